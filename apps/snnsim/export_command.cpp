// `snnsim export --nir IN OUT.nir`: a trained network as a NIR graph, for
// the other simulators and neuromorphic toolchains that read NIR.

#include <sys/stat.h>

#include <iostream>
#include <memory>

#include "commands.h"
#include "validators.h"
#include "snn/core/atomic_file.h"
#include "snn/core/error.h"
#include "snn/graph/nir_file.h"
#include "snn/simulator/checkpoint.h"
#include "snn/simulator/network_graph.h"

namespace snn::app {

namespace {
struct ExportFlags {
  std::string input;
  std::string nir;
  double dt = graph::kDefaultNirDt;
  bool overwrite = false;
};
}  // namespace

Run add_export_command(CLI::App& app) {
  auto f = std::make_shared<ExportFlags>();
  CLI::App* cmd = app.add_subcommand(
      "export", "Write a trained network (a checkpoint of snnsim train, or a .nir file) as a NIR graph (HDF5)");
  cmd->add_option("CHECKPOINT", f->input, "The network: a checkpoint (.h5) or a .nir file")->required();
  cmd->add_option("--nir", f->nir, "The NIR file to write")->required();
  cmd->add_option("--nir-dt", f->dt, "Duration of a step in seconds: NIR's time constants are tau_steps * dt")
      ->capture_default_str()
      ->check(number_above(0));
  cmd->add_flag("--overwrite", f->overwrite, "Replace an existing --nir file");
  return [cmd, f] {
    if (!cmd->parsed()) return;
    check_output_files({{"--nir", f->nir}}, {{"the input", f->input}, config_argument(cmd)});
    struct stat st {};
    if (!f->overwrite && ::stat(f->nir.c_str(), &st) == 0) {
      throw Error("'" + f->nir + "' exists; pass --overwrite to replace it");
    }
    const LoadedCheckpoint loaded = load_checkpoint(f->input);
    const graph::Graph trained = network_graph(*loaded.network);
    graph::write_nir(f->nir, trained, f->dt);
    const graph::Graph g = graph::fold_for_inference(trained);  // what was written
    std::string layers;
    for (const int64_t n : loaded.network->config().layers) layers += (layers.empty() ? "" : "-") + std::to_string(n);
    std::cout << "exported " << layers << " (" << g.nodes.size() << " nodes, " << g.edges.size() << " edges, dt "
              << f->dt << " s) to " << f->nir << "\n";
  };
}

}  // namespace snn::app
