#pragma once
/// Telling a binary file given where a text (TOML, JSON) was meant, so that
/// the message says what the file is rather than which byte of line 1 a
/// parser did not expect.

#include <string>

#include "snn/core/error.h"

namespace snn {

/// Whether `bytes` (a file's first bytes, or all of them) start with HDF5's
/// 8-byte signature (at offset 0: snnsim and nir write no user block).
inline bool has_hdf5_signature(const std::string& bytes) { return bytes.compare(0, 8, "\x89HDF\r\n\x1a\n") == 0; }

/// Throws snn::Error "<where> is an HDF5 file (a checkpoint, a recording or
/// a NIR graph), not <expected>", "... is UTF-16 text: save it as UTF-8", or
/// "... is a binary file, not <expected>" when `text` is not UTF-8 text.
/// Valid TOML and JSON never trip it: 0x89 cannot start UTF-8, and neither
/// format allows a raw NUL.
inline void refuse_binary_text(const std::string& text, const std::string& where, const std::string& expected) {
  if (has_hdf5_signature(text)) {
    throw Error(where + " is an HDF5 file (a checkpoint, a recording or a NIR graph), not " + expected);
  }
  if (text.compare(0, 2, "\xff\xfe") == 0 || text.compare(0, 2, "\xfe\xff") == 0) {
    throw Error(where + " is UTF-16 text: save it as UTF-8");
  }
  if (text.find('\0') != std::string::npos) throw Error(where + " is a binary file, not " + expected);
}

}  // namespace snn
