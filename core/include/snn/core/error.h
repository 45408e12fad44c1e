#pragma once
/// Exceptions of snnsim (DESIGN.md, "Errors").
///
/// Tensor preconditions use TORCH_CHECK (c10::Error). Everything else throws
/// snn::Error for user and runtime errors (bad files, flags, values), and
/// snn::InternalError for broken invariants, i.e. our bugs. Messages say what
/// was wrong, with the value, and what was expected.

#include <stdexcept>
#include <string>

namespace snn {

/// A user or runtime error: bad input, a file that cannot be read, a bad value.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

/// The run stopped on request (SIGINT, SIGTERM) after committing what it had
/// done; the message says what was kept and how to continue.
class Interrupted : public Error {
 public:
  explicit Interrupted(const std::string& what) : Error(what) {}
};

/// A broken internal invariant: a bug in snnsim, never the user's fault.
class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& what)
      : std::logic_error("internal error (please report): " + what) {}
};

}  // namespace snn
