// The population model file: one JSON tree (TOML converted), read key by
// key with the entry named in every message, quantities checked for their
// dimension.

#include "snn/populations/model_file.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

#include "snn/core/error.h"
#include "snn/graph/detail/text_document.h"

namespace snn::populations {

using nlohmann::json;

namespace {

enum class Dim { kTime, kPotential, kCurrent, kCapacitance, kRate };

const char* dim_name(Dim d) {
  switch (d) {
    case Dim::kTime:
      return "a time (ms)";
    case Dim::kPotential:
      return "a potential (mV)";
    case Dim::kCurrent:
      return "a current (pA)";
    case Dim::kCapacitance:
      return "a capacitance (pF)";
    case Dim::kRate:
      return "a rate (Hz)";
  }
  return "?";
}

// Each unit's dimension and factor to the dimension's unit.
const std::map<std::string, std::pair<Dim, double>>& units() {
  static const std::map<std::string, std::pair<Dim, double>> u{
      {"ms", {Dim::kTime, 1.0}},        {"s", {Dim::kTime, 1000.0}},        {"us", {Dim::kTime, 1e-3}},
      {"mV", {Dim::kPotential, 1.0}},   {"V", {Dim::kPotential, 1000.0}},   {"uV", {Dim::kPotential, 1e-3}},
      {"pA", {Dim::kCurrent, 1.0}},     {"nA", {Dim::kCurrent, 1000.0}},    {"uA", {Dim::kCurrent, 1e6}},
      {"pF", {Dim::kCapacitance, 1.0}}, {"nF", {Dim::kCapacitance, 1000.0}},
      {"Hz", {Dim::kRate, 1.0}},        {"kHz", {Dim::kRate, 1000.0}}};
  return u;
}

std::string shown(const json& v) {
  const std::string s = v.dump();
  return s.size() > 60 ? s.substr(0, 60) + "..." : s;
}

// One entry of the file (the whole file, a population, a projection, ...).
struct Entry {
  const json& j;
  std::string where;  // "model 'x.toml', population 'E'"

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
  int64_t integer(const std::string& key) const {
    const json& v = at(key);
    if (!v.is_number_integer()) fail("'" + key + "' must be an integer, got " + shown(v));
    return v.get<int64_t>();
  }
  bool boolean(const std::string& key) const {
    const json& v = at(key);
    if (!v.is_boolean()) fail("'" + key + "' must be true or false, got " + shown(v));
    return v.get<bool>();
  }
  // A number in dim's unit, or a string "<number> <unit>".
  double quantity(const std::string& key, Dim dim) const { return quantity_of(at(key), key, dim); }
  double quantity_of(const json& v, const std::string& key, Dim dim) const {
    if (v.is_number()) {
      const double x = v.get<double>();
      if (!std::isfinite(x)) fail("'" + key + "' must be finite");
      return x;
    }
    if (!v.is_string()) fail("'" + key + "' must be " + dim_name(dim) + ", a number or a string such as \"1.5 ms\"; got " + shown(v));
    const std::string s = v.get<std::string>();
    std::istringstream in(s);
    double x = 0;
    std::string unit, rest;
    if (!(in >> x) || !(in >> unit) || (in >> rest) || !std::isfinite(x)) {
      fail("'" + key + "': '" + s + "' is not a number and a unit such as \"1.5 ms\"");
    }
    const auto it = units().find(unit);
    if (it == units().end()) fail("'" + key + "': '" + s + "' has an unknown unit '" + unit + "'");
    if (it->second.first != dim) {
      fail("'" + key + "': '" + s + "' is " + dim_name(it->second.first) + ", but '" + key + "' is " + dim_name(dim));
    }
    return x * it->second.second;
  }
  // A constant, or {distribution = "normal", mean, std} / {distribution = "uniform", low, high}.
  Distribution distribution(const std::string& key, Dim dim) const {
    const json& v = at(key);
    if (!v.is_object()) return Distribution::constant(quantity(key, dim));
    const Entry d{v, where + ", '" + key + "'"};
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

Dim dim_of_parameter(const std::string& name) {
  if (name == "dt" || name == "tau_m" || name == "t_ref" || name == "tau_syn_ex" || name == "tau_syn_in") {
    return Dim::kTime;
  }
  if (name == "C_m") return Dim::kCapacitance;
  if (name == "I_e") return Dim::kCurrent;
  return Dim::kPotential;  // E_L, V_th, V_reset, V_min
}

PopulationSpec read_population(const json& j, const std::string& where, size_t index, double dt) {
  const Entry e{j, where + ", population " + std::to_string(index)};
  e.only({"name", "model", "size", "params"});
  PopulationSpec p;
  p.name = e.text("name");
  const Entry named{j, where + ", population '" + p.name + "'"};
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
      p.v_init = Entry{params, named.where + ", params"}.distribution("V_m", Dim::kPotential);
      try {
        p.v_init->validate("V_m");
      } catch (const Error& err) {
        named.fail(std::string("params: ") + err.what());
      }
      continue;
    }
    if (key == "I_e" && value.is_array()) {
      std::vector<double> currents;
      for (const auto& x : value) currents.push_back(named.quantity_of(x, "I_e", Dim::kCurrent));
      if (static_cast<int64_t>(currents.size()) != p.size) {
        named.fail("params: 'I_e' lists " + std::to_string(currents.size()) + " currents for " +
                   std::to_string(p.size) + " neurons");
      }
      p.neuron.I_e_neurons(torch::tensor(currents, torch::kDouble));
      continue;
    }
    const double v = named.quantity_of(value, key, dim_of_parameter(key));
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
  const Entry named{e.j, e.where + " (" + pr.source + " -> " + pr.target + ")"};
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
    if (!named.at("p").is_number()) named.fail("'p' must be a number, got " + shown(named.at("p")));
    c.p = named.at("p").get<double>();
    if (!(c.p >= 0 && c.p <= 1)) named.fail("'p' must be a probability in [0, 1], got " + shown(named.at("p")));
  }
  if (c.indegree < 0) named.fail("'indegree' must be >= 0, got " + std::to_string(c.indegree));
  if (c.total < 0) named.fail("'N' must be >= 0, got " + std::to_string(c.total));
  if (named.has("autapses")) c.autapses = named.boolean("autapses");
  if (named.has("multapses")) c.multapses = named.boolean("multapses");
  // The weight's unit is the target model's: mV jumps (psc_delta) or pA currents (psc_exp).
  const Dim weight_dim = models.at(pr.target) == IafModel::kPscDelta ? Dim::kPotential : Dim::kCurrent;
  pr.synapse.weight = named.has("weight") ? named.distribution("weight", weight_dim) : Distribution::constant(1.0);
  pr.synapse.delay = named.has("delay") ? named.distribution("delay", Dim::kTime) : Distribution::constant(1.0);
  try {
    pr.synapse.weight.validate("weight");
    pr.synapse.delay.validate("delay");
  } catch (const Error& err) {
    named.fail(err.what());
  }
  return pr;
}

}  // namespace

int64_t PopulationModel::steps() const { return static_cast<int64_t>(std::llround(duration_ms / network.dt)); }

PopulationModel parse_population_model(const std::string& text, const std::string& where) {
  const json doc = graph::detail::parse_text_document(text, where);
  const Entry top{doc, where};
  top.only({"dt", "duration", "trials", "seed", "input_seed", "population", "projection", "poisson", "record"});
  PopulationModel m;
  m.json = doc.dump();
  PopulationNetworkSpec& net = m.network;
  net.dt = top.has("dt") ? top.quantity("dt", Dim::kTime) : 0.1;
  if (!(net.dt > 0)) top.fail("'dt' must be a positive time, got " + shown(top.at("dt")));
  const double grid = net.dt / 0.1;
  if (std::fabs(grid - std::round(grid)) > 1e-9 * std::max(1.0, grid)) {
    top.fail("'dt' must be a multiple of 0.1 ms, got " + shown(top.at("dt")));
  }
  m.duration_ms = top.quantity("duration", Dim::kTime);
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

  std::map<std::string, IafModel> models;
  const json& pops = top.list("population");
  for (size_t i = 0; i < pops.size(); ++i) {
    const PopulationSpec p = read_population(pops[i], where, i, net.dt);
    if (models.count(p.name)) top.fail("population '" + p.name + "' is defined twice");
    models[p.name] = p.neuron.model();
    net.populations.push_back(p);
  }
  if (top.has("projection")) {
    const json& prs = top.list("projection");
    for (size_t i = 0; i < prs.size(); ++i) {
      net.projections.push_back(read_projection(Entry{prs[i], where + ", projection " + std::to_string(i)}, models));
    }
  }
  if (top.has("poisson")) {
    const json& drives = top.list("poisson");
    for (size_t i = 0; i < drives.size(); ++i) {
      const Entry e{drives[i], where + ", poisson " + std::to_string(i)};
      e.only({"name", "target", "rate", "weight"});
      PoissonDriveSpec d;
      d.name = e.has("name") ? e.text("name") : "poisson" + std::to_string(i);
      const Entry named{drives[i], where + ", Poisson drive '" + d.name + "'"};
      d.target = named.text("target");
      if (!models.count(d.target)) named.fail("population '" + d.target + "' is not defined");
      d.rate_hz = named.quantity("rate", Dim::kRate);
      if (d.rate_hz < 0) named.fail("'rate' must be >= 0 Hz, got " + shown(named.at("rate")));
      d.weight = named.quantity("weight", models.at(d.target) == IafModel::kPscDelta ? Dim::kPotential : Dim::kCurrent);
      net.drives.push_back(d);
    }
  }
  if (top.has("record")) {
    const Entry r{top.at("record"), where + ", record"};
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

PopulationModel read_population_model(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("model '" + path + "': cannot open it");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_population_model(text, "model '" + path + "'");
}

}  // namespace snn::populations
