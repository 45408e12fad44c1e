#pragma once
/// What an input file is, told by its content rather than its name, so that
/// a file given in the wrong place (a recording as --checkpoint, a checkpoint
/// as --model, a truncated .nir) gets a message that says what it is and
/// what takes it, instead of the parser's complaint about its first bytes.

#include <string>

namespace snn {

/// The kinds of HDF5 file snnsim meets.
enum class Hdf5Kind {
  kNotHdf5,            ///< no HDF5 signature (text, or a missing file)
  kDamaged,            ///< HDF5's signature, but HDF5 cannot open it (e.g. truncated)
  kCheckpoint,         ///< snnsim train's: attribute "config" and /parameters
  kRecording,          ///< snnsim run's or simulate's: the recording format attribute
  kNir,                ///< a NIR graph: /version and /node
  kNirWithoutVersion,  ///< /node but no /version (snnsim reads NIR 1.x, which has it)
  kOther,              ///< an HDF5 file of another program
};

/// The kind of the file at `path` (kNotHdf5 where it cannot be read).
Hdf5Kind hdf5_kind(const std::string& path);

/// The words for a kind in a message: "a checkpoint of snnsim train", "a
/// recording of snnsim run or simulate", "a NIR graph", ...
std::string describe(Hdf5Kind kind);

}  // namespace snn
