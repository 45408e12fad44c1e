// Quantities with units and a recursive-descent evaluator for the
// expressions of model files.

#include "snn/populations/quantity.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "snn/core/error.h"

namespace snn::populations {

namespace {

using Dim = std::array<int, 3>;

struct Unit {
  int exp10;
  Dim dim;
};

const std::map<std::string, Unit>& units() {
  static const std::map<std::string, Unit> u{
      {"ms", {0, {1, 0, 0}}},   {"s", {3, {1, 0, 0}}},    {"us", {-3, {1, 0, 0}}},   {"mV", {0, {0, 1, 0}}},
      {"V", {3, {0, 1, 0}}},    {"uV", {-3, {0, 1, 0}}},  {"pA", {0, {0, 0, 1}}},    {"nA", {3, {0, 0, 1}}},
      {"uA", {6, {0, 0, 1}}},   {"pF", {0, {1, -1, 1}}},  {"nF", {3, {1, -1, 1}}},   {"Hz", {-3, {-1, 0, 0}}},
      {"kHz", {0, {-1, 0, 0}}}};
  return u;
}

// x * 10^k, by one multiplication or division with an exact power of ten
// (|k| <= 22), so that a value written in the documented unit is unchanged.
double scaled(double x, int k) {
  if (k == 0) return x;
  if (std::abs(k) > 22) return x * std::pow(10.0, k);
  double p = 1;
  for (int i = 0; i < std::abs(k); ++i) p *= 10;
  return k > 0 ? x * p : x / p;
}

// The documented unit of each kind, as a power of ten of the base units.
int documented_exp10(Kind k) { return k == Kind::kRate ? -3 : 0; }

class Parser {
 public:
  Parser(const std::string& text, const NameLookup& lookup) : s_(text), lookup_(lookup) {}

  Quantity parse() {
    skip();
    if (pos_ == s_.size()) throw Error("'" + s_ + "' is empty");
    Quantity q = sum();
    if (pos_ != s_.size()) fail(std::string("unexpected '") + s_[pos_] + "'");
    if (!std::isfinite(q.value)) throw Error("'" + s_ + "' is not finite");
    return q;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("'" + s_ + "': " + what + " at character " + std::to_string(pos_ + 1));
  }
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool eat(char c) {
    skip();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      skip();
      return true;
    }
    return false;
  }
  bool at_name() const {
    return pos_ < s_.size() && (std::isalpha(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_');
  }
  std::string name() {
    const size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
    std::string n = s_.substr(start, pos_ - start);
    skip();
    return n;
  }

  Quantity sum() {
    Quantity a = product();
    for (;;) {
      const bool plus = eat('+');
      if (!plus && !eat('-')) return a;
      Quantity b = product();
      if (a.dim != b.dim) {
        fail(std::string(plus ? "adds " : "subtracts ") + dimension_name(b.dim) + (plus ? " to " : " from ") +
             dimension_name(a.dim));
      }
      const int e = std::min(a.exp10, b.exp10);
      a.value = scaled(a.value, a.exp10 - e) + (plus ? 1 : -1) * scaled(b.value, b.exp10 - e);
      a.exp10 = e;
    }
  }

  Quantity product() {
    Quantity a = unary();
    for (;;) {
      const bool times = eat('*');
      if (!times && !eat('/')) return a;
      const Quantity b = unary();
      if (!times && b.value == 0) fail("division by zero");
      a.value = times ? a.value * b.value : a.value / b.value;
      for (size_t i = 0; i < 3; ++i) a.dim[i] += times ? b.dim[i] : -b.dim[i];
      a.exp10 += times ? b.exp10 : -b.exp10;
    }
  }

  Quantity unary() {
    if (eat('-')) {
      Quantity q = unary();
      q.value = -q.value;
      return q;
    }
    if (eat('+')) return unary();
    return primary();
  }

  // A number or a parenthesised expression, each optionally followed by a
  // unit; or a name.
  Quantity primary() {
    skip();
    Quantity q;
    if (eat('(')) {
      q = sum();
      if (!eat(')')) fail("expected ')'");
    } else if (pos_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '.')) {
      const char* begin = s_.c_str() + pos_;
      char* end = nullptr;
      q.value = std::strtod(begin, &end);
      if (end == begin) fail("expected a number");
      pos_ += static_cast<size_t>(end - begin);
      skip();
    } else if (at_name()) {
      const size_t start = pos_;
      const std::string n = name();
      if (lookup_ && lookup_(n, q)) return q;
      const auto u = units().find(n);
      if (u == units().end()) {
        pos_ = start;
        fail("'" + n + "' is neither a parameter nor a unit");
      }
      return {1.0, u->second.exp10, u->second.dim};
    } else {
      fail(pos_ < s_.size() ? std::string("unexpected '") + s_[pos_] + "'" : "expected a value");
    }
    // "1.5 ms", "(g * 0.1) mV": a unit right after a number or a parenthesis.
    if (at_name()) {
      const std::string n = name();
      const auto u = units().find(n);
      if (u == units().end()) {
        throw Error("'" + s_ + "' has an unknown unit '" + n + "' (units: ms s us mV V uV pA nA uA pF nF Hz kHz)");
      }
      for (size_t i = 0; i < 3; ++i) q.dim[i] += u->second.dim[i];
      q.exp10 += u->second.exp10;
    }
    return q;
  }

  const std::string& s_;
  const NameLookup& lookup_;
  size_t pos_ = 0;
};

}  // namespace

std::string kind_name(Kind k) {
  switch (k) {
    case Kind::kNumber:
      return "a plain number";
    case Kind::kTime:
      return "a time (ms)";
    case Kind::kPotential:
      return "a potential (mV)";
    case Kind::kCurrent:
      return "a current (pA)";
    case Kind::kCapacitance:
      return "a capacitance (pF)";
    case Kind::kRate:
      return "a rate (Hz)";
  }
  return "?";
}

std::array<int, 3> dimension_of(Kind k) {
  switch (k) {
    case Kind::kNumber:
      return {0, 0, 0};
    case Kind::kTime:
      return {1, 0, 0};
    case Kind::kPotential:
      return {0, 1, 0};
    case Kind::kCurrent:
      return {0, 0, 1};
    case Kind::kCapacitance:
      return {1, -1, 1};
    case Kind::kRate:
      return {-1, 0, 0};
  }
  return {0, 0, 0};
}

std::string dimension_name(const std::array<int, 3>& dim) {
  for (Kind k : {Kind::kNumber, Kind::kTime, Kind::kPotential, Kind::kCurrent, Kind::kCapacitance, Kind::kRate}) {
    if (dimension_of(k) == dim) return kind_name(k);
  }
  static const char* base[3] = {"ms", "mV", "pA"};
  std::string out;
  for (size_t i = 0; i < 3; ++i) {
    if (dim[i] == 0) continue;
    out += (out.empty() ? "" : " ") + std::string(base[i]) + (dim[i] == 1 ? "" : "^" + std::to_string(dim[i]));
  }
  return "a quantity in " + out;
}

Quantity evaluate_expression(const std::string& text, const NameLookup& lookup) {
  return Parser(text, lookup).parse();
}

double value_as(const Quantity& q, Kind k) {
  if (q.dimensionless()) return scaled(q.value, q.exp10);  // a bare number: already in k's unit
  if (q.dim != dimension_of(k)) throw Error("is " + dimension_name(q.dim) + ", not " + kind_name(k));
  return scaled(q.value, q.exp10 - documented_exp10(k));
}

bool is_unit(const std::string& name) { return units().count(name) > 0; }

}  // namespace snn::populations
