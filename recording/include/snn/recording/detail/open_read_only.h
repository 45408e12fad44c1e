#pragma once
// Opening a recording read-only, shared by the writer's resume and recover
// checks and by read_recording_info. Include only from targets that link HDF5.

#include <string>

#include "snn/core/detail/hdf5.h"

namespace snn::recording::detail {

// Opens `file` read-only, a killed or still running SWMR writer's file too
// (SWMR reading ignores its "open for writing" mark), and checks that it is
// an snnsim recording (schema::check_format). Nothing it does changes the
// file. Throws snn::Error naming the file.
hdf5::Handle open_read_only(const std::string& file);

}  // namespace snn::recording::detail
