#include "snn/simulator/csv.h"

#include <charconv>
#include <cmath>
#include <sstream>

#include "snn/core/binary_text.h"
#include "snn/core/error.h"
#include "snn/core/text_file.h"

namespace snn {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, ',')) out.push_back(trim(field));
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

enum class Parsed { kNumber, kNotANumber, kOutOfRange };

// Parses the whole field as a T.
template <typename T>
Parsed parse_number(const std::string& field, T& out) {
  if (field.empty()) return Parsed::kNotANumber;
  const char* begin = field.data();
  const char* end = begin + field.size();
  if (*begin == '+') {
    ++begin;  // from_chars rejects a leading '+', so "+-1" must not reach it as "-1"
    if (begin == end || *begin == '-') return Parsed::kNotANumber;
  }
  const auto [ptr, ec] = std::from_chars(begin, end, out);
  if (ptr != end) return Parsed::kNotANumber;
  // A number too large or too small (underflowing to 0) for T.
  if (ec == std::errc::result_out_of_range) return Parsed::kOutOfRange;
  return ec == std::errc() ? Parsed::kNumber : Parsed::kNotANumber;
}

// A field as an error message shows it: at most 40 characters, control and
// non-ASCII bytes escaped, so a binary file gives one readable line.
std::string shown(const std::string& field) {
  std::string out = "'";
  for (size_t i = 0; i < field.size() && i < 40; ++i) {
    const unsigned char c = static_cast<unsigned char>(field[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      static const char digits[] = "0123456789abcdef";
      out += "\\x";
      out += digits[c >> 4];
      out += digits[c & 15];
    }
  }
  return out + (field.size() > 40 ? "...'" : "'");
}

template <typename T>
CsvMatrix parse(const std::string& text, const std::string& name) {
  CsvMatrix result;
  std::vector<T> values;
  int64_t cols = -1;
  int64_t rows = 0;
  std::istringstream in(text);
  std::string line;
  int64_t line_no = 0;
  bool first = true;
  while (std::getline(in, line)) {
    ++line_no;
    if (trim(line).empty()) continue;
    const std::vector<std::string> fields = split(line);
    if (first) {
      first = false;
      // A header holds no number at all; a first row with some numbers and a
      // typo is a data row with an error, never silently dropped.
      T probe;
      bool any_number = false;
      for (const auto& f : fields) any_number = any_number || parse_number(f, probe) != Parsed::kNotANumber;
      if (!any_number) {
        result.header = fields;
        cols = static_cast<int64_t>(fields.size());
        continue;
      }
    }
    if (cols < 0) cols = static_cast<int64_t>(fields.size());
    if (static_cast<int64_t>(fields.size()) != cols) {
      throw Error(name + " line " + std::to_string(line_no) + ": " + std::to_string(fields.size()) +
                  " fields, but the " + (result.header.empty() ? "first row has " : "header has ") +
                  std::to_string(cols));
    }
    for (int64_t c = 0; c < cols; ++c) {
      const std::string& f = fields[static_cast<size_t>(c)];
      T v;
      const std::string where = name + " line " + std::to_string(line_no) + ", column " + std::to_string(c + 1);
      if (f.empty()) throw Error(where + ": empty field");
      const Parsed parsed = parse_number(f, v);
      if (parsed == Parsed::kNotANumber) throw Error(where + ": " + shown(f) + " is not a number");
      if (parsed == Parsed::kOutOfRange) {
        throw Error(where + ": " + shown(f) + " is outside the range of " +
                    (std::is_same_v<T, float> ? "float32 (magnitudes 1.4e-45 to 3.4e38, or 0)"
                                              : "float64 (magnitudes 4.9e-324 to 1.8e308, or 0)"));
      }
      if (!std::isfinite(v)) throw Error(where + ": " + shown(f) + " is not a finite number");
      values.push_back(v);
    }
    ++rows;
  }
  if (rows == 0) throw Error(name + " holds no data rows");
  const auto dtype = std::is_same_v<T, float> ? torch::kFloat : torch::kDouble;
  result.values = torch::from_blob(values.data(), {rows, cols}, dtype).clone();
  return result;
}

}  // namespace

CsvMatrix parse_csv_matrix(const std::string& text, const std::string& name, torch::ScalarType dtype) {
  if (dtype == torch::kFloat) return parse<float>(text, name);
  if (dtype == torch::kDouble) return parse<double>(text, name);
  throw Error("CSV values can be read as float32 or float64 only");
}

CsvMatrix read_csv_matrix(const std::string& path, torch::ScalarType dtype) {
  const std::string name = "'" + path + "'";
  const std::string text = read_text_file(path, name);
  refuse_binary_text(text, name, "a CSV file of input currents");
  return parse_csv_matrix(text, name, dtype);
}

}  // namespace snn
