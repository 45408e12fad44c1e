#pragma once
/// Numbers in messages (snn::Error texts).

#include <sstream>
#include <string>

namespace snn {

/// A number as messages show it: the stream's default form ("0.1", "1e+06").
inline std::string message_number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace snn
