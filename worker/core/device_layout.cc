#include "core/device_layout.h"

#include <algorithm>

#include "core/tiled_attention.h"
#include "pacer/planner/cost_model.h"
#include "pacer/planner/layer_shapes.h"

namespace pacer::worker {
namespace {

using planner::IsMixedPrecision;
using planner::Precision;
using planner::Recompute;

int64_t RoundUp(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

Status CheckDivisible(int64_t value, int64_t by, const char* what) {
  if (by > 0 && value % by == 0) return Status::Ok();
  return InvalidArgumentError(std::string("GPU backend: ") + what + " (" + std::to_string(value) +
                              ") must be divisible by the tensor-parallel degree " +
                              std::to_string(by));
}

LayerStashLayout StashFor(const LayerDims& d, Recompute recompute,
                          planner::AttentionKernel attention) {
  LayerStashLayout s;
  s.input_elements = d.local_tokens * d.hidden;
  if (recompute == Recompute::kFull) return s;  // the layer re-runs from its input
  s.keeps_everything = true;
  // A fused kernel stores no probabilities (its backward recomputes them).
  s.keeps_probabilities =
      recompute == Recompute::kNone && attention == planner::AttentionKernel::kUnfused;
  s.attention_norm_elements = d.local_tokens * d.hidden;
  s.qkv_elements = d.tokens * d.qkv_width;
  if (s.keeps_probabilities) s.probabilities_elements = d.batch * d.heads * d.sequence * d.sequence;
  s.context_elements = d.tokens * d.heads * d.head_dim;
  s.attention_residual_elements = d.local_tokens * d.hidden;
  s.mlp_norm_elements = d.local_tokens * d.hidden;
  s.mlp_hidden_elements = d.tokens * d.mlp_in_width;
  s.mlp_activation_elements = d.tokens * d.ffn;
  return s;
}

}  // namespace

int MaxSlotsInFlight(const std::vector<PipelineAction>& pipeline) {
  int in_flight = 0, peak = 0;
  for (const PipelineAction& a : pipeline) {
    in_flight += a.pass == PassKind::kForward ? 1 : -1;
    peak = std::max(peak, in_flight);
  }
  return std::max(peak, 1);
}

StatusOr<DeviceMemoryPlan> PlanDeviceMemory(const WorkerConfig& c, const StepSchedule& s) {
  const planner::ModelSpec& m = c.model;
  const int64_t t = c.tensor_parallel;
  RETURN_IF_ERROR(CheckDivisible(m.sequence_length, t, "the sequence length"));
  RETURN_IF_ERROR(CheckDivisible(m.attention_heads, t, "the attention heads"));
  RETURN_IF_ERROR(CheckDivisible(m.kv_heads, t, "the key/value heads"));
  RETURN_IF_ERROR(CheckDivisible(m.ffn_hidden_size, t, "the FFN hidden size"));
  if (m.attention_heads <= 0 || m.hidden_size % m.attention_heads != 0 || m.kv_heads <= 0 ||
      m.attention_heads % m.kv_heads != 0) {
    return InvalidArgumentError(
        "GPU backend: the hidden size must split into attention heads, and the heads into "
        "key/value groups");
  }

  DeviceMemoryPlan plan;
  LayerDims& d = plan.dims;
  d.batch = c.micro_batch_size;
  d.sequence = m.sequence_length;
  d.hidden = m.hidden_size;
  d.tokens = d.batch * d.sequence;
  d.local_tokens = d.tokens / t;
  d.head_dim = d.hidden / m.attention_heads;
  d.heads = m.attention_heads / t;
  d.kv_heads = m.kv_heads / t;
  d.qkv_width = (d.heads + 2 * d.kv_heads) * d.head_dim;
  d.ffn = m.ffn_hidden_size / t;
  d.swiglu = m.ffn_kind == planner::FfnKind::kSwiglu;
  d.mlp_in_width = (d.swiglu ? 2 : 1) * d.ffn;
  d.vocab = planner::VocabShardRows(m, static_cast<int>(t));  // padded, as the planner counts

  const int e = IsMixedPrecision(c.precision) ? 2 : 4;
  plan.element_bytes = e;
  const planner::StateBytesPerParameter state =
      planner::StateBytes(c.precision, c.optimizer, WorkerConfig::kFp32Gradients);
  plan.optimizer_floats_per_parameter = static_cast<int>(state.optimizer / 4);

  // Parameters.
  ParameterLayout& p = plan.parameters;
  p.layer.qkv_elements = d.hidden * d.qkv_width;
  p.layer.projection_elements = d.heads * d.head_dim * d.hidden;
  p.layer.mlp_in_elements = d.hidden * d.mlp_in_width;
  p.layer.mlp_out_elements = d.ffn * d.hidden;
  p.layer.norm_elements = 2 * d.hidden;
  p.layers_per_chunk = s.layers_per_chunk;
  p.layers = s.chunks * s.layers_per_chunk;
  p.table_elements = d.vocab * d.hidden;
  int64_t next = 0;
  const bool single_stage = s.holds_embedding && s.holds_logits;
  if (s.holds_embedding) {
    p.input_table_offset = next;
    next += p.table_elements;
  }
  p.layers_offset = next;
  next += static_cast<int64_t>(p.layers) * p.layer.total_elements();
  if (s.holds_logits) {
    if (single_stage && m.tied_embeddings) {
      p.output_table_offset = p.input_table_offset;
    } else {
      p.output_table_offset = next;
      next += p.table_elements;
    }
  }
  p.elements = next;
  const int64_t dp = c.data_parallel;
  p.padded_elements = RoundUp(p.elements, kGradientBuckets * dp * kShardAlignElements);
  p.bucket_elements = p.padded_elements / kGradientBuckets;
  p.piece_elements = p.bucket_elements / dp;
  p.shard_elements = p.padded_elements / dp;

  // Activations.
  plan.stash = StashFor(d, c.recompute, c.attention);
  plan.slots_in_flight = MaxSlotsInFlight(s.pipeline);
  const int64_t stashed_layers = static_cast<int64_t>(plan.slots_in_flight) * s.layers_per_chunk;

  // Workspace: one layer's scratch (not kept across passes).
  auto& w = plan.workspace_elements;
  const int64_t th = d.tokens * d.hidden, lh = d.local_tokens * d.hidden;
  const int64_t context = d.tokens * d.heads * d.head_dim;
  // Unfused: whole s x s matrices; fused: one tile of query rows (P and dP).
  const int64_t probabilities =
      d.batch * d.heads * d.sequence *
      (c.attention == planner::AttentionKernel::kFused
           ? std::min<int64_t>(d.sequence, TiledAttentionOptions{}.tile_rows)
           : d.sequence);
  w.emplace_back("gathered", th);
  w.emplace_back("partial", th);
  w.emplace_back("chunk_output", lh);
  if (c.recompute == Recompute::kFull) {
    // The recomputed forward keeps both gathered inputs (no re-gather in
    // backward) and one layer's full activations.
    w.emplace_back("gathered_mlp", th);
    w.emplace_back("recompute_stash", StashFor(d, Recompute::kNone, c.attention).total_elements());
  } else if (c.recompute == Recompute::kSelective ||
             c.attention == planner::AttentionKernel::kFused) {
    w.emplace_back("probabilities", probabilities);
  }
  w.emplace_back("grad_probabilities", probabilities);
  w.emplace_back("grad_gathered", th);
  w.emplace_back("grad_context", context);
  w.emplace_back("grad_qkv", d.tokens * d.qkv_width);
  w.emplace_back("grad_kv_expanded", 2 * context);
  w.emplace_back("grad_mlp_hidden", d.tokens * d.mlp_in_width);
  w.emplace_back("grad_mlp_activation", d.tokens * d.ffn);
  w.emplace_back("grad_local", lh);
  w.emplace_back("grad_residual", lh);
  w.emplace_back("grad_stream", lh);
  w.emplace_back("grad_recv", lh);
  w.emplace_back("norm_rstd", (d.local_tokens * 4 + e - 1) / e);
  w.emplace_back("attention_pointers", (3 * d.batch * d.heads * 8 + e - 1) / e);
  // ZeRO 2 and 3 shard the gradients, ZeRO 3 also the weights; the backward
  // still produces (and the forward still reads) the whole stage, staged here.
  if (c.zero_stage >= 2 && dp > 1) w.emplace_back("gradient_staging", p.padded_elements);
  if (c.zero_stage >= 3 && dp > 1) w.emplace_back("weight_staging", p.padded_elements);
  plan.cublas_workspace_bytes = int64_t{32} << 20;

  // The planner's formulas for this rank.
  const planner::ShardedStateBytes sharded =
      planner::ShardedState(s.stage_parameters, state, c.zero_stage, c.data_parallel);
  plan.planned.weights_bytes = sharded.weights_bytes;
  plan.planned.gradients_bytes = sharded.gradients_bytes;
  plan.planned.optimizer_bytes = sharded.optimizer_bytes;
  const double element_scale = e / 2.0;  // the planner's formulas assume 16-bit
  const bool sp = t > 1;
  plan.planned.activations_bytes =
      element_scale *
      // The score matrix is stored only under an unfused kernel.
      planner::LayerActivationBytes(m, c.micro_batch_size, c.tensor_parallel, sp, c.recompute,
                                    c.attention) *
      static_cast<double>(stashed_layers);
  if (c.recompute == Recompute::kFull) {
    plan.planned.activations_bytes +=
        element_scale * planner::LayerActivationBytes(m, c.micro_batch_size, c.tensor_parallel, sp,
                                                      Recompute::kNone, c.attention);
  }
  const double logits_elements = static_cast<double>(d.tokens) * static_cast<double>(d.vocab);
  plan.planned.logits_bytes = s.holds_logits ? logits_elements * (e + 4.0) : 0;

  // What the backend allocates.
  const double n = static_cast<double>(p.padded_elements);
  const double zero_d = static_cast<double>(dp);
  plan.allocated.weights_bytes = e * (c.zero_stage >= 3 ? n / zero_d : n);
  // fp32 gradients under every plan (WorkerConfig::kFp32Gradients).
  plan.allocated.gradients_bytes = 4.0 * (c.zero_stage >= 2 ? n / zero_d : n);
  plan.allocated.optimizer_bytes =
      4.0 * plan.optimizer_floats_per_parameter *
      static_cast<double>(c.zero_stage >= 1 ? p.shard_elements : p.padded_elements);
  plan.allocated.activations_bytes = static_cast<double>(e) *
                                     static_cast<double>(plan.stash.total_elements()) *
                                     static_cast<double>(stashed_layers);
  plan.allocated.logits_bytes = plan.planned.logits_bytes;
  double workspace = static_cast<double>(plan.cublas_workspace_bytes);
  for (const auto& [name, elements] : w)
    workspace += static_cast<double>(e) * static_cast<double>(elements);
  if (c.recompute == Recompute::kFull) {
    // The planner counts this one layer as activations; so does `allocated`.
    const double one_layer =
        static_cast<double>(e) *
        static_cast<double>(StashFor(d, Recompute::kNone, c.attention).total_elements());
    workspace -= one_layer;
    plan.allocated.activations_bytes += one_layer;
  }
  plan.allocated.workspace_bytes = workspace;
  return plan;
}

std::string CommunicatorGroup::StoreKey() const {
  return std::string("gpu/nccl/") + GroupName(group) + "/" + std::to_string(index);
}

CommunicatorGroup CommunicatorGroupOf(const WorkerConfig& c, RankCoordinates r, Group group) {
  CommunicatorGroup g;
  g.group = group;
  const int t = c.tensor_parallel, d = c.data_parallel, p = c.pipeline_parallel;
  RankCoordinates member = r;
  switch (group) {
    case Group::kTensor:
      g.size = t;
      g.rank = r.tensor_rank;
      g.index = r.data_rank + d * r.pipeline_rank;
      for (int i = 0; i < t; ++i) {
        member.tensor_rank = i;
        g.members.push_back(GlobalRankOf(c, member));
      }
      break;
    case Group::kData:
      g.size = d;
      g.rank = r.data_rank;
      g.index = r.tensor_rank + t * r.pipeline_rank;
      for (int i = 0; i < d; ++i) {
        member.data_rank = i;
        g.members.push_back(GlobalRankOf(c, member));
      }
      break;
    case Group::kPipeline:
      g.size = p;
      g.rank = r.pipeline_rank;
      g.index = r.tensor_rank + t * r.data_rank;
      for (int i = 0; i < p; ++i) {
        member.pipeline_rank = i;
        g.members.push_back(GlobalRankOf(c, member));
      }
      break;
  }
  return g;
}

}  // namespace pacer::worker
