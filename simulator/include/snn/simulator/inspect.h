#pragma once
/// `snnsim inspect FILE`: what a checkpoint, a recording (finished or not)
/// or a sweep manifest holds, its status and its provenance, in a few lines
/// or as one JSON object, so that nobody needs h5py for that. Only what the
/// file stores is shown (older files lack some provenance).

#include <string>
#include <vector>

namespace snn {

/// A file described for a reader.
struct FileDescription {
  std::string kind;                ///< "checkpoint", "recording", "sweep manifest" or "NIR graph"
  std::string path;                ///< the file read (a recording's PATH.partial when only that exists)
  std::vector<std::string> lines;  ///< the text, one line each, the first naming the kind and file
  std::string json;                ///< the same as one JSON object (its "kind" and "path" as above)
};

/// Finds what `path` is and describes it: an HDF5 checkpoint of `snnsim
/// train`, a recording of `snnsim run --output` (PATH or PATH.partial, read
/// with SWMR so that a running or killed run's file is fine), or a sweep's
/// manifest.json (a sweep's output folder names its manifest.json). Throws
/// snn::Error with one line naming the file and the problem: no such file,
/// a directory, neither HDF5 nor JSON, an HDF5 or JSON file of another kind,
/// a damaged file (and what is damaged).
FileDescription describe_file(const std::string& path);

/// The same for a file known to be of one kind (errors as describe_file).
FileDescription describe_checkpoint(const std::string& path);
FileDescription describe_recording(const std::string& path);
FileDescription describe_sweep_manifest(const std::string& path);
/// A NIR file: its nodes in step order with their shapes and inputs, and
/// whether snnsim simulates it yet.
FileDescription describe_nir(const std::string& path);

/// The command that continues the run of the recording at `path` (the
/// finished name, or its .partial): `snnsim run --resume FILE` for a
/// network's samples, `snnsim simulate MODEL --record FILE --resume (with
/// the flags it was started with)` for a population model's trials. Throws
/// snn::Error as describe_recording.
std::string resume_command(const std::string& path);

}  // namespace snn
