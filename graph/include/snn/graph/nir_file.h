#pragma once
/// NIR files (neuromorphs/NIR, the `nir` package's HDF5 layout, version 1.x)
/// read and written through HDF5, no Python needed:
///   /version                    string, "1.0.8"
///   /node/type                  "NIRGraph"
///   /node/edges                 [E, 2] strings (source, target)
///   /node/nodes/<name>/type     "Affine", "LIF", ...; then the node's arrays
///   /node/nodes/<name>/metadata optional group (snnsim keeps its discrete
///                               parameters there, see docs/GRAPHS.md)
///
/// NIR's neurons are continuous-time (tau dv/dt = (v_leak - v) + R I, in
/// seconds). snnsim's are SpikingJelly's discrete updates (in steps). The two
/// meet through dt, the duration of one step in seconds, by forward Euler:
/// a LIF of tau_steps with decay_input is NIR's tau = tau_steps dt, r = 1,
/// v_leak = v_reset; without decay_input r = tau_steps; an IF is r = 1 / dt.
/// NIR fires when v > v_threshold, snnsim (like SpikingJelly) when
/// v >= v_threshold: the two differ only where v lands exactly on the
/// threshold. A write followed by a read gives back the identical graph.

#include <optional>
#include <string>

#include "snn/graph/graph.h"

namespace snn::graph {

/// The default duration of a step in seconds (snnTorch's import default).
inline constexpr double kDefaultNirDt = 1e-4;

/// True when `path` is an HDF5 file with NIR's /version and /node (false for
/// anything else, including a missing file).
bool is_nir_file(const std::string& path);

/// Reads a NIR file. `dt` is the step in seconds; nullopt (default) takes
/// the one snnsim stored in the file, or kDefaultNirDt. Throws snn::Error
/// with one line naming the file and the node or dataset: not HDF5, another
/// major version, a node type snnsim does not read (nested graphs), a
/// missing or mis-shaped dataset, continuous parameters with no discrete
/// snnsim equivalent (a LIF whose v_leak differs from v_reset, a delay that
/// is not a whole number of steps). Does not validate() the graph.
Graph read_nir(const std::string& path, std::optional<double> dt = std::nullopt);

/// Writes `graph` (validated first; every Affine, Linear and Conv2d with
/// its weights) to `path` as NIR 1.0.8 with steps of `dt` seconds, through
/// a temporary beside it renamed at the end: an existing file is replaced
/// only by a complete one. Throws snn::Error naming the node that NIR
/// cannot express (a soft reset, a refractory period) or the write that
/// failed.
void write_nir(const std::string& path, const Graph& graph, double dt = kDefaultNirDt);

}  // namespace snn::graph
