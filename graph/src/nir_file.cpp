#include "snn/graph/nir_file.h"

#include <hdf5.h>

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "snn/core/atomic_file.h"
#include "snn/core/build_info.h"
#include "snn/core/detail/hdf5.h"
#include "snn/core/error.h"
#include "snn/core/message_number.h"

namespace snn::graph {
namespace {

using hdf5::check;
using hdf5::Handle;

// The NIR version written, and the major version read.
constexpr const char* kNirVersion = "1.0.8";

// ---- reading ---------------------------------------------------------------

struct Array {
  std::vector<int64_t> dims;
  std::vector<double> values;
};

Handle string_type() {
  Handle t(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(t.get(), H5T_VARIABLE);
  H5Tset_cset(t.get(), H5T_CSET_UTF8);
  return t;
}

struct Reader {
  std::string where;  // "NIR file 'x.nir'"

  [[noreturn]] void fail(const std::string& what) const { throw Error(where + ": " + what); }

  bool has(hid_t loc, const std::string& name) const { return H5Lexists(loc, name.c_str(), H5P_DEFAULT) > 0; }

  Handle dataset(hid_t loc, const std::string& name, const std::string& path) const {
    if (!has(loc, name)) fail("no dataset " + path + "/" + name);
    Handle ds(H5Dopen2(loc, name.c_str(), H5P_DEFAULT), H5Dclose);
    if (!ds.ok()) fail(path + "/" + name + " is not a dataset");
    return ds;
  }

  // Every string of a string dataset (any rank), in storage order.
  std::vector<std::string> strings(hid_t loc, const std::string& name, const std::string& path,
                                   std::vector<int64_t>* dims = nullptr) const {
    Handle ds = dataset(loc, name, path);
    Handle type(H5Dget_type(ds.get()), H5Tclose);
    if (H5Tget_class(type.get()) != H5T_STRING) fail(path + "/" + name + " is not a string");
    Handle space(H5Dget_space(ds.get()), H5Sclose);
    const int rank = H5Sget_simple_extent_ndims(space.get());
    std::vector<hsize_t> d(static_cast<size_t>(std::max(rank, 0)));
    if (rank > 0) H5Sget_simple_extent_dims(space.get(), d.data(), nullptr);
    if (dims) dims->assign(d.begin(), d.end());
    const hssize_t n = H5Sget_simple_extent_npoints(space.get());
    std::vector<std::string> out;
    if (n <= 0) return out;
    if (H5Tis_variable_str(type.get()) > 0) {
      std::vector<char*> raw(static_cast<size_t>(n), nullptr);
      Handle mem = string_type();
      H5Tset_cset(mem.get(), H5Tget_cset(type.get()));  // HDF5 converts no ASCII to UTF-8
      check(H5Dread(ds.get(), mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, raw.data()), where + ": cannot read " + path + "/" + name);
      for (char* s : raw) out.emplace_back(s ? s : "");
      H5Dvlen_reclaim(mem.get(), space.get(), H5P_DEFAULT, raw.data());
    } else {
      const size_t size = H5Tget_size(type.get());
      std::vector<char> raw(static_cast<size_t>(n) * size);
      check(H5Dread(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, raw.data()), where + ": cannot read " + path + "/" + name);
      for (hssize_t i = 0; i < n; ++i) {
        const char* s = raw.data() + i * size;
        out.emplace_back(s, strnlen(s, size));
      }
    }
    return out;
  }

  std::string string(hid_t loc, const std::string& name, const std::string& path) const {
    const auto v = strings(loc, name, path);
    if (v.size() != 1) fail(path + "/" + name + " must be one string");
    return v[0];
  }

  // A numeric dataset (integer or float, any rank) as float64 values.
  Array array(hid_t loc, const std::string& name, const std::string& path) const {
    Handle ds = dataset(loc, name, path);
    Handle type(H5Dget_type(ds.get()), H5Tclose);
    const H5T_class_t cls = H5Tget_class(type.get());
    if (cls != H5T_INTEGER && cls != H5T_FLOAT) fail(path + "/" + name + " is not numeric");
    Handle space(H5Dget_space(ds.get()), H5Sclose);
    const int rank = H5Sget_simple_extent_ndims(space.get());
    std::vector<hsize_t> d(static_cast<size_t>(std::max(rank, 0)));
    if (rank > 0) H5Sget_simple_extent_dims(space.get(), d.data(), nullptr);
    Array a;
    a.dims.assign(d.begin(), d.end());
    a.values.resize(static_cast<size_t>(std::max<hssize_t>(H5Sget_simple_extent_npoints(space.get()), 0)));
    if (!a.values.empty()) {
      check(H5Dread(ds.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, a.values.data()),
            where + ": cannot read " + path + "/" + name);
    }
    for (double v : a.values) {
      if (!std::isfinite(v)) fail(path + "/" + name + " holds NaN or infinity");
    }
    return a;
  }

  double scalar(hid_t loc, const std::string& name, const std::string& path) const {
    const Array a = array(loc, name, path);
    if (a.values.size() != 1) fail(path + "/" + name + " must hold one value, it has " + std::to_string(a.values.size()));
    return a.values[0];
  }

  // (Whole numbers beyond +-2^62 are refused here: converting them to
  // int64 is undefined, and no size or count comes near.)
  int64_t integer(hid_t loc, const std::string& name, const std::string& path) const {
    const double v = scalar(loc, name, path);
    if (v != std::floor(v)) fail(path + "/" + name + " must be a whole number, got " + std::to_string(v));
    if (std::fabs(v) > 4.6e18) fail(path + "/" + name + " is out of range: " + message_number(v));
    return static_cast<int64_t>(v);
  }

  std::vector<int64_t> ints(hid_t loc, const std::string& name, const std::string& path) const {
    const Array a = array(loc, name, path);
    std::vector<int64_t> out;
    for (double v : a.values) {
      if (v != std::floor(v)) fail(path + "/" + name + " must hold whole numbers");
      if (std::fabs(v) > 4.6e18) fail(path + "/" + name + " holds a value out of range: " + message_number(v));
      out.push_back(static_cast<int64_t>(v));
    }
    return out;
  }

  // A window parameter: one value for both dims, or two.
  std::vector<int64_t> pair(hid_t loc, const std::string& name, const std::string& path) const {
    Handle ds = dataset(loc, name, path);
    Handle type(H5Dget_type(ds.get()), H5Tclose);
    if (H5Tget_class(type.get()) == H5T_STRING) {
      fail(path + "/" + name + " is '" + string(loc, name, path) + "': " +
           (name == "padding" ? "only numeric padding is read (give it in pixels)"
                              : name + " must be numeric (one whole number, or two)"));
    }
    std::vector<int64_t> v = ints(loc, name, path);
    if (v.size() == 1) v.push_back(v[0]);
    if (v.size() != 2) fail(path + "/" + name + " must hold 1 or 2 values, it has " + std::to_string(v.size()));
    return v;
  }

  torch::Tensor tensor(hid_t loc, const std::string& name, const std::string& path, torch::ScalarType dtype) const {
    Array a = array(loc, name, path);
    return torch::tensor(a.values, torch::kDouble).reshape(a.dims).to(dtype);
  }
};

// All values equal: the one value; else nullopt.
std::optional<double> uniform(const Array& a) {
  if (a.values.empty()) return std::nullopt;
  for (double v : a.values) {
    if (v != a.values[0]) return std::nullopt;
  }
  return a.values[0];
}

bool near(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max(1.0, std::fabs(b)); }

// snnsim's own record of a neuron node's discrete parameters (written by
// write_nir), when present in the node's metadata.
struct SnnsimMeta {
  std::optional<std::string> model, surrogate;
  std::optional<std::string> encoding;  // an Input's (snnsim_encoding); absent: rate coded
  std::optional<double> tau, w;
  std::optional<int64_t> decay_input, detach_reset;
  // The general parameters in steps as snnsim wrote them (snnsim_steps_<key>),
  // so that a time constant survives the round trip through seconds exactly.
  std::map<std::string, Array> steps;
};

SnnsimMeta read_meta(const Reader& r, hid_t node, const std::string& path) {
  SnnsimMeta m;
  if (!r.has(node, "metadata")) return m;
  Handle g(H5Gopen2(node, "metadata", H5P_DEFAULT), H5Gclose);
  if (!g.ok()) return m;
  const std::string p = path + "/metadata";
  if (r.has(g.get(), "snnsim_model")) m.model = r.string(g.get(), "snnsim_model", p);
  if (r.has(g.get(), "snnsim_surrogate")) m.surrogate = r.string(g.get(), "snnsim_surrogate", p);
  if (r.has(g.get(), "snnsim_encoding")) m.encoding = r.string(g.get(), "snnsim_encoding", p);
  if (r.has(g.get(), "snnsim_tau")) m.tau = r.scalar(g.get(), "snnsim_tau", p);
  for (const auto& key : hdf5::members(g.get())) {
    if (key.rfind("snnsim_steps_", 0) == 0) m.steps[key.substr(13)] = r.array(g.get(), key, p);
  }
  if (r.has(g.get(), "snnsim_w")) m.w = r.scalar(g.get(), "snnsim_w", p);
  if (r.has(g.get(), "snnsim_decay_input")) m.decay_input = r.integer(g.get(), "snnsim_decay_input", p);
  if (r.has(g.get(), "snnsim_detach_reset")) m.detach_reset = r.integer(g.get(), "snnsim_detach_reset", p);
  return m;
}

// The one place that says how a general parameter's units differ between
// NIR and snnsim: time constants are seconds there and steps here (divide
// by dt on reading), an IF's r is per second there and per step here
// (multiply by dt); the rest are the same numbers.
enum class Unit { kSame, kTime, kPerTime };
Unit unit_of(NodeKind kind, const std::string& key) {
  if (key == "tau" || key == "tau_syn" || key == "tau_mem") return Unit::kTime;
  if (key == "r" && kind == NodeKind::kIF) return Unit::kPerTime;
  return Unit::kSame;
}
double to_steps(Unit u, double x, double dt) { return u == Unit::kTime ? x / dt : u == Unit::kPerTime ? x * dt : x; }
torch::Tensor from_steps(Unit u, const torch::Tensor& x, double dt) {
  return u == Unit::kTime ? x * dt : u == Unit::kPerTime ? x / dt : x;
}

// The general parameters of a neuron node, converted to steps (graph.h:
// Node::arrays); a value common to all neurons becomes a 0-dim tensor.
// `nir` holds them in NIR's units, all of one shape.
void set_general(const std::map<std::string, Array>& nir, const SnnsimMeta& m, double dt, Node& n) {
  for (const auto& key : dynamics_keys(n.kind)) {
    const Array& a = nir.at(key);
    const Unit u = unit_of(n.kind, key);
    std::vector<double> v = a.values;
    for (double& x : v) x = to_steps(u, x, dt);
    const auto exact = m.steps.find(key);  // snnsim's own value in steps, when it agrees
    if (u != Unit::kSame && exact != m.steps.end() && exact->second.values.size() == v.size()) {
      bool agrees = true;
      for (size_t i = 0; i < v.size(); ++i) agrees &= near(exact->second.values[i], v[i]);
      if (agrees) v = exact->second.values;
    }
    const Array conv{a.dims, v};
    n.arrays[key] = uniform(conv) ? torch::tensor(*uniform(conv), torch::kDouble)
                                  : torch::tensor(v, torch::kDouble).reshape(a.dims);
  }
}

// NIR's parameters of a neuron node, by name, in NIR's units: every key of
// dynamics_keys, the optional ones defaulted as the nir package does
// (v_reset 0, w_in 1); all of one shape.
std::map<std::string, Array> read_nir_params(const Reader& r, hid_t g, const std::string& path, NodeKind kind) {
  std::map<std::string, Array> a;
  const auto& keys = dynamics_keys(kind);
  const std::string& first = keys.front();
  for (const auto& key : keys) {
    if (r.has(g, key)) {
      a[key] = r.array(g, key, path);
    } else if (key == "v_reset" || key == "w_in") {
      a[key] = Array{};  // filled below, once the shape is known
    } else {
      r.fail("no dataset " + path + "/" + key + " (a " + to_string(kind) + " node has " + key + ")");
    }
  }
  const std::vector<int64_t> dims = a.at(first).dims;
  for (auto& [key, arr] : a) {
    if (arr.values.empty() && arr.dims.empty()) {
      int64_t count = 1;
      for (auto d : dims) count *= d;
      arr = Array{dims, std::vector<double>(static_cast<size_t>(count), key == "w_in" ? 1.0 : 0.0)};
    }
    // The nir package broadcasts a scalar w_in; take one value as every neuron's.
    if (arr.dims != dims && arr.values.size() == 1) {
      arr = Array{dims, std::vector<double>(a.at(first).values.size(), arr.values[0])};
    }
    if (arr.dims != dims) {
      r.fail(path + "/" + key + " has shape " + shape_str(arr.dims) + " but " + first + " has " + shape_str(dims));
    }
  }
  return a;
}

// Surrogate and detach_reset from snnsim's metadata (training options that
// NIR has no word for; other tools' files keep snnsim's defaults).
void read_training_options(const Reader& r, const SnnsimMeta& m, const std::string& path, NeuronParams& p) {
  if (m.detach_reset) p.detach_reset = *m.detach_reset != 0;
  if (m.surrogate) {
    try {
      p.surrogate = Surrogate::parse(*m.surrogate);
    } catch (const Error& e) {
      r.fail(path + "/metadata/snnsim_surrogate: " + e.what());
    }
  }
}

// LIF and IF: SpikingJelly's discrete form when the file's parameters fit it
// (one value for all neurons, v_leak = v_reset, r = 1 or tau / dt; IF:
// r dt = 1), which runs on the fused kernels; the general form otherwise.
void read_spiking(const Reader& r, hid_t g, const std::string& path, double dt, Node& n) {
  const bool lif = n.kind == NodeKind::kLIF;
  const std::map<std::string, Array> a = read_nir_params(r, g, path, n.kind);
  n.shape = a.at("v_threshold").dims;
  const SnnsimMeta m = read_meta(r, g, path);
  NeuronParams& p = n.neuron;
  read_training_options(r, m, path, p);
  bool all_uniform = true;
  for (const auto& [key, arr] : a) all_uniform &= uniform(arr).has_value();
  const auto general = [&]() {
    p.model = lif ? NeuronModel::kLIF : NeuronModel::kIF;
    set_general(a, m, dt, n);
  };
  if (!all_uniform) return general();
  p.v_threshold = *uniform(a.at("v_threshold"));
  p.v_reset = *uniform(a.at("v_reset"));
  const double rr = *uniform(a.at("r"));
  if (!lif) {
    p.model = NeuronModel::kIF;
    if (!near(rr * dt, 1.0)) general();  // an input gain r dt other than 1
    return;
  }
  const double tau = *uniform(a.at("tau")), v_leak = *uniform(a.at("v_leak"));
  const double tau_steps = tau / dt;  // the time constant the neurons decay with now
  const bool sj_form = near(v_leak, *p.v_reset) && (near(rr, 1.0) || near(rr, tau_steps)) && tau_steps >= 1.0;
  // Leaks toward another value than the reset, or another input gain (a
  // PLIF read at another dt than its own too: its learned rate is a number
  // of its own steps).
  if (!sj_form) return general();
  p.tau = tau_steps;
  if (m.tau && near(*m.tau * dt, tau)) p.tau = *m.tau;  // the exact value snnsim wrote
  p.decay_input = near(rr, 1.0);
  if (m.decay_input && near(tau_steps, 1.0)) p.decay_input = *m.decay_input != 0;  // both read the same then
  if (m.model && *m.model == "plif") {
    // PLIF: tau is 1 / sigmoid(w) now; snnsim_tau is its initial value.
    if (!m.w || !m.tau) r.fail(path + "/metadata: snnsim_model is plif but snnsim_w or snnsim_tau is missing");
    if (!near(1.0 + std::exp(-*m.w), tau_steps)) {
      r.fail(path + " (PLIF): tau = " + std::to_string(tau) + " s disagrees with its learned snnsim_w = " +
             std::to_string(*m.w) + " (tau / dt should be 1 + exp(-w) = " + std::to_string(1.0 + std::exp(-*m.w)) + ")");
    }
    n.kind = NodeKind::kPLIF;
    p.model = NeuronModel::kParametricLIF;
    p.tau = *m.tau;
    n.arrays["w"] = torch::tensor(static_cast<float>(*m.w));
  }
}

// LI, CubaLIF, CubaLI, Threshold: the general form.
void read_general(const Reader& r, hid_t g, const std::string& path, double dt, Node& n) {
  const std::map<std::string, Array> a = read_nir_params(r, g, path, n.kind);
  n.shape = a.begin()->second.dims;
  const SnnsimMeta m = read_meta(r, g, path);
  read_training_options(r, m, path, n.neuron);
  set_general(a, m, dt, n);
}

Node read_node(const Reader& r, hid_t g, const std::string& name, const std::string& path, double dt) {
  Node n;
  n.name = name;
  const std::string type = r.string(g, "type", path);
  const auto kind = parse_node_kind(type);
  if (!kind) {
    r.fail(path + " has type '" + type + "', which snnsim does not read" +
           (type == "NIRGraph" ? " (nested graphs: flatten the graph before writing it)" : "") + " (it reads: " +
           known_node_kinds() + ")");
  }
  n.kind = *kind;
  switch (n.kind) {
    case NodeKind::kInput:
    case NodeKind::kOutput:
      n.shape = r.ints(g, "shape", path);
      if (n.kind == NodeKind::kInput) {  // snnsim's own: how images become the input
        if (auto e = read_meta(r, g, path).encoding) n.encoding = *e;
      }
      break;
    case NodeKind::kAffine:
      n.weight = r.tensor(g, "weight", path, torch::kFloat);
      n.bias = r.tensor(g, "bias", path, torch::kFloat);
      break;
    case NodeKind::kLinear:
      n.weight = r.tensor(g, "weight", path, torch::kFloat);
      break;
    case NodeKind::kConv2d:
      n.weight = r.tensor(g, "weight", path, torch::kFloat);
      if (r.has(g, "bias")) n.bias = r.tensor(g, "bias", path, torch::kFloat);
      if (n.weight.dim() == 4) n.kernel_size = {n.weight.size(2), n.weight.size(3)};
      n.stride = r.pair(g, "stride", path);
      n.padding = r.pair(g, "padding", path);
      n.dilation = r.pair(g, "dilation", path);
      n.groups = r.integer(g, "groups", path);
      if (r.has(g, "input_shape")) n.declared_input = r.ints(g, "input_shape", path);
      break;
    case NodeKind::kSumPool2d:
    case NodeKind::kAvgPool2d:
    case NodeKind::kMaxPool2d:
      n.kernel_size = r.pair(g, "kernel_size", path);
      n.stride = r.pair(g, "stride", path);
      n.padding = r.pair(g, "padding", path);
      break;
    case NodeKind::kFlatten:
      n.start_dim = r.integer(g, "start_dim", path);
      n.end_dim = r.integer(g, "end_dim", path);
      if (r.has(g, "input_type")) n.declared_input = r.ints(g, "input_type", path);
      break;
    case NodeKind::kScale:
      n.scale = r.tensor(g, "scale", path, torch::kFloat);
      break;
    case NodeKind::kBatchNorm:
    case NodeKind::kDropout:
      r.fail(path + " has type '" + type + "', which is no NIR node (snnsim folds or drops it on export)");
    case NodeKind::kDelay: {
      const Array a = r.array(g, "delay", path);
      n.shape = a.dims;
      const auto d = uniform(a);
      if (!d) r.fail(path + "/delay: per-neuron delays are not simulated yet (all must be equal)");
      const double steps = *d / dt;
      if (std::fabs(steps - std::round(steps)) > 1e-6 || std::round(steps) < 1) {
        r.fail(path + "/delay: " + std::to_string(*d) + " s is not a whole number (>= 1) of steps of dt = " +
               std::to_string(dt) + " s");
      }
      n.delay = static_cast<int64_t>(std::round(steps));
      break;
    }
    case NodeKind::kLIF:
    case NodeKind::kIF:
      read_spiking(r, g, path, dt, n);
      break;
    default:
      read_general(r, g, path, dt, n);
      break;
  }
  return n;
}

// ---- writing ---------------------------------------------------------------

struct Writer {
  std::string where;

  void string(hid_t loc, const std::string& name, const std::string& value) const {
    Handle type = string_type();
    Handle space(H5Screate(H5S_SCALAR), H5Sclose);
    Handle ds(H5Dcreate2(loc, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
    if (!ds.ok()) throw Error(where + ": cannot create " + name);
    const char* p = value.c_str();
    check(H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &p), where + ": cannot write " + name);
  }

  void edges(hid_t loc, const std::vector<Edge>& edges) const {
    Handle type = string_type();
    const hsize_t dims[2] = {edges.size(), 2};
    Handle space(H5Screate_simple(2, dims, nullptr), H5Sclose);
    Handle ds(H5Dcreate2(loc, "edges", type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
    if (!ds.ok()) throw Error(where + ": cannot create edges");
    std::vector<const char*> p;
    for (const auto& e : edges) {
      p.push_back(e.source.c_str());
      p.push_back(e.target.c_str());
    }
    if (!p.empty()) check(H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, p.data()), where + ": cannot write edges");
  }

  // A tensor as float32 (weights) or float64 (neuron parameters), of its shape.
  void tensor(hid_t loc, const std::string& name, const torch::Tensor& t, bool float64) const {
    const torch::Tensor c = t.detach().to(torch::kCPU, float64 ? torch::kDouble : torch::kFloat).contiguous();
    std::vector<hsize_t> dims(c.sizes().begin(), c.sizes().end());
    Handle space(dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                 H5Sclose);
    Handle ds(H5Dcreate2(loc, name.c_str(), float64 ? H5T_IEEE_F64LE : H5T_IEEE_F32LE, space.get(), H5P_DEFAULT,
                         H5P_DEFAULT, H5P_DEFAULT),
              H5Dclose);
    if (!ds.ok()) throw Error(where + ": cannot create " + name);
    check(H5Dwrite(ds.get(), float64 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, c.data_ptr()),
          where + ": cannot write " + name);
  }

  void ints(hid_t loc, const std::string& name, const std::vector<int64_t>& v, bool scalar = false) const {
    const hsize_t n = v.size();
    Handle space(scalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, nullptr), H5Sclose);
    Handle ds(H5Dcreate2(loc, name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
    if (!ds.ok()) throw Error(where + ": cannot create " + name);
    check(H5Dwrite(ds.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), where + ": cannot write " + name);
  }

  void number(hid_t loc, const std::string& name, double v) const {
    tensor(loc, name, torch::tensor(v, torch::kDouble), true);
  }
};

void write_node(const Writer& w, hid_t g, const Node& n, const GraphShapes& shapes, double dt) {
  const std::vector<int64_t>& out = shapes.output.at(n.name);
  const auto full = [&](double v) { return torch::full(out, v, torch::kDouble); };
  const bool spiking = n.kind == NodeKind::kLIF || n.kind == NodeKind::kIF || n.kind == NodeKind::kPLIF;
  w.string(g, "type", n.kind == NodeKind::kPLIF ? "LIF" : to_string(n.kind));
  const auto weights = [&]() {
    if (!n.weight.defined()) {
      throw Error(w.where + ": node '" + n.name + "' has no weights (export a trained checkpoint or a .nir file)");
    }
    w.tensor(g, "weight", n.weight, false);
  };
  switch (n.kind) {
    case NodeKind::kInput: {
      w.ints(g, "shape", n.shape);
      if (n.encoding == "poisson") return;  // NIR says nothing of encoders; snnsim's default
      Handle meta(H5Gcreate2(g, "metadata", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
      if (!meta.ok()) throw Error(w.where + ": cannot create metadata of " + n.name);
      w.string(meta.get(), "snnsim_encoding", n.encoding);
      return;
    }
    case NodeKind::kOutput:
      w.ints(g, "shape", out);
      return;
    case NodeKind::kAffine:
      weights();
      w.tensor(g, "bias", n.bias.defined() ? n.bias : torch::zeros({n.weight.size(0)}), false);
      return;
    case NodeKind::kLinear:
      weights();
      return;
    case NodeKind::kConv2d: {
      weights();
      w.tensor(g, "bias", n.bias.defined() ? n.bias : torch::zeros({n.weight.size(0)}), false);
      w.ints(g, "stride", n.stride);
      w.ints(g, "padding", n.padding);
      w.ints(g, "dilation", n.dilation);
      w.ints(g, "groups", {n.groups}, true);
      const auto& in = shapes.input.at(n.name);
      w.ints(g, "input_shape", {in[1], in[2]});
      return;
    }
    case NodeKind::kSumPool2d:
    case NodeKind::kAvgPool2d:
    case NodeKind::kMaxPool2d:
      w.ints(g, "kernel_size", n.kernel_size);
      w.ints(g, "stride", n.stride);
      w.ints(g, "padding", n.padding);
      return;
    case NodeKind::kFlatten:
      w.ints(g, "start_dim", {n.start_dim}, true);
      w.ints(g, "end_dim", {n.end_dim}, true);
      w.ints(g, "input_type", shapes.input.at(n.name));
      return;
    case NodeKind::kScale:
      w.tensor(g, "scale", n.scale, false);
      return;
    case NodeKind::kDelay:
      w.tensor(g, "delay", full(static_cast<double>(n.delay) * dt), true);
      return;
    default:
      break;
  }
  const NeuronParams& p = n.neuron;
  if (spiking && !p.v_reset) {
    throw Error(w.where + ": node '" + n.name + "' has a soft reset (v_reset none), which NIR cannot express "
                "(its neurons reset to v_reset); export refused");
  }
  if (spiking && p.refractory > 0) {
    throw Error(w.where + ": node '" + n.name + "' has a refractory period of " + std::to_string(p.refractory) +
                " steps, which NIR cannot express; export refused");
  }
  if (has_general_dynamics(n)) {
    // NIR's units: time constants in seconds, an IF's r per second. snnsim's
    // own values in steps go to the metadata too, for an exact round trip.
    Handle meta(H5Gcreate2(g, "metadata", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    if (!meta.ok()) throw Error(w.where + ": cannot create metadata of " + n.name);
    if (is_spiking(n.kind)) {
      w.string(meta.get(), "snnsim_surrogate", surrogate_spec(p.surrogate));
      if (n.kind != NodeKind::kThreshold) w.ints(meta.get(), "snnsim_detach_reset", {p.detach_reset ? 1 : 0}, true);
    }
    for (const auto& [key, t] : n.arrays) {
      const torch::Tensor steps = t.to(torch::kDouble).reshape(t.dim() == 0 ? std::vector<int64_t>{} : out).expand(out);
      const Unit u = unit_of(n.kind, key);
      w.tensor(g, key, from_steps(u, steps, dt), true);
      if (u != Unit::kSame) w.tensor(meta.get(), "snnsim_steps_" + key, steps, true);
    }
    return;
  }
  const double v_reset = *p.v_reset;
  w.tensor(g, "v_threshold", full(p.v_threshold), true);
  w.tensor(g, "v_reset", full(v_reset), true);
  Handle meta(H5Gcreate2(g, "metadata", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  if (!meta.ok()) throw Error(w.where + ": cannot create metadata of " + n.name);
  w.string(meta.get(), "snnsim_model", to_string(p.model));
  w.string(meta.get(), "snnsim_surrogate", surrogate_spec(p.surrogate));
  w.ints(meta.get(), "snnsim_detach_reset", {p.detach_reset ? 1 : 0}, true);
  if (n.kind == NodeKind::kIF) {
    w.tensor(g, "r", full(1.0 / dt), true);
    return;
  }
  double tau_now = p.tau;  // PLIF: 1 / sigmoid(w), the learned one
  if (n.kind == NodeKind::kPLIF) {
    const auto it = n.arrays.find("w");
    if (it == n.arrays.end()) throw Error(w.where + ": node '" + n.name + "' (PLIF) has no learned w");
    const double wv = it->second.item<double>();
    w.number(meta.get(), "snnsim_w", wv);
    tau_now = 1.0 + std::exp(-wv);
  }
  w.number(meta.get(), "snnsim_tau", p.tau);
  w.ints(meta.get(), "snnsim_decay_input", {p.decay_input ? 1 : 0}, true);
  w.tensor(g, "tau", full(tau_now * dt), true);
  w.tensor(g, "r", full(p.decay_input ? 1.0 : tau_now), true);
  w.tensor(g, "v_leak", full(v_reset), true);
}

}  // namespace

bool is_nir_file(const std::string& path) {
  hdf5::QuietHdf5 quiet;
  if (H5Fis_hdf5(path.c_str()) <= 0) return false;
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  return file.ok() && H5Lexists(file.get(), "version", H5P_DEFAULT) > 0 && H5Lexists(file.get(), "node", H5P_DEFAULT) > 0;
}

Graph read_nir(const std::string& path, std::optional<double> dt_arg) {
  hdf5::QuietHdf5 quiet;
  const Reader r{"NIR file '" + path + "'"};
  if (::access(path.c_str(), R_OK) != 0) r.fail(std::strerror(errno));
  if (H5Fis_hdf5(path.c_str()) <= 0) r.fail("not an HDF5 file");
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.ok()) r.fail("HDF5 cannot open it");
  const std::string version = r.string(file.get(), "version", "");
  if (version.rfind("1.", 0) != 0) r.fail("/version is '" + version + "'; snnsim reads NIR 1.x");
  if (!r.has(file.get(), "node")) r.fail("no group /node");
  Handle root(H5Gopen2(file.get(), "node", H5P_DEFAULT), H5Gclose);
  if (!root.ok()) r.fail("/node is not a group");
  const std::string type = r.string(root.get(), "type", "/node");
  if (type != "NIRGraph") r.fail("/node/type is '" + type + "', not NIRGraph");
  double dt = kDefaultNirDt;
  if (dt_arg) {
    dt = *dt_arg;
  } else if (r.has(root.get(), "metadata")) {
    Handle meta(H5Gopen2(root.get(), "metadata", H5P_DEFAULT), H5Gclose);
    if (meta.ok() && r.has(meta.get(), "snnsim_dt")) dt = r.scalar(meta.get(), "snnsim_dt", "/node/metadata");
  }
  if (!(dt > 0)) r.fail("dt must be positive, got " + std::to_string(dt));
  if (!r.has(root.get(), "nodes")) r.fail("no group /node/nodes");
  Handle nodes(H5Gopen2(root.get(), "nodes", H5P_DEFAULT), H5Gclose);
  Graph g;
  for (const auto& name : hdf5::members(nodes.get())) {
    const std::string path_in = "/node/nodes/" + name;
    Handle ng(H5Gopen2(nodes.get(), name.c_str(), H5P_DEFAULT), H5Gclose);
    if (!ng.ok()) r.fail(path_in + " is not a group");
    g.nodes.push_back(read_node(r, ng.get(), name, path_in, dt));
  }
  std::vector<int64_t> dims;
  const auto ends = r.has(root.get(), "edges") ? r.strings(root.get(), "edges", "/node", &dims) : std::vector<std::string>{};
  if (!ends.empty() && (dims.size() != 2 || dims[1] != 2)) r.fail("/node/edges must be [E, 2] strings, it is " + shape_str(dims));
  for (size_t i = 0; i + 1 < ends.size(); i += 2) g.edges.push_back({ends[i], ends[i + 1]});
  // Input first, Output last, the rest as stored (name order): a stable,
  // readable order for messages and listings.
  std::stable_partition(g.nodes.begin(), g.nodes.end(), [](const Node& n) { return n.kind == NodeKind::kInput; });
  std::stable_partition(g.nodes.begin(), g.nodes.end(), [](const Node& n) { return n.kind != NodeKind::kOutput; });
  return g;
}

void write_nir(const std::string& path, const Graph& trained, double dt) {
  check_output_file(path);
  if (!(dt > 0) || !std::isfinite(dt)) throw Error("NIR: dt must be a positive number of seconds, got " + std::to_string(dt));
  // NIR has neither BatchNorm nor Dropout: the inference network is written.
  std::vector<std::string> unfolded;
  const Graph graph = fold_for_inference(trained, &unfolded);
  if (!unfolded.empty()) {
    const Node& bn = trained.node(unfolded.front());
    const auto src = trained.sources_of(bn.name);
    throw Error("cannot write NIR file '" + path + "': node '" + bn.name + "' (BatchNorm) follows " +
                (src.size() == 1 ? "'" + src[0] + "' (" + to_string(trained.node(src[0]).kind) + ")" : "several nodes") +
                ", not one Conv2d, Affine or Linear that it alone reads, so it cannot be folded into it and NIR has no "
                "BatchNorm; export refused");
  }
  const GraphShapes shapes = graph.validate();
  hdf5::QuietHdf5 quiet;
  const Writer w{"cannot write NIR file '" + path + "'"};
  const std::string tmp = atomic_temporary_name(path);
  errno = 0;
  const hid_t file = H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(w.where + ": " + (err ? std::strerror(err) : "HDF5 cannot create '" + tmp + "'"));
  }
  try {
    errno = 0;
    w.string(file, "version", kNirVersion);
    Handle root(H5Gcreate2(file, "node", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    w.string(root.get(), "type", "NIRGraph");
    w.edges(root.get(), graph.edges);
    Handle meta(H5Gcreate2(root.get(), "metadata", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    w.number(meta.get(), "snnsim_dt", dt);
    w.string(meta.get(), "snnsim_version", kVersion);
    Handle nodes(H5Gcreate2(root.get(), "nodes", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    for (const auto& n : graph.nodes) {
      Handle g(H5Gcreate2(nodes.get(), n.name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
      if (!g.ok()) throw Error(w.where + ": cannot create node " + n.name);
      write_node(w, g.get(), n, shapes, dt);
    }
    if (H5Fflush(file, H5F_SCOPE_GLOBAL) < 0) throw Error(w.where + ": " + (errno ? std::strerror(errno) : "HDF5 cannot flush it"));
  } catch (const Error&) {
    H5Fclose(file);
    ::unlink(tmp.c_str());
    throw;
  }
  if (H5Fclose(file) < 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(w.where + ": " + (err ? std::strerror(err) : "HDF5 cannot close it"));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(w.where + ": " + std::strerror(err));
  }
}

}  // namespace snn::graph
