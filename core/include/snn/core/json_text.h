#pragma once
/// Parsing a human-written JSON text (a graph, a population model, an
/// options file) without what nlohmann::json accepts silently or reports in
/// its own words: an object member given twice (nlohmann keeps the last, so
/// `"size": 10, "size": 20` simulated 20 neurons without a word) and a
/// number beyond float64 ("[json.exception.out_of_range.406] number
/// overflow parsing '1e400'", which left the command with exit 1).
/// Include only from targets that link nlohmann_json.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "snn/core/error.h"

namespace snn {

/// The JSON document in `text`. Throws snn::Error with one line and no
/// prefix (the caller names the file): "\"population\"[0] has the member
/// \"size\" twice", "the number 1e400 is beyond float64's range", or
/// nlohmann's parse error without its "[json.exception...]" tag.
inline nlohmann::json parse_json_text(const std::string& text) {
  struct Open {
    bool array = false;
    std::string name;             // how a message names it: "params", "population"[0]; "" at the top
    std::set<std::string> keys;   // an object's members so far
    int64_t elements = 0;         // an array's values so far
  };
  std::vector<Open> open;
  std::string last_key;
  auto check = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start || event == E::array_start) {
      Open o;
      o.array = event == E::array_start;
      if (!open.empty()) {
        o.name = open.back().array ? open.back().name + "[" + std::to_string(open.back().elements) + "]"
                                   : "\"" + last_key + "\"";
      }
      open.push_back(std::move(o));
    } else if (event == E::object_end || event == E::array_end) {
      open.pop_back();
      if (!open.empty() && open.back().array) ++open.back().elements;
    } else if (event == E::value) {
      if (!open.empty() && open.back().array) ++open.back().elements;
    } else if (event == E::key) {
      last_key = parsed.get<std::string>();
      if (!open.back().keys.insert(last_key).second) {
        throw Error(open.back().name.empty() ? "the member \"" + last_key + "\" appears twice"
                                             : open.back().name + " has the member \"" + last_key + "\" twice");
      }
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text, check);
  } catch (const nlohmann::json::out_of_range& e) {
    // 406: "number overflow parsing '1e400'".
    std::string what = e.what();
    const std::string lead = "number overflow parsing '";
    const size_t at = what.find(lead);
    if (at != std::string::npos) {
      const size_t end = what.find('\'', at + lead.size());
      throw Error("the number " + what.substr(at + lead.size(), end - at - lead.size()) +
                  " is beyond float64's range");
    }
    throw Error(what.substr(what.find(']') + 2));
  } catch (const nlohmann::json::exception& e) {
    const std::string what = e.what();
    throw Error(what.rfind("[json.exception.", 0) == 0 ? what.substr(what.find(']') + 2) : what);
  }
}

}  // namespace snn
