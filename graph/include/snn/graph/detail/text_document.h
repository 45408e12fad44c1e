#pragma once
/// A human-written document (a graph or a population model) in TOML or JSON
/// as one JSON tree, so that each reader checks one form. Header-only: the
/// target that includes it needs nlohmann_json and toml++ (SNN_TOMLPP_INCLUDE_DIR).

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <toml++/toml.h>

#include "snn/core/binary_text.h"
#include "snn/core/error.h"
#include "snn/core/json_text.h"

namespace snn::graph::detail {

/// JSON when the text starts with '{', TOML otherwise. Throws snn::Error
/// with `where`, the format and (TOML) the line of a syntax error, a JSON
/// member given twice or a number beyond float64, or saying that the file is
/// HDF5 or binary.
inline nlohmann::json parse_text_document(const std::string& text, const std::string& where) {
  refuse_binary_text(text, where, "a TOML or JSON text");
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    try {
      return parse_json_text(text);
    } catch (const Error& e) {
      throw Error(where + " (JSON): " + e.what());
    }
  }
  toml::table table;
  try {
    table = toml::parse(text);
  } catch (const toml::parse_error& e) {
    throw Error(where + " (TOML), line " + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
  }
  std::ostringstream as_json;
  as_json << toml::json_formatter{table};
  return nlohmann::json::parse(as_json.str());
}

}  // namespace snn::graph::detail
