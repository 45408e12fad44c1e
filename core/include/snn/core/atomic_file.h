#pragma once
/// Whole-file writes that either complete or leave the old file untouched.
///
/// Every text or binary output of snnsim that replaces a file (summaries,
/// JSON, CSV, PNG plots, sweep manifests) goes through here: the bytes are
/// written to a temporary name beside the target (same folder, so the rename
/// is atomic), every write, the flush, fsync and close are checked, and only
/// then is the temporary renamed over the target. On any failure (a full
/// disk, a quota, an I/O error) the temporary is removed, the target keeps
/// its previous content, and snn::Error names the file and the reason, e.g.
/// "cannot write 'out/run.json': No space left on device".

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "snn/core/error.h"

namespace snn {

/// The folder that holds `path`: "." for a bare name, "/" for "/name".
inline std::string parent_folder(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

/// Throws snn::Error unless the folder that holds `path` exists, is a folder
/// and is writable: "cannot write 'out/x.json': its folder 'out' does not
/// exist".
inline void check_parent_folder(const std::string& path) {
  const std::string dir = parent_folder(path);
  struct stat d {};
  if (::stat(dir.c_str(), &d) != 0) {
    throw Error("cannot write '" + path + "': its folder '" + dir + "' " +
                (errno == ENOENT ? "does not exist" : std::string("cannot be read: ") + std::strerror(errno)));
  }
  if (!S_ISDIR(d.st_mode)) throw Error("cannot write '" + path + "': '" + dir + "' is not a folder");
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    throw Error("cannot write '" + path + "': its folder '" + dir + "' is not writable (" + std::strerror(errno) + ")");
  }
}

/// Throws snn::Error when `path` exists and is not a regular file (a device
/// such as /dev/null, a FIFO, a directory, a socket, a symbolic link):
/// outputs are written beside their target and renamed over it, which would
/// replace that thing with a file. Every writer of a replaceable output calls
/// it, and the commands call it before they start, so that a bad name is
/// refused before the work rather than after it. Its folder must exist and
/// be writable (check_parent_folder).
inline void check_output_file(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) {
    // Its folder, also for a file that exists: the new file is written
    // beside it under a temporary name.
    check_parent_folder(path);
    return;
  }
  const char* what = S_ISLNK(st.st_mode)    ? "a symbolic link"
                     : S_ISDIR(st.st_mode)  ? "a directory"
                     : S_ISCHR(st.st_mode)  ? "a character device"
                     : S_ISBLK(st.st_mode)  ? "a block device"
                     : S_ISFIFO(st.st_mode) ? "a FIFO"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "not a file";
  throw Error("'" + path + "' is " + what + ", not a regular file: outputs are written as new files that replace " +
              "their target, so give a file name");
}

/// Whether `a` and `b` name one file: the same device and inode where both
/// exist; otherwise the same folder (resolved, so "./x" matches "x" and a
/// link to the folder its target) and the same last name.
inline bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  const bool has_a = ::stat(a.c_str(), &sa) == 0, has_b = ::stat(b.c_str(), &sb) == 0;
  if (has_a && has_b) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  if (has_a != has_b) return false;
  auto resolved = [](const std::string& p) {
    const std::string dir = parent_folder(p);
    const std::string name = p.substr(p.find_last_of('/') + 1);  // (npos + 1 = 0: the whole name)
    char* real = ::realpath(dir.c_str(), nullptr);
    std::string out = (real ? std::string(real) : dir) + "/" + name;
    std::free(real);
    return out;
  };
  return resolved(a) == resolved(b);
}

/// A command's file argument: the flag or argument that names it ("--summary",
/// "CHECKPOINT") and its path ("" when not given).
struct FileArgument {
  std::string flag;
  std::string path;
};

/// A command's outputs, before the work: each passes check_output_file, and
/// none names the same file as one of `inputs` or as another output
/// ("--summary 'ck.h5' is the file given as --checkpoint: writing it would
/// replace that file; give another name"). Empty paths are skipped.
inline void check_output_files(const std::vector<FileArgument>& outputs, const std::vector<FileArgument>& inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const FileArgument& out = outputs[i];
    if (out.path.empty()) continue;
    check_output_file(out.path);
    auto refuse = [&](const FileArgument& other, const char* what) {
      throw Error(out.flag + " '" + out.path + "' is the file given as " + other.flag + ": writing it would " + what +
                  "; give another name");
    };
    for (const FileArgument& in : inputs) {
      if (!in.path.empty() && same_file(out.path, in.path)) refuse(in, "replace that file");
    }
    for (size_t j = 0; j < i; ++j) {
      if (!outputs[j].path.empty() && same_file(out.path, outputs[j].path)) refuse(outputs[j], "replace that output");
    }
  }
}

/// The temporary name write_file_atomically() writes before renaming:
/// `path` + ".tmp-" + the process id (so concurrent writers of one target
/// never share a temporary).
inline std::string atomic_temporary_name(const std::string& path) {
  return path + ".tmp-" + std::to_string(static_cast<long>(::getpid()));
}

/// Writes `size` bytes to `path` atomically (see the file comment). The new
/// file gets mode 0644 (less the umask). Throws snn::Error naming `path` and
/// strerror(errno) when anything fails, or check_output_file's when `path`
/// is not a regular file; `path` is then unchanged.
inline void write_file_atomically(const std::string& path, const void* data, size_t size) {
  check_output_file(path);
  const std::string tmp = atomic_temporary_name(path);
  auto fail = [&](int err, int fd) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw Error("cannot write '" + path + "': " + std::strerror(err));
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot write '" + path + "': " + std::strerror(errno));
  const char* p = static_cast<const char*>(data);
  size_t left = size;
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(errno, fd);
    }
    if (n == 0) fail(EIO, fd);
    p += n;
    left -= static_cast<size_t>(n);
  }
  // tmpfs and most filesystems report a full disk at write(); some (NFS,
  // delayed allocation) only at fsync or close.
  if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) fail(errno, fd);
  if (::close(fd) != 0) fail(errno, -1);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(errno, -1);
}

inline void write_file_atomically(const std::string& path, const std::string& content) {
  write_file_atomically(path, content.data(), content.size());
}

/// For writers that must produce the file themselves (a plotting library
/// writing by name): they write atomic_temporary_name(path), check it, and
/// call commit_temporary().
/// Renames atomic_temporary_name(path) to `path`; on failure removes the
/// temporary and throws snn::Error.
inline void commit_temporary(const std::string& path) {
  const std::string tmp = atomic_temporary_name(path);
  try {
    check_output_file(path);
  } catch (const Error&) {
    ::unlink(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error("cannot write '" + path + "': " + std::strerror(err));
  }
}

}  // namespace snn
