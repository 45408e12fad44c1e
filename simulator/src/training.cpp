#include "snn/simulator/training.h"

#include <torch/nn/functional/loss.h>
#include <torch/optim/adam.h>

#include <chrono>
#include <cmath>

#include "snn/core/error.h"

namespace snn {

Loss parse_loss(const std::string& name) {
  if (name == "mse") return Loss::kMse;
  if (name == "ce") return Loss::kCrossEntropy;
  throw Error("unknown loss '" + name + "': expected mse or ce");
}

std::string to_string(Loss loss) { return loss == Loss::kMse ? "mse" : "ce"; }

LrSchedule parse_lr_schedule(const std::string& name) {
  if (name == "constant") return LrSchedule::kConstant;
  if (name == "cosine") return LrSchedule::kCosine;
  throw Error("unknown learning-rate schedule '" + name + "': expected constant or cosine");
}

std::string to_string(LrSchedule schedule) { return schedule == LrSchedule::kConstant ? "constant" : "cosine"; }

double Trainer::learning_rate(int64_t epoch) const {
  if (options_.lr_schedule == LrSchedule::kConstant) return options_.lr;
  const double progress = std::min(1.0, static_cast<double>(epoch) / static_cast<double>(options_.epochs));
  return options_.lr * 0.5 * (1.0 + std::cos(M_PI * progress));
}

std::vector<AdamMoments> Trainer::optimizer_state() const {
  std::vector<AdamMoments> out;
  for (const auto& p : net_.parameters()) {
    AdamMoments m;
    const auto it = adam_->state().find(p.unsafeGetTensorImpl());
    if (it != adam_->state().end()) {
      const auto& s = static_cast<const torch::optim::AdamParamState&>(*it->second);
      m.step = s.step();
      m.exp_avg = s.exp_avg();
      m.exp_avg_sq = s.exp_avg_sq();
    }
    out.push_back(m);
  }
  return out;
}

void Trainer::load_optimizer_state(const std::vector<AdamMoments>& state) {
  const auto params = net_.parameters();
  if (state.size() != params.size()) {
    throw Error("optimizer state holds " + std::to_string(state.size()) + " parameters, the network " +
                std::to_string(params.size()));
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (!state[i].exp_avg.defined()) continue;
    auto s = std::make_unique<torch::optim::AdamParamState>();
    s->step(state[i].step);
    s->exp_avg(state[i].exp_avg.to(params[i].options()).clone());
    s->exp_avg_sq(state[i].exp_avg_sq.to(params[i].options()).clone());
    adam_->state()[params[i].unsafeGetTensorImpl()] = std::move(s);
  }
}

namespace {
int64_t used_samples(const LabeledImages& data, int64_t limit) {
  if (data.size() == 0) throw Error("the data split holds no samples");
  return limit < 0 ? data.size() : std::min(limit, data.size());
}
}  // namespace

Trainer::Trainer(SpikingNetwork& network, TrainOptions options)
    : net_(network), options_(options), pipe_(network.make_pipeline()) {
  if (options_.batch_size < 1) throw Error("batch size must be >= 1, got " + std::to_string(options_.batch_size));
  if (!(options_.lr > 0)) throw Error("learning rate must be positive, got " + std::to_string(options_.lr));
  if (!(options_.weight_decay >= 0)) {
    throw Error("weight decay must be >= 0, got " + std::to_string(options_.weight_decay));
  }
  if (options_.epochs < 1) throw Error("epochs must be >= 1, got " + std::to_string(options_.epochs));
  if (options_.augment_shift < 0) {
    throw Error("image shift must be >= 0 pixels, got " + std::to_string(options_.augment_shift));
  }
  adam_ = std::make_unique<torch::optim::Adam>(
      net_.parameters(), torch::optim::AdamOptions(options_.lr).weight_decay(options_.weight_decay));
}

EpochStats Trainer::train_epoch(const LabeledImages& data, int64_t epoch,
                                const std::function<void(int64_t, int64_t, double)>& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t n = used_samples(data, options_.limit);
  const int64_t T = net_.config().steps;
  const int64_t classes = net_.config().layers.back();
  EpochStats stats;
  stats.epoch = epoch;
  double loss_sum = 0;
  int64_t correct = 0;
  for (auto& group : adam_->param_groups()) group.options().set_lr(learning_rate(epoch));
  for (const torch::Tensor& idx : epoch_batches(n, options_.batch_size, true, options_.shuffle_seed, epoch)) {
    const torch::Tensor images = random_shift(data.images.index_select(0, idx), idx, options_.augment_shift,
                                              options_.shuffle_seed, epoch);
    const torch::Tensor x = net_.prepare_input(images);
    const torch::Tensor y = data.labels.index_select(0, idx);
    adam_->zero_grad();
    const torch::Tensor counts = pipe_.constant_forward(x, T, true, idx).to(torch::kCPU);
    torch::Tensor loss;
    if (options_.loss == Loss::kMse) {
      const torch::Tensor target = torch::one_hot(y, classes).to(torch::kFloat);
      loss = torch::nn::functional::mse_loss(counts / static_cast<double>(T), target);
    } else {
      loss = torch::nn::functional::cross_entropy(counts, y);
    }
    loss.backward();
    adam_->step();
    const int64_t b = idx.size(0);
    loss_sum += loss.item<double>() * static_cast<double>(b);
    correct += counts.argmax(1).eq(y).sum().item<int64_t>();
    stats.samples += b;
    if (progress) progress(stats.samples, n, loss_sum / static_cast<double>(stats.samples));
  }
  stats.loss = loss_sum / static_cast<double>(stats.samples);
  stats.train_accuracy = static_cast<double>(correct) / static_cast<double>(stats.samples);
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return stats;
}

EvalResult evaluate(SpikingNetwork& net, const LabeledImages& data, int64_t batch_size, int64_t limit) {
  if (batch_size < 1) throw Error("batch size must be >= 1, got " + std::to_string(batch_size));
  const int64_t n = used_samples(data, limit);
  const int64_t T = net.config().steps;
  torch::NoGradGuard no_grad;
  ModelPipeline pipe = net.make_pipeline();
  for (const auto& layer : net.neuron_layers()) layer->set_count_spikes(true);
  std::vector<torch::Tensor> counts;
  torch::Tensor correct_by_step = torch::zeros({T}, torch::kLong);
  for (const torch::Tensor& idx : epoch_batches(n, batch_size, false, 0, 0)) {
    const torch::Tensor x = net.prepare_input(data.images.index_select(0, idx));
    const torch::Tensor y = data.labels.index_select(0, idx);
    const torch::Tensor per_step = pipe.constant_forward(x, T, false, idx).to(torch::kCPU);  // [T, B, C]
    // Counts up to each step in time order: exact integers in float32.
    const torch::Tensor cumulative = per_step.cumsum(0);
    correct_by_step += cumulative.argmax(2).eq(y.unsqueeze(0)).sum(1);
    counts.push_back(cumulative[T - 1]);
  }
  EvalResult r;
  r.samples = n;
  r.counts = torch::cat(counts);
  r.labels = data.labels.narrow(0, 0, n);
  // torch::argmax returns the first maximal index: ties go to the lowest class.
  r.predictions = r.counts.argmax(1);
  r.accuracy = r.predictions.eq(r.labels).sum().item<double>() / static_cast<double>(n);
  for (int64_t t = 0; t < T; ++t) {
    r.accuracy_by_step.push_back(correct_by_step[t].item<double>() / static_cast<double>(n));
  }
  const auto& layers = net.config().layers;
  for (size_t i = 0; i < net.neuron_layers().size(); ++i) {
    const double slots = static_cast<double>(n) * static_cast<double>(T) * static_cast<double>(layers[i + 1]);
    r.firing_rate.push_back(net.neuron_layers()[i]->spikes_counted() / slots);
    net.neuron_layers()[i]->set_count_spikes(false);
  }
  return r;
}

}  // namespace snn
