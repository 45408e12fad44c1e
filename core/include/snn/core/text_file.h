#pragma once
/// Reading a whole input file (a model, a graph) into memory with errors
/// that name it: a missing or unreadable file, or a directory given where a
/// file was meant (which std::ifstream opens on Linux and then fails to
/// read, with libstdc++'s own message).

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <string>

#include "snn/core/error.h"

namespace snn {

/// The bytes of the file at `path`. Throws snn::Error starting with `where`
/// (e.g. "model 'x.toml'") when it is a directory or cannot be opened or
/// read.
inline std::string read_text_file(const std::string& path, const std::string& where) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) throw Error(where + ": is a directory, not a file");
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(where + ": cannot open it" + (errno ? std::string(": ") + std::strerror(errno) : ""));
  std::string text;
  try {
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (const std::exception&) {  // libstdc++ throws on a read error (EIO)
    throw Error(where + ": cannot read it" + (errno ? std::string(": ") + std::strerror(errno) : ""));
  }
  if (in.bad()) throw Error(where + ": cannot read it");
  return text;
}

}  // namespace snn
