// snn_fuzz: a seeded mutation fuzzer for snnsim's readers of untrusted files
// (IDX, CSV, TOML/JSON configs, recordings), built with the project's own
// compiler so that it runs under the sanitizer build's ASan + UBSan.
//
//   snn_fuzz TARGET CORPUS_DIR SEED SECONDS [WORK_DIR] [MAX_ITERATIONS]
//   snn_fuzz --replay TARGET FILE
//
// Each iteration takes an input from the pool (the corpus, then also the
// mutants the readers accepted), mutates it deterministically from (SEED,
// iteration), writes it to WORK_DIR/<input file> and runs the target's
// readers on it. A rejection (snn::Error, c10::Error, CLI11's errors: any
// std::exception with a message) is the expected answer to a bad file.
// Anything else fails the run, naming the seed, the iteration and the saved
// input: a crash or sanitizer report (the process dies; the input is already
// on disk), no answer within the per-input limit (a hang), an allocation
// the size of the machine (std::bad_alloc, std::length_error, or ASan's
// allocation-size-too-big), an accepted input that breaks the reader's
// contract (Defect). The same seed gives the same inputs; the time budget
// only decides how many of them run.

#include <c10/util/Exception.h>
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "snn/core/error.h"
#include "targets.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
// A reader asking for gigabytes because a header says so is a defect: ASan
// reports it (allocation-size-too-big) instead of letting the machine
// swap. The ASAN_OPTIONS environment variable still overrides this.
extern "C" const char* __asan_default_options() { return "max_allocation_size_mb=2048:allocator_may_return_null=0"; }
#endif

namespace snn::fuzz {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("fuzz: cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out.flush()) throw std::runtime_error("fuzz: cannot write " + path);
}

namespace {

constexpr unsigned kPerInputSeconds = 10;  // far above any input's time; a hang otherwise
constexpr size_t kMaxPoolAdditions = 512;

// What a fatal-signal handler or sanitizer death callback prints: fixed
// buffers, written with write(2) only.
char g_context[1024] = "snn_fuzz";

void say(const char* text) {
  const ssize_t ignored = ::write(2, text, std::strlen(text));
  (void)ignored;
}

void set_context(const std::string& target, uint64_t seed, int64_t iteration, const std::string& input) {
  std::snprintf(g_context, sizeof g_context, "snn_fuzz: target %s, seed %llu, iteration %lld, input saved as %s",
                target.c_str(), static_cast<unsigned long long>(seed), static_cast<long long>(iteration),
                input.c_str());
}

void on_hang(int) {
  say("\n");
  say(g_context);
  say(": FAILED: no answer within the per-input time limit (a hang)\n");
  _exit(3);
}

void on_death() {
  say("\n");
  say(g_context);
  say(": FAILED: the process died (crash or sanitizer report above)\n");
}

#if !defined(__SANITIZE_ADDRESS__)
void on_fatal_signal(int sig) {
  on_death();
  signal(sig, SIG_DFL);
  raise(sig);
}
#endif

void install_handlers() {
  signal(SIGALRM, on_hang);
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_set_death_callback(on_death);  // ASan handles the signals itself and calls this
#else
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) signal(sig, on_fatal_signal);
  // Without ASan, an address-space cap turns a huge allocation into
  // std::bad_alloc (with ASan it is unreliable: its shadow memory is
  // reserved up front; __asan_default_options covers that case).
  struct rlimit cap {};
  cap.rlim_cur = cap.rlim_max = rlim_t{8} << 30;
  setrlimit(RLIMIT_AS, &cap);
#endif
}

// A failure that does not kill the process by itself.
[[noreturn]] void fail(const std::string& why) {
  std::cout << std::flush;
  std::cerr << "\n" << g_context << ": FAILED: " << why << std::endl;
  // No exit-time cleanup: a reader that left HDF5 objects open would crash
  // HDF5's and bury this line under a second report.
  _exit(1);
}

Target target_named(const std::string& name) {
  if (name == "idx") return idx_target();
  if (name == "csv") return csv_target();
  if (name == "config") return config_target();
  if (name == "recording") return recording_target();
  throw std::runtime_error("fuzz: no target '" + name + "' (idx, csv, config, recording)");
}

std::vector<std::string> load_corpus(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) throw std::runtime_error("fuzz: no corpus folder " + dir);
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());  // readdir's order is the file system's
  std::vector<std::string> corpus;
  for (const auto& n : names) corpus.push_back(read_file(dir + "/" + n));
  if (corpus.empty()) throw std::runtime_error("fuzz: the corpus folder " + dir + " is empty");
  return corpus;
}

// The message of the last rejection, for the summary's examples.
std::string g_message;

// Outcome of one input; returns "" when accepted, else the kind of rejection.
std::string run_one(const Target& t, const std::string& path) {
  alarm(kPerInputSeconds);
  std::string kind;
  g_message.clear();
  try {
    t.check(path);
  } catch (const Defect& e) {
    fail(std::string("the reader accepted the input but broke its contract: ") + e.what());
  } catch (const std::bad_alloc&) {
    fail("std::bad_alloc: a reader asked for more memory than the machine has (check sizes before allocating)");
  } catch (const std::length_error& e) {
    fail(std::string("std::length_error (") + e.what() + "): a reader sized a buffer from unchecked input");
  } catch (const snn::Error& e) {
    kind = "snn::Error";
    g_message = e.what();
    if (!*e.what()) fail("snn::Error without a message");
  } catch (const c10::Error& e) {
    kind = "c10::Error";
    g_message = e.what_without_backtrace();
    if (!*e.what()) fail("c10::Error without a message");
  } catch (const std::exception& e) {
    kind = "other std::exception";
    g_message = e.what();
    if (!*e.what()) fail("an exception without a message");
  } catch (...) {
    fail("an exception of unknown type (not std::exception)");
  }
  alarm(0);
  return kind;
}

std::string hex(uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

int replay(const std::string& target_name, const std::string& file) {
  const Target t = target_named(target_name);
  set_context(t.name, 0, 0, file);
  install_handlers();
  const std::string kind = run_one(t, file);
  std::cout << "snn_fuzz: " << file << ": " << (kind.empty() ? "accepted" : "rejected (" + kind + "): " + g_message)
            << std::endl;
  return 0;
}

int fuzz(const std::string& target_name, const std::string& corpus_dir, uint64_t seed, double seconds,
         std::string work, int64_t max_iterations) {
  const Target t = target_named(target_name);
  if (work.empty()) work = "/tmp/snn_fuzz_" + t.name + "_" + std::to_string(::getpid());
  for (size_t slash = work.find('/', 1); slash != std::string::npos; slash = work.find('/', slash + 1)) {
    ::mkdir(work.substr(0, slash).c_str(), 0755);  // mkdir -p
  }
  ::mkdir(work.c_str(), 0755);
  const std::string path = work + "/" + t.file_name;
  std::vector<std::string> pool = load_corpus(corpus_dir);
  const size_t corpus_size = pool.size();
  install_handlers();

  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  std::map<std::string, int64_t> outcomes;
  std::map<std::string, std::string> examples;  // the first message of each kind of rejection
  uint64_t digest = 0xcbf29ce484222325ULL;  // FNV-1a of the inputs and outcomes, to see that a seed repeats
  int64_t i = 0;
  for (; (max_iterations < 0 || i < max_iterations) && (i < static_cast<int64_t>(corpus_size) || elapsed() < seconds);
       ++i) {
    // Each iteration's randomness depends on (seed, i) only; the pool it
    // draws from on the inputs before it, so a seed repeats exactly.
    Rng rng(seed * 0x9E3779B97F4A7C15ULL ^ static_cast<uint64_t>(i) * 0xD1B54A32D192ED03ULL);
    std::string input;
    bool mutated = false;
    if (i < static_cast<int64_t>(corpus_size)) {
      input = pool[static_cast<size_t>(i)];  // the corpus itself first, unmutated
    } else {
      input = pool[rng.below(pool.size())];
      mutated = rng.one_in(t.mutate_bytes_one_in);
      if (mutated) mutate(input, pool[rng.below(pool.size())], rng, t.mutator);
    }
    set_context(t.name, seed, i, path);
    try {
      if (t.prepare) {
        t.prepare(input, mutated, rng, path);
      } else {
        write_file(path, input);
      }
    } catch (const std::exception& e) {
      fail(std::string("the fuzzer itself could not make the input: ") + e.what());
    }
    const std::string kind = run_one(t, path);
    const std::string outcome = kind.empty() ? "accepted" : "rejected (" + kind + ")";
    if (++outcomes[outcome] == 1 && !kind.empty()) examples[outcome] = g_message.substr(0, g_message.find('\n'));
    // The digest covers each input (before the target's own changes, which
    // the same random numbers repeat) and its outcome.
    for (unsigned char c : input + '\0' + outcome) digest = (digest ^ c) * 0x100000001B3ULL;
    // Mutants the readers accept are valid-looking inputs to mutate further.
    if (kind.empty() && t.grow_pool && i >= static_cast<int64_t>(corpus_size) &&
        pool.size() < corpus_size + kMaxPoolAdditions) {
      pool.push_back(read_file(path));
    }
  }
  std::cout << "snn_fuzz: target " << t.name << ", seed " << seed << ": " << i << " inputs in " << elapsed()
            << " s (digest of inputs and outcomes " << hex(digest) << "), no failure";
  for (const auto& [k, n] : outcomes) std::cout << "; " << n << " " << k;
  std::cout << "\n";
  for (const auto& [k, m] : examples) std::cout << "  first " << k << ": " << m << "\n";
  std::cout << std::flush;
  return 0;
}

}  // namespace
}  // namespace snn::fuzz

int main(int argc, char** argv) {
  using namespace snn::fuzz;
  try {
    if (argc == 4 && std::string(argv[1]) == "--replay") return replay(argv[2], argv[3]);
    if (argc >= 5 && argc <= 7) {
      return fuzz(argv[1], argv[2], std::stoull(argv[3]), std::stod(argv[4]), argc >= 6 ? argv[5] : "",
                  argc >= 7 ? std::stoll(argv[6]) : -1);
    }
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
  std::cerr << "usage: snn_fuzz TARGET CORPUS_DIR SEED SECONDS [WORK_DIR] [MAX_ITERATIONS]\n"
               "       snn_fuzz --replay TARGET FILE\n"
               "targets: idx, csv, config, recording\n";
  return 2;
}
