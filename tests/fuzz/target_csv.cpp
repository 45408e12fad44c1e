// Input-current CSV files (`snnsim neuron --input`): snn::read_csv_matrix in
// both precisions.

#include <torch/torch.h>

#include <exception>

#include "snn/core/error.h"
#include "snn/simulator/csv.h"
#include "targets.h"

namespace snn::fuzz {
namespace {

void check_matrix(const CsvMatrix& m, torch::ScalarType dtype) {
  if (m.values.dim() != 2 || m.values.size(0) < 1 || m.values.size(1) < 1) throw Defect("CSV matrix of no data");
  if (m.values.scalar_type() != dtype) throw Defect("CSV matrix of another dtype than asked for");
  if (!m.header.empty() && static_cast<int64_t>(m.header.size()) != m.values.size(1)) {
    throw Defect("CSV header and rows differ in width");
  }
  if (!torch::isfinite(m.values).all().item<bool>()) throw Defect("CSV reader accepted a non-finite value");
}

void check_csv(const std::string& path) {
  // Both precisions, whatever the first says: a float32 overflow ("1e39")
  // is rejected in one and not the other.
  std::exception_ptr rejected;
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    try {
      check_matrix(read_csv_matrix(path, dtype), dtype);
    } catch (const Error&) {
      rejected = std::current_exception();
    }
  }
  if (rejected) std::rethrow_exception(rejected);
}

}  // namespace

Target csv_target() {
  Target t;
  t.name = "csv";
  t.file_name = "input.csv";
  t.mutator.max_size = 1 << 14;
  t.mutator.dictionary = {",",    "\n",   "\r\n", "\r",   " ",     "\t",       "nan",   "inf",     "-inf", "1e39",
                          "1e309", "-0",  "+",    "-",    "+-1",   "0x1p3",    "e",     ".",       "1.5",  "3.4028236e38",
                          "4.9e-324", "1e-46", "\"", "#",  "\xef\xbb\xbf", std::string(1, '\0'), ",,", "a,b"};
  t.check = check_csv;
  return t;
}

}  // namespace snn::fuzz
