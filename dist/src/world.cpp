#include "snn/dist/world.h"

#include <c10/util/Logging.h>
#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <mutex>
#include <thread>

#include "snn/core/detail/json_difference.h"
#include "snn/core/error.h"
#include "store_address.h"

namespace snn::dist {

namespace {

using Clock = std::chrono::steady_clock;
// Store keys live under this prefix: torchrun's agent store holds its own.
constexpr const char* kPrefix = "snnsim/";
// How long a failing rank waits for the others to read its report.
constexpr std::chrono::seconds kReportWait{3};

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// c10's messages carry "[/pytorch/...cpp:547] " source locations first.
std::string c10_message(const std::exception& e) {
  std::string m = first_line(e.what());
  if (const auto* c = dynamic_cast<const c10::Error*>(&e)) m = first_line(c->what_without_backtrace());
  if (!m.empty() && m[0] == '[') {
    const auto close = m.find("] ");
    if (close != std::string::npos) m = m.substr(close + 2);
  }
  return m;
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

std::string rank_list(const std::vector<int64_t>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size() && i < 8; ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 8) out += fmt::format(" and {} more", ranks.size() - 8);
  return out;
}

std::string value(const std::vector<uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }
std::vector<uint8_t> bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

void default_peer_failure(const std::string& message, int code) {
  std::cerr << "error: " << message << std::endl;
  std::_Exit(code);
}

// "steps: 8 on rank 0, 4 on rank 1": the first JSON value that differs.
std::string first_difference(const std::string& a_text, const std::string& b_text, int64_t b_rank) {
  detail::JsonDifference d;
  try {
    d = detail::first_json_difference(a_text, b_text);
  } catch (const std::exception&) {
    return fmt::format("the settings on rank 0 and on rank {} differ", b_rank);
  }
  if (!d.found) return fmt::format("the settings of rank {} differ", b_rank);
  return fmt::format("{}: {} on rank 0, {} on rank {}", d.key, d.first, d.second, b_rank);
}

int64_t env_whole(const char* name, const char* text) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0) {
    throw Error(fmt::format("environment variable {}='{}': expected a whole number", name, text));
  }
  return v;
}

}  // namespace

void WorldOptions::validate() const {
  if (world_size < 1 || world_size > kMaxWorldSize) {
    throw Error(fmt::format("world size: expected 1..{} processes, got {}", kMaxWorldSize, world_size));
  }
  if (rank < 0 || rank >= world_size) {
    throw Error(fmt::format("rank {} is outside the run's {} ranks (0..{})", rank, world_size, world_size - 1));
  }
  if (master_port < 1 || master_port > 65535) {
    throw Error(fmt::format("master port {}: expected a TCP port in 1..65535", master_port));
  }
  if (master_addr.empty()) throw Error("master address: expected a host name or address, got ''");
  if (!(timeout_s > 0 && timeout_s <= kMaxTimeout)) {
    throw Error(fmt::format("timeout: expected more than 0 and at most {} seconds (a week), got {}", kMaxTimeout,
                            timeout_s));
  }
}

std::string WorldOptions::describe() const {
  return fmt::format("rank {} of {} at {}:{}", rank, world_size, master_addr, master_port);
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "unknown host";
  return name;
}

std::optional<WorldOptions> options_from_environment() {
  const char* world = std::getenv("WORLD_SIZE");
  if (!world) return std::nullopt;
  WorldOptions o;
  o.world_size = env_whole("WORLD_SIZE", world);
  const char* rank = std::getenv("RANK");
  if (!rank) throw Error("WORLD_SIZE is set but RANK is not: a launcher sets both (torchrun does)");
  o.rank = env_whole("RANK", rank);
  if (const char* a = std::getenv("MASTER_ADDR")) o.master_addr = a;
  if (const char* p = std::getenv("MASTER_PORT")) o.master_port = env_whole("MASTER_PORT", p);
  if (const char* s = std::getenv("TORCHELASTIC_USE_AGENT_STORE")) o.agent_store = std::string(s) == "True";
  return o;
}

void parse_master(const std::string& text, WorldOptions& options) {
  const auto colon = text.rfind(':');
  const auto bad = [&] { return Error("--master: expected HOST:PORT (e.g. 127.0.0.1:29500), got '" + text + "'"); };
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) throw bad();
  std::string host = text.substr(0, colon);
  if (host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string::npos) {
    // "127.0.0.1:29500:1", or an IPv6 address without its brackets
    throw Error("--master: expected HOST:PORT with one colon, or [IPv6]:PORT (e.g. [::1]:29500), got '" + text + "'");
  }
  const std::string port = text.substr(colon + 1);
  if (port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5) throw bad();
  options.master_addr = host;
  options.master_port = std::stoll(port);
  if (options.master_port < 1 || options.master_port > 65535) throw bad();
}

struct World::State {
  WorldOptions o;
  std::string where;  // "host:port"
  std::vector<sockets::Endpoint> endpoints;  // the store host's addresses
  bool foreign_master = false;               // rank 0 hosts behind an address it does not hold
  c10::intrusive_ptr<c10d::TCPStore> tcp;
  c10::intrusive_ptr<c10d::Store> store;        // the main thread's connection
  c10::intrusive_ptr<c10d::Store> watch_store;  // the watch thread's own (a blocking get holds a connection)
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  PeerFailure on_peer_failure;
  std::thread watcher;
  std::atomic<bool> stop_watch{false};
  std::atomic<bool> ending{false};
  mutable std::mutex traffic_mutex;  // the pipeline's link threads count theirs too
  World::Traffic traffic;
  bool finished = false;
  std::chrono::microseconds spin{0};  // World::spin_before_waiting

  // A collective's end: where this rank has cores of its own, it first
  // polls, yielding, for up to `spin`, so that its core does not go idle.
  // Why: a thread sleeping in wait() is woken through its core, and on a
  // virtual machine an idle core halts; waking it costs about 40 us (a
  // loopback round trip between two bound processes took 80 us here,
  // against 8 us unbound), and a collective is several such hand-offs
  // between the caller, Gloo's worker and its transport threads. The
  // yield lets those threads run on this core whenever they have work.
  void wait_collective(const c10::intrusive_ptr<c10d::Work>& work) const {
    if (spin.count() > 0) {
      const auto until = Clock::now() + spin;
      while (!work->isCompleted() && Clock::now() < until) ::sched_yield();
    }
    work->wait();
  }

  // Hands a peer's failure to on_peer_failure, once per process (the watch
  // thread and a failed collective may both find it).
  void end_for_peer(const std::string& message, int code) {
    if (!ending.exchange(true)) on_peer_failure(message, code);
  }

  // A failure another rank reported: (message, code), if any.
  std::optional<std::pair<std::string, int>> peer_failure(c10d::Store& s) const {
    if (!s.check({"failure"})) return std::nullopt;
    const std::string v = value(s.get("failure"));
    // "<rank>\n<code>\n<message>"
    const auto a = v.find('\n'), b = v.find('\n', a + 1);
    if (a == std::string::npos || b == std::string::npos) return std::nullopt;
    const int64_t from = std::stoll(v.substr(0, a));
    if (from == o.rank) return std::nullopt;
    return std::make_pair(fmt::format("rank {} failed: {}", from, v.substr(b + 1)), std::stoi(v.substr(a + 1, b - a - 1)));
  }

  void watch() {
    while (!stop_watch.load()) {
      std::this_thread::sleep_for(kWatchInterval);
      if (stop_watch.load()) return;
      try {
        if (auto f = peer_failure(*watch_store)) {
          watch_store->set("ack/" + std::to_string(o.rank), "1");
          end_for_peer(f->first, f->second);
          return;
        }
      } catch (const std::exception& e) {
        if (stop_watch.load()) return;
        end_for_peer(fmt::format("lost the run's store at {} ({}): {} ended without a word (killed?)", where,
                                 c10_message(e), o.agent_store ? "torchrun's agent" : "rank 0"),
                     2);
        return;
      }
    }
  }

  // After a failed collective: a peer's report explains it (it may still be
  // on its way: the peer writes it before its sockets close).
  [[noreturn]] void collective_failed(const std::string& what, const std::exception& e) {
    const auto deadline = Clock::now() + std::chrono::seconds(1);
    do {
      try {
        if (auto f = peer_failure(*store)) {
          store->set("ack/" + std::to_string(o.rank), "1");
          end_for_peer(f->first, f->second);
          throw Error(f->first);
        }
      } catch (const Error&) {
        throw;
      } catch (const std::exception&) {
        break;  // the store is gone too: rank 0 ended
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } while (Clock::now() < deadline);
    const std::string m = c10_message(e);
    if (m.find("Timed out") != std::string::npos || m.find("timed out") != std::string::npos) {
      throw Error(fmt::format("rank {}: {} waited {} s for the other ranks without an answer ({}): is a rank "
                              "stuck, or slower than the timeout (--dist-timeout)?",
                              o.rank, what, o.timeout_s, m));
    }
    throw Error(fmt::format("rank {}: lost a peer during {} ({}): another rank ended without a word (killed, or "
                            "its machine went away)",
                            o.rank, what, m));
  }

  template <typename F>
  auto guarded(const std::string& what, F&& f, int64_t bytes = 0) -> decltype(f()) {
    const auto t0 = Clock::now();
    struct Count {  // counted however the call ends
      World::Traffic& t;
      std::mutex& m;
      Clock::time_point t0;
      int64_t bytes;
      ~Count() {
        std::lock_guard<std::mutex> lock(m);
        t.seconds += std::chrono::duration<double>(Clock::now() - t0).count();
        t.bytes += bytes;
        ++t.calls;
      }
    } count{traffic, traffic_mutex, t0, bytes};
    try {
      return f();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      collective_failed(what, e);
    }
  }

  // Plain sockets before c10d (store_address.h): a host that does not
  // resolve and a store nobody hosts each get their own line within the
  // timeout. Returns the address c10d connects to: the one that answered.
  std::string find_store(Clock::time_point deadline) {
    try {
      endpoints = sockets::resolve_store_host(o.master_addr, o.master_port, deadline);
    } catch (const Error& e) {
      throw Error(fmt::format("rank {}: {}", o.rank, e.what()));
    }
    if (o.rank == 0 && !o.agent_store) {
      // It hosts the store: c10d listens on every address of this machine
      // and then asks its own store at the address given. An address this
      // machine does not hold (a NAT's, a forwarded port, or a mistake) may
      // lead elsewhere, so it asks through the loopback instead.
      foreign_master = !sockets::is_local_address(endpoints);
      return foreign_master ? "127.0.0.1" : o.master_addr;
    }
    const sockets::Endpoint* found = sockets::wait_for_listener(endpoints, deadline);
    if (found == nullptr) {
      throw Error(fmt::format("rank {} could not reach the run's store at {} within {} s: nothing listens there "
                              "({} hosts it: did it start, on that address?)",
                              o.rank, where, o.timeout_s, o.agent_store ? "torchrun's agent" : "rank 0"));
    }
    return found->text.empty() ? o.master_addr : found->text;
  }

  void connect(const std::string& address) {
    c10d::TCPStoreOptions t;
    t.port = static_cast<std::uint16_t>(o.master_port);
    t.isServer = o.rank == 0 && !o.agent_store;
    t.numWorkers = std::nullopt;  // arrival is checked below, by name
    t.waitWorkers = false;
    t.timeout = millis(o.timeout_s);
    try {
      tcp = c10::make_intrusive<c10d::TCPStore>(address, t);
    } catch (const std::exception& e) {
      const std::string m = c10_message(e);
      if (t.isServer && (m.find("EADDRINUSE") != std::string::npos || m.find("in use") != std::string::npos)) {
        throw Error(fmt::format("rank 0 cannot host the run's store on {}: the port is in use (another run, or "
                                "another program): choose another port (--master HOST:PORT, or MASTER_PORT)",
                                where));
      }
      if (t.isServer) throw Error(fmt::format("rank 0 cannot host the run's store on {}: {}", where, m));
      throw Error(fmt::format("rank {} could not reach the run's store at {} within {} s ({} hosts it: did it "
                              "start, on that address?): {}",
                              o.rank, where, o.timeout_s, o.agent_store ? "torchrun's agent" : "rank 0", m));
    }
    store = c10::make_intrusive<c10d::PrefixStore>(kPrefix, tcp);
    watch_store = c10::make_intrusive<c10d::PrefixStore>(kPrefix, tcp->clone());
  }

  // Every rank announces itself by name, then waits for the others: a
  // missing rank is named, a rank started twice or with another world size
  // is refused.
  void arrive() {
    const std::string size = std::to_string(o.world_size);
    const std::string agreed = value(store->compareSet("world_size", {}, bytes(size)));
    if (agreed != size) {
      throw Error(fmt::format("rank {} was started with world size {}, but the run at {} has {}: start every rank "
                              "with the same world size",
                              o.rank, o.world_size, where, agreed));
    }
    static std::atomic<int> joined{0};  // worlds of this process (tests run ranks as threads)
    const std::string me = fmt::format("{} (pid {}, world {})", host_name(), ::getpid(), joined++);
    const std::string got = value(store->compareSet("arrived/" + std::to_string(o.rank), {}, bytes(me)));
    if (got != me) {
      throw Error(fmt::format("rank {} joined the run at {} twice: it is already held by {}; give each process its "
                              "own rank",
                              o.rank, where, got));
    }
    store->add("arrived", 1);
    // Rank 0, when it hosts the store, gives the verdict on who is missing;
    // the others wait a little longer for it, since its store ends with it.
    const bool judge = o.rank == 0 || o.agent_store;
    const auto deadline = Clock::now() + millis(o.timeout_s) + (judge ? std::chrono::seconds(0) : std::chrono::seconds(2));
    try {
      while (store->add("arrived", 0) < o.world_size) {
        if (!judge && store->check({"missing"})) {
          const std::string names = value(store->get("missing"));
          store->add("missing_read", 1);  // after reading: rank 0 may end once all have
          throw Error(missing_message(names));
        }
        if (Clock::now() >= deadline) {
          std::vector<int64_t> missing;
          for (int64_t r = 0; r < o.world_size; ++r) {
            if (!store->check({"arrived/" + std::to_string(r)})) missing.push_back(r);
          }
          const std::string names = std::to_string(missing.size()) + "|" + rank_list(missing);
          if (o.rank == 0 && !o.agent_store) {
            store->set("missing", names);
            const int64_t waiting = store->add("arrived", 0) - 1;
            const auto until = Clock::now() + std::chrono::seconds(2);
            while (store->add("missing_read", 0) < waiting && Clock::now() < until) {
              std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
          }
          throw Error(missing_message(names));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      throw Error(fmt::format("rank {}: lost the run's store at {} while waiting for the other ranks ({}): {} ended",
                              o.rank, where, c10_message(e), o.agent_store ? "torchrun's agent" : "rank 0"));
    }
  }

  // "rank 1: 1 of the 3 ranks did not arrive ... (rank 2 missing)" from "1|2".
  std::string missing_message(const std::string& names) const {
    const auto bar = names.find('|');
    return fmt::format("rank {}: {} of the {} ranks did not arrive at {} within {} s (rank {} missing): start every "
                       "rank with the same --master and world size{}",
                       o.rank, names.substr(0, bar), o.world_size, where, o.timeout_s, names.substr(bar + 1),
                       foreign_master ? fmt::format(" ({} is not an address of this machine, {}, which hosts the "
                                                    "store: does it lead here?)",
                                                    o.master_addr, host_name())
                                      : "");
  }

  void make_group() {
    auto options = c10d::ProcessGroupGloo::Options::create(millis(o.timeout_s));
    // Loopback runs (tests, one machine) bind to the loopback address; other
    // runs to GLOO_SOCKET_IFNAME's interface or the hostname's address.
    if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME")) {
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    } else if (is_loopback(o.master_addr)) {
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(o.master_addr));
    } else {
      options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    }
    options->threads = 1;
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>("gloo", store);
    group = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, static_cast<int>(o.rank),
                                                        static_cast<int>(o.world_size), options);
  }
};

void World::prepare_process() {
  static std::once_flag once;
  std::call_once(once, [] {
    // c10d logs a warning (with a stack trace) for every broken connection
    // before it throws; World turns each into one error that names the
    // rank, so c10's warnings would only repeat it, many lines long.
    // Its errors too: each is followed by the exception World turns into
    // its one line, and comes with a stack trace of its own.
    FLAGS_caffe2_log_level = std::max(FLAGS_caffe2_log_level, 3);  // fatal only
    // c10d's flight recorder (a trace of every collective for debugging
    // hangs, on by default; snnsim never reads it) adds each process group
    // to a process-wide std::map outside its mutex on the group's first
    // collective (torch 2.11, FlightRecorderDetail.hpp). Two groups of one
    // process starting collectives at once corrupt the map: a SIGSEGV in
    // ProcessGroupGloo::enqueue, seen when tests run ranks as threads. It is
    // read from the environment when the first group starts; a size the
    // user set (under either of its names) is kept.
    if (!std::getenv("TORCH_FR_BUFFER_SIZE") && !std::getenv("TORCH_NCCL_TRACE_BUFFER_SIZE")) {
      ::setenv("TORCH_FR_BUFFER_SIZE", "0", /*overwrite=*/0);
    }
  });
}

World::World(const WorldOptions& options, PeerFailure on_peer_failure) : s_(std::make_unique<State>()) {
  options.validate();
  prepare_process();
  s_->o = options;
  s_->where = fmt::format("{}:{}", options.master_addr, options.master_port);
  s_->on_peer_failure = on_peer_failure ? std::move(on_peer_failure) : PeerFailure(default_peer_failure);
  const std::string address = s_->find_store(Clock::now() + millis(options.timeout_s));
  {
    // Once connected, c10d's client waits for the store's first answer with
    // no deadline: where another program listens on the port and never
    // answers, the rank would hang. A store that listens (find_store saw
    // it) answers at once, so past the timeout and a margin, counted from
    // there, the watchdog ends the process with one line. (arrive() has
    // deadlines of its own.)
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    std::thread watchdog([&] {
      std::unique_lock<std::mutex> lock(m);
      constexpr int kMargin = 2;  // seconds
      if (!cv.wait_for(lock, millis(options.timeout_s) + std::chrono::seconds(kMargin), [&] { return done; })) {
        s_->end_for_peer(fmt::format("rank {}: no answer from the run's store at {} within {} s: is another program "
                                     "listening on that port? (choose another with --master HOST:PORT, or MASTER_PORT)",
                                     options.rank, s_->where, options.timeout_s + kMargin),
                         2);
      }
    });
    const auto stop = [&] {
      {
        std::lock_guard<std::mutex> lock(m);
        done = true;
      }
      cv.notify_one();
      watchdog.join();
    };
    try {
      s_->connect(address);
    } catch (...) {
      stop();
      throw;
    }
    stop();
  }
  s_->arrive();
  try {
    s_->make_group();
  } catch (const std::exception& e) {
    throw Error(fmt::format("rank {}: could not connect to the other ranks ({}): {}", options.rank, s_->where,
                            c10_message(e)));
  }
  s_->watcher = std::thread([s = s_.get()] { s->watch(); });
}

World::~World() {
  s_->stop_watch = true;
  if (s_->watcher.joinable()) s_->watcher.join();
}

int64_t World::rank() const { return s_->o.rank; }
int64_t World::size() const { return s_->o.world_size; }
const WorldOptions& World::options() const { return s_->o; }
bool World::ending_for_peer() const { return s_->ending.load(); }
World::Traffic World::traffic() const {
  std::lock_guard<std::mutex> lock(s_->traffic_mutex);
  return s_->traffic;
}

void World::check_same_settings(const std::string& settings_json) {
  // Through the Gloo group, not the store: a rank that died before it could
  // send its settings fails the exchange at once instead of after timeout_s.
  torch::Tensor mine = torch::empty({static_cast<int64_t>(settings_json.size())}, torch::kUInt8);
  std::copy(settings_json.begin(), settings_json.end(), mine.data_ptr<uint8_t>());
  const torch::Tensor sizes = all_gather_rows(torch::tensor({mine.numel()}, torch::kLong));
  const torch::Tensor all = all_gather_rows(mine);
  std::vector<std::string> texts;
  int64_t at = 0;
  for (int64_t r = 0; r < size(); ++r) {
    const int64_t n = sizes[r].item<int64_t>();
    const uint8_t* p = all.data_ptr<uint8_t>() + at;
    texts.emplace_back(p, p + n);
    at += n;
  }
  // Every rank compares every rank with rank 0, in rank order: all of them
  // name the same difference.
  for (int64_t r = 1; r < size(); ++r) {
    if (texts[r] != texts[0]) {
      throw Error("the ranks were started with different settings (" + first_difference(texts[0], texts[r], r) +
                  "): start every rank with the same command");
    }
  }
}

torch::Tensor World::all_gather_rows(const torch::Tensor& rows) {
  State& s = *s_;
  TORCH_CHECK(rows.dim() >= 1 && rows.dim() <= 6, "all_gather_rows: expected 1 to 6 dims, got ", rows.dim());
  const int64_t W = s.o.world_size;
  // Each rank's row count, dtype and row shape, so that a mismatch is named
  // before any data moves.
  constexpr int64_t kMeta = 8;
  torch::Tensor meta = torch::full({kMeta}, -1, torch::kLong);
  meta[0] = rows.size(0);
  meta[1] = static_cast<int64_t>(rows.scalar_type());
  for (int64_t d = 1; d < rows.dim(); ++d) meta[1 + d] = rows.size(d);
  std::vector<std::vector<torch::Tensor>> metas(1);
  for (int64_t r = 0; r < W; ++r) metas[0].push_back(torch::empty({kMeta}, torch::kLong));
  std::vector<torch::Tensor> meta_in{meta};
  s.guarded("a gather", [&] { s.wait_collective(s.group->allgather(metas, meta_in)); }, kMeta * 8);
  for (int64_t r = 0; r < W; ++r) {
    const torch::Tensor& m = metas[0][r];
    if (!m.narrow(0, 1, kMeta - 1).equal(metas[0][0].narrow(0, 1, kMeta - 1))) {
      throw InternalError(fmt::format("all_gather_rows: rank {} sent rows of another dtype or shape than rank 0",
                                      r));
    }
  }
  // The rows as bytes; every rank's count is known now, so the bytes go
  // as all_gather_parts' parts.
  const torch::Tensor flat = rows.contiguous().to(torch::kCPU).reshape({-1}).view(torch::kUInt8);
  int64_t row_elems = 1;
  for (int64_t d = 1; d < rows.dim(); ++d) row_elems *= rows.size(d);
  const int64_t bytes_per_row = row_elems * static_cast<int64_t>(rows.element_size());
  std::vector<int64_t> split, shape(rows.sizes().begin(), rows.sizes().end());
  shape[0] = 0;
  for (int64_t r = 0; r < W; ++r) {
    const int64_t n = metas[0][r][0].item<int64_t>();
    split.push_back(n * bytes_per_row);
    shape[0] += n;
  }
  return all_gather_parts(flat, split).view(rows.scalar_type()).reshape(shape);
}

torch::Tensor World::sum_in_rank_order(const torch::Tensor& t) {
  State& s = *s_;
  const torch::Tensor mine = t.contiguous().to(torch::kCPU);
  // Shapes and dtypes first (a cheap exchange): Gloo moves equal sizes.
  const torch::Tensor meta = torch::tensor({static_cast<int64_t>(mine.scalar_type()), mine.numel()}, torch::kLong);
  std::vector<std::vector<torch::Tensor>> metas(1);
  for (int64_t r = 0; r < s.o.world_size; ++r) metas[0].push_back(torch::empty({2}, torch::kLong));
  std::vector<torch::Tensor> meta_in{meta};
  s.guarded("a sum", [&] { s.wait_collective(s.group->allgather(metas, meta_in)); }, 16);
  for (int64_t r = 1; r < s.o.world_size; ++r) {
    if (!metas[0][r].equal(metas[0][0])) {
      throw InternalError(fmt::format("sum_in_rank_order: rank {} sent another dtype or size than rank 0", r));
    }
  }
  // Gathered whole, then added in rank order on every rank: the same bits
  // everywhere (a reducing collective would add in its own order).
  const torch::Tensor flat = mine.reshape({-1});
  std::vector<std::vector<torch::Tensor>> outs(1);
  for (int64_t r = 0; r < s.o.world_size; ++r) outs[0].push_back(torch::empty_like(flat));
  std::vector<torch::Tensor> in{flat};
  s.guarded("a sum", [&] { s.wait_collective(s.group->allgather(outs, in)); }, static_cast<int64_t>(flat.nbytes()));
  torch::Tensor sum = outs[0][0];
  for (int64_t r = 1; r < s.o.world_size; ++r) sum.add_(outs[0][r]);  // sum + t_r, rounded as a + b
  return sum.reshape(mine.sizes());
}

torch::Tensor World::exchange_parts(const torch::Tensor& t, const std::vector<int64_t>& split) {
  const int64_t W = s_->o.world_size;
  TORCH_CHECK(t.dim() == 1 && static_cast<int64_t>(split.size()) == W, "exchange_parts: expected a 1-D tensor and ",
              W, " parts, got ", t.dim(), " dims and ", split.size(), " parts");
  const int64_t mine = split[static_cast<size_t>(s_->o.rank)];
  return exchange(t, split, std::vector<int64_t>(static_cast<size_t>(W), mine)).reshape({W, mine});
}

torch::Tensor World::exchange(const torch::Tensor& t, const std::vector<int64_t>& send,
                              const std::vector<int64_t>& recv) {
  State& s = *s_;
  const int64_t W = s.o.world_size;
  TORCH_CHECK(t.dim() == 1 && static_cast<int64_t>(send.size()) == W && static_cast<int64_t>(recv.size()) == W,
              "exchange: expected a 1-D tensor and ", W, " send and receive sizes, got ", t.dim(), " dims, ",
              send.size(), " and ", recv.size(), " sizes");
  int64_t sent = 0, received = 0;
  for (const int64_t n : send) sent += n;
  for (const int64_t n : recv) received += n;
  TORCH_CHECK(sent == t.numel(), "exchange: the parts add up to ", sent, " elements, the tensor has ", t.numel());
  TORCH_CHECK(send[static_cast<size_t>(s.o.rank)] == recv[static_cast<size_t>(s.o.rank)], "exchange: rank ", s.o.rank,
              " sends itself ", send[static_cast<size_t>(s.o.rank)], " elements but receives ",
              recv[static_cast<size_t>(s.o.rank)]);
  torch::Tensor in = t.contiguous().to(torch::kCPU);
  torch::Tensor out = torch::empty({received}, in.options());
  std::vector<int64_t> out_split(recv), in_split(send);
  const int64_t to_self = send[static_cast<size_t>(s.o.rank)];
  s.guarded(
      "an exchange", [&] { s.wait_collective(s.group->alltoall_base(out, in, out_split, in_split)); },
      (sent - to_self) * static_cast<int64_t>(in.element_size()));
  return out;
}

torch::Tensor World::all_gather_parts(const torch::Tensor& part, const std::vector<int64_t>& split) {
  State& s = *s_;
  const int64_t W = s.o.world_size;
  TORCH_CHECK(part.dim() == 1 && static_cast<int64_t>(split.size()) == W, "all_gather_parts: expected a 1-D part and ",
              W, " sizes, got ", part.dim(), " dims and ", split.size(), " sizes");
  TORCH_CHECK(part.numel() == split[static_cast<size_t>(s.o.rank)], "all_gather_parts: rank ", s.o.rank, "'s part has ",
              part.numel(), " elements, split says ", split[static_cast<size_t>(s.o.rank)]);
  int64_t most = 1, total = 0;
  for (const int64_t n : split) {
    most = std::max(most, n);
    total += n;
  }
  // Gloo's allgather moves equal sizes: each rank's slot is `most` long,
  // the slots are rows of one buffer, so equal parts need no copy after.
  torch::Tensor in = torch::empty({most}, part.options().device(torch::kCPU));
  in.narrow(0, 0, part.numel()).copy_(part);
  torch::Tensor slots = torch::empty({W, most}, in.options());
  std::vector<std::vector<torch::Tensor>> outs(1);
  for (int64_t r = 0; r < W; ++r) outs[0].push_back(slots[r]);
  std::vector<torch::Tensor> ins{in};
  s.guarded(
      "a gather", [&] { s.wait_collective(s.group->allgather(outs, ins)); }, static_cast<int64_t>(in.nbytes()));
  if (total == W * most) return slots.reshape({-1});
  std::vector<torch::Tensor> parts;
  for (int64_t r = 0; r < W; ++r) parts.push_back(slots[r].narrow(0, 0, split[static_cast<size_t>(r)]));
  return torch::cat(parts);
}

void World::spin_before_waiting(std::chrono::microseconds most) { s_->spin = most; }

void World::barrier() {
  s_->guarded("a barrier", [&] { s_->wait_collective(s_->group->barrier()); });
}

struct Cancel::Impl {
  std::mutex mutex;
  bool cancelled = false;
  c10::intrusive_ptr<c10d::Work> current;  // the call in progress
};

Cancel::Cancel() : impl_(std::make_unique<Impl>()) {}
Cancel::~Cancel() = default;

void Cancel::cancel() noexcept {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->cancelled = true;
  try {
    if (impl_->current) impl_->current->abort();
  } catch (const std::exception&) {
    // Already over: nothing to end.
  }
}

bool Cancel::cancelled() const noexcept {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->cancelled;
}

namespace {

// Waits for a point-to-point call that `cancel` may abort meanwhile.
void wait_for(const c10::intrusive_ptr<c10d::Work>& work, Cancel::Impl* cancel, const std::string& what) {
  const auto cancelled = [&] { return Error(what + " was cancelled: the pipeline failed on this rank"); };
  if (cancel) {
    std::lock_guard<std::mutex> lock(cancel->mutex);
    if (cancel->cancelled) {
      work->abort();
      throw cancelled();
    }
    cancel->current = work;
  }
  bool done = false;
  try {
    done = work->wait();
  } catch (...) {
    if (cancel) {
      std::lock_guard<std::mutex> lock(cancel->mutex);
      cancel->current.reset();
      if (cancel->cancelled) throw cancelled();
    }
    throw;
  }
  if (cancel) {
    std::lock_guard<std::mutex> lock(cancel->mutex);
    cancel->current.reset();
    if (cancel->cancelled && !done) throw cancelled();
  }
  if (!done) throw cancelled();  // an abort nobody asked for is one too
}

}  // namespace

void World::send(const torch::Tensor& t, int64_t dst, int tag, Cancel* cancel) {
  std::vector<torch::Tensor> v{t.contiguous()};
  const std::string what = fmt::format("a send to rank {}", dst);
  s_->guarded(
      what, [&] { wait_for(s_->group->send(v, static_cast<int>(dst), tag), cancel ? cancel->impl_.get() : nullptr, what); },
      static_cast<int64_t>(v[0].nbytes()));
}

void World::recv(torch::Tensor& t, int64_t src, int tag, Cancel* cancel) {
  TORCH_CHECK(t.is_contiguous(), "recv: expected a contiguous tensor to receive into");
  std::vector<torch::Tensor> v{t};
  const std::string what = fmt::format("a receive from rank {}", src);
  s_->guarded(what, [&] {
    wait_for(s_->group->recv(v, static_cast<int>(src), tag), cancel ? cancel->impl_.get() : nullptr, what);
  });
}

bool World::report_failure(const std::string& message, int code) noexcept {
  State& s = *s_;
  // Whoever comes first ends the process: this report, or a peer's failure
  // that the watch thread (or a collective) found.
  if (s.ending.exchange(true)) return false;
  s.stop_watch = true;
  try {
    const std::string payload = fmt::format("{}\n{}\n{}", s.o.rank, code, first_line(message));
    s.store->compareSet("failure", {}, bytes(payload));
    const auto deadline = Clock::now() + kReportWait;
    for (int64_t r = 0; r < s.o.world_size; ++r) {
      if (r == s.o.rank) continue;
      while (!s.store->check({"ack/" + std::to_string(r)}) && Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  } catch (const std::exception&) {
    // The store is gone (rank 0 ended first): nobody is left to tell.
  }
  return true;
}

void World::finish() {
  State& s = *s_;
  if (s.finished) return;
  s.finished = true;
  s.stop_watch = true;
  if (s.watcher.joinable()) s.watcher.join();
  s.guarded("the end of the run", [&] { s.store->add("finished", 1); });
  if (s.o.rank != 0 || s.o.agent_store) return;  // torchrun's agent keeps its store
  const auto deadline = Clock::now() + millis(s.o.timeout_s);
  while (true) {
    int64_t done = 0;
    try {
      if (auto f = s.peer_failure(*s.store)) {
        s.end_for_peer(f->first, f->second);
        throw Error(f->first);
      }
      done = s.store->add("finished", 0);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      throw Error(fmt::format("rank 0: the run's store failed at the end: {}", c10_message(e)));
    }
    if (done >= s.o.world_size) return;
    if (Clock::now() >= deadline) {
      throw Error(fmt::format("rank 0: only {} of {} ranks finished within {} s", done, s.o.world_size,
                              s.o.timeout_s));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace snn::dist
