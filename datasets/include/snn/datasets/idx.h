#pragma once
/// Reading image data sets stored in the IDX format of MNIST and
/// Fashion-MNIST (plain or gzip-compressed), and deterministic batching.
///
/// Every check fails with an snn::Error naming the file and what is wrong:
/// magic number, data type, number of dimensions, sizes, truncation or
/// trailing bytes, label range, and image/label counts.

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace snn {

/// An IDX array of unsigned bytes (type code 0x08), the only type MNIST uses.
struct IdxArray {
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;  ///< row-major, prod(shape) bytes
};

/// Reads an IDX file, plain or gzip-compressed (recognised by its content).
/// expected_dims > 0 also checks the number of dimensions.
IdxArray read_idx(const std::string& path, int expected_dims = 0);

/// Images and their labels, checked against each other.
struct LabeledImages {
  torch::Tensor images;  ///< [N, rows, cols] uint8
  torch::Tensor labels;  ///< [N] int64 in [0, num_classes)
  int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

/// Reads an images file (idx3) and a labels file (idx1); labels must lie in
/// [0, num_classes) and the counts must agree.
LabeledImages read_labeled_images(const std::string& images_path, const std::string& labels_path,
                                  int64_t num_classes = 10);

/// A train/test split in MNIST's file layout.
struct ImageDataset {
  LabeledImages train;  ///< train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz]
  LabeledImages test;   ///< t10k-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz]
};

/// Loads the four MNIST-layout files from a folder (each plain or .gz):
/// MNIST, Fashion-MNIST, or the embedded 10k MNIST subset (datasets/mnist).
ImageDataset load_image_dataset(const std::string& directory, int64_t num_classes = 10);

/// A permutation of 0 .. n-1 that depends only on (seed, epoch): Fisher-Yates
/// driven by SplitMix64 with unbiased bounded draws, fully specified here
/// (unlike std::shuffle) so it is the same with every compiler and library.
torch::Tensor shuffled_indices(int64_t n, uint64_t seed, int64_t epoch);

/// The batches of one epoch as index tensors ([<= batch_size] int64, the
/// samples' global indices within their split, which also key the encoder):
/// shuffled by (seed, epoch) when shuffle is set, else in order. The last
/// batch holds the remainder unless drop_last.
std::vector<torch::Tensor> epoch_batches(int64_t n, int64_t batch_size, bool shuffle, uint64_t seed, int64_t epoch,
                                         bool drop_last = false);

/// Training augmentation: each image [H, W] of images [B, H, W] moved by
/// (dy, dx), each uniform in [-max_shift, max_shift] pixels, with zeros
/// filling the uncovered border. The shift depends only on (seed, epoch,
/// the sample's global index in `indices` [B]), so it is the same for any
/// batching or thread count. max_shift 0 returns the images unchanged.
torch::Tensor random_shift(const torch::Tensor& images, const torch::Tensor& indices, int64_t max_shift, uint64_t seed,
                           int64_t epoch);

}  // namespace snn
