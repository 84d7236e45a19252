// DeviceLayout: how a GPU rank's memory was laid out for its plan by the
// former GPU backend's own orchestration (bf16 storage, fixed stash slots),
// as pure functions of (WorkerConfig, StepSchedule), so that the layout can be
// unit-tested on machines without a GPU and checked against the planner's
// memory model (planner::PredictMemory).
//
// It answers three questions:
//   - where each parameter lives in this rank's flat parameter vector (the
//     vector the data-parallel buckets and ZeRO shards cut), in elements;
//   - which activations one layer stashes for its backward under the plan's
//     recomputation, and how many (micro-batch, chunk) slots the rank's 1F1B
//     order keeps in flight;
//   - how many bytes each buffer class takes: `planned` is the planner's
//     formula for this rank, `allocated` what the GPU backend cudaMallocs.
//     They differ only where the planner simplifies (norm gains are
//     replicated across tensor-parallel ranks, middle pipeline stages hold no
//     embedding table, padding for the buckets) and in the workspace, which
//     the planner covers with its fixed reserve.
// It also names the communicator groups (tensor, data, pipeline) of a rank,
// which both devices' communicators use.
//
// Since both backends are the step executor over a device, nothing
// allocates by PlanDeviceMemory any more: the executor allocates fp32
// buffers through the device's MemoryTracker, which is what a step's peak
// reports. PlanDeviceMemory stays, with its test, as the planner cross-check
// of the activation formula (of the plan's attention kernel) until the
// executor's tracker is compared with PredictMemory on a GPU.
//
// Units: `_elements` count tensor elements, `_bytes` are bytes. Tensor-
// parallel runs use sequence parallelism (as BuildStepSchedule does): the
// residual stream of a rank is its 1/t share of the b x s tokens.
// Thread-safety: plain values and pure functions.
#ifndef PACER_WORKER_CORE_DEVICE_LAYOUT_H_
#define PACER_WORKER_CORE_DEVICE_LAYOUT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/step_schedule.h"
#include "core/worker_config.h"
#include "pacer/status.h"

namespace pacer::worker {

// Elements the flat parameter vector is padded to, per bucket and shard, so
// every bucket splits evenly over the data-parallel ranks and every shard
// starts 256-byte aligned.
inline constexpr int64_t kShardAlignElements = 64;

// Weight matrices of one layer on this rank (row-major, [in x out]).
struct LayerParameterLayout {
  int64_t qkv_elements = 0;         // h x (h + 2 kv hd) / t
  int64_t projection_elements = 0;  // h / t x h
  int64_t mlp_in_elements = 0;      // h x (1 or 2) ffn / t
  int64_t mlp_out_elements = 0;     // ffn / t x h
  int64_t norm_elements = 0;        // two RMSNorm gains of h (replicated across TP)
  // Offsets inside the layer's block.
  int64_t qkv_offset() const { return 0; }
  int64_t projection_offset() const { return qkv_elements; }
  int64_t mlp_in_offset() const { return projection_offset() + projection_elements; }
  int64_t mlp_out_offset() const { return mlp_in_offset() + mlp_in_elements; }
  int64_t norm_offset() const { return mlp_out_offset() + mlp_out_elements; }
  int64_t total_elements() const { return norm_offset() + norm_elements; }
};

// This rank's flat parameter vector: [input table][layers, chunk-major][output
// table]; a single-stage model with tied embeddings has one table for both.
struct ParameterLayout {
  LayerParameterLayout layer;
  int layers = 0;  // chunks x layers_per_chunk
  int layers_per_chunk = 0;
  int64_t table_elements = 0;        // one vocabulary shard: ceil(V / t) x h
  int64_t input_table_offset = -1;   // -1: this stage has no input embedding
  int64_t output_table_offset = -1;  // -1: no output projection (may equal the input's)
  int64_t layers_offset = 0;
  int64_t elements = 0;         // what the parameters need
  int64_t padded_elements = 0;  // multiple of kGradientBuckets x d x kShardAlignElements
  int64_t bucket_elements = 0;  // padded / kGradientBuckets
  int64_t piece_elements = 0;   // bucket / d: this rank's share of one bucket
  int64_t shard_elements = 0;   // padded / d (ZeRO shards), or padded when d == 1

  int64_t LayerOffset(int chunk, int layer_in_chunk) const {
    return layers_offset + (static_cast<int64_t>(chunk) * layers_per_chunk + layer_in_chunk) *
                               layer.total_elements();
  }
};

// What one layer keeps from its forward for its backward, for one micro-
// batch, in elements (offsets inside the layer's stash slot). Tokens: T = b s
// gathered, T / t in this rank's sequence shard.
struct LayerStashLayout {
  bool keeps_everything = false;  // false under full recomputation: only `input`
  bool keeps_probabilities = false;  // false under selective recomputation
  int64_t input_elements = 0;        // T/t x h, the residual stream entering
  int64_t attention_norm_elements = 0;  // T/t x h, RMSNorm output (re-gathered in backward)
  int64_t qkv_elements = 0;          // T x (h + 2 kv hd) / t
  int64_t probabilities_elements = 0;  // b heads / t x s x s (softmax output)
  int64_t context_elements = 0;      // T x h / t (projection input)
  int64_t attention_residual_elements = 0;  // T/t x h
  int64_t mlp_norm_elements = 0;     // T/t x h
  int64_t mlp_hidden_elements = 0;   // T x (1 or 2) ffn / t (pre-activation)
  int64_t mlp_activation_elements = 0;  // T x ffn / t (mlp-out input)
  int64_t total_elements() const {
    return input_elements + attention_norm_elements + qkv_elements + probabilities_elements +
           context_elements + attention_residual_elements + mlp_norm_elements +
           mlp_hidden_elements + mlp_activation_elements;
  }
};

// Dimensions one rank works with, in elements.
struct LayerDims {
  int64_t batch = 0;         // b
  int64_t sequence = 0;      // s
  int64_t hidden = 0;        // h
  int64_t tokens = 0;        // T = b s
  int64_t local_tokens = 0;  // T / t (sequence-parallel shard)
  int64_t head_dim = 0;
  int64_t heads = 0;         // attention heads on this rank (a / t)
  int64_t kv_heads = 0;      // key/value heads on this rank (kv / t)
  int64_t qkv_width = 0;     // (a + 2 kv) hd / t
  int64_t ffn = 0;           // ffn / t
  int64_t mlp_in_width = 0;  // ffn / t, twice that for SwiGLU
  int64_t vocab = 0;         // ceil(V / t) (VocabShardRows)
  bool swiglu = false;
};

// Bytes per buffer class.
struct BufferBytes {
  double weights_bytes = 0;
  double gradients_bytes = 0;
  double optimizer_bytes = 0;
  double activations_bytes = 0;  // the stash of every slot in flight
  double logits_bytes = 0;       // last stage: 16-bit (or fp32) logits + an fp32 copy
  double workspace_bytes = 0;    // scratch the planner covers with its reserve
  double total_bytes() const {
    return weights_bytes + gradients_bytes + optimizer_bytes + activations_bytes + logits_bytes +
           workspace_bytes;
  }
};

struct DeviceMemoryPlan {
  LayerDims dims;
  ParameterLayout parameters;
  LayerStashLayout stash;
  // Peak (micro-batch, chunk) pairs whose activations are stashed at once in
  // this rank's pipeline order (p - stage for plain 1F1B, capped at k).
  int slots_in_flight = 1;
  int element_bytes = 2;                   // weights and activations: 2 or 4 (gradients: 4)
  int optimizer_floats_per_parameter = 0;  // fp32 master copy and moments per shard element
  // Named scratch buffers in elements of `element_bytes` (the backend
  // allocates exactly these), and cuBLAS' workspace in bytes.
  std::vector<std::pair<std::string, int64_t>> workspace_elements;
  int64_t cublas_workspace_bytes = 0;
  BufferBytes planned;    // the planner's formulas for this rank
  BufferBytes allocated;  // what the GPU backend allocates
};

// The layout of `schedule`'s rank under `config`. InvalidArgument when the
// plan cannot be split evenly for a GPU (sequence, heads, KV heads or FFN
// not divisible by t; a vocabulary t does not divide is padded).
StatusOr<DeviceMemoryPlan> PlanDeviceMemory(const WorkerConfig& config,
                                            const StepSchedule& schedule);

// The highest number of (micro-batch, chunk) forwards not yet matched by
// their backward along `pipeline`.
int MaxSlotsInFlight(const std::vector<PipelineAction>& pipeline);

// One communicator of a rank.
struct CommunicatorGroup {
  Group group = Group::kTensor;
  int size = 1;
  int rank = 0;   // this rank's place in the group
  int index = 0;  // which group of its kind (names the store key)
  std::vector<int> members;  // global ranks, in group-rank order
  // "gpu/nccl/tensor/3": where the group's rank 0 publishes the NCCL id.
  std::string StoreKey() const;
};

// The tensor group is the t ranks that share (data, pipeline) coordinates,
// the data group the d ranks that share (tensor, pipeline), the pipeline
// group the p ranks that share (tensor, data).
CommunicatorGroup CommunicatorGroupOf(const WorkerConfig& config, RankCoordinates coordinates,
                                      Group group);

}  // namespace pacer::worker

#endif  // PACER_WORKER_CORE_DEVICE_LAYOUT_H_
