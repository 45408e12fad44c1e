#pragma once
/// One recording made of parts: the ranks of a run over several processes
/// each record their contiguous share of the samples to a part file
/// (RecordingLayout::first_sample), and one file presents the parts as the
/// run's recording, with the layout of docs/RECORDING.md and the content of
/// a one-process recording of the same run.
///
/// Every dataset whose rows grow with the samples (spike timestamps and
/// node ids, report frames, the per-sample rows) is an HDF5 virtual dataset
/// over the parts' rows in order, so nothing is copied and readers (h5py,
/// libsonata, snnsim analyze) see one file; the parts must stay beside it
/// (sources are found relative to its folder). The spike pointers (which a
/// part counts from its own first spike), the report time axes and /meta's
/// counter and status are written into the file itself.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace snn::recording {

/// The part of `path` that rank `rank` of `world_size` records:
/// "run.h5" -> "run.rank1-of-4.h5" (beside it).
std::string part_path(const std::string& path, int64_t rank, int64_t world_size);

/// Writes `path` (as path.partial, renamed when complete) presenting the
/// finished recordings `parts` (in sample order) as one. Checks before it
/// writes anything that every part is complete, that the parts follow each
/// other (each one's first sample is where the previous one ended) and
/// that they hold the same populations, recorded neurons, T, dt and classes;
/// throws snn::Error naming the part and the difference otherwise. Refuses
/// an existing `path` unless `overwrite`. /meta is the first part's (its
/// provenance) with the counter and status of the whole, `extra_meta`
/// (string attributes) and "parts" (the part files' names).
void write_merged_recording(const std::string& path, const std::vector<std::string>& parts, bool overwrite,
                            const std::vector<std::pair<std::string, std::string>>& extra_meta = {});

}  // namespace snn::recording
