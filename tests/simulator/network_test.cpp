#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "snn/core/error.h"
#include "snn/datasets/idx.h"
#include "snn/simulator/checkpoint.h"
#include "snn/simulator/network.h"
#include "snn/simulator/training.h"
#include "support/test_util.h"

namespace snn {
namespace {

const std::string kFixture = test::test_data_dir() + "/mnist-fixture";

NetworkConfig small_config() {
  NetworkConfig c;
  c.layers = {784, 64, 32, 10};
  c.neuron.v_threshold = 0.25;  // untrained weights are small: a low threshold keeps every layer spiking
  c.steps = 6;
  c.seed = 3;
  c.neuron.surrogate = Surrogate::atan();
  return c;
}

TEST(NetworkConfig, ParsesValidatesAndRoundTripsThroughJson) {
  EXPECT_EQ(NetworkConfig::parse_layers("784-256-10"), (std::vector<int64_t>{784, 256, 10}));
  EXPECT_THROW(NetworkConfig::parse_layers("784"), Error);
  EXPECT_THROW(NetworkConfig::parse_layers("784--10"), Error);
  EXPECT_THROW(NetworkConfig::parse_layers("784-0-10"), Error);
  NetworkConfig c = small_config();
  c.neuron.v_reset = std::nullopt;
  c.devices = {"cpu", "cpu"};
  c.balance = {2, 1};
  const NetworkConfig back = NetworkConfig::from_json(c.to_json());
  EXPECT_EQ(back.to_json(), c.to_json());
  EXPECT_FALSE(back.neuron.v_reset.has_value());
  c.balance = {1, 1};
  EXPECT_THROW(c.validate(), Error);
  c.balance = {};
  c.devices = {"cpu", "gpu7"};
  EXPECT_THROW(c.validate(), Error);
  c.devices = {"cpu", "cpu", "cpu", "cpu"};
  EXPECT_THROW(c.validate(), Error);  // more stages than layers
  EXPECT_THROW(NetworkConfig::from_json("{\"layers\": [1]}"), Error);
}

// Run results must not depend on threads, stage partition, batch size or K.
TEST(Simulation, RunResultsAreIdenticalAcrossThreadsPartitionsBatchesAndStepsPerTick) {
  const ImageDataset data = load_image_dataset(kFixture);
  auto run = [&](std::vector<std::string> devices, int64_t K, int64_t batch, int threads) {
    NetworkConfig c = small_config();
    c.devices = std::move(devices);
    c.steps_per_tick = K;
    SpikingNetwork net(c);
    const int saved = at::get_num_threads();
    at::set_num_threads(threads);
    EvalResult r = evaluate(net, data.test, batch);
    at::set_num_threads(saved);
    return r;
  };
  const EvalResult ref = run({"cpu"}, 0, 64, 2);
  ASSERT_GT(ref.counts.sum().item<double>(), 0) << "the untrained network must still spike";
  for (double rate : ref.firing_rate) ASSERT_GT(rate, 0) << "every layer must spike";
  ASSERT_EQ(ref.accuracy_by_step.size(), 6u);
  EXPECT_EQ(ref.execution.steps_per_tick, 6) << "K = 0 runs layer by layer (K = T)";
  for (const auto& [devices, K, batch, threads] :
       std::vector<std::tuple<std::vector<std::string>, int64_t, int64_t, int>>{
           {{"cpu"}, 0, 64, 1},
           {{"cpu", "cpu"}, 0, 64, 2},
           {{"cpu", "cpu", "cpu"}, 1, 7, 3},
           {{"cpu"}, 4, 33, 8},
           {{"cpu", "cpu", "cpu"}, 2, 13, 8},
           {{"cpu", "cpu"}, 5, 100, 3}}) {
    const EvalResult r = run(devices, K, batch, threads);
    const std::string what = std::to_string(devices.size()) + " stages, K " + std::to_string(K) + ", batch " +
                             std::to_string(batch) + ", " + std::to_string(threads) + " threads";
    // The placement took effect: what ran is what was asked for (else the
    // comparison below could pass with the flags ignored).
    EXPECT_EQ(r.execution.devices, devices) << what;
    EXPECT_EQ(r.execution.steps_per_tick, K > 0 ? K : 6) << what;
    EXPECT_EQ(r.execution.batch_size, batch) << what;
    EXPECT_EQ(r.execution.threads, threads) << what;
    EXPECT_EQ(r.execution.stage_threads,
              std::vector<int>(devices.size(), std::max(1, threads / static_cast<int>(devices.size()))))
        << what;
    EXPECT_TRUE(torch::equal(r.counts, ref.counts)) << what;
    EXPECT_EQ(r.accuracy_by_step, ref.accuracy_by_step) << what;
    EXPECT_EQ(r.firing_rate, ref.firing_rate) << what;
  }
}

// On a GPU, and split across CPU and GPU, a run gives the CPU's results:
// the encoder, the linear layers and the LIF kernels add in the same order
// with the same rounding on both.
TEST(Simulation_CUDA, GpuAndMixedPipelinesGiveTheCpuResults) {
  SNN_REQUIRE_CUDA();
  const ImageDataset data = load_image_dataset(kFixture);
  auto run = [&](std::vector<std::string> devices, int64_t K) {
    NetworkConfig c = small_config();
    c.devices = std::move(devices);
    c.steps_per_tick = K;
    SpikingNetwork net(c);
    return evaluate(net, data.test, 64);
  };
  const EvalResult ref = run({"cpu"}, 0);
  ASSERT_GT(ref.counts.sum().item<double>(), 0) << "the untrained network must still spike";
  for (const auto& [devices, K] : std::vector<std::pair<std::vector<std::string>, int64_t>>{
           {{"cuda:0"}, 0}, {{"cuda:0"}, 1}, {{"cuda:0", "cuda:0"}, 2}, {{"cpu", "cuda:0"}, 0}, {{"cuda:0", "cpu"}, 3}}) {
    const EvalResult r = run(devices, K);
    EXPECT_TRUE(torch::equal(r.counts.cpu(), ref.counts.cpu())) << devices.size() << " stages from " << devices[0] << ", K " << K;
    EXPECT_EQ(r.accuracy_by_step, ref.accuracy_by_step);
    EXPECT_EQ(r.firing_rate, ref.firing_rate);
  }
}

// What a network is and how it is simulated are apart: changing T, K,
// devices or balance keeps the modules (the same parameter storage) and
// only changes where and in what blocks the same results are computed.
TEST(NetworkConfig, ChangingTheSimulationDoesNotRebuildTheNetwork) {
  SpikingNetwork net(small_config());
  const auto before = net.named_parameters();
  const torch::Tensor x = net.prepare_input(torch::rand({5, 784}));
  const auto run = [&]() {
    torch::NoGradGuard no_grad;
    ModelPipeline p = net.make_pipeline();
    return p.constant_forward(x, net.config().steps, false);
  };
  const torch::Tensor ref = run();
  SimulationConfig s = net.config().simulation();
  s.devices = {"cpu", "cpu", "cpu"};
  s.steps_per_tick = 2;
  net.set_simulation(s);
  EXPECT_TRUE(torch::equal(run(), ref));
  s.steps = 9;
  s.balance = {1, 1, 1};
  net.set_simulation(s);
  EXPECT_EQ(run().size(0), 9);
  const auto after = net.named_parameters();
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(before[i].second.data_ptr(), after[i].second.data_ptr()) << before[i].first << " was built again";
  }
  EXPECT_EQ(net.config().network().layers, small_config().layers);
  s.devices = {"cpu", "cpu", "cpu", "cpu"};  // more stages than layers: refused, the simulation unchanged
  s.balance.clear();
  EXPECT_THROW(net.set_simulation(s), Error);
  EXPECT_EQ(net.config().devices.size(), 3u);
}

TEST(Simulation, PredictionsTakeTheMostSpikesAndTiesGoToTheLowestClass) {
  const ImageDataset data = load_image_dataset(kFixture);
  SpikingNetwork net(small_config());
  const EvalResult r = evaluate(net, data.test, 50, 40);
  EXPECT_EQ(r.samples, 40);
  for (int64_t i = 0; i < r.samples; ++i) {
    const torch::Tensor row = r.counts[i];
    const int64_t p = r.predictions[i].item<int64_t>();
    EXPECT_EQ(row[p].item<float>(), row.max().item<float>());
    for (int64_t k = 0; k < p; ++k) EXPECT_LT(row[k].item<float>(), row[p].item<float>());
  }
  EXPECT_NEAR(r.accuracy, r.predictions.eq(r.labels).sum().item<double>() / 40.0, 1e-12);
  EXPECT_EQ(r.accuracy_by_step.back(), r.accuracy);
}

// The recorder streams: however long the run, it holds at most the
// writer's queue (4 batches) plus the batch being handed over.
TEST(Recording, BuffersStayWithinAFixedNumberOfBatchesWhateverTheRunLength) {
  const ImageDataset data = load_image_dataset(kFixture);
  SpikingNetwork net(small_config());
  LabeledImages many;  // the 100 test digits 8 times: 80 batches of 10
  many.images = torch::cat(std::vector<torch::Tensor>(8, data.test.images));
  many.labels = torch::cat(std::vector<torch::Tensor>(8, data.test.labels));
  RecordRequest rec;
  rec.path = "/tmp/snn_network_test_" + std::to_string(::getpid()) + ".h5";
  rec.spikes = {{0, {}}, {1, {}}, {2, {}}};
  rec.traces = {{0, {1, 2, 3}}};
  rec.record_input = true;
  const int64_t batch = 10;
  const EvalResult r = evaluate(net, many, batch, -1, &rec);
  std::remove(rec.path.c_str());
  ASSERT_EQ(r.samples, 800);
  const double per_batch = static_cast<double>(r.record_total_bytes) / 80.0;
  ASSERT_GT(per_batch, 0);
  EXPECT_LE(static_cast<double>(r.record_peak_bytes), 1.5 * 5 * per_batch);  // 1.5: batches differ in spikes
  EXPECT_LT(r.record_peak_bytes, r.record_total_bytes / 10);
}

TEST(Training, SameSeedGivesIdenticalParametersAndLearningLowersTheLoss) {
  const ImageDataset data = load_image_dataset(kFixture);
  std::vector<std::vector<torch::Tensor>> params;
  std::vector<double> losses;
  for (int rep = 0; rep < 2; ++rep) {
    SpikingNetwork net(small_config());
    TrainOptions o;
    o.batch_size = 32;
    o.lr = 2e-3;
    Trainer trainer(net, o);
    for (int64_t e = 0; e < 3; ++e) losses.push_back(trainer.train_epoch(data.train, e).loss);
    std::vector<torch::Tensor> p;
    for (const auto& t : net.parameters()) p.push_back(t.detach().clone());
    params.push_back(p);
  }
  for (size_t i = 0; i < params[0].size(); ++i) EXPECT_TRUE(torch::equal(params[0][i], params[1][i])) << i;
  EXPECT_LT(losses[2], losses[0]);
}

// Training must give bit-identical parameters for any thread count, stage
// partition and steps per tick (the batch size is a training hyperparameter:
// it changes the optimisation itself).
TEST(Training, ParametersAreIdenticalAcrossThreadsPartitionsAndStepsPerTick) {
  const ImageDataset data = load_image_dataset(kFixture);
  auto train = [&](NeuronModel model, std::vector<std::string> devices, int64_t K, int threads) {
    NetworkConfig c = small_config();
    c.neuron.model = model;
    c.neuron.tau = 2.5;
    c.devices = devices;
    c.steps_per_tick = K;
    SpikingNetwork net(c);
    TrainOptions o;
    o.batch_size = 32;
    o.limit = 128;
    o.lr = 2e-3;
    const int saved = at::get_num_threads();
    at::set_num_threads(threads);
    Trainer trainer(net, o);
    for (int64_t e = 0; e < 2; ++e) {
      const EpochStats s = trainer.train_epoch(data.train, e);
      // The placement took effect (else the comparison could pass with it ignored).
      EXPECT_EQ(s.execution.devices, devices);
      EXPECT_EQ(s.execution.steps_per_tick, K > 0 ? K : 6);
      EXPECT_EQ(s.execution.batch_size, 32);
      EXPECT_EQ(s.execution.threads, threads);
      EXPECT_EQ(s.execution.stage_threads,
                std::vector<int>(devices.size(), std::max(1, threads / static_cast<int>(devices.size()))));
    }
    at::set_num_threads(saved);
    std::vector<torch::Tensor> p;
    for (const auto& t : net.parameters()) p.push_back(t.detach().clone());
    return p;
  };
  for (NeuronModel model : {NeuronModel::kLIF, NeuronModel::kParametricLIF}) {
    const auto ref = train(model, {"cpu"}, 0, 2);
    for (const auto& [devices, K, threads] : std::vector<std::tuple<std::vector<std::string>, int64_t, int>>{
             {{"cpu"}, 1, 1},
             {{"cpu", "cpu"}, 2, 3},
             {{"cpu", "cpu", "cpu"}, 4, 1},
             {{"cpu", "cpu", "cpu"}, 1, 8},
             {{"cpu", "cpu"}, 0, 8},
             {{"cpu"}, 5, 3}}) {
      const auto p = train(model, devices, K, threads);
      ASSERT_EQ(p.size(), ref.size());
      for (size_t i = 0; i < p.size(); ++i) {
        EXPECT_TRUE(torch::equal(p[i], ref[i]))
            << to_string(model) << ": parameter " << i << ", " << devices.size() << " stages, K " << K << ", "
            << threads << " threads";
      }
    }
  }
}

// --loss ce trains on cross-entropy of the output spike counts: the first
// step's loss equals cross-entropy computed independently (in double, from
// the untrained network's counts), which MSE on rates does not.
TEST(Training, CrossEntropyLossIsComputedOnTheOutputCounts) {
  const ImageDataset data = load_image_dataset(kFixture);
  const int64_t n = 40;
  NetworkConfig c = small_config();
  c.neuron.v_threshold = 0.1;  // the untrained output layer spikes: all-zero counts give trivial losses
  SpikingNetwork net(c);
  torch::Tensor counts;
  {
    torch::NoGradGuard no_grad;
    ModelPipeline pipe = net.make_pipeline();
    counts = pipe.constant_forward(net.prepare_input(data.train.images.narrow(0, 0, n)), 6, true,
                                   torch::arange(n, torch::kLong))
                 .to(torch::kDouble);
  }
  const torch::Tensor y = data.train.labels.narrow(0, 0, n);
  ASSERT_GT(counts.sum().item<double>(), 0);
  double ce = 0, mse = 0;
  for (int64_t i = 0; i < n; ++i) {
    const torch::Tensor row = counts[i];
    const double top = row.max().item<double>();
    ce += top + std::log((row - top).exp().sum().item<double>()) - row[y[i].item<int64_t>()].item<double>();
    const torch::Tensor target = torch::one_hot(y[i], 10).to(torch::kDouble);
    mse += (row / 6.0 - target).pow(2).mean().item<double>();
  }
  ce /= static_cast<double>(n);
  mse /= static_cast<double>(n);
  ASSERT_GT(std::abs(ce - mse), 1e-3) << "the two losses must differ for the test to tell them apart";
  for (const auto& [loss, expected] : std::vector<std::pair<Loss, double>>{{Loss::kCrossEntropy, ce}, {Loss::kMse, mse}}) {
    SpikingNetwork fresh(c);
    TrainOptions o;
    o.loss = loss;
    o.batch_size = n;  // one batch: the epoch's loss is the first step's, before any update
    o.limit = n;
    Trainer trainer(fresh, o);
    EXPECT_NEAR(trainer.train_epoch(data.train, 0).loss, expected, 1e-5 * expected) << to_string(loss);
  }
}

TEST(Training, CosineScheduleAnnealsFromLrTowardsZero) {
  SpikingNetwork net(small_config());
  TrainOptions o;
  o.lr = 1e-3;
  o.epochs = 4;
  o.lr_schedule = LrSchedule::kCosine;
  const Trainer cosine(net, o);
  EXPECT_DOUBLE_EQ(cosine.learning_rate(0), 1e-3);
  EXPECT_NEAR(cosine.learning_rate(2), 5e-4, 1e-15);
  EXPECT_NEAR(cosine.learning_rate(4), 0.0, 1e-15);
  EXPECT_LT(cosine.learning_rate(3), cosine.learning_rate(1));
  o.lr_schedule = LrSchedule::kConstant;
  EXPECT_DOUBLE_EQ(Trainer(net, o).learning_rate(3), 1e-3);
  EXPECT_EQ(parse_lr_schedule("cosine"), LrSchedule::kCosine);
  EXPECT_THROW(parse_lr_schedule("step"), Error);
  o.weight_decay = -1;
  EXPECT_THROW(Trainer(net, o), Error);
}

TEST(Balance, PartitionMinimisesTheSlowestStage) {
  EXPECT_EQ(balanced_partition({5, 1, 1, 1}, 2), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(balanced_partition({1, 1, 1, 5}, 2), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(balanced_partition({3, 3, 2, 2, 2}, 3), (std::vector<int64_t>{1, 2, 2}));  // 3 / 5 / 4
  EXPECT_EQ(balanced_partition({1, 2, 3}, 3), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(balanced_partition({4, 4}, 1), (std::vector<int64_t>{2}));
  EXPECT_THROW(balanced_partition({1, 2}, 3), Error);
  EXPECT_THROW(balanced_partition({1, 2}, 0), Error);
}

TEST(Balance, MeasuredBalanceIsValidAndLeavesResultsUnchanged) {
  const ImageDataset data = load_image_dataset(kFixture);
  NetworkConfig c = small_config();
  c.layers = {784, 200, 16, 10};  // the first layer dominates: it gets a stage to itself
  c.devices = {"cpu", "cpu"};
  SpikingNetwork net(c);
  const EvalResult before = evaluate(net, data.test, 50);
  const std::vector<int64_t> b = net.measure_balance(data.test.images.narrow(0, 0, 32), 2);
  ASSERT_EQ(net.measured_layer_seconds().size(), 3u);
  EXPECT_EQ(b, (std::vector<int64_t>{1, 2}));
  net.set_balance(b);
  EXPECT_EQ(net.config().balance, b);
  const EvalResult after = evaluate(net, data.test, 50);
  EXPECT_TRUE(torch::equal(after.counts, before.counts));
  EXPECT_THROW(net.set_balance({3, 1}), Error);
}

TEST(Checkpoint, RoundTripsParametersAndConfig) {
  const std::string path = std::string("/tmp/snn_ckpt_test_") + std::to_string(::getpid()) + ".h5";
  NetworkConfig c = small_config();
  c.neuron.model = NeuronModel::kParametricLIF;
  c.neuron.tau = 3.0;
  SpikingNetwork net(c);
  save_checkpoint(path, net, 7);
  const LoadedCheckpoint back = load_checkpoint(path);
  EXPECT_EQ(back.epoch, 7);
  EXPECT_EQ(back.network->config().to_json(), c.to_json());
  const auto a = net.named_parameters();
  const auto b = back.network->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_TRUE(torch::equal(a[i].second, b[i].second)) << a[i].first;
  }
  EXPECT_EQ(a.back().first, "lif2.w");
  std::remove(path.c_str());
  EXPECT_THROW(load_checkpoint(path), Error);
  EXPECT_THROW(load_checkpoint(test::test_data_dir() + "/lif_golden.json"), Error);
}

}  // namespace
}  // namespace snn
