#include "validators.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "snn/core/error.h"
#include "suggest.h"

namespace snn::app {
namespace {

std::string got(const std::string& rule, const std::string& value) {
  return "expected " + rule + ", got '" + value + "'";
}

// The whole text as a finite double, or false.
bool parse_finite(const std::string& text, double& out) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text.front()))) return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && errno != ERANGE && std::isfinite(out);
}

std::string bound_text(double v) { return fmt::format("{}", v); }

// The whole text as an int64 (digits with one optional sign), or false.
bool parse_whole(const std::string& text, int64_t& out) {
  const size_t start = !text.empty() && (text[0] == '+' || text[0] == '-') ? 1 : 0;
  if (text.size() == start || text.find_first_not_of("0123456789", start) != std::string::npos) return false;
  errno = 0;
  out = std::strtoll(text.c_str(), nullptr, 10);
  return errno != ERANGE;
}

}  // namespace

std::string either(const std::vector<std::string>& names) {
  if (names.size() <= 1) return join_names(names);
  return join_names(std::vector<std::string>(names.begin(), names.end() - 1)) + " or " + names.back();
}

CLI::Validator whole_number(int64_t min, int64_t max) {
  const bool unbounded = max == std::numeric_limits<int64_t>::max();
  const std::string rule = unbounded ? fmt::format("a whole number >= {}", min)
                                     : fmt::format("a whole number from {} to {}", min, max);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        int64_t v = 0;
        return parse_whole(text, v) && v >= min && v <= max ? std::string() : got(rule, text);
      },
      unbounded ? fmt::format(">={}", min) : fmt::format("{}..{}", min, max));
}

CLI::Validator whole_number_or(int64_t min, int64_t special, const std::string& meaning) {
  const std::string rule = fmt::format("a whole number >= {}, or {} ({})", min, special, meaning);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        int64_t v = 0;
        return parse_whole(text, v) && (v >= min || v == special) ? std::string() : got(rule, text);
      },
      fmt::format(">={}|{}", min, special));
}

CLI::Validator finite_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double v = 0;
        return parse_finite(text, v) ? std::string() : got("a finite number", text);
      },
      "");
}

CLI::Validator number_above(double bound) {
  const std::string rule = "a number > " + bound_text(bound);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double v = 0;
        return parse_finite(text, v) && v > bound ? std::string() : got(rule, text);
      },
      ">" + bound_text(bound));
}

CLI::Validator number_at_least(double bound) {
  const std::string rule = "a number >= " + bound_text(bound);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double v = 0;
        return parse_finite(text, v) && v >= bound ? std::string() : got(rule, text);
      },
      ">=" + bound_text(bound));
}

CLI::Validator one_of(std::vector<std::string> allowed) {
  const std::string rule = either(allowed);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        for (const auto& a : allowed) {
          if (text == a) return std::string();
        }
        const std::string near = nearest_name(text, allowed);
        return got(rule, text) + (near.empty() ? "" : " (did you mean '" + near + "'?)");
      },
      "{" + join_names(allowed, ",") + "}");
}

void naming_flags(const std::vector<std::string>& given, const std::function<void()>& body) {
  // The start of each library message about a flag's value (NeuronParams,
  // NetworkConfig, SimulationConfig, NetworkOverrides, Placement), and the flag.
  static const std::pair<const char*, const char*> kFields[] = {
      {"tau", "--tau"},
      {"the parametric LIF's initial tau", "--tau"},
      {"v_threshold", "--v-threshold"},
      {"v_reset", "--v-reset"},
      {"refractory", "--refractory"},
      {"surrogate", "--surrogate"},
      {"the input gain", "--gain"},
      {"T (steps per sample)", "--T"},
      {"T:", "--T"},
      {"steps per tick", "--steps-per-tick"},
      {"at least one device", "--devices"},
      {"device '", "--devices"},
      {"balance", "--balance"},
      {"every stage needs", "--balance"},
      {"threads:", "--threads"},
  };
  try {
    body();
  } catch (const Error& e) {
    const std::string what = e.what();
    const bool stages = what.find(" devices (stages) for ") != std::string::npos;
    for (const auto& [start, flag] : kFields) {
      if (what.rfind(start, 0) != 0 && !(stages && std::string(flag) == "--devices")) continue;
      if (std::find(given.begin(), given.end(), flag) == given.end()) break;
      // "tau: a plif network ..." -> "--tau: a plif network ...", and
      // "T: expected ..." -> "--T: expected ..."; otherwise "--tau: tau must ...".
      const std::string field = start;
      const size_t n = field.back() == ':' ? field.size() - 1 : field.size();
      const bool labelled = what.rfind(start, 0) == 0 && what.size() > n && what[n] == ':';
      throw Error(std::string(flag) + (labelled ? what.substr(n) : ": " + what));
    }
    throw;
  }
}

}  // namespace snn::app
