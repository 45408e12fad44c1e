#pragma once
/// snn::dist: one run spread over several processes (ranks), on LibTorch's
/// distributed engine c10d: a TCPStore for the rendezvous and the control
/// messages, a Gloo process group for tensors (CPU).
///
/// A run's life, on every rank:
///
///     World world(options)        connect to the store (rank 0 hosts it, or
///                                 torchrun's agent does), wait for every rank
///                                 (timeout_s), build the Gloo group, start the
///                                 watch thread
///     world.check_same_settings   every rank's settings equal rank 0's, or
///                                 every rank fails with the first difference
///     ... work, collectives ...   all_gather_rows, sum_in_rank_order, barrier
///     world.finish()              every rank done; rank 0 keeps the store up
///                                 until the others have left it
///
/// Failures end every rank, never hang one: a rank that fails calls
/// report_failure(message, code); the watch thread of every other rank sees
/// it within kWatchInterval, prints "rank R failed: message" through
/// on_peer_failure and ends its process with the same exit code. A rank that
/// dies without a word (killed) closes its sockets: a collective with it
/// throws at once, and the loss of rank 0's store ends the others' watch.
/// Whatever waits on a peer gives up after timeout_s with an snn::Error that
/// names the ranks and the address.
///
/// The public API holds no c10d or gloo type (as HDF5 stays inside the
/// recording code): consumers of snn::dist need neither's headers.

#include <torch/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace snn::dist {

/// How this process joins a run.
struct WorldOptions {
  int64_t rank = 0;        ///< this process: 0 .. world_size - 1
  int64_t world_size = 1;  ///< processes in the run; 1: no peers (World is not needed)
  /// Host of the rendezvous store (rank 0's machine, or torchrun's agent);
  /// the Gloo transport binds to this host's address when it is a loopback
  /// address, else to the machine's hostname (or GLOO_SOCKET_IFNAME).
  std::string master_addr = "127.0.0.1";
  int64_t master_port = 29500;  ///< the store's TCP port (torchrun's default)
  /// torchrun's agent hosts the store (TORCHELASTIC_USE_AGENT_STORE=True):
  /// rank 0 connects to it as a client like every other rank.
  bool agent_store = false;
  /// The longest wait for a peer, seconds: every rank's arrival, a
  /// collective, the others' departure at finish().
  double timeout_s = 300;

  bool distributed() const { return world_size > 1; }
  /// Throws snn::Error naming the value: a rank outside [0, world_size), a
  /// world size outside 1..kMaxWorldSize, a port outside 1..65535, a timeout
  /// outside (0, kMaxTimeout] seconds.
  void validate() const;
  /// Largest world size: Gloo's full mesh (a connection per pair of ranks)
  /// and one rendezvous store do not reach further.
  static constexpr int64_t kMaxWorldSize = 65536;
  /// Longest timeout, seconds (a week): beyond it a wait is a hang.
  static constexpr double kMaxTimeout = 7 * 24 * 3600.0;
  /// "rank 1 of 2 at 127.0.0.1:29500"
  std::string describe() const;
};

/// The run as torchrun (or another launcher setting its variables) started
/// this process: RANK, WORLD_SIZE, MASTER_ADDR (default 127.0.0.1),
/// MASTER_PORT (default 29500), TORCHELASTIC_USE_AGENT_STORE. nullopt when
/// WORLD_SIZE is unset. Throws snn::Error naming the variable when one is
/// not a whole number or RANK is missing.
std::optional<WorldOptions> options_from_environment();

/// This machine's hostname ("unknown host" where it cannot be read).
std::string host_name();

/// "HOST:PORT" (or "[v6]:PORT") into options.master_addr and master_port;
/// throws snn::Error naming `text` otherwise.
void parse_master(const std::string& text, WorldOptions& options);

/// Lets another thread end the point-to-point calls given it (World::send,
/// World::recv): cancel() aborts the call in progress and makes every later
/// one throw snn::Error at once. The pipeline's links use it when the
/// pipeline fails on this rank, so that none of its threads waits on a peer.
class Cancel {
 public:
  Cancel();
  ~Cancel();
  Cancel(const Cancel&) = delete;
  Cancel& operator=(const Cancel&) = delete;
  void cancel() noexcept;
  bool cancelled() const noexcept;

  struct Impl;  // opaque: holds the c10d call in progress

 private:
  friend class World;
  std::unique_ptr<Impl> impl_;
};

/// How often the watch thread asks the store whether a rank failed.
constexpr std::chrono::milliseconds kWatchInterval{100};

/// One process's membership of a run (see the file comment).
class World {
 public:
  /// Called once, when another rank reported a failure or the run's store
  /// went away (in the watch thread, or in a collective that the failure
  /// broke): `message` is one line ("rank 1 failed: ..."), `code` the exit
  /// code to end with. The default prints "error: MESSAGE" to stderr and
  /// ends the process with std::_Exit(code), whatever the main thread is
  /// doing. One that returns (tests) stops the watch; the collective throws
  /// snn::Error(message).
  using PeerFailure = std::function<void(const std::string& message, int code)>;

  /// The process-wide c10d settings every World relies on: c10's warnings
  /// off (World reports each failure once, by rank) and c10d's flight
  /// recorder off unless TORCH_FR_BUFFER_SIZE asks for it (see world.cpp:
  /// it races when two process groups of one process start at once). Once
  /// per process, through the environment; the constructor calls it, and a
  /// program that constructs Worlds on several threads (tests running ranks
  /// as threads) calls it first, before those threads exist.
  static void prepare_process();

  /// Joins the run. Throws snn::Error when the store cannot be hosted (the
  /// port is in use) or reached, or when not every rank arrives within
  /// timeout_s (the message names the missing ranks).
  explicit World(const WorldOptions& options, PeerFailure on_peer_failure = {});
  /// Stops the watch thread; does not wait for the other ranks (finish() does).
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int64_t rank() const;
  int64_t size() const;
  const WorldOptions& options() const;

  /// Every rank passes the settings that decide its results, as a JSON
  /// object. Returns when all equal rank 0's; otherwise throws, on every
  /// rank, snn::Error naming the first key that differs and its values on
  /// rank 0 and on the first rank that differs.
  void check_same_settings(const std::string& settings_json);

  /// The rows (dim 0) of every rank's `rows`, concatenated in rank order, on
  /// every rank. Ranks may hold different numbers of rows (0 included); the
  /// dtype and the other dims must agree (checked, naming the ranks). CPU.
  torch::Tensor all_gather_rows(const torch::Tensor& rows);

  /// The sum over ranks of every rank's `t` (same shape and dtype), added in
  /// rank order, ((t0 + t1) + t2) + ..., so that the result is the same bit
  /// for bit on every rank and on every rerun. CPU.
  torch::Tensor sum_in_rank_order(const torch::Tensor& t);

  /// What this rank's exchanges cost so far: wall seconds inside
  /// collectives and point-to-point calls (waiting for slower ranks
  /// included), the bytes it contributed (what it sends once; an all-gather
  /// delivers them to every other rank), and the calls.
  struct Traffic {
    double seconds = 0;
    int64_t bytes = 0;
    int64_t calls = 0;
  };
  Traffic traffic() const;

  /// All to all: `t` (1-D, the same length, dtype and `split` on every
  /// rank) is cut into size() consecutive parts of split[0], split[1], ...
  /// elements; this rank receives part rank() of every rank's `t`, as the
  /// rows of [size(), split[rank()]] in rank order. (A reduce-scatter whose
  /// additions the caller makes, in the order it chooses.) CPU.
  torch::Tensor exchange_parts(const torch::Tensor& t, const std::vector<int64_t>& split);

  /// All to all with parts of any size: `t` (1-D) is cut into size()
  /// consecutive parts of send[0], send[1], ... elements, part r going to
  /// rank r; this rank receives recv[r] elements from rank r, returned
  /// concatenated in rank order. The callers agree on the sizes (rank r's
  /// send[q] is rank q's recv[r]); the dtype is the same on every rank.
  /// CPU.
  torch::Tensor exchange(const torch::Tensor& t, const std::vector<int64_t>& send, const std::vector<int64_t>& recv);

  /// exchange_parts' way back: rank r passes its part, split[r] elements
  /// (1-D; the same `split` and dtype on every rank); every rank gets all
  /// parts concatenated in rank order (split's total). Unlike
  /// all_gather_rows, no message about the sizes goes first: the ranks
  /// already agree on them. CPU.
  torch::Tensor all_gather_parts(const torch::Tensor& part, const std::vector<int64_t>& split);

  /// Waits until every rank has reached this point (timeout_s).
  void barrier();

  /// How a collective waits for its peers: first polling, yielding the
  /// core, for up to `most` (0, the default: straight to sleep). For ranks
  /// with cores of their own (bind_to_cores sets it), where a sleeping
  /// thread is woken late: an idle core of a virtual machine halts, and
  /// waking it took about 40 us a hand-off here, several per collective.
  /// Collectives only: send() and recv() run on the pipeline's link
  /// threads, beside the rank's compute on its core, where polling took
  /// the core from the compute (a K = 8 pipeline over 2 ranks ran at 0.42
  /// of its ideal instead of 0.65-0.71).
  void spin_before_waiting(std::chrono::microseconds most);

  /// Point to point (the pipeline across processes): `t` to rank `dst`, and
  /// into `t` (preallocated, the sender's shape and dtype) from rank `src`.
  /// `tag` tells messages between the same pair apart. Messages with the
  /// same pair and tag arrive in the order sent. A send may wait until the
  /// receiver is ready. Safe to call from several threads at once (one
  /// sending, one receiving); `cancel`, if given, lets another thread end it.
  void send(const torch::Tensor& t, int64_t dst, int tag = 0, Cancel* cancel = nullptr);
  void recv(torch::Tensor& t, int64_t src, int tag = 0, Cancel* cancel = nullptr);

  /// This rank failed: tells every other rank (they end with `message` and
  /// `code`), then waits up to a few seconds until they have read it, so
  /// that rank 0's store outlives their reading. Returns false, telling
  /// nobody, when a peer's failure is already ending this process (this
  /// rank's error is its consequence: print nothing, wait for the end).
  /// Never throws.
  bool report_failure(const std::string& message, int code) noexcept;

  /// True once the watch thread has begun ending the process for a peer's
  /// failure: the caller's own error is a consequence, not news, and it
  /// should wait for the end instead of printing a second line.
  bool ending_for_peer() const;

  /// The orderly end: stops the watch thread, then every rank says it is
  /// done; rank 0 waits (timeout_s) until all have, so that its store stays
  /// up while anyone uses it. Call it once, after the last collective.
  void finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace snn::dist
