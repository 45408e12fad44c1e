#pragma once
// The flag checks of snnsim, in place of CLI11's PositiveNumber,
// NonNegativeNumber, Range and IsMember: their messages name the rule and
// the value the way every other snnsim error does, e.g.
//   --T: expected a whole number >= 1, got '0'
//   --loss: expected mse or ce, got 'mes' (did you mean 'mse'?)
// (CLI11 puts the flag's name and ": " in front). A check runs on the text
// before it is converted, so a value of the wrong kind ("1.5" for a whole
// number, "fast" for a number) gets the same message as one out of range.

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace snn::app {

/// A whole number in [min, max] (max: unbounded when left out).
CLI::Validator whole_number(int64_t min, int64_t max = std::numeric_limits<int64_t>::max());

/// A whole number >= min, or `special` (meaning `meaning`): --limit's
/// "a whole number >= 1, or -1 (all)".
CLI::Validator whole_number_or(int64_t min, int64_t special, const std::string& meaning);

/// A finite number.
CLI::Validator finite_number();

/// A finite number > bound.
CLI::Validator number_above(double bound);

/// A finite number >= bound.
CLI::Validator number_at_least(double bound);

/// One of `allowed` (exactly, case included); the message lists them and
/// suggests the nearest.
CLI::Validator one_of(std::vector<std::string> allowed);

/// "a", "a or b", "a, b or c".
std::string either(const std::vector<std::string>& names);

/// Runs `body`, which validates values set by flags in a library whose
/// messages name its fields ("tau must be a finite number >= 1 (steps), got
/// 0.5", "device 'gpu' is not cpu or cuda:N"). An snn::Error about a value
/// that one of the `given` flags set is rethrown with the flag in front
/// ("--tau: tau must be ..."); any other error (a checkpoint's own bad value)
/// passes unchanged.
void naming_flags(const std::vector<std::string>& given, const std::function<void()>& body);

}  // namespace snn::app
