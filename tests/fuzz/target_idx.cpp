// IDX files (MNIST's format), plain and gzip-compressed: snn::read_idx and
// snn::read_labeled_images, which cross-checks an images file against a
// labels file.

#include <zlib.h>

#include <string>

#include "snn/datasets/idx.h"
#include "targets.h"

namespace snn::fuzz {
namespace {

std::string be32(uint64_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

void prepare_idx(const std::string& bytes, bool, Rng& rng, const std::string& path) {
  // One input in three is compressed after mutation, so the gzip path reads
  // the same malformed headers and sizes (mutating compressed bytes mostly
  // tests zlib's checksum).
  if (!rng.one_in(3)) return write_file(path, bytes);
  gzFile f = gzopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("fuzz: cannot write " + path);
  if (!bytes.empty()) gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

void check_idx(const std::string& path) {
  const IdxArray a = read_idx(path);
  int64_t total = 1;
  for (int64_t s : a.shape) {
    if (s < 0) throw Defect("read_idx returned a negative size");
    total *= s;
  }
  if (static_cast<int64_t>(a.data.size()) != total) throw Defect("read_idx returned data of another size than its shape");
  // The same file as one half of a data set, with a partner that fits it, so
  // the cross-checks and the tensor conversion run too.
  const int64_t n = a.shape[0];
  if (n > (1 << 16)) return;
  if (a.shape.size() == 3) {
    write_file(path + ".labels", std::string("\0\0\x08\x01", 4) + be32(static_cast<uint64_t>(n)) +
                                     std::string(static_cast<size_t>(n), '\x03'));
    const LabeledImages d = read_labeled_images(path, path + ".labels");
    if (d.size() != n || d.images.size(0) != n) throw Defect("read_labeled_images lost samples");
  } else if (a.shape.size() == 1) {
    write_file(path + ".images", std::string("\0\0\x08\x03", 4) + be32(static_cast<uint64_t>(n)) + be32(1) + be32(1) +
                                     std::string(static_cast<size_t>(n), '\x7f'));
    const LabeledImages d = read_labeled_images(path + ".images", path);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t label = d.labels[i].item<int64_t>();
      if (label < 0 || label >= 10) throw Defect("read_labeled_images accepted label " + std::to_string(label));
    }
  }
}

}  // namespace

Target idx_target() {
  Target t;
  t.name = "idx";
  t.file_name = "input.idx";
  t.mutator.max_size = 1 << 14;
  t.mutator.be32_fields = {0, 4, 8, 12, 16, 20};
  t.mutator.dictionary = {std::string("\0\0\x08\x01", 4), std::string("\0\0\x08\x03", 4), std::string("\0\0\x08\x00", 4),
                          std::string("\0\0\x08\xff", 4), std::string("\0\0\x0d\x03", 4), std::string("\x1f\x8b", 2),
                          std::string("\xff\xff\xff\xff", 4), std::string("\0\0\0\0", 4)};
  t.prepare = prepare_idx;
  t.check = check_idx;
  return t;
}

}  // namespace snn::fuzz
