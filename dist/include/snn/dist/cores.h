#pragma once
/// Binding the ranks that share a machine to cores of their own.
///
/// Unbound, the kernel's scheduler moves each rank's compute thread and
/// its Gloo threads across all the machine's cores, so that a rank's
/// exchange threads wake on the core where another rank computes, and
/// caches are lost at each move. On the 2-core machine this project is
/// measured on, binding two 1-thread ranks to a core each made a
/// data-parallel training epoch 1.2-1.3x faster (docs/DISTRIBUTED.md).

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "snn/dist/world.h"

namespace snn::dist {

/// What bind_to_cores() did on this rank.
struct CoreBinding {
  std::vector<int> cores;   ///< the cores this process's threads now run on (empty: left as they were)
  std::string reason;       ///< why they were left, where they were
  int64_t local_rank = 0;   ///< this rank's place among the ranks on its machine (same hostname and boot)
  int64_t local_ranks = 1;  ///< ranks on this machine
};

/// A collective (every rank calls it once): where L ranks share this
/// machine (same hostname and boot), each running `threads` threads, all
/// started on the same C cores (their affinity mask), and L * threads = C
/// (the run fills the machine, as a job given a machine does), binds every
/// thread of this process (and so the threads it starts later) to the
/// mask's cores [l * threads, (l + 1) * threads), l its local rank.
/// Otherwise it changes nothing and says why: one rank here; masks that
/// differ (a launcher that binds leaves them so); more threads than cores;
/// fewer (other work may share the machine, and binding every job from
/// its first core would pile them onto the same cores). Linux only.
/// Where it binds, the rank's collectives also poll before they sleep
/// (World::spin_before_waiting, up to kBoundSpin).
CoreBinding bind_to_cores(World& world, int64_t threads);

/// How long a bound rank polls for a collective's end before it sleeps.
constexpr std::chrono::microseconds kBoundSpin{20000};

/// "each rank on a core of its own (2 ranks on this machine)", or "not
/// bound (REASON)".
std::string describe(const CoreBinding& binding, int64_t threads);

}  // namespace snn::dist
