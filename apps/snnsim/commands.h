#pragma once
// Subcommands of snnsim. Each adds its options to the app and returns the
// function that runs it once the command line is parsed.

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "snn/core/atomic_file.h"

#include <functional>
#include <string>
#include <vector>

namespace snn {
struct ImageDataset;
}  // namespace snn

namespace snn::app {

using Run = std::function<void()>;

/// The source tree's git commit at build time ("unknown" outside git).
extern const char* const kGitCommit;

/// `snnsim neuron`: one layer driven by an input-current CSV.
Run add_neuron_command(CLI::App& app);
/// `snnsim train`: surrogate-gradient training to an HDF5 checkpoint.
Run add_train_command(CLI::App& app);
/// `snnsim run`: simulate a data split with a checkpoint.
Run add_run_command(CLI::App& app);
/// `snnsim recover`: repair an unfinished recording.
Run add_recover_command(CLI::App& app);
/// `snnsim sweep`: parameter sweeps over run, with a resumable manifest.
Run add_sweep_command(CLI::App& app);
/// `snnsim analyze`: statistics of a recording.
Run add_analyze_command(CLI::App& app);
/// `snnsim bench`: simulation throughput against a naive per-step loop.
Run add_bench_command(CLI::App& app);
/// `snnsim inspect`: contents, status and provenance of a checkpoint, recording or sweep manifest.
Run add_inspect_command(CLI::App& app);
/// `snnsim export`: a trained network as a NIR file.
Run add_export_command(CLI::App& app);
/// `snnsim simulate`: a population model file (NEST-style networks in biological time).
Run add_simulate_command(CLI::App& app);
/// The embedded MNIST subset's folder: the copy installed beside this executable
/// (PREFIX/share/snnsim/mnist), else the source tree's (the build tree's snnsim).
std::string default_data_dir();
/// The MNIST-format data in `dir` for a network with `outputs` output
/// neurons, one per class: a label the output cannot represent is refused
/// as the network's size, not as a fault of the labels file.
ImageDataset load_data_for_outputs(const std::string& dir, int64_t outputs);
/// "a,b,c" -> {"a", "b", "c"} (flags that take comma-separated lists).
std::vector<std::string> split_list(const std::string& text);
/// "500M"-style sizes for `flag`: bytes, or with a K, M, G or T suffix
/// (powers of 1024); throws snn::Error naming the flag otherwise.
double parse_bytes(const std::string& flag, const std::string& text);
/// A finite number; throws snn::Error "WHAT: expected a number, got ..." otherwise.
double parse_number(const std::string& what, const std::string& text);
/// A number for JSON output, or null where it is not finite (a CV without intervals).
nlohmann::json json_number(double x);
/// The statistics a population model sweep's manifest rows hold
/// ("E.rate_hz", "E.isi_cv", "E.fano", "E.synchrony", then "I.rate_hz", ...),
/// in that order; `rows` is the manifest's "rows" array.
std::vector<std::string> sweep_metric_names(const nlohmann::json& rows);
/// The long names ("--tau") of the options given to `cmd`, on the command line or in --config.
std::vector<std::string> given_options(const CLI::App* cmd);
/// Remembers the command line for typed(); main() calls it before parsing.
void set_command_line(int argc, const char* const* argv);
/// Whether `flag` ("--x") was typed on the command line, not only set in a
/// --config file (a config's defaults may hold options a command ignores).
bool typed(const std::string& flag);
/// The --config file given to `cmd`'s program, as an input the command's
/// outputs must not replace ({"--config", ""} when none).
FileArgument config_argument(const CLI::App* cmd);
/// The signal (SIGINT, SIGTERM) that stopped a recording run; 0 if none.
int stop_signal();
/// From now on SIGINT and SIGTERM set stop_requested() instead of killing
/// (a second signal kills at once): a recording run finishes what it is
/// writing, commits, marks the file aborted and exits non-zero.
void watch_stop_signals();
/// Whether SIGINT or SIGTERM arrived since watch_stop_signals().
bool stop_requested();
/// Until a command watches them: SIGINT and SIGTERM end the program with
/// one line on stderr ("snnsim: error: interrupted by SIGINT" and the note
/// below), then by the signal itself (a shell sees 128 + it). Signals
/// ignored at start stay ignored.
void end_on_stop_signals();
/// What that line adds, e.g. where a killed training can continue from.
/// A signal during the call prints the old note or the new one.
void set_interrupt_note(const std::string& note);
/// While it lives, such a signal waits: its line and the end come when it
/// goes (after the work it covers, e.g. a checkpoint put in place and the
/// note that names it); where an exception ends that work, its error ends
/// the program instead. For short work only: the user is waiting. Does not
/// nest.
class HoldStopSignals {
 public:
  HoldStopSignals();
  ~HoldStopSignals();
  HoldStopSignals(const HoldStopSignals&) = delete;
  HoldStopSignals& operator=(const HoldStopSignals&) = delete;
};

}  // namespace snn::app
