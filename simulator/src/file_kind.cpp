#include "snn/simulator/file_kind.h"

#include <hdf5.h>

#include <fstream>

#include "snn/core/binary_text.h"
#include "snn/core/detail/hdf5.h"
#include "snn/graph/nir_file.h"
#include "snn/recording/schema.h"

namespace snn {

Hdf5Kind hdf5_kind(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[8] = {};
  if (!in.read(head, sizeof head) || !has_hdf5_signature(std::string(head, sizeof head))) {
    // (HDF5 also finds a signature after a user block of 512, 1024, ...
    // bytes; snnsim and nir write none, and H5Fis_hdf5 below sees those.)
    hdf5::QuietHdf5 quiet;
    if (H5Fis_hdf5(path.c_str()) <= 0) return Hdf5Kind::kNotHdf5;
  }
  hdf5::QuietHdf5 quiet;
  // SWMR reading opens a file a run is writing or was killed writing; other
  // files (checkpoints) open without it.
  hdf5::Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
  H5Pset_metadata_read_attempts(fapl.get(), 1);
  hdf5::Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl.get()), H5Fclose);
  if (!f.ok()) f = hdf5::Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!f.ok()) return Hdf5Kind::kDamaged;
  // "magic": the attribute of recordings before the format attribute.
  if (H5Aexists(f.get(), recording::schema::attr_format.name) > 0 || H5Aexists(f.get(), "magic") > 0) {
    return Hdf5Kind::kRecording;
  }
  if (H5Aexists(f.get(), "config") > 0 && H5Lexists(f.get(), "parameters", H5P_DEFAULT) > 0) return Hdf5Kind::kCheckpoint;
  if (graph::is_nir_file(path)) return Hdf5Kind::kNir;
  // (nir.write always writes /version; a file with nodes but none is a NIR
  // graph that snnsim cannot date.)
  if (H5Lexists(f.get(), "node", H5P_DEFAULT) > 0) return Hdf5Kind::kNirWithoutVersion;
  return Hdf5Kind::kOther;
}

std::string describe(Hdf5Kind kind) {
  switch (kind) {
    case Hdf5Kind::kNotHdf5:
      return "not an HDF5 file";
    case Hdf5Kind::kDamaged:
      return "an HDF5 file that HDF5 cannot open (cut short or damaged, or locked by a program writing it)";
    case Hdf5Kind::kCheckpoint:
      return "a checkpoint of snnsim train";
    case Hdf5Kind::kRecording:
      return "a recording of snnsim run or simulate";
    case Hdf5Kind::kNir:
      return "a NIR graph";
    case Hdf5Kind::kNirWithoutVersion:
      return "a NIR graph without /version (snnsim reads NIR 1.x files, which have it: write them with nir.write)";
    case Hdf5Kind::kOther:
      break;
  }
  return "an HDF5 file of another program (neither an snnsim checkpoint, with attribute 'config' and /parameters, "
         "nor a recording, nor a NIR graph, with /version and /node)";
}

}  // namespace snn
