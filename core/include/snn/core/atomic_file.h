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
#include <cstring>
#include <string>

#include "snn/core/error.h"

namespace snn {

/// Throws snn::Error when `path` exists and is not a regular file (a device
/// such as /dev/null, a FIFO, a directory, a socket, a symbolic link):
/// outputs are written beside their target and renamed over it, which would
/// replace that thing with a file. Every writer of a replaceable output calls
/// it, and the commands call it before they start, so that a bad name is
/// refused before the work rather than after it.
inline void check_output_file(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return;
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
