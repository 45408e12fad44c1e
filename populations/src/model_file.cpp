// The population model file: one JSON tree (TOML converted), read key by
// key with the entry named in every message, quantities checked for their
// dimension.

#include "snn/populations/model_file.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

#include "snn/core/error.h"
#include "snn/core/text_file.h"
#include "snn/graph/detail/text_document.h"
#include "snn/populations/quantity.h"

namespace snn::populations {

using nlohmann::json;

namespace {

std::string shown(const json& v) {
  const std::string s = v.dump();
  return s.size() > 60 ? s.substr(0, 60) + "..." : s;
}

// An error inside a parameter's own definition, named by the parameter
// rather than by the entry that used it.
struct ParameterError : Error {
  using Error::Error;
};

// The model's [parameters]: named numbers or expressions (quantity.h),
// evaluated on first use so that they may refer to each other in any order;
// `set` replaces some of them (a sweep's point, `snnsim simulate --set`).
class Parameters {
 public:
  Parameters(const json* table, std::string where) : where_(std::move(where)) {
    if (!table) return;
    if (!table->is_object()) throw Error(where_ + ": expected a table of named values, got " + shown(*table));
    for (const auto& [name, value] : table->items()) {
      check_name(name);
      if (!value.is_number() && !value.is_string()) {
        throw Error(where_ + ", '" + name + "': expected a number or an expression such as \"0.1 mV\", got " +
                    shown(value));
      }
      text_[name] = value.is_string() ? value.get<std::string>() : value.dump();
    }
  }

  // Replaces `name`'s value; it must be one of the file's parameters.
  void set(const std::string& name, const std::string& text) {
    if (!text_.count(name)) {
      std::string known;
      for (const auto& [n, t] : text_) known += (known.empty() ? "" : ", ") + n;
      throw Error(where_ + " has no '" + name + "' to set" +
                  (known.empty() ? std::string(" (the model defines none)") : " (it defines " + known + ")"));
    }
    text_[name] = text;
  }

  const std::map<std::string, std::string>& texts() const { return text_; }

  bool lookup(const std::string& name, Quantity& out) const {
    const auto it = text_.find(name);
    if (it == text_.end()) return false;
    if (const auto v = value_.find(name); v != value_.end()) {
      out = v->second;
      return true;
    }
    if (std::find(active_.begin(), active_.end(), name) != active_.end()) {
      std::string chain;
      for (const auto& a : active_) chain += a + " -> ";
      throw ParameterError(where_ + ": '" + name + "' is defined through itself (" + chain + name + ")");
    }
    active_.push_back(name);
    try {
      out = evaluate_expression(it->second, [this](const std::string& n, Quantity& q) { return lookup(n, q); });
    } catch (const ParameterError&) {
      active_.clear();
      throw;
    } catch (const Error& e) {
      active_.clear();
      throw ParameterError(where_ + ", '" + name + "': " + e.what());
    }
    active_.pop_back();
    value_[name] = out;
    return true;
  }

 private:
  void check_name(const std::string& name) const {
    const bool ok = !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_') &&
                    std::all_of(name.begin(), name.end(),
                                [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
    if (!ok) throw Error(where_ + ": '" + name + "' is not a name (letters, digits and _, not first a digit)");
    if (is_unit(name)) throw Error(where_ + ": '" + name + "' is a unit and cannot name a parameter");
  }

  std::string where_;
  std::map<std::string, std::string> text_;
  mutable std::map<std::string, Quantity> value_;
  mutable std::vector<std::string> active_;
};

// One entry of the file (the whole file, a population, a projection, ...).
struct Entry {
  const json& j;
  std::string where;  // "model 'x.toml', population 'E'"
  const Parameters& params;

  Entry child(const json& v, const std::string& w) const { return Entry{v, w, params}; }

  [[noreturn]] void fail(const std::string& what) const { throw Error(where + ": " + what); }

  bool has(const std::string& key) const { return j.contains(key); }
  const json& at(const std::string& key) const {
    if (!j.contains(key)) fail("'" + key + "' is missing");
    return j.at(key);
  }
  void only(const std::set<std::string>& keys) const {
    if (!j.is_object()) fail("expected a table, got " + shown(j));
    for (const auto& [key, value] : j.items()) {
      if (keys.count(key)) continue;
      std::string list;
      for (const auto& k : keys) list += (list.empty() ? "" : ", ") + k;
      fail("unknown key '" + key + "' (expected " + list + ")");
    }
  }
  std::string text(const std::string& key) const {
    const json& v = at(key);
    if (!v.is_string()) fail("'" + key + "' must be a string, got " + shown(v));
    return v.get<std::string>();
  }
  // An integer, or an expression giving a whole plain number.
  int64_t integer(const std::string& key) const {
    const json& v = at(key);
    if (v.is_number_integer()) return v.get<int64_t>();
    if (!v.is_string()) fail("'" + key + "' must be an integer, got " + shown(v));
    double x = quantity_of(v, key, Kind::kNumber);
    // epsilon * N may round to 199.99999999999997: within 1e-9 is whole.
    if (std::fabs(x - std::round(x)) <= 1e-9 * std::max(1.0, std::fabs(x))) x = std::round(x);
    if (x != std::floor(x) || std::fabs(x) > 9007199254740992.0) {
      fail("'" + key + "' must be a whole number, but '" + v.get<std::string>() + "' is " + shown(json(x)));
    }
    return static_cast<int64_t>(x);
  }
  bool boolean(const std::string& key) const {
    const json& v = at(key);
    if (!v.is_boolean()) fail("'" + key + "' must be true or false, got " + shown(v));
    return v.get<bool>();
  }
  // A number in the kind's unit, or an expression ("1.5 ms", "-g * J").
  double quantity(const std::string& key, Kind kind) const { return quantity_of(at(key), key, kind); }
  double quantity_of(const json& v, const std::string& key, Kind kind) const {
    if (v.is_number()) {
      const double x = v.get<double>();
      if (!std::isfinite(x)) fail("'" + key + "' must be finite");
      return x;
    }
    if (!v.is_string()) {
      fail("'" + key + "' must be " + kind_name(kind) + ", a number or a string such as \"1.5 ms\"; got " + shown(v));
    }
    const std::string text = v.get<std::string>();
    Quantity q;
    try {
      q = evaluate_expression(text, [this](const std::string& n, Quantity& out) { return params.lookup(n, out); });
    } catch (const ParameterError&) {
      throw;  // names the parameter itself
    } catch (const Error& e) {
      fail("'" + key + "': " + e.what());
    }
    if (!q.dimensionless() && q.dim != dimension_of(kind)) {
      fail("'" + key + "': '" + text + "' is " + dimension_name(q.dim) + ", but '" + key + "' is " + kind_name(kind));
    }
    return value_as(q, kind);
  }
  // A constant, or {distribution = "normal", mean, std} / {distribution = "uniform", low, high}.
  Distribution distribution(const std::string& key, Kind dim) const {
    const json& v = at(key);
    if (!v.is_object()) return Distribution::constant(quantity(key, dim));
    const Entry d = child(v, where + ", '" + key + "'");
    const std::string kind = d.text("distribution");
    if (kind == "normal") {
      d.only({"distribution", "mean", "std"});
      return Distribution::normal(d.quantity("mean", dim), d.quantity("std", dim));
    }
    if (kind == "uniform") {
      d.only({"distribution", "low", "high"});
      return Distribution::uniform(d.quantity("low", dim), d.quantity("high", dim));
    }
    d.fail("unknown distribution '" + kind + "' (expected normal or uniform)");
  }
  std::vector<std::string> names(const std::string& key) const {
    const json& v = at(key);
    if (v.is_string()) return {v.get<std::string>()};
    if (v.is_array() && std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_string(); })) {
      return v.get<std::vector<std::string>>();
    }
    fail("'" + key + "' must be a population name or a list of them, got " + shown(v));
  }
  const json& list(const std::string& key) const {
    const json& v = at(key);
    if (!v.is_array()) fail("'" + key + "' must be a list of tables ([[" + key + "]] in TOML), got " + shown(v));
    return v;
  }
};

Kind kind_of_parameter(const std::string& name) {
  if (name == "dt" || name == "tau_m" || name == "t_ref" || name == "tau_syn_ex" || name == "tau_syn_in") {
    return Kind::kTime;
  }
  if (name == "C_m") return Kind::kCapacitance;
  if (name == "I_e") return Kind::kCurrent;
  return Kind::kPotential;  // E_L, V_th, V_reset, V_min
}

PopulationSpec read_population(const Entry& e, double dt) {
  const json& j = e.j;
  e.only({"name", "model", "size", "params"});
  PopulationSpec p;
  p.name = e.text("name");
  const Entry named = e.child(j, e.where.substr(0, e.where.rfind(", population ")) + ", population '" + p.name + "'");
  try {
    p.neuron = IafOptions(parse_iaf_model(named.text("model")));
  } catch (const Error& err) {
    named.fail(err.what());
  }
  p.size = named.integer("size");
  if (p.size <= 0) named.fail("'size' must be at least 1, got " + std::to_string(p.size));
  p.neuron.dt(dt);
  if (!named.has("params")) return p;
  const json& params = named.at("params");
  if (!params.is_object()) named.fail("'params' must be a table of NEST parameters, got " + shown(params));
  for (const auto& [key, value] : params.items()) {
    if (key == "dt") named.fail("params: 'dt' is the model's, set at the top of the file");
    if (key == "V_m") {  // the initial potential: a constant or a distribution
      p.v_init = named.child(params, named.where + ", params").distribution("V_m", Kind::kPotential);
      try {
        p.v_init->validate("V_m");
      } catch (const Error& err) {
        named.fail(std::string("params: ") + err.what());
      }
      continue;
    }
    if (key == "I_e" && value.is_array()) {
      std::vector<double> currents;
      for (const auto& x : value) currents.push_back(named.quantity_of(x, "I_e", Kind::kCurrent));
      if (static_cast<int64_t>(currents.size()) != p.size) {
        named.fail("params: 'I_e' lists " + std::to_string(currents.size()) + " currents for " +
                   std::to_string(p.size) + " neurons");
      }
      p.neuron.I_e_neurons(torch::tensor(currents, torch::kDouble));
      continue;
    }
    // The name first: a misspelt name with a unit ("t_rf = '2 ms'") would
    // otherwise be read as a potential and blamed on its unit.
    try {
      check_iaf_parameter_name(p.neuron.model(), key);
    } catch (const Error& err) {
      named.fail(std::string("params: ") + err.what());
    }
    const double v = named.quantity_of(value, key, kind_of_parameter(key));
    try {
      set_iaf_parameter(p.neuron, key, v);
    } catch (const Error& err) {
      named.fail(std::string("params: ") + err.what());
    }
  }
  return p;
}

ProjectionSpec read_projection(const Entry& e, const std::map<std::string, IafModel>& models) {
  e.only({"source", "target", "rule", "indegree", "N", "p", "autapses", "multapses", "weight", "delay"});
  ProjectionSpec pr;
  pr.source = e.text("source");
  pr.target = e.text("target");
  const Entry named = e.child(e.j, e.where + " (" + pr.source + " -> " + pr.target + ")");
  for (const auto& name : {pr.source, pr.target}) {
    if (!models.count(name)) {
      std::string known;
      for (const auto& [n, m] : models) known += (known.empty() ? "" : ", ") + n;
      named.fail("population '" + name + "' is not defined (the model defines " + known + ")");
    }
  }
  ConnectionSpec& c = pr.connection;
  try {
    c.rule = named.has("rule") ? parse_connection_rule(named.text("rule")) : ConnectionRule::kAllToAll;
  } catch (const Error& err) {
    named.fail(err.what());
  }
  const std::map<ConnectionRule, std::string> needs{{ConnectionRule::kFixedIndegree, "indegree"},
                                                    {ConnectionRule::kFixedTotalNumber, "N"},
                                                    {ConnectionRule::kPairwiseBernoulli, "p"}};
  for (const std::string key : {"indegree", "N", "p"}) {
    const auto it = needs.find(c.rule);
    const bool wanted = it != needs.end() && it->second == key;
    if (wanted && !named.has(key)) named.fail("rule " + to_string(c.rule) + " needs '" + key + "'");
    if (!wanted && named.has(key)) named.fail("'" + key + "' is not a parameter of rule " + to_string(c.rule));
  }
  if (named.has("indegree")) c.indegree = named.integer("indegree");
  if (named.has("N")) c.total = named.integer("N");
  if (named.has("p")) {
    c.p = named.quantity("p", Kind::kNumber);
    if (!(c.p >= 0 && c.p <= 1)) named.fail("'p' must be a probability in [0, 1], got " + shown(named.at("p")));
  }
  if (c.indegree < 0) named.fail("'indegree' must be >= 0, got " + std::to_string(c.indegree));
  if (c.total < 0) named.fail("'N' must be >= 0, got " + std::to_string(c.total));
  if (named.has("autapses")) c.autapses = named.boolean("autapses");
  if (named.has("multapses")) c.multapses = named.boolean("multapses");
  // The weight's unit is the target model's: mV jumps (psc_delta) or pA currents (psc_exp).
  const Kind weight_dim = models.at(pr.target) == IafModel::kPscDelta ? Kind::kPotential : Kind::kCurrent;
  pr.synapse.weight = named.has("weight") ? named.distribution("weight", weight_dim) : Distribution::constant(1.0);
  pr.synapse.delay = named.has("delay") ? named.distribution("delay", Kind::kTime) : Distribution::constant(1.0);
  try {
    pr.synapse.weight.validate("weight");
    pr.synapse.delay.validate("delay");
  } catch (const Error& err) {
    named.fail(err.what());
  }
  return pr;
}

}  // namespace

double iaf_parameter_value(IafModel model, const std::string& name, const std::string& text) {
  check_iaf_parameter_name(model, name);
  const Quantity q = evaluate_expression(text);
  try {
    return value_as(q, kind_of_parameter(name));
  } catch (const Error& e) {
    throw Error("'" + text + "' " + e.what());
  }
}

int64_t PopulationModel::steps() const { return static_cast<int64_t>(std::llround(duration_ms / network.dt)); }

PopulationModel parse_population_model(const std::string& text, const std::string& where,
                                       const std::vector<std::pair<std::string, std::string>>& set) {
  json doc = graph::detail::parse_text_document(text, where);
  if (doc.is_object() && doc.contains("nodes") && !doc.contains("population")) {
    throw Error(where + " is a network graph (nodes and edges), not a population model: snnsim train --model FILE "
                        "trains it");
  }
  Parameters params(doc.is_object() && doc.contains("parameters") ? &doc.at("parameters") : nullptr,
                    where + ", parameters");
  for (const auto& [name, value] : set) {
    params.set(name, value);
    doc["parameters"][name] = value;  // the provenance says what ran
  }
  const Entry top{doc, where, params};
  top.only({"dt", "duration", "trials", "seed", "input_seed", "connectivity", "parameters", "population", "projection",
            "poisson", "dc", "record"});
  // Every parameter is evaluated, used or not: a typo fails here.
  for (const auto& [name, t] : params.texts()) {
    Quantity q;
    params.lookup(name, q);
  }
  PopulationModel m;
  m.json = doc.dump();
  PopulationNetworkSpec& net = m.network;
  net.dt = top.has("dt") ? top.quantity("dt", Kind::kTime) : 0.1;
  if (!(net.dt > 0)) top.fail("'dt' must be a positive time, got " + shown(top.at("dt")));
  const double grid = net.dt / 0.1;
  if (std::fabs(grid - std::round(grid)) > 1e-9 * std::max(1.0, grid)) {
    top.fail("'dt' must be a multiple of 0.1 ms, got " + shown(top.at("dt")));
  }
  m.duration_ms = top.quantity("duration", Kind::kTime);
  const double steps = m.duration_ms / net.dt;
  if (!(steps >= 1) || std::fabs(steps - std::round(steps)) > 1e-9 * steps) {
    top.fail("'duration' must be a positive whole number of steps of dt = " + shown(json(net.dt)) + " ms, got " +
             shown(top.at("duration")));
  }
  if (top.has("trials")) m.trials = top.integer("trials");
  if (m.trials < 1) top.fail("'trials' must be at least 1, got " + std::to_string(m.trials));
  for (const char* key : {"seed", "input_seed"}) {
    if (!top.has(key)) continue;
    const int64_t v = top.integer(key);
    if (v < 0) top.fail(std::string("'") + key + "' must be >= 0, got " + std::to_string(v));
    (std::string(key) == "seed" ? m.seed : m.input_seed) = static_cast<uint64_t>(v);
  }

  if (top.has("connectivity")) {
    const std::string c = top.text("connectivity");
    if (c != "shared" && c != "per_trial") {
      top.fail("'connectivity' must be \"shared\" (every trial on one network) or \"per_trial\" (trial b drawn "
               "with seed + b), got '" + c + "'");
    }
    m.connectivity_per_trial = c == "per_trial";
  }

  std::map<std::string, IafModel> models;
  const json& pops = top.list("population");
  for (size_t i = 0; i < pops.size(); ++i) {
    const PopulationSpec p = read_population(top.child(pops[i], where + ", population " + std::to_string(i)), net.dt);
    if (models.count(p.name)) top.fail("population '" + p.name + "' is defined twice");
    models[p.name] = p.neuron.model();
    net.populations.push_back(p);
  }
  if (top.has("projection")) {
    const json& prs = top.list("projection");
    for (size_t i = 0; i < prs.size(); ++i) {
      net.projections.push_back(read_projection(top.child(prs[i], where + ", projection " + std::to_string(i)), models));
    }
  }
  // A device entry ([[poisson]], [[dc]]): its keys checked, its name (by
  // default the table's name and index), and its target population.
  struct Device {
    std::string name, target;
    Entry named;  // the entry, named by the device
  };
  const auto device = [&](const std::string& table, size_t i, const std::string& label,
                          const std::set<std::string>& keys) {
    const json& j = top.list(table)[i];
    const Entry e = top.child(j, where + ", " + table + " " + std::to_string(i));
    e.only(keys);
    const std::string name = e.has("name") ? e.text("name") : table + std::to_string(i);
    Device d{name, "", top.child(j, where + ", " + label + " '" + name + "'")};
    d.target = d.named.text("target");
    if (!models.count(d.target)) d.named.fail("population '" + d.target + "' is not defined");
    return d;
  };
  for (size_t i = 0; top.has("poisson") && i < top.list("poisson").size(); ++i) {
    const Device dev = device("poisson", i, "Poisson drive", {"name", "target", "rate", "weight"});
    const Entry& named = dev.named;
    PoissonDriveSpec d;
    d.name = dev.name;
    d.target = dev.target;
    d.rate_hz = named.quantity("rate", Kind::kRate);
    if (d.rate_hz < 0) named.fail("'rate' must be >= 0 Hz, got " + shown(named.at("rate")));
    d.weight = named.quantity("weight", models.at(d.target) == IafModel::kPscDelta ? Kind::kPotential : Kind::kCurrent);
    net.drives.push_back(d);
  }
  for (size_t i = 0; top.has("dc") && i < top.list("dc").size(); ++i) {
    const Device dev = device("dc", i, "DC current", {"name", "target", "amplitude", "start", "stop", "delay"});
    const Entry& named = dev.named;
    CurrentSpec c;
    c.name = dev.name;
    c.target = dev.target;
    c.amplitude_pa = named.quantity("amplitude", Kind::kCurrent);
    if (named.has("start")) c.start_ms = named.quantity("start", Kind::kTime);
    if (named.has("stop")) c.stop_ms = named.quantity("stop", Kind::kTime);
    if (named.has("delay")) {  // 0 would mean the default (one step): refused as written
      c.delay_ms = named.quantity("delay", Kind::kTime);
      if (!(c.delay_ms > 0)) named.fail("'delay' must be at least one step of dt, got " + shown(named.at("delay")));
    }
    net.currents.push_back(c);
  }
  if (top.has("record")) {
    const Entry r = top.child(top.at("record"), where + ", record");
    r.only({"spikes", "v", "v_neurons"});
    if (r.has("spikes")) m.record.record_spikes = r.names("spikes");
    if (r.has("v")) m.record.record_v = r.names("v");
    m.record.voltmeter_neurons = r.has("v_neurons") ? r.integer("v_neurons") : (m.record.record_v.empty() ? 0 : 1);
    for (const auto& list : {m.record.record_spikes, m.record.record_v}) {
      for (const auto& name : list) {
        if (!models.count(name)) r.fail("population '" + name + "' is not defined");
      }
    }
    if (!m.record.record_v.empty() && m.record.voltmeter_neurons < 1) {
      r.fail("'v_neurons' must be at least 1, got " + std::to_string(m.record.voltmeter_neurons));
    }
    for (const auto& name : m.record.record_v) {  // (was cut to the population's size without a word)
      for (const auto& pop : net.populations) {
        if (pop.name == name && m.record.voltmeter_neurons > pop.size) {
          r.fail("'v_neurons' = " + std::to_string(m.record.voltmeter_neurons) + " is more than population '" + name +
                 "''s " + std::to_string(pop.size) + " neurons");
        }
      }
    }
  }
  try {
    net.validate();
  } catch (const Error& err) {
    top.fail(err.what());
  }
  m.record.steps = m.steps();
  m.record.trials = m.trials;
  m.record.input_seed = m.input_seed;
  return m;
}

PopulationModel read_population_model(const std::string& path,
                                      const std::vector<std::pair<std::string, std::string>>& set) {
  const std::string where = "model '" + path + "'";
  return parse_population_model(read_text_file(path, where), where, set);
}

}  // namespace snn::populations
