#pragma once
/// A model pipeline over the ranks of a run: rank r holds part r of the
/// pipeline (stage order is rank order) and these links carry its blocks,
/// through the World's point-to-point messages (Gloo, CPU tensors):
///
///     rank 0 --blocks--> rank 1 --blocks--> ... --> rank N-1
///       ^                                              |
///       +------------------ results -------------------+
///
/// Each block goes as a small header (dtype, shape) and then its data, so
/// the receiver needs to know nothing in advance; CUDA blocks are copied to
/// the CPU to be sent. Blocks keep their order, so the results are those
/// of one process (ModelPipeline's guarantee holds across the links).

#include "snn/dist/world.h"
#include "snn/pipeline/stage_link.h"

namespace snn::dist {

/// Message tags of the pipeline's blocks and of its results.
constexpr int kPipelineBlockTag = 100;
constexpr int kPipelineResultTag = 101;

/// Blocks from rank `src`, sent there by block_sink(world, this rank, tag).
std::shared_ptr<BlockSource> block_source(World& world, int64_t src, int tag);
/// Blocks to rank `dst`.
std::shared_ptr<BlockSink> block_sink(World& world, int64_t dst, int tag);

/// This rank's links in a pipeline over every rank of `world`: upstream
/// from rank - 1 (not on rank 0), downstream to rank + 1 (the last rank's
/// go back to rank 0 as the results), results on rank 0. A world of one
/// has no links. The world must outlive the links.
PipelineLinks pipeline_links(World& world);

}  // namespace snn::dist
