#include <gtest/gtest.h>
#include <torch/torch.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "snn/core/detail/hdf5.h"
#include "snn/core/error.h"
#include "snn/recording/recording_file.h"
#include "snn/recording/schema.h"
#include "support/source_path.h"
#include "support/test_util.h"

namespace snn::recording {
namespace {

std::string temp_path(const std::string& name) {
  return "/tmp/snn_recording_test_" + std::to_string(::getpid()) + "_" + name;
}

bool exists(const std::string& p) { return std::ifstream(p).good(); }

// A file's bytes (to prove that a refused resume left it exactly as it was).
std::string bytes_of(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

RecordingLayout small_layout() {
  RecordingLayout L;
  L.spikes = {{"hidden", 6, 1, {}}, {"output", 3, 2, {}}};
  L.traces = {{"hidden", 6, 1, {0, 2}}};
  L.classes = 3;
  L.steps = 4;
  L.dt_ms = 0.5;
  return L;
}

// Random batches of the given sizes (the same seed: a prefix of sizes gives
// the same first batches) and what h5py must read back once all are written.
struct Batches {
  std::vector<SampleBatch> batches;
  nlohmann::json want;
};

Batches make_batches(const std::vector<int64_t>& sizes) {
  const RecordingLayout L = small_layout();
  Batches out;
  nlohmann::json& want = out.want;
  torch::manual_seed(7);
  int64_t first = 0;
  std::vector<uint64_t> ptr_h{0}, ptr_o{0};
  for (int64_t B : sizes) {
    SampleBatch b;
    const torch::Tensor hidden = torch::rand({L.steps, B, 6}) < 0.3;   // [T, B, N] as the pipeline produces
    const torch::Tensor output = torch::rand({L.steps, B, 3}) < 0.5;
    b.spikes = {compact_spikes(hidden), compact_spikes(output)};
    b.output_counts = output.sum(0).to(torch::kFloat);
    b.predicted = b.output_counts.argmax(1);
    b.labels = torch::arange(B, torch::kLong).remainder(3);
    b.traces = {torch::randn({B, L.steps, 2})};
    for (auto [name, spikes, ptr] : {std::tuple{"hidden", hidden, &ptr_h}, std::tuple{"output", output, &ptr_o}}) {
      const torch::Tensor nz = spikes.permute({1, 0, 2}).nonzero();  // b, t, n in file order
      for (int64_t i = 0; i < nz.size(0); ++i) {
        const int64_t s = nz[i][0].item<int64_t>(), t = nz[i][1].item<int64_t>();
        want["spikes"][name]["timestamps"].push_back(static_cast<double>((first + s) * L.steps + t) * L.dt_ms);
        want["spikes"][name]["node_ids"].push_back(nz[i][2].item<int64_t>());
      }
      for (int64_t s = 0; s < B; ++s) ptr->push_back(ptr->back() + spikes.select(1, s).sum().item<int64_t>());
    }
    for (int64_t s = 0; s < B; ++s) {
      want["labels"].push_back(b.labels[s].item<int64_t>());
      want["predicted"].push_back(b.predicted[s].item<int64_t>());
      std::vector<int64_t> row;
      for (int64_t c = 0; c < 3; ++c) row.push_back(b.output_counts[s][c].item<int64_t>());
      want["counts"].push_back(row);
      want["t_start"].push_back(static_cast<double>(first + s) * L.steps * L.dt_ms);
      want["t_stop"].push_back(static_cast<double>(first + s + 1) * L.steps * L.dt_ms);
      for (int64_t t = 0; t < L.steps; ++t) {
        want["traces"]["hidden"]["data"].push_back(
            std::vector<float>{b.traces[0][s][t][0].item<float>(), b.traces[0][s][t][1].item<float>()});
      }
    }
    first += B;
    out.batches.push_back(std::move(b));
  }
  want["spikes"]["hidden"]["ptr"] = ptr_h;
  want["spikes"]["output"]["ptr"] = ptr_o;
  want["traces"]["hidden"]["node_ids"] = {0, 2};
  want["traces"]["hidden"]["time"] = {0.0, static_cast<double>(first * L.steps) * L.dt_ms, L.dt_ms};
  want["samples"] = first;
  return out;
}

// Appends and commits each batch.
void write_all(RecordingFile& file, const std::vector<SampleBatch>& batches) {
  for (const auto& b : batches) {
    file.append(b);
    file.commit();
  }
}

nlohmann::json write_two_batches(RecordingFile& file) {
  Batches b = make_batches({3, 2});
  write_all(file, b.batches);
  return b.want;
}

// A writer killed mid-run, in a child process: it commits `batches`, appends
// `uncommitted` without a commit, and dies without closing anything (as
// SIGKILL leaves it: no destructor, no flush).
void killed_writer(const std::string& path, const std::vector<SampleBatch>& batches, const SampleBatch& uncommitted) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::alarm(60);
    try {
      auto* file = new RecordingFile(path, small_layout(), {{"config", "c"}});  // never destroyed
      write_all(*file, batches);
      file->append(uncommitted);
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

void expect_h5py_reads(const std::string& path, nlohmann::json want) {
  const std::string expected = path + ".expected.json";
  std::ofstream(expected) << want.dump();
  const std::string cmd = test::test_python() + " " + test::source_path("tests/python/check_recording.py") + " " + path +
                          " " + expected;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::remove(expected.c_str());
}

TEST(RecordingFile, H5pyReadsWhatWasWrittenAndTheFileIsRenamedWhenComplete) {
  const std::string path = temp_path("complete.h5");
  {
    RecordingFile file(path, small_layout(), {{"config", "{\"steps\": 4}"}, {"snnsim_version", "test"}});
    EXPECT_TRUE(exists(path + ".partial"));
    nlohmann::json want = write_two_batches(file);
    EXPECT_EQ(file.samples_committed(), 5);
    file.finish("complete", {{"wall_time_s", "1.5"}});
    EXPECT_FALSE(exists(path + ".partial"));
    want["status"] = "complete";
    want["meta"] = {{"config", "{\"steps\": 4}"}, {"wall_time_s", "1.5"}};
    expect_h5py_reads(path, want);
  }
  // A complete file is not overwritten unless asked to.
  EXPECT_THROW(RecordingFile(path, small_layout(), {}), Error);
  { RecordingFile again(path, small_layout(), {}, /*overwrite=*/true); }
  std::remove(path.c_str());
  std::remove((path + ".partial").c_str());
}

TEST(RecordingFile, AnUnfinishedFileStaysPartialAndSaysAborted) {
  const std::string path = temp_path("aborted.h5");
  nlohmann::json want;
  {
    RecordingFile file(path, small_layout(), {});
    want = write_two_batches(file);
  }  // destroyed without finish(): an exception or a signal unwound the run
  EXPECT_FALSE(exists(path));
  ASSERT_TRUE(exists(path + ".partial"));
  want["status"] = "aborted";
  want["meta"] = nlohmann::json::object();
  expect_h5py_reads(path + ".partial", want);
  std::remove((path + ".partial").c_str());
}

TEST(RecordingFile, RejectsBadBatches) {
  const std::string path = temp_path("bad.h5");
  RecordingFile file(path, small_layout(), {});
  SampleBatch b;
  b.labels = torch::zeros({2}, torch::kLong);
  b.predicted = torch::zeros({2}, torch::kLong);
  b.output_counts = torch::zeros({2, 4});  // 4 classes, the layout has 3
  EXPECT_THROW(file.append(b), c10::Error);
  b.output_counts = torch::zeros({2, 3});
  b.spikes = {compact_spikes(torch::zeros({4, 2, 6})), compact_spikes(torch::zeros({4, 2, 3}))};
  b.traces = {torch::zeros({2, 3, 2})};  // 3 steps, T is 4
  EXPECT_THROW(file.append(b), c10::Error);
  file.finish("aborted");
  std::remove((path + ".partial").c_str());
}

TEST(RecordingFile, RecoverKeepsEveryCommittedSampleOfAKilledWriter) {
  const std::string path = temp_path("killed.h5");
  const Batches all = make_batches({3, 2, 4});
  killed_writer(path, {all.batches[0], all.batches[1]}, all.batches[2]);
  ASSERT_TRUE(exists(path + ".partial"));
  EXPECT_FALSE(exists(path));
  const Recovered r = recover(path + ".partial");
  EXPECT_EQ(r.path, path);
  EXPECT_EQ(r.samples, 5);
  EXPECT_EQ(r.previous_status, "running");
  EXPECT_FALSE(exists(path + ".partial"));
  nlohmann::json want = make_batches({3, 2}).want;  // the uncommitted third batch is gone
  want["status"] = "recovered";
  want["meta"] = {{"config", "c"}, {"recovered_from_status", "running"}};
  expect_h5py_reads(path, want);
  EXPECT_THROW(recover(path), Error);                     // already a normal file
  EXPECT_THROW(recover(temp_path("no-such.h5")), Error);  // nothing there
  std::remove(path.c_str());
}

TEST(RecordingFile, ResumeContinuesAKilledRecordingAsIfNeverInterrupted) {
  const std::string path = temp_path("resumed.h5");
  const Batches all = make_batches({3, 2, 4});
  killed_writer(path, {all.batches[0], all.batches[1]}, all.batches[2]);
  {
    RecordingFile file = RecordingFile::resume(path, small_layout());
    EXPECT_EQ(file.samples_committed(), 5);
    EXPECT_EQ(file.meta_attribute("config"), "c");
    const SampleRows rows = file.read_rows();
    EXPECT_TRUE(rows.labels.equal(torch::cat({all.batches[0].labels, all.batches[1].labels})));
    EXPECT_TRUE(rows.output_counts.equal(
        torch::cat({all.batches[0].output_counts, all.batches[1].output_counts}).to(torch::kLong)));
    write_all(file, {all.batches[2]});
    file.finish("complete");
  }
  nlohmann::json want = all.want;  // equal to writing the three batches at once
  want["status"] = "complete";
  want["meta"] = {{"config", "c"}};
  expect_h5py_reads(path, want);
  EXPECT_THROW(RecordingFile::resume(path, small_layout()), Error);  // complete: nothing to resume
  std::remove(path.c_str());
}

TEST(RecordingFile, ResumeRefusesAnotherLayout) {
  const std::string path = temp_path("other.h5");
  { RecordingFile file(path, small_layout(), {}); }  // aborted, nothing committed
  RecordingLayout steps = small_layout();
  steps.steps = 5;
  EXPECT_THROW(RecordingFile::resume(path, steps), Error);
  RecordingLayout ids = small_layout();
  ids.traces[0].node_ids = {0, 3};
  EXPECT_THROW(RecordingFile::resume(path, ids), Error);
  RecordingLayout pops = small_layout();
  pops.spikes.pop_back();
  EXPECT_THROW(RecordingFile::resume(path, pops), Error);
  { RecordingFile file = RecordingFile::resume(path, small_layout()); }  // the right layout opens
  std::remove((path + ".partial").c_str());
}

// The writer refuses what the readers would refuse (the schema's limits),
// before it creates anything.
TEST(RecordingFile, RefusesALayoutItsReadersWouldRefuse) {
  const std::string path = temp_path("limits.h5");
  RecordingLayout steps = small_layout();
  steps.steps = schema::kMax_steps + 1;
  RecordingLayout classes = small_layout();
  classes.classes = 0;
  RecordingLayout size = small_layout();
  size.spikes[1].size = schema::kMax_n_nodes + 1;
  for (const RecordingLayout& L : {steps, classes, size}) {
    EXPECT_THROW(RecordingFile(path, L, {}), Error);
    EXPECT_FALSE(exists(path + ".partial") || exists(path + ".partial.creating"));
  }
}

// Every check runs on the file opened read-only: a refused resume (another
// layout, another config) leaves a killed run's .partial and a recovered file
// byte for byte as they were, under the same name, still resumable.
TEST(RecordingFile, ARefusedResumeLeavesTheFileExactlyAsItWas) {
  const std::string path = temp_path("refused.h5");
  const Batches all = make_batches({3, 2, 4});
  killed_writer(path, {all.batches[0], all.batches[1]}, all.batches[2]);
  RecordingLayout ids = small_layout();
  ids.spikes[0].node_ids = {0, 1, 2};  // another --record list
  RecordingLayout classes = small_layout();
  classes.classes = 4;
  auto expect_refused = [&](const std::string& file, const std::string& name) {
    const std::string before = bytes_of(file);
    ASSERT_FALSE(before.empty());
    EXPECT_THROW(RecordingFile::resume(path, ids), Error) << name;
    EXPECT_THROW(RecordingFile::resume(path, classes), Error) << name;
    EXPECT_THROW(RecordingFile::resume(path, small_layout(), {{"config", "another network"}}), Error) << name;
    EXPECT_TRUE(bytes_of(file) == before) << name << ": a refused resume changed the file";
  };
  expect_refused(path + ".partial", "killed run");
  EXPECT_FALSE(exists(path));
  // The same for a file recover() made (status recovered, the normal name).
  ASSERT_EQ(recover(path).samples, 5);
  expect_refused(path, "recovered file");
  EXPECT_FALSE(exists(path + ".partial")) << "a refused resume renamed the recovered file";
  // The file is still good: the right layout and config continue it.
  {
    RecordingFile file = RecordingFile::resume(path, small_layout(), {{"config", "c"}});
    EXPECT_EQ(file.samples_committed(), 5);
    write_all(file, {all.batches[2]});
    file.finish("complete");
  }
  nlohmann::json want = all.want;
  want["status"] = "complete";
  want["meta"] = {{"config", "c"}, {"recovered_from_status", "running"}};
  expect_h5py_reads(path, want);
  std::remove(path.c_str());
}

// hdf5::check names the system's cause of the call that failed, read
// from HDF5's error stack: a full device's ENOSPC where a write failed
// (/dev/full), nothing where no system call did, whatever errno an
// earlier, unrelated failure left behind.
TEST(Hdf5Check, NamesTheFailedCallsOwnCauseNotAStaleErrno) {
  hdf5::QuietHdf5 quiet;
  errno = ENOSPC;
  EXPECT_EQ(test::message_of([] { hdf5::check(H5Pclose(-1), "closing nothing"); }), "closing nothing");
  errno = 0;
  const std::string full = test::message_of([] {
    hdf5::Handle f(H5Fcreate("/dev/full", H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    if (!f.ok()) throw Error("cannot create /dev/full" + hdf5::failed_call_cause());
    hdf5::check(H5Fflush(f.get(), H5F_SCOPE_GLOBAL), "cannot flush /dev/full");
  });
  EXPECT_NE(full.find(": No space left on device"), std::string::npos) << full;
}

}  // namespace
}  // namespace snn::recording
