#include "parse_errors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>

#include "suggest.h"
#include "validators.h"

namespace snn::app {
namespace {

std::string command_path(const CLI::App* cmd) {
  std::string path;
  for (const CLI::App* a = cmd; a != nullptr; a = a->get_parent()) {
    path = (a->get_parent() == nullptr ? std::string("snnsim") : a->get_name()) + (path.empty() ? "" : " " + path);
  }
  return path;
}

std::vector<const CLI::App*> commands_of(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App*) { return true; });
}

std::vector<std::string> command_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : commands_of(app)) names.push_back(sub->get_name());
  return names;
}

// `name` ("--tau", "-h") among the options of `cmd` or of the commands above it.
const CLI::Option* find_option(const CLI::App* cmd, const std::string& name) {
  for (const CLI::App* a = cmd; a != nullptr; a = a->get_parent()) {
    if (const CLI::Option* opt = a->get_option_no_throw(name)) {
      if (opt->nonpositional()) return opt;
    }
  }
  return nullptr;
}

std::vector<std::string> long_names(const CLI::App* cmd) {
  std::vector<std::string> names;
  for (const CLI::App* a = cmd; a != nullptr; a = a->get_parent()) {
    for (const CLI::Option* opt : a->get_options()) {
      for (const auto& l : opt->get_lnames()) names.push_back(l);
    }
  }
  return names;
}

bool is_number(const std::string& s) {
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return !s.empty() && end == s.c_str() + s.size();
}

std::string strip_dashes(const std::string& s) { return s.substr(std::min(s.find_first_not_of('-'), s.size())); }

std::string unknown_option(const CLI::App& app, const CLI::App* cmd, const std::string& given) {
  const std::string word = strip_dashes(given);
  std::string msg = "unknown option '" + given + "' for '" + command_path(cmd) + "'";
  if (cmd == &app) {
    // An option of a command, given before the command.
    std::vector<std::string> owners;
    for (const CLI::App* sub : commands_of(app)) {
      if (sub->get_option_no_throw("--" + word) != nullptr) owners.push_back(sub->get_name());
    }
    if (!owners.empty()) return msg + " (it is an option of " + either(owners) + ": put it after the command)";
  }
  const std::string near = nearest_name(word, long_names(cmd));
  if (!near.empty()) return msg + " (did you mean '--" + near + "'?)";
  return msg + " (see '" + command_path(cmd) + " --help')";
}

std::string unknown_command(const CLI::App& app, const std::string& given) {
  const auto names = command_names(app);
  const std::string near = nearest_name(given, names);
  return "unknown command '" + given + "' (" + (near.empty() ? "" : "did you mean '" + near + "'?; ") +
         "commands: " + join_names(names) + ")";
}

struct Walk {
  const CLI::App* cmd;                ///< the command the arguments reached
  std::string problem;                ///< the first unknown command, option or extra argument; "" if none
  std::vector<const CLI::Option*> given;  ///< the options on the command line
};

// Reads `args` as CLI11 does, far enough to find the first argument that
// names nothing: a command, an option, or a positional argument too many.
Walk walk(const CLI::App& app, const std::vector<std::string>& args) {
  const CLI::App* cmd = &app;
  std::vector<const CLI::Option*> given;
  int positionals = 0;
  bool only_positionals = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (!only_positionals && a == "--") {
      only_positionals = true;
      continue;
    }
    if (!only_positionals && a.size() > 1 && a[0] == '-' && !is_number(a)) {
      std::string name = a;
      bool attached = false;
      if (a.rfind("--", 0) == 0) {
        const size_t eq = a.find('=');
        if (eq != std::string::npos) name = a.substr(0, eq), attached = true;
      } else if (a.size() > 2 && find_option(cmd, a.substr(0, 2)) != nullptr) {
        name = a.substr(0, 2), attached = true;  // -xVALUE
      }
      const CLI::Option* opt = find_option(cmd, name);
      if (opt == nullptr) return {cmd, unknown_option(app, cmd, name), given};
      given.push_back(opt);
      // Its value, where it takes one: a flag (--overwrite) is expected 0
      // times, though its type size says 1.
      if (!attached && opt->get_type_size_max() > 0 && opt->get_expected_max() > 0) ++i;
      continue;
    }
    if (cmd == &app) {
      const CLI::App* sub = nullptr;
      for (const CLI::App* s : commands_of(app)) {
        if (s->get_name() == a) sub = s;
      }
      if (sub == nullptr) return {cmd, unknown_command(app, a), given};
      cmd = sub;
      positionals = 0;
      continue;
    }
    int slots = 0;
    std::vector<std::string> names;
    for (const CLI::Option* opt : cmd->get_options()) {
      if (opt->nonpositional()) continue;
      const int n = opt->get_items_expected_max();
      slots += n < 0 ? 1 << 20 : n;
      names.push_back(opt->get_name());
    }
    if (++positionals > slots) {
      return {cmd,
              "unexpected argument '" + a + "' for '" + command_path(cmd) + "' (it takes " +
                  (names.empty() ? std::string("options only") : join_names(names, " ")) + ")",
              given};
    }
  }
  return {cmd, "", given};
}

std::string number_text(const std::string& s) {
  return fmt::format("{}", std::strtod(s.c_str(), nullptr));
}

// The kind of value an option's type holds ("INT:POSITIVE" -> "a whole
// number"), with the bound of CLI11's PositiveNumber or NonNegativeNumber
// when it has one ("a whole number >= 1").
std::string rule_of(const CLI::Option* opt) {
  const std::string type = opt == nullptr ? "" : opt->get_type_name();
  std::string kind = "a value";
  if (type.rfind("INT", 0) == 0 || type.rfind("UINT", 0) == 0) kind = "a whole number";
  if (type.rfind("FLOAT", 0) == 0) kind = "a number";
  if (type.rfind("BOOLEAN", 0) == 0) return "true or false";
  const bool positive = type.find(":POSITIVE") != std::string::npos;
  const bool non_negative = type.find(":NONNEGATIVE") != std::string::npos;
  if (kind == "a value" && (positive || non_negative)) kind = "a number";
  if (positive) return kind + (kind == "a whole number" ? " >= 1" : " > 0");
  if (non_negative) return kind + " >= 0";
  // The descriptions of validators.h's checks: ">=1", "0..64".
  std::smatch m;
  static const std::regex at_least(":>=(-?[0-9.e+]+)"), between(":(-?[0-9.e+]+)\\.\\.(-?[0-9.e+]+)");
  if (std::regex_search(type, m, at_least)) return kind + " >= " + m[1].str();
  if (std::regex_search(type, m, between)) return kind + " from " + m[1].str() + " to " + m[2].str();
  return kind;
}

// CLI11's own messages for an option, "NAME: ..." or "... NAME = VALUE",
// in snnsim's form.
std::string rewrite_option_message(const CLI::App* cmd, const std::string& what) {
  std::smatch m;
  static const std::regex range("^(\\S+): Value (.*) not in range (\\S+) to (\\S+)$");
  static const std::regex member("^(\\S+): (.*) not in \\{(.*)\\}$");
  static const std::regex convert("^Could not convert: (\\S+) = (.*)$");
  static const std::regex allowed("^The value (.*) is not an allowed value for (\\S+)$");
  static const std::regex missing("^(\\S+): (\\d+) required (\\S+) missing$");
  static const std::regex at_most("^(\\S+): At Most (\\d+) required but received (\\d+)$");
  static const std::regex flag_value("^(\\S+): Should be true/false or a number$");
  if (std::regex_match(what, m, range)) {
    const CLI::Option* opt = find_option(cmd, m[1]);
    std::string rule = rule_of(opt);
    if (rule.find_first_of("<>") == std::string::npos) {  // a Range(min, max)
      const std::string kind = rule == "a whole number" ? rule : "a number";
      rule = std::strtod(m[4].str().c_str(), nullptr) > 1e300 ? kind + " >= " + number_text(m[3])
                                                               : kind + " from " + number_text(m[3]) + " to " +
                                                                     number_text(m[4]);
    }
    return m[1].str() + ": expected " + rule + ", got '" + m[2].str() + "'";
  }
  if (std::regex_match(what, m, member)) {
    const auto allowed_values = CLI::detail::split(m[3].str(), ',');
    const std::string near = nearest_name(m[2], allowed_values);
    return m[1].str() + ": expected " + either(allowed_values) + ", got '" + m[2].str() + "'" +
           (near.empty() ? "" : " (did you mean '" + near + "'?)");
  }
  if (std::regex_match(what, m, convert)) {
    return m[1].str() + ": expected " + rule_of(find_option(cmd, m[1])) + ", got '" + m[2].str() + "'";
  }
  if (std::regex_match(what, m, allowed)) {
    return m[2].str() + ": expected " + rule_of(find_option(cmd, m[2])) + ", got '" + m[1].str() + "'";
  }
  if (std::regex_match(what, m, missing)) {
    return m[1].str() + ": expected " + rule_of(find_option(cmd, m[1])) + " after it, got nothing";
  }
  if (std::regex_match(what, m, at_most)) {
    return m[1].str() + ": given " + m[3].str() + " times; give it " +
           (m[2].str() == "1" ? std::string("once") : "at most " + m[2].str() + " times");
  }
  if (std::regex_match(what, m, flag_value)) return m[1].str() + ": a flag takes no value (or true/false)";
  return what;
}

}  // namespace

std::string describe_parse_error(const CLI::App& app, const CLI::ParseError& error,
                                 const std::vector<std::string>& args) {
  const Walk w = walk(app, args);
  std::string msg;
  if (!w.problem.empty()) {
    msg = w.problem;
  } else if (dynamic_cast<const CLI::RequiredError*>(&error) != nullptr &&
             std::string(error.what()).rfind("A subcommand", 0) == 0) {
    msg = "a subcommand is required: " + either(command_names(app)) + " (see snnsim --help)";
  } else if (dynamic_cast<const CLI::FileError*>(&error) != nullptr) {
    // "PATH was not readable (missing?)": --config's file.
    std::string what = error.what();
    const std::string tail = " was not readable (missing?)";
    if (what.size() > tail.size() && what.compare(what.size() - tail.size(), tail.size(), tail) == 0) {
      const std::string path = what.substr(0, what.size() - tail.size());
      std::ifstream probe(path);
      const int err = errno;
      msg = "--config: '" + path + "' is not readable (" + (probe ? std::string("not a file") : std::strerror(err)) +
            ")";
    } else {
      msg = what;
    }
  } else if (dynamic_cast<const CLI::ConfigError*>(&error) != nullptr) {
    std::string what = error.what();
    const std::string lead = "INI was not able to parse ";
    msg = what.rfind(lead, 0) == 0 ? "config: no option '" + what.substr(lead.size()) + "'" : what;
  } else if (dynamic_cast<const CLI::RequiredError*>(&error) != nullptr) {
    msg = std::string(error.what()) + " (see '" + command_path(w.cmd) + " --help')";
  } else {
    msg = rewrite_option_message(w.cmd, error.what());
    // A value from --config rather than the command line: say where.
    const size_t colon = msg.find(": ");
    const CLI::Option* opt = colon == std::string::npos ? nullptr : find_option(w.cmd, msg.substr(0, colon));
    const CLI::Option* config = app.get_config_ptr();
    if (opt != nullptr && w.cmd != &app && std::find(w.given.begin(), w.given.end(), opt) == w.given.end() &&
        config != nullptr && !config->results().empty() && !config->results().front().empty()) {
      msg = "config '" + config->results().front() + "': [" + w.cmd->get_name() + "] " + msg.substr(2);
    }
  }
  // One line, whatever a message holds.
  for (char& c : msg) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return msg;
}

}  // namespace snn::app
