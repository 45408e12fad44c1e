#include "snn/analysis/analysis.h"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "snn/core/error.h"
#include "snn/recording/recording_file.h"

namespace snn::analysis {
namespace {

using recording::RecordingFile;
using recording::RecordingLayout;
using recording::SampleBatch;

std::string temp_path(const std::string& name) {
  return "/tmp/snn_analysis_test_" + std::to_string(::getpid()) + "_" + name;
}

constexpr int64_t kT = 10;

// A small recording with spikes placed by hand (dt = 0.5 ms, T = 10, four
// samples), so that every statistic can be worked out on paper:
// population "a" (4 neurons, 0..2 recorded):
//   neuron 0 fires at steps 0, 2, 4, 6, 8 of every sample;
//   neuron 1 fires at steps 0 and 5 of sample 0, 1 and 3 of sample 1;
//   neuron 2 never fires.
// population "sync" (2 neurons): both fire at step 3 of every sample.
// Labels 0 1 2 0, predictions 0 1 1 2; sample 0 predicts 1 before step 5.
void write_synthetic(const std::string& path) {
  RecordingLayout L;
  L.spikes = {{"a", 4, 1, {0, 1, 2}}, {"sync", 2, 2, {}}};
  L.classes = 3;
  L.steps = kT;
  L.dt_ms = 0.5;
  L.prediction_by_step = true;
  RecordingFile file(path, L, {});
  torch::Tensor a = torch::zeros({kT, 4, 4}), sync = torch::zeros({kT, 4, 2});
  for (int64_t s = 0; s < 4; ++s) {
    for (int64_t t = 0; t < kT; t += 2) a[t][s][0] = 1;
    sync[3][s] = 1;
  }
  a[0][0][1] = a[5][0][1] = a[1][1][1] = a[3][1][1] = 1;
  a.select(2, 3).fill_(1);  // neuron 3 is not recorded: its spikes must not count
  const torch::Tensor labels = torch::tensor({0, 1, 2, 0}, torch::kLong);
  const torch::Tensor predicted = torch::tensor({0, 1, 1, 2}, torch::kLong);
  torch::Tensor by_step = predicted.unsqueeze(1).repeat({1, kT});
  by_step[0].narrow(0, 0, 5).fill_(1);
  const torch::Tensor ids = torch::tensor({0, 1, 2}, torch::kLong);
  for (auto [first, n] : {std::pair<int64_t, int64_t>{0, 3}, {3, 1}}) {  // two appends
    SampleBatch b;
    b.labels = labels.narrow(0, first, n);
    b.predicted = predicted.narrow(0, first, n);
    b.output_counts = torch::zeros({n, 3});
    b.prediction_by_step = by_step.narrow(0, first, n);
    b.spikes = {recording::compact_spikes(a.narrow(1, first, n), ids),
                recording::compact_spikes(sync.narrow(1, first, n))};
    file.append(b);
    file.commit();
  }
  file.finish();
}

TEST(Analysis, StatisticsOfAHandMadeRecording) {
  const std::string path = temp_path("synthetic.h5");
  write_synthetic(path);
  const RecordingStats r = analyze_recording(path);
  EXPECT_EQ(r.samples, 4);
  EXPECT_EQ(r.steps, kT);
  EXPECT_DOUBLE_EQ(r.dt_ms, 0.5);
  EXPECT_DOUBLE_EQ(r.accuracy, 0.5);
  ASSERT_EQ(r.accuracy_by_step.size(), 10u);
  EXPECT_DOUBLE_EQ(r.accuracy_by_step[4], 0.25);
  EXPECT_DOUBLE_EQ(r.accuracy_by_step[5], 0.5);
  const std::vector<std::vector<int64_t>> confusion{{1, 0, 1}, {0, 1, 0}, {0, 1, 0}};
  EXPECT_EQ(r.confusion, confusion);
  ASSERT_EQ(r.populations.size(), 2u);

  const PopulationStats& a = r.populations[0];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.spikes, 24);                            // 4 x 5 + 4
  EXPECT_EQ(a.neuron_spikes, (std::vector<int64_t>{20, 4, 0}));
  EXPECT_DOUBLE_EQ(a.spikes_per_step, 0.2);           // 24 / (4 samples x 10 steps x 3 neurons)
  EXPECT_DOUBLE_EQ(a.rate_hz, 400.0);                 // 0.2 per 0.5 ms
  EXPECT_DOUBLE_EQ(a.neuron_rate_hz[0], 1000.0);      // every other 0.5 ms step
  EXPECT_EQ(a.silent_neurons, 1);
  EXPECT_EQ(a.isi_count, 18);                         // 16 of neuron 0, 2 of neuron 1
  EXPECT_EQ(a.isi_histogram[2], 17);
  EXPECT_EQ(a.isi_histogram[5], 1);
  EXPECT_NEAR(a.isi_mean_ms, 39.0 / 18.0 * 0.5, 1e-12);
  EXPECT_EQ(a.cv_neurons, 2);
  EXPECT_NEAR(a.isi_cv, (0.0 + 1.5 / 3.5) / 2, 1e-12);  // CVs 0 and std{5,2}/mean{5,2}
  EXPECT_EQ(a.fano_neurons, 2);
  EXPECT_NEAR(a.fano, (0.0 + 4.0 / 3.0) / 2, 1e-12);    // counts {5,5,5,5} and {2,2,0,0}
  EXPECT_NEAR(a.population_fano, (4.0 / 3.0) / 6.0, 1e-12);  // totals {7,7,5,5}
  EXPECT_NEAR(a.psth_hz[0], 5.0 / 12.0 * 2000.0, 1e-9);
  EXPECT_NEAR(a.psth_hz[7], 0.0, 1e-12);
  EXPECT_NEAR(a.psth_hz[5], 1.0 / 12.0 * 2000.0, 1e-9);
  // Bins: var of the population mean 26/9/40 - 0.2^2; neuron variances .25, .09, 0.
  EXPECT_NEAR(a.synchrony, std::sqrt((26.0 / 9.0 / 40.0 - 0.04) / (0.34 / 3.0)), 1e-12);

  const PopulationStats& sync = r.populations[1];
  EXPECT_EQ(sync.spikes, 8);
  EXPECT_NEAR(sync.synchrony, 1.0, 1e-12);            // identical neurons
  EXPECT_TRUE(std::isnan(sync.isi_cv));               // one spike per sample: no interval
  EXPECT_NEAR(sync.fano, 0.0, 1e-12);
  std::remove(path.c_str());
}

TEST(Analysis, ChunksOfAnySizeGiveTheSameResultsWithinTheBudget) {
  const std::string path = temp_path("chunks.h5");
  write_synthetic(path);
  const RecordingStats whole = analyze_recording(path);
  AnalysisOptions small;
  small.chunk_bytes = 16;  // one event: every sample is read on its own
  const RecordingStats chunked = analyze_recording(path, small);
  EXPECT_EQ(whole.peak_chunk_bytes, 24 * 16);
  EXPECT_LE(chunked.peak_chunk_bytes, 7 * 16);  // the largest sample: 7 spikes
  for (size_t p = 0; p < whole.populations.size(); ++p) {
    const PopulationStats &x = whole.populations[p], &y = chunked.populations[p];
    EXPECT_EQ(x.neuron_spikes, y.neuron_spikes);
    EXPECT_EQ(x.isi_histogram, y.isi_histogram);
    EXPECT_EQ(x.psth_hz, y.psth_hz);
    EXPECT_TRUE(x.fano == y.fano || (std::isnan(x.fano) && std::isnan(y.fano)));
    EXPECT_TRUE(x.synchrony == y.synchrony);
  }
  std::remove(path.c_str());
}

// Synchrony over bins of several steps, worked out on paper for the
// hand-made recording: bins of 3 steps (1.5 ms) hold steps 0-2, 3-5, 6-8 of
// each sample, step 9 is left out. Neuron 0 counts {2, 1, 2} in every
// sample, neuron 1 {1, 1, 0} in samples 0 and 1 and nothing after: both
// vary by 2/9, neuron 2 by 0: 4/27 on average. The population mean is
// {1, 2/3, 2/3} in samples 0-1 and {2/3, 1/3, 2/3} in 2-3: variance
// 13/27 - 4/9 = 1/27. So chi = sqrt((1/27) / (4/27)) = 1/2.
TEST(Analysis, SynchronyOverWiderBinsCountsSpikesPerBin) {
  const std::string path = temp_path("bins.h5");
  write_synthetic(path);
  AnalysisOptions o;
  o.synchrony_bin_ms = 1.5;
  const RecordingStats r = analyze_recording(path, o);
  EXPECT_DOUBLE_EQ(r.synchrony_bin_ms, 1.5);
  EXPECT_NEAR(r.populations[0].synchrony, 0.5, 1e-12);
  EXPECT_NEAR(r.populations[1].synchrony, 1.0, 1e-12);  // identical neurons in any bins
  EXPECT_EQ(r.populations[0].spikes, 24);               // the other statistics keep every step
  EXPECT_EQ(r.populations[0].isi_count, 18);

  // One bin per sample: per-sample counts {5, 5, 5, 5}, {2, 2, 0, 0} and
  // zeros vary by 0, 1 and 0; the mean's totals {7, 7, 5, 5} / 3 by 1/9.
  o.synchrony_bin_ms = 5.0;
  EXPECT_NEAR(analyze_recording(path, o).populations[0].synchrony, std::sqrt((1.0 / 9.0) / (1.0 / 3.0)), 1e-12);

  // One step is the default; any chunking gives the same chi.
  o.synchrony_bin_ms = 0.5;
  EXPECT_NEAR(analyze_recording(path, o).populations[0].synchrony, analyze_recording(path).populations[0].synchrony,
              1e-15);
  o.synchrony_bin_ms = 1.5;
  o.chunk_bytes = 16;
  EXPECT_TRUE(analyze_recording(path, o).populations[0].synchrony == r.populations[0].synchrony);

  auto expect_error = [&](double bin_ms, const std::string& want) {
    AnalysisOptions bad;
    bad.synchrony_bin_ms = bin_ms;
    try {
      analyze_recording(path, bad);
      ADD_FAILURE() << "no error for a bin of " << bin_ms << " ms";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  expect_error(0.7, "the synchrony bin of 0.7 ms is not a whole number of steps of dt = 0.5 ms (recording '" +
                        path + "')");
  expect_error(5.5, "the synchrony bin of 5.5 ms is longer than a sample of recording '" + path +
                        "' (10 steps of 0.5 ms)");
  expect_error(-1, "the synchrony bin of -1 ms must be a positive number of ms");
  expect_error(0.25, "is not a whole number of steps");
  std::remove(path.c_str());
}

TEST(Analysis, BadFilesGetAClearError) {
  auto expect_error = [](const std::string& path, const std::string& want) {
    try {
      analyze_recording(path);
      ADD_FAILURE() << "no error for " << path;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  expect_error(temp_path("none.h5"), "no recording");
  const std::string text = temp_path("text.h5");
  std::ofstream(text) << "not hdf5";
  expect_error(text, "not an HDF5 file");
  std::remove(text.c_str());
  const std::string plain = temp_path("plain.h5");
  H5Fclose(H5Fcreate(plain.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  expect_error(plain, "not an snnsim recording");
  std::remove(plain.c_str());
  // An unfinished run leaves only .partial: the message points to recover.
  const std::string unfinished = temp_path("unfinished.h5");
  { RecordingFile file(unfinished, RecordingLayout{}, {}); }
  expect_error(unfinished, "snnsim recover");
  std::remove((unfinished + ".partial").c_str());
}

// Edits one value or extent of a copy of a good file, with the HDF5 C API
// (as a damaged or hostile file would hold it).
struct Damage {
  std::string dataset;
  hsize_t row = 0;         // the row to overwrite (uint64 datasets)
  uint64_t value = 0;
  hsize_t extent = 0;      // > 0: resize the dataset to this many rows instead
};

void damage(const std::string& path, const Damage& d) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  const hid_t ds = H5Dopen2(f, d.dataset.c_str(), H5P_DEFAULT);
  ASSERT_GE(ds, 0) << d.dataset;
  if (d.extent > 0) {
    hsize_t dims[2] = {0, 0};
    const hid_t space = H5Dget_space(ds);
    H5Sget_simple_extent_dims(space, dims, nullptr);
    H5Sclose(space);
    dims[0] = d.extent;
    EXPECT_GE(H5Dset_extent(ds, dims), 0);
  } else {
    const hid_t space = H5Dget_space(ds);
    const hsize_t one = 1;
    H5Sselect_hyperslab(space, H5S_SELECT_SET, &d.row, nullptr, &one, nullptr);
    const hid_t mem = H5Screate_simple(1, &one, nullptr);
    EXPECT_GE(H5Dwrite(ds, H5T_NATIVE_UINT64, mem, space, H5P_DEFAULT, &d.value), 0);
    H5Sclose(mem);
    H5Sclose(space);
  }
  H5Dclose(ds);
  H5Fclose(f);
}

// Every index and extent is checked before it is used: a damaged file gets
// snn::Error naming the dataset, from the statistics and from read_spikes
// (the raster), never a crash (an interior pointer out of range used to
// abort with "double free or corruption") or a giant allocation.
TEST(Analysis, DamagedFilesGetAnErrorNamingTheDatasetNotACrash) {
  const std::string good = temp_path("good.h5");
  write_synthetic(good);
  const std::string bad = temp_path("bad.h5");
  const std::vector<std::pair<Damage, std::string>> cases = {
      {{"samples/spike_ptr/a", 2, 1000000000}, "/samples/spike_ptr/a"},   // interior pointer out of range
      {{"samples/spike_ptr/a", 2, 1}, "/samples/spike_ptr/a"},            // decreasing pointer
      {{"samples/spike_ptr/a", 0, 3}, "/samples/spike_ptr/a"},            // not starting at 0
      {{"samples/spike_ptr/sync", 4, 7}, "/spikes/sync/timestamps"},      // last != spike count
      {{"spikes/a/node_ids", 0, 3}, "/spikes/a/node_ids"},                // a neuron not recorded
      {{"spikes/a/node_ids", 5, 4000}, "/spikes/a/node_ids"},             // id >= n_nodes
      {{"samples/label", 0, 0, 3}, "/samples/label"},                     // rows != samples
      {{"spikes/a/timestamps", 0, 0, 20}, "/spikes/a/timestamps"},        // truncated timestamps
      {{"spikes/sync/node_ids", 0, 0, 5}, "/spikes/sync/node_ids"},       // ids != timestamps
      {{"spikes/a/timestamps", 0, 0, hsize_t{1} << 40}, "/spikes/a/timestamps"},  // huge extent
      {{"samples/prediction_by_step", 0, 0, hsize_t{1} << 40}, "/samples/prediction_by_step"},
      {{"meta/populations/a/recorded_node_ids", 1, 0}, "recorded_node_ids"},  // not ascending
  };
  for (const auto& [d, want] : cases) {
    std::ifstream in(good, std::ios::binary);
    std::ofstream(bad, std::ios::binary) << in.rdbuf();
    damage(bad, d);
    for (int reader = 0; reader < 2; ++reader) {
      try {
        if (reader == 0) {
          analyze_recording(bad);
        } else {
          read_spikes(bad, "a", 0, 4);
        }
        ADD_FAILURE() << d.dataset << " row " << d.row << ": no error";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
      }
    }
  }
  std::remove(good.c_str());
  std::remove(bad.c_str());
}

}  // namespace
}  // namespace snn::analysis
