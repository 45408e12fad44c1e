#pragma once
// A recording's marks of where it stands, shared by the writer and the
// merged file over a run's parts: the first sample of a part (/meta's
// first_sample attribute) and the status dataset. Include only from targets
// that link HDF5.

#include <cstdint>
#include <string>

#include "snn/core/detail/hdf5.h"

namespace snn::recording::detail {

/// Writes `status` ("running", "complete", ...) to the status dataset `ds`,
/// a fixed-length string so that it can change under SWMR.
void write_status(hid_t ds, const std::string& status);

/// The status dataset's string type (schema::status.length bytes).
hdf5::Handle status_type();

}  // namespace snn::recording::detail
