#include "config_format.h"

#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "snn/core/binary_text.h"
#include "snn/core/error.h"
#include "snn/core/json_text.h"
#include "suggest.h"
#include "validators.h"

namespace snn::app {
namespace {

// Where a message points: "config 'x.toml' (TOML)" for --config, else
// "TOML"/"JSON" with the caller naming the file.
struct Source {
  std::string prefix;  // "" for a reader without an app
  bool json = false;

  [[noreturn]] void fail(const std::string& what, int line = 0) const {
    std::string where = prefix;
    if (line > 0) where += (where.empty() ? "line " : ", line ") + std::to_string(line);
    throw CLI::ConfigError(where.empty() ? what : where + ": " + what);
  }
  std::string table(const std::string& name) const { return json ? "\"" + name + "\"" : "[" + name + "]"; }
  std::string key(const std::string& name) const { return json ? "\"" + name + "\"" : "'" + name + "'"; }
};

std::string trimmed(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\r\n") - a + 1);
}

std::string unquoted(std::string s) {
  if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front()) s = s.substr(1, s.size() - 2);
  return s;
}

// The line of each table and key of a TOML text, read line by line as
// CLI11's ConfigBase::from_config reads it; a table or key met twice is an
// error. Keys are full names: "train.T".
std::map<std::string, int> toml_key_lines(const std::string& text, const Source& src) {
  std::map<std::string, int> keys, tables;
  std::istringstream in(text);
  std::string raw, section;
  int n = 0;
  while (std::getline(in, raw)) {
    ++n;
    const std::string line = trimmed(raw);
    if (line.size() < 3) continue;  // CLI11 skips these too
    if (line.front() == '[' && line.back() == ']') {
      std::string name = line.substr(1, line.size() - 2);
      if (name.size() > 1 && name.front() == '[' && name.back() == ']') {
        // An array of tables: another kind of file given as options.
        name = trimmed(name.substr(1, name.size() - 2));
        const bool model = name == "population" || name == "projection";
        const bool graph = name == "nodes" || name == "edges";
        src.fail("[[" + name + "]] is an array of tables, which options and sweep files do not have" +
                     (model ? ": this is a population model (snnsim simulate runs it; a sweep file names it as "
                              "[base] model = \"FILE\")"
                      : graph ? ": this is a network graph (snnsim train --model FILE trains it)"
                              : ""),
                 n);
      }
      name = trimmed(name);
      const auto [it, fresh] = tables.emplace(name, n);
      if (!fresh) src.fail("table [" + name + "] appears twice (first at line " + std::to_string(it->second) + ")", n);
      section = name;
      continue;
    }
    if (line.front() == ';' || line.front() == '#') continue;
    const size_t eq = line.find('=');
    // CLI11 would read these as keys named "[train" or "layers 784-10".
    if (line.front() == '[') src.fail("expected a table header like [train], got '" + line + "'", n);
    if (eq == std::string::npos) src.fail("expected key = value, got '" + line + "'", n);
    std::string name = trimmed(line.substr(0, eq));
    std::string value = trimmed(line.substr(eq + 1));
    value = trimmed(value.substr(0, value.find('#')));
    if (value.size() > 1 && value.front() == '[') {  // a list that may continue on the next lines
      for (std::string more; value.back() != ']' && std::getline(in, more);) {
        ++n;
        value += trimmed(more);
      }
    }
    if (name.find('.') == std::string::npos) name = unquoted(name);
    const std::string full = section.empty() ? name : section + "." + name;
    const auto [it, fresh] = keys.emplace(full, n);
    if (!fresh) {
      src.fail("key '" + name + "' appears twice" + (section.empty() ? "" : " in [" + section + "]") +
                   " (first at line " + std::to_string(it->second) + ")",
               n);
    }
  }
  return keys;
}

// JSON with every object's members checked for repeats (nlohmann keeps the
// last one silently) and numbers beyond float64 named.
nlohmann::json parse_json(const std::string& text, const Source& src) {
  try {
    return parse_json_text(text);
  } catch (const Error& e) {
    src.fail(e.what());
  }
}

std::string toml_value(const Source& src, const std::string& key, const nlohmann::json& v) {
  if (v.is_string() || v.is_number() || v.is_boolean()) return v.dump();  // JSON's literals are TOML's
  if (v.is_array()) {
    std::string joined;
    for (const auto& e : v) {
      if (!(e.is_string() || e.is_number())) src.fail("JSON config: " + key + " holds a nested value");
      joined += (joined.empty() ? "" : ",") + (e.is_string() ? e.get<std::string>() : e.dump());
    }
    return nlohmann::json(joined).dump();
  }
  src.fail("JSON config: " + key + " must be a string, number, boolean or list");
}

// The TOML equivalent of a JSON config.
std::string json_as_toml(const std::string& text, const Source& src) {
  const nlohmann::json j = parse_json(text, src);
  if (!j.is_object()) src.fail("the JSON config must be an object of sections");
  std::ostringstream toml, sections;
  for (const auto& [key, value] : j.items()) {
    if (value.is_object()) {
      sections << "[" << key << "]\n";
      for (const auto& [k, v] : value.items()) sections << k << " = " << toml_value(src, key + "." + k, v) << "\n";
    } else {
      toml << key << " = " << toml_value(src, key, value) << "\n";
    }
  }
  return toml.str() + sections.str();
}

std::vector<std::string> option_names(const CLI::App* cmd) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : cmd->get_options()) {
    if (opt == cmd->get_help_ptr() || opt == cmd->get_help_all_ptr()) continue;
    for (const auto& l : opt->get_lnames()) names.push_back(l);
  }
  return names;
}

const CLI::Option* option_of(const CLI::App* cmd, const std::string& key) {
  const CLI::Option* opt = cmd->get_option_no_throw("--" + key);
  if (opt == nullptr && key.size() == 1) opt = cmd->get_option_no_throw("-" + key);
  return opt;
}

// Every table a command of `app`, every key one of its options.
void check_keys(const CLI::App& app, const std::vector<CLI::ConfigItem>& items, const std::map<std::string, int>& lines,
                const Source& src) {
  std::vector<const CLI::App*> commands = app.get_subcommands([](const CLI::App*) { return true; });
  std::vector<std::string> command_names, tables;
  for (const CLI::App* c : commands) {
    command_names.push_back(c->get_name());
    tables.push_back(src.table(c->get_name()));
  }
  for (const auto& item : items) {
    if (item.name == "++" || item.name == "--") continue;  // CLI11's table begin and end markers
    std::string full;
    for (const auto& p : item.parents) full += p + ".";
    const auto at = lines.find(full + item.name);
    const int line = at == lines.end() ? 0 : at->second;
    if (item.parents.empty()) {
      if (option_of(&app, item.name) != nullptr) continue;
      std::vector<std::string> owners;
      for (const CLI::App* c : commands) {
        if (option_of(c, item.name) != nullptr) owners.push_back(src.table(c->get_name()));
      }
      src.fail("the key " + src.key(item.name) + " is outside any table (" +
                   (owners.empty() ? "tables: " + join_names(tables)
                                   : "it belongs in " + either(owners)) + ")",
               line);
    }
    const CLI::App* cmd = nullptr;
    for (const CLI::App* c : commands) {
      if (c->get_name() == item.parents.front()) cmd = c;
    }
    if (cmd == nullptr || item.parents.size() > 1) {
      const std::string near = nearest_name(item.parents.front(), command_names);
      src.fail("there is no table " + src.table(full.substr(0, full.size() - 1)) + " (" +
                   (near.empty() || item.parents.size() > 1 ? "" : "did you mean " + src.table(near) + "?; ") +
                   "tables: " + join_names(tables) + ")",
               line);
    }
    const CLI::Option* opt = option_of(cmd, item.name);
    if (opt == nullptr) {
      const std::string near = nearest_name(item.name, option_names(cmd));
      src.fail(src.table(cmd->get_name()) + " has no key " + src.key(item.name) +
                   (near.empty() ? " (see snnsim " + cmd->get_name() + " --help)" : " (did you mean " + src.key(near) + "?)"),
               line);
    }
    // The command line, read first, wins over the file, and CLI11 then skips
    // the file's value unchecked: a wrong value there would wait unnoticed
    // for the day the flag is left out. Checked here by the flag's own rules.
    if (opt->count() > 0 && item.inputs.size() == 1) {
      auto* checked = const_cast<CLI::Option*>(opt);  // (get_validator is not const; nothing is changed)
      for (int i = 0;; ++i) {
        CLI::Validator* v = nullptr;
        try {
          v = checked->get_validator(i);
        } catch (const CLI::OptionNotFound&) {
          break;
        }
        // (A wrong value on the command line is reported first, as CLI11 does.)
        bool flag_ok = true;
        for (std::string given : opt->results()) flag_ok = flag_ok && (*v)(given).empty();
        std::string value = item.inputs.front();
        const std::string problem = flag_ok ? (*v)(value) : std::string();
        if (!problem.empty()) {
          src.fail(src.table(cmd->get_name()) + " " + item.name + ": " + problem +
                       " (the command line sets --" + item.name + " too, which wins, but the file's value must be valid)",
                   line);
        }
      }
    }
  }
}

}  // namespace

std::vector<CLI::ConfigItem> TomlOrJsonConfig::from_config(std::istream& input) const {
  const std::string text((std::istreambuf_iterator<char>(input)), std::istreambuf_iterator<char>());
  const auto first = text.find_first_not_of(" \t\r\n");
  Source src;
  src.json = first != std::string::npos && text[first] == '{';
  std::string file = "the file";  // (a sweep file's reader names it)
  if (app_ != nullptr) {
    const CLI::Option* config = app_->get_config_ptr();
    file = "config '" + (config != nullptr && !config->results().empty() ? config->results().front() : "") + "'";
    src.prefix = file + " (" + (src.json ? "JSON" : "TOML") + ")";
  }
  // A binary file (a checkpoint given as --config or as a sweep file): say
  // so, not print its first bytes as a malformed line.
  try {
    refuse_binary_text(text, file, "a TOML or JSON options file");
  } catch (const Error& e) {
    throw CLI::ConfigError(e.what());
  }
  std::map<std::string, int> lines;
  std::vector<CLI::ConfigItem> items;
  if (src.json) {
    std::istringstream toml(json_as_toml(text, src));
    items = CLI::ConfigTOML::from_config(toml);
  } else {
    lines = toml_key_lines(text, src);
    std::istringstream toml(text);
    items = CLI::ConfigTOML::from_config(toml);
  }
  if (app_ != nullptr) {
    check_keys(*app_, items, lines, src);
    // A TOML list is one flag's comma-separated list, as a JSON array is
    // (CLI11 would give the flag one value per element: "given 3 times").
    for (auto& item : items) {
      if (item.inputs.size() > 1) item.inputs = {join_names(item.inputs, ",")};
    }
  }
  return items;
}

}  // namespace snn::app
