// StepSchedule: what one rank executes for one optimizer step of its plan —
// which GEMMs with which shapes, which collectives on which group with how
// many bytes, and in which pipeline order — independent of the backend. The
// CPU (OpenBLAS + Gloo) and GPU (cuBLAS + NCCL) backends both execute it, and
// the tests check that what it issues adds up to what the planner predicts
// for the same plan (docs/worker.md).
//
// Rank layout (Megatron's order): tensor-parallel rank varies fastest, then
// data-parallel, then pipeline: rank = t_rank + t x (d_rank + d x p_rank), so
// a TP group is t consecutive ranks on one node.
//
// Units: bytes for payloads (`_bytes`), elements for GEMM dimensions, FLOPs
// count a multiply-add as 2. Thread-safety: plain values; BuildStepSchedule
// is pure.
#ifndef PACER_WORKER_CORE_STEP_SCHEDULE_H_
#define PACER_WORKER_CORE_STEP_SCHEDULE_H_

#include <array>
#include <cstdint>
#include <vector>

#include "core/worker_config.h"
#include "pacer/planner/layer_shapes.h"
#include "pacer/status.h"

namespace pacer::worker {

enum class Group { kTensor, kData, kPipeline };
enum class CollectiveKind { kAllReduce, kReduceScatter, kAllGather, kSend, kRecv };
const char* GroupName(Group g);
const char* CollectiveKindName(CollectiveKind k);

struct Collective {
  const char* name = "";
  CollectiveKind kind = CollectiveKind::kAllReduce;
  Group group = Group::kTensor;
  int ranks = 1;
  // The full buffer: what an all-reduce reduces, what a reduce-scatter takes
  // in, what an all-gather produces, what a send sends.
  double bytes = 0;
  // Bytes each rank moves over its links in a ring (nccl-tests' bus traffic:
  // 2(n-1)/n S for all-reduce, (n-1)/n S for reduce-scatter / all-gather).
  double BusBytes() const;
};

struct RankCoordinates {
  int tensor_rank = 0;
  int data_rank = 0;
  int pipeline_rank = 0;
};
RankCoordinates CoordinatesOf(const WorkerConfig& config, int global_rank);
int GlobalRankOf(const WorkerConfig& config, RankCoordinates c);

enum class PassKind { kForward, kBackward };
struct PipelineAction {
  PassKind pass = PassKind::kForward;
  int micro_batch = 0;
  int chunk = 0;  // model chunk (virtual stage) on this rank
};

// The work of one transformer layer for one micro-batch on this rank.
struct LayerWork {
  // The planner's LayerForwardGemms; under a fused kernel with a causal
  // mask the scores' n and the context's k are the mean keys a query row's
  // tile computes (causal_mask.h), so the FLOPs are what the kernel issues.
  std::array<planner::GemmShape, 6> forward_gemms;
  // Backward runs, for each forward GEMM, one GEMM for the input gradient and
  // one for the weight gradient, each with the forward's FLOPs.
  std::vector<planner::GemmShape> recompute_gemms;  // what recomputation repeats
  std::vector<Collective> forward_collectives;
  std::vector<Collective> backward_collectives;
  std::vector<Collective> recompute_collectives;
  double ForwardFlops() const;
  double BackwardFlops() const { return 2 * ForwardFlops(); }
  double RecomputeFlops() const;
};

// Collectives that run once per micro-batch in a pass.
struct PassCollectives {
  std::vector<Collective> forward, backward;
};

struct StepSchedule {
  RankCoordinates coordinates;
  int layers_per_chunk = 1;
  int chunks = 1;              // virtual stages on this rank
  bool holds_embedding = false;  // first pipeline stage
  bool holds_logits = false;     // last pipeline stage
  int64_t micro_batches = 1;     // k
  LayerWork layer;
  planner::GemmShape logits;     // forward; backward twice it (last stage only)
  // The vocabulary-parallel tables' tensor-parallel collectives (t > 1, with
  // sequence parallelism; Megatron's VocabParallelEmbedding and
  // vocab-parallel cross-entropy), per micro-batch: on the first stage the
  // embedding's output reduce-scattered into sequence shards and its
  // gradient gathered back; on the last stage the logits' input gathered,
  // each token's logsumexp and target logit gathered (two fp32 per token),
  // and the input's gradient reduce-scattered. The planner leaves them out
  // (2 or 3 messages per micro-batch against 5 per layer).
  PassCollectives embedding_collectives, logits_collectives;
  std::vector<PipelineAction> pipeline;  // this rank's 1F1B order for one step
  double p2p_bytes = 0;          // one activation (or gradient) send between stages
  // Data-parallel collectives, in bucket order: once per step for ZeRO 0 and
  // 1; `per_micro_batch_collectives` run after every micro-batch (ZeRO 2 and 3).
  std::vector<Collective> step_collectives;
  std::vector<Collective> per_micro_batch_collectives;
  double stage_parameters = 0;            // held by this rank (after the TP split)
  double optimizer_shard_parameters = 0;  // updated by this rank (after ZeRO)

  // Totals for one optimizer step on this rank.
  double GemmFlopsPerStep() const;
  double BusBytesPerStep(Group group) const;
};

// Gradient buckets: the same count the planner's overlap model assumes.
inline constexpr int kGradientBuckets = 8;

// The schedule of `global_rank` under `config`'s plan. InvalidArgument for an
// inconsistent plan (ValidateConfig's rules) or a rank outside the world.
StatusOr<StepSchedule> BuildStepSchedule(const WorkerConfig& config, int global_rank);

// The 1F1B order of pipeline stage `stage` of `stages` for `micro_batches`
// micro-batches and `chunks` interleaved chunks (Narayanan et al. 2021;
// Megatron's interleaved schedule when chunks > 1, which needs micro_batches
// divisible by stages).
std::vector<PipelineAction> OneForwardOneBackward(int stage, int stages, int64_t micro_batches,
                                                  int chunks);

}  // namespace pacer::worker

#endif  // PACER_WORKER_CORE_STEP_SCHEDULE_H_
