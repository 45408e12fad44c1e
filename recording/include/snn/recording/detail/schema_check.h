#pragma once
// Reading a recording against the schema (snn/recording/schema.h): every
// attribute and dataset present with its type and shape, every extent and
// index consistent with the others, before anything is read by them or
// allocated for them. The reader (analysis), resume and recover call it
// before they trust a file; torch-free. Include only from targets that link
// HDF5.

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "snn/recording/schema.h"

namespace snn::recording::schema {

/// HDF5's type for a schema type: in the file (little-endian) and in memory.
hid_t file_type(Type t);
hid_t memory_type(Type t);

/// " (the committed samples)" and so on: what an extent means, for messages.
std::string describe_extent(const Extent& e);

/// What a checked recording holds.
/// The value of /meta's `kind` in a recording of snnsim simulate: its
/// samples are trials of a population model, its populations no layers.
inline constexpr const char* kPopulationsKind = "populations";

struct Contents {
  struct Population {
    std::string name;
    int64_t n_nodes = 0;
    int64_t layer = 0;
    std::vector<int64_t> recorded;  ///< ascending, distinct, < n_nodes
    uint64_t events = 0;            ///< spikes of the committed samples (spike_ptr[S])
  };
  struct Report {
    std::string name;
    std::vector<int64_t> node_ids;  ///< ascending, distinct
  };
  std::string status;
  int64_t samples = 0;  ///< committed (S)
  int64_t steps = 0;    ///< T
  double dt_ms = 0;
  int64_t classes = 0;
  /// /meta's `kind`: kPopulationsKind for a population model's trials
  /// (snnsim simulate), empty for a network's samples (snnsim run).
  std::string kind;
  /// /meta's `first_sample`: a rank's part of a run over several processes
  /// starts its time axis there (sample s covers steps (first_sample + s) T
  /// on); 0 otherwise.
  int64_t first_sample = 0;
  int64_t layers = 0;  ///< width of layer_spikes; 0 = no such dataset
  bool prediction_by_step = false;
  std::vector<Population> populations;  ///< name order
  std::vector<Report> reports;          ///< name order
};

/// How the rows of growing datasets must relate to the committed samples:
/// a finished file holds exactly those, an unfinished one may hold more
/// (appended after its last commit, dropped by resume and recover).
enum class Rows { kExact, kAtLeast };

/// Throws snn::Error ("<where> is not an snnsim recording ...") unless the
/// root says the file is one, of a format version this code reads.
void check_format(hid_t file, const std::string& where);

/// The status (running, complete, aborted, recovered), checked.
std::string read_status(hid_t file, const std::string& where);

/// Checks the whole file (see the file comment) and returns its numbers.
/// `where` names the file ("recording 'a.h5'"); errors name it, the dataset
/// or attribute, and the defect.
Contents check(hid_t file, const std::string& where, Rows rows);

/// The names of a group's members, in name order; refuses more than
/// kMax_populations of them (a damaged link table must not be listed).
std::vector<std::string> members(hid_t group, const std::string& what, const std::string& where);

}  // namespace snn::recording::schema
