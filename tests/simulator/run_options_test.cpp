// RunOptions (the one description of a run's result-deciding settings),
// load_network and the checks a loaded checkpoint passes.

#include <gtest/gtest.h>
#include <hdf5.h>
#include <torch/torch.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <vector>

#include "snn/core/error.h"
#include "snn/core/memory_limit.h"
#include "snn/simulator/checkpoint.h"
#include "snn/simulator/run_options.h"
#include "snn/simulator/run_recording.h"
#include "snn/simulator/training.h"

namespace snn {
namespace {

std::string temp_path(const std::string& name) {
  return testing::TempDir() + "/run_options_" + std::to_string(::getpid()) + "_" + name;
}

NetworkConfig tiny_config() {
  NetworkConfig c;
  c.layers = {20, 8, 3};
  c.steps = 4;
  c.seed = 7;
  return c;
}

TEST(RunOptions, EverySettingRoundTripsThroughJsonIncludingOverrides) {
  RunOptions o;
  o.checkpoint = "/data/ck.h5";
  o.data_dir = "/data/mnist";
  o.split = "train";
  o.limit = 300;
  o.record = "hidden:0-9,output";
  o.record_v = "hidden:1,2";
  o.record_input = true;
  o.dt_ms = 0.5;
  o.compress = true;
  o.overrides.steps = 12;
  o.overrides.tau = 3.5;
  o.overrides.v_threshold = 0.75;
  o.overrides.v_reset = std::optional<double>();  // soft reset
  o.overrides.refractory = 2;
  o.overrides.gain = 1.5;
  o.overrides.seed = 99;
  const RunOptions back = RunOptions::from_json(o.to_json(), "test");
  EXPECT_EQ(back.to_json(), o.to_json());
  ASSERT_TRUE(back.overrides.v_reset.has_value());
  EXPECT_FALSE(back.overrides.v_reset->has_value());
  EXPECT_EQ(*back.overrides.seed, 99u);
  // Unset overrides stay unset (not zero).
  RunOptions plain;
  plain.checkpoint = "/x.h5";
  const RunOptions plain_back = RunOptions::from_json(plain.to_json(), "test");
  EXPECT_TRUE(plain_back.overrides.empty());
  o.overrides.v_reset = std::optional<double>(-0.25);
  EXPECT_EQ(*RunOptions::from_json(o.to_json(), "test").overrides.v_reset, std::optional<double>(-0.25));
}

TEST(RunOptions, ReadsTheOptionsOfOlderRecordingsAndNamesAMissingKey) {
  // snnsim 0.1 kept these keys, with T = 0 for "the checkpoint's".
  const std::string old = R"({"checkpoint": "ck.h5", "data-dir": "d", "split": "test", "limit": -1, "T": 0,
    "record": "output", "record-v": "", "record-input": false, "dt": 1.0, "compress": false})";
  const RunOptions r = RunOptions::from_json(old, "recording 'r.h5'");
  EXPECT_TRUE(r.overrides.empty());
  try {
    RunOptions::from_json(R"({"checkpoint": "ck.h5"})", "recording 'r.h5'");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("recording 'r.h5': run_options key 'data-dir'"), std::string::npos) << e.what();
  }
}

TEST(RunOptions, RefusesLimitsThatAreNeitherPositiveNorAll) {
  RunOptions o;
  o.checkpoint = "/x.h5";
  o.limit = 0;
  EXPECT_THROW(o.validate(), Error);
  o.limit = -5;
  EXPECT_THROW(o.validate(), Error);
  o.limit = -1;
  EXPECT_NO_THROW(o.validate());
}

TEST(RunOptions, ResolvesRelativePathsAgainstTheCurrentFolder) {
  const std::string path = temp_path("resolve.h5");
  { std::FILE* f = std::fopen(path.c_str(), "w"); ASSERT_NE(f, nullptr); std::fclose(f); }
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(::chdir(testing::TempDir().c_str()), 0);
  RunOptions o;
  o.checkpoint = path.substr(path.rfind('/') + 1);
  o.data_dir = "mnist";
  o.resolve_paths();
  ASSERT_EQ(::chdir(cwd), 0);
  EXPECT_EQ(o.checkpoint[0], '/');
  EXPECT_EQ(o.checkpoint.substr(o.checkpoint.rfind('/')), path.substr(path.rfind('/')));
  EXPECT_EQ(o.data_dir[0], '/');
  std::remove(path.c_str());
  o.checkpoint = "no-such-checkpoint.h5";
  EXPECT_THROW(o.resolve_paths(), Error);
}

TEST(NetworkOverrides, ApplyOnlyWhatIsSetAndRefusePlifTau) {
  NetworkConfig c = tiny_config();
  NetworkOverrides o;
  o.apply(c);
  EXPECT_EQ(c.to_json(), tiny_config().to_json());
  o.tau = 4;
  o.gain = 2;
  o.seed = 11;
  o.apply(c);
  EXPECT_EQ(c.neuron.tau, 4);
  EXPECT_EQ(c.input_gain, 2);
  EXPECT_EQ(c.seed, 11u);
  NetworkConfig p = tiny_config();
  p.neuron.model = NeuronModel::kParametricLIF;
  EXPECT_THROW(o.apply(p), Error);
}

TEST(LoadNetwork, AppliesOverridesAndPlacementAndKeepsTheWeightsAndTheirHash) {
  const std::string path = temp_path("load.h5");
  SpikingNetwork net(tiny_config());
  save_checkpoint(path, net, 3);
  NetworkOverrides o;
  o.steps = 9;
  o.v_threshold = 0.5;
  Placement p;
  p.devices = {"cpu", "cpu"};
  p.steps_per_tick = 2;
  const LoadedNetwork loaded = load_network(path, o, p);
  EXPECT_EQ(loaded.epoch, 3);
  EXPECT_EQ(loaded.network->config().steps, 9);
  EXPECT_EQ(loaded.network->config().neuron.v_threshold, 0.5);
  EXPECT_EQ(loaded.network->config().devices.size(), 2u);
  EXPECT_EQ(loaded.network->config().steps_per_tick, 2);
  const auto a = net.named_parameters(), b = loaded.network->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a[i].second.equal(b[i].second)) << a[i].first;
  EXPECT_EQ(loaded.parameters_hash, parameters_hash(net));
  EXPECT_EQ(loaded.parameters_hash.size(), 16u);
  // One changed weight changes the hash.
  {
    torch::NoGradGuard no_grad;
    net.named_parameters()[0].second.view(-1)[5].add_(1e-3);
  }
  EXPECT_NE(parameters_hash(net), loaded.parameters_hash);
  std::remove(path.c_str());
}

// Writes value into parameter `name` of the checkpoint at `path`.
void poison(const std::string& path, const std::string& name, float value) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  const hid_t ds = H5Dopen2(f, ("parameters/" + name).c_str(), H5P_DEFAULT);
  ASSERT_GE(ds, 0);
  const hid_t space = H5Dget_space(ds);
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  std::vector<float> data(static_cast<size_t>(n));
  H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data());
  data[1] = value;
  H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data());
  H5Sclose(space);
  H5Dclose(ds);
  H5Fclose(f);
}

TEST(LoadCheckpoint, RefusesNaNAndInfiniteParametersNamingThem) {
  const std::string path = temp_path("nan.h5");
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
    SpikingNetwork net(tiny_config());
    save_checkpoint(path, net, 1);
    poison(path, "fc1.bias", bad);
    try {
      load_checkpoint(path);
      FAIL() << "no error for " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("parameters/fc1.bias holds 1 of 3 values that are NaN or infinite"),
                std::string::npos)
          << e.what();
    }
  }
  std::remove(path.c_str());
}

TEST(Placement, RefusesThreadCountsBeyondASaneMultipleOfTheCores) {
  EXPECT_GE(max_intra_op_threads(), 64);
  EXPECT_THROW(set_intra_op_threads(100000), Error);
  EXPECT_THROW(set_intra_op_threads(0), Error);
  Placement p;
  p.threads = 100000;
  NetworkConfig c = tiny_config();
  EXPECT_THROW(p.apply(c), Error);
}

TEST(CheckMemory, RefusesARunThatCannotFitWithTheNumbers) {
  NetworkConfig c = tiny_config();
  c.layers = {784, 256, 10};
  c.steps = 1000000000;
  try {
    check_memory(c, 64, false);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("T = 1000000000 steps with batch size 64 needs about"), std::string::npos) << m;
    EXPECT_NE(m.find("784-256-10"), std::string::npos) << m;
  }
  c.steps = 8;
  EXPECT_NO_THROW(check_memory(c, 64, false));
  EXPECT_NO_THROW(check_memory(c, 64, true));
  // K bounds a simulation block's memory, not training's.
  c.steps = 2000000;
  c.steps_per_tick = 4;
  EXPECT_LT(memory_estimate(c, 64, false), memory_estimate(c, 64, true) / 10);
}

// A scheduler's limit (Slurm's --mem, docker --memory) is a control group's,
// often on the job's group with the process in a child group of its own.
TEST(MemoryLimit, ReadsTheSmallestCgroupLimitOfTheGroupAndItsAncestors) {
  // (No std::filesystem: libtorch.so exports its own build of it.)
  char tmpl[] = "/tmp/snn_cgroup_XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  std::vector<std::string> made;  // files and folders, to remove in reverse
  auto put = [&](const std::string& file, const std::string& text) {
    for (size_t at = root.size() + 1; (at = file.find('/', at)) != std::string::npos; ++at) {
      const std::string dir = file.substr(0, at);
      if (::mkdir(dir.c_str(), 0755) == 0) made.push_back(dir);
    }
    if (std::find(made.begin(), made.end(), file) == made.end()) made.push_back(file);
    std::ofstream(file) << text << "\n";
  };
  // v2: the job's group limits 4 GiB, the process's own group says "max".
  put(root + "/job/memory.max", "4294967296");
  put(root + "/job/task_0/memory.max", "max");
  EXPECT_EQ(cgroup_memory_limit(root, "0::/job/task_0\n"), 4294967296.0);
  // The smaller of a group's and its parent's.
  put(root + "/job/task_0/memory.max", "1073741824");
  EXPECT_EQ(cgroup_memory_limit(root, "0::/job/task_0\n"), 1073741824.0);
  // v1, whose "no limit" is 2^63 rounded to pages.
  put(root + "/memory/slurm/uid_0/job_7/memory.limit_in_bytes", "2147483648");
  put(root + "/memory/slurm/uid_0/job_7/step_0/memory.limit_in_bytes", "9223372036854771712");
  put(root + "/memory/memory.limit_in_bytes", "9223372036854771712");
  EXPECT_EQ(cgroup_memory_limit(root, "5:cpuset:/\n4:memory:/slurm/uid_0/job_7/step_0\n1:cpu:/\n"),
            2147483648.0);
  // The memory controller among others on one line.
  EXPECT_EQ(cgroup_memory_limit(root, "4:cpu,memory:/slurm/uid_0/job_7\n"), 2147483648.0);
  // No limit anywhere, a group that is not there, or no cgroup at all.
  EXPECT_EQ(cgroup_memory_limit(root, "4:memory:/\n"), 0.0);
  EXPECT_EQ(cgroup_memory_limit(root, "0::/elsewhere\n"), 0.0);
  EXPECT_EQ(cgroup_memory_limit(root, ""), 0.0);
  for (auto it = made.rbegin(); it != made.rend(); ++it) std::remove(it->c_str());
  ::rmdir(root.c_str());
  // This process: a positive number with words for the message.
  const MemoryLimit m = memory_limit();
  EXPECT_GT(m.bytes, 0);
  EXPECT_FALSE(m.whose.empty());
}

}  // namespace
}  // namespace snn

namespace snn {
namespace {

TEST(PopulationList, NamesLayersAndIdsAndRefusesWhatIsNotThere) {
  NetworkConfig c;
  c.layers = {20, 8, 6, 3};
  const auto all = parse_population_list("--record", "hidden1,output:0-1,2", c);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].first, 0);
  EXPECT_TRUE(all[0].second.empty());
  EXPECT_EQ(all[1].first, 2);
  EXPECT_EQ(all[1].second, (std::vector<int64_t>{0, 1, 2}));
  auto message = [&](const std::string& text) {
    try {
      parse_population_list("--record", text, c);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("hiden"), "--record: no layer named 'hiden' (this network has hidden1, hidden2, output)");
  EXPECT_NE(message("output:3").find("within layer 'output' (0..2)"), std::string::npos);
  EXPECT_NE(message("5").find("must follow a layer name"), std::string::npos);
  EXPECT_NE(message("hidden2:0-99999999999").find("(0..5)"), std::string::npos);
}

TEST(RecordingEstimate, SaysTheTotalAndItsParts) {
  RecordingEstimate e;
  e.bytes = 1536;
  e.parts = {{"hidden spikes", 1024}, {"per-sample rows", 512}};
  e.probe_samples = 4;
  EXPECT_EQ(e.parts_text(), "hidden spikes 1.0 KiB, per-sample rows 512.0 B");
  EXPECT_EQ(e.describe(),
            "recording estimate (before compression, firing rates of the first 4 samples): 1.5 KiB (hidden spikes "
            "1.0 KiB, per-sample rows 512.0 B)");
  EXPECT_EQ(human_bytes(3.0 * (int64_t{1} << 30)), "3.0 GiB");
}

}  // namespace
}  // namespace snn
