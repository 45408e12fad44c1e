#include "snn/datasets/idx.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <sstream>

#include "snn/core/error.h"

namespace snn {
namespace {

// POSIX rather than std::filesystem: libtorch.so exports std::filesystem
// symbols of its own libstdc++ build, and calls into them can crash.
bool is_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
bool is_dir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Files larger than this are not MNIST-like data sets; refusing them keeps a
// corrupt header from asking for terabytes.
constexpr int64_t kMaxBytes = int64_t{1} << 34;

struct GzCloser {
  void operator()(gzFile f) const {
    if (f) gzclose(f);
  }
};
using GzFile = std::unique_ptr<std::remove_pointer_t<gzFile>, GzCloser>;

// Reads up to n bytes; fewer only at the end of the data. gzread reads plain
// files as they are, so one path serves both.
int64_t read_bytes(gzFile f, const std::string& path, uint8_t* out, int64_t n) {
  int64_t done = 0;
  while (done < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<int64_t>(n - done, 1 << 30));
    const int got = gzread(f, out + done, chunk);
    if (got < 0) {
      int code = 0;
      const char* msg = gzerror(f, &code);
      throw Error("'" + path + "' is corrupt: " + (msg ? msg : "read error"));
    }
    if (got == 0) break;
    done += got;
  }
  return done;
}

// Reads up to `declared` bytes into `out`, which grows as the data arrive
// (in blocks of 1 MiB, then doubling): the header is not trusted with
// memory, so a corrupt or hostile size meets the end of the file before it
// can claim gigabytes. For gzip data the file size says nothing about the
// data size, so this is the one bound that serves both. Returns the bytes read.
int64_t read_data(gzFile f, const std::string& path, int64_t declared, std::vector<uint8_t>& out) {
  out.clear();
  int64_t got = 0;
  while (got < declared) {
    const int64_t want = std::min(declared - got, std::max<int64_t>(int64_t{1} << 20, got));
    out.resize(static_cast<size_t>(got + want));
    const int64_t n = read_bytes(f, path, out.data() + got, want);
    got += n;
    if (n < want) break;
  }
  out.resize(static_cast<size_t>(got));
  return got;
}

}  // namespace

IdxArray read_idx(const std::string& path, int expected_dims) {
  if (!is_file(path)) throw Error("'" + path + "' does not exist or is not a file");
  GzFile f(gzopen(path.c_str(), "rb"));
  if (!f) throw Error("cannot open '" + path + "'");
  uint8_t magic[4];
  if (read_bytes(f.get(), path, magic, 4) != 4) throw Error("'" + path + "' is too short to be an IDX file");
  if (magic[0] != 0 || magic[1] != 0) {
    std::ostringstream os;
    os << "'" << path << "' is not an IDX file (magic number bytes " << int(magic[0]) << " " << int(magic[1]) << " "
       << int(magic[2]) << " " << int(magic[3]) << ", expected 0 0 8 D)";
    throw Error(os.str());
  }
  if (magic[2] != 0x08) {
    throw Error("'" + path + "' holds IDX data of type code " + std::to_string(magic[2]) +
                "; only unsigned bytes (8) are supported");
  }
  const int dims = magic[3];
  if (dims < 1 || (expected_dims > 0 && dims != expected_dims)) {
    throw Error("'" + path + "' has " + std::to_string(dims) + " dimensions, expected " +
                std::to_string(expected_dims > 0 ? expected_dims : 1) + (expected_dims > 0 ? "" : " or more"));
  }
  IdxArray a;
  // The product of the nonzero sizes is bounded too: 0 images of 2^32 x 2^32
  // pixels hold no data, but their strides overflow any tensor made of them.
  int64_t extent = 1;
  for (int d = 0; d < dims; ++d) {
    uint8_t b[4];
    if (read_bytes(f.get(), path, b, 4) != 4) throw Error("'" + path + "' is truncated inside its header");
    const int64_t size = (int64_t{b[0]} << 24) | (int64_t{b[1]} << 16) | (int64_t{b[2]} << 8) | int64_t{b[3]};
    a.shape.push_back(size);
    // Checked before multiplying: two sizes near 2^32 would overflow int64.
    if (size != 0 && extent > kMaxBytes / size) {
      throw Error("'" + path + "' declares sizes whose product exceeds 2^34 (size " + std::to_string(size) +
                  " of dimension " + std::to_string(d + 1) + "); not a data set we read");
    }
    extent *= std::max<int64_t>(size, 1);
  }
  int64_t total = 1;
  for (int64_t size : a.shape) total *= size;
  const int64_t got = read_data(f.get(), path, total, a.data);
  if (got < total) {
    throw Error("'" + path + "' is truncated: it holds " + std::to_string(got) + " bytes of data, its header says " +
                std::to_string(total));
  }
  uint8_t extra;
  if (read_bytes(f.get(), path, &extra, 1) != 0) {
    throw Error("'" + path + "' has data past the " + std::to_string(total) + " bytes its header declares");
  }
  return a;
}

LabeledImages read_labeled_images(const std::string& images_path, const std::string& labels_path,
                                  int64_t num_classes) {
  IdxArray images = read_idx(images_path, 3);
  IdxArray labels = read_idx(labels_path, 1);
  if (images.shape[0] != labels.shape[0]) {
    throw Error("labels file '" + labels_path + "' holds " + std::to_string(labels.shape[0]) +
                " labels but images file '" + images_path + "' holds " + std::to_string(images.shape[0]) + " images");
  }
  if (images.shape[1] < 1 || images.shape[2] < 1) {
    throw Error("images file '" + images_path + "' has empty images (" + std::to_string(images.shape[1]) + "x" +
                std::to_string(images.shape[2]) + ")");
  }
  for (size_t i = 0; i < labels.data.size(); ++i) {
    if (labels.data[i] >= num_classes) {
      throw Error("labels file '" + labels_path + "': label " + std::to_string(labels.data[i]) + " of sample " +
                  std::to_string(i) + " is outside [0, " + std::to_string(num_classes) + ")");
    }
  }
  LabeledImages out;
  out.images = torch::from_blob(images.data.data(), images.shape, torch::kUInt8).clone();
  out.labels = torch::from_blob(labels.data.data(), labels.shape, torch::kUInt8).to(torch::kLong);
  return out;
}

ImageDataset load_image_dataset(const std::string& directory, int64_t num_classes) {
  if (!is_dir(directory)) {
    throw Error("data directory '" + directory + "' " +
                (is_file(directory) ? "is a file, not a folder of IDX files" : "does not exist"));
  }
  auto find = [&](const std::string& stem) {
    for (const std::string& name : {stem, stem + ".gz"}) {
      const std::string p = directory + "/" + name;
      if (is_file(p)) return p;
    }
    throw Error("data directory '" + directory + "' has no " + stem + " (nor " + stem + ".gz)");
  };
  // One after the other, so the first missing file is the one reported.
  const std::string train_images = find("train-images-idx3-ubyte");
  const std::string train_labels = find("train-labels-idx1-ubyte");
  const std::string test_images = find("t10k-images-idx3-ubyte");
  const std::string test_labels = find("t10k-labels-idx1-ubyte");
  ImageDataset d;
  d.train = read_labeled_images(train_images, train_labels, num_classes);
  d.test = read_labeled_images(test_images, test_labels, num_classes);
  if (d.train.images.sizes().slice(1) != d.test.images.sizes().slice(1)) {
    std::ostringstream os;
    os << "data directory '" << directory << "': train images are " << d.train.images.sizes().slice(1)
       << " but test images are " << d.test.images.sizes().slice(1);
    throw Error(os.str());
  }
  return d;
}

namespace {
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Uniform in [0, bound) without bias (Lemire's multiply-and-reject).
uint64_t bounded(uint64_t& state, uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    const unsigned __int128 m = static_cast<unsigned __int128>(splitmix64(state)) * bound;
    if (static_cast<uint64_t>(m) >= threshold) return static_cast<uint64_t>(m >> 64);
  }
}
}  // namespace

torch::Tensor shuffled_indices(int64_t n, uint64_t seed, int64_t epoch) {
  if (n < 0) throw Error("cannot shuffle " + std::to_string(n) + " samples");
  torch::Tensor idx = torch::arange(n, torch::kLong);
  int64_t* p = idx.data_ptr<int64_t>();
  uint64_t state = seed ^ (0xD1B54A32D192ED03ULL * static_cast<uint64_t>(epoch + 1));
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(bounded(state, static_cast<uint64_t>(i + 1)));
    std::swap(p[i], p[j]);
  }
  return idx;
}

std::vector<torch::Tensor> epoch_batches(int64_t n, int64_t batch_size, bool shuffle, uint64_t seed, int64_t epoch,
                                         bool drop_last) {
  if (batch_size < 1) throw Error("batch size must be >= 1, got " + std::to_string(batch_size));
  const torch::Tensor order = shuffle ? shuffled_indices(n, seed, epoch) : torch::arange(n, torch::kLong);
  std::vector<torch::Tensor> out;
  for (int64_t b = 0; b < n; b += batch_size) {
    const int64_t len = std::min(batch_size, n - b);
    if (drop_last && len < batch_size) break;
    out.push_back(order.narrow(0, b, len));
  }
  return out;
}

torch::Tensor random_shift(const torch::Tensor& images, const torch::Tensor& indices, int64_t max_shift, uint64_t seed,
                           int64_t epoch) {
  if (max_shift < 0) throw Error("image shift must be >= 0 pixels, got " + std::to_string(max_shift));
  if (max_shift == 0) return images;
  if (images.dim() != 3) {
    std::ostringstream os;
    os << "shifting images needs [B, H, W] images, got " << images.sizes();
    throw Error(os.str());
  }
  TORCH_CHECK(indices.dim() == 1 && indices.size(0) == images.size(0), "random_shift: indices must be [",
              images.size(0), "], got ", indices.sizes());
  const int64_t h = images.size(1), w = images.size(2);
  const torch::Tensor idx = indices.to(torch::kLong).contiguous();
  const int64_t* ip = idx.data_ptr<int64_t>();
  torch::Tensor out = torch::zeros_like(images);
  const uint64_t span = static_cast<uint64_t>(2 * max_shift + 1);
  for (int64_t b = 0; b < images.size(0); ++b) {
    // A stream of its own per (seed, epoch, sample): mixing, not sequence position.
    uint64_t state = seed ^ (0xD1B54A32D192ED03ULL * static_cast<uint64_t>(epoch + 1)) ^
                     (0x8CB92BA72F3D8DD7ULL * static_cast<uint64_t>(ip[b] + 1));
    const int64_t dy = static_cast<int64_t>(bounded(state, span)) - max_shift;
    const int64_t dx = static_cast<int64_t>(bounded(state, span)) - max_shift;
    const int64_t rows = h - std::abs(dy), cols = w - std::abs(dx);
    if (rows <= 0 || cols <= 0) continue;  // moved out of the frame entirely
    out[b].narrow(0, std::max<int64_t>(dy, 0), rows)
        .narrow(1, std::max<int64_t>(dx, 0), cols)
        .copy_(images[b].narrow(0, std::max<int64_t>(-dy, 0), rows).narrow(1, std::max<int64_t>(-dx, 0), cols));
  }
  return out;
}

}  // namespace snn
