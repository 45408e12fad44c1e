#pragma once
/// Reading numeric CSV tables (one row per time step, one column per neuron).

#include <torch/types.h>

#include <string>
#include <vector>

namespace snn {

/// A numeric table read from CSV.
struct CsvMatrix {
  torch::Tensor values;             ///< [rows, cols] in the requested dtype
  std::vector<std::string> header;  ///< column names, empty when the file has none
};

/// Reads a numeric CSV file into a [rows, cols] tensor of dtype (float32 or
/// float64; each field is parsed directly in that precision). An optional
/// first line of column names is recognised by holding no number at all. Blank
/// lines are skipped; fields may be padded with spaces; "\r\n" line ends are
/// fine. Throws snn::Error naming the file, line and column for a missing or
/// empty file, ragged rows, empty fields, non-numbers and non-finite values.
CsvMatrix read_csv_matrix(const std::string& path, torch::ScalarType dtype);

/// Same, from text already in memory; `name` is used in error messages.
CsvMatrix parse_csv_matrix(const std::string& text, const std::string& name, torch::ScalarType dtype);

}  // namespace snn
