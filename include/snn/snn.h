#pragma once
/// Umbrella header: everything snnsim offers to C++ users.

#include "snn/core/build_info.h"
#include "snn/core/error.h"
#include "snn/datasets/idx.h"
#include "snn/encoders/encoders.h"
#include "snn/neurons/functional.h"
#include "snn/neurons/lif.h"
#include "snn/neurons/linear.h"
#include "snn/neurons/linear_neuron.h"
#include "snn/neurons/surrogate.h"
#include "snn/pipeline/model_pipeline.h"
#include "snn/analysis/analysis.h"
#include "snn/recording/events.h"
#include "snn/recording/recording_file.h"
#include "snn/simulator/csv.h"
#include "snn/simulator/neuron_sim.h"
