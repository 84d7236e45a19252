#include "core/step_schedule.h"

#include <algorithm>
#include <string>

#include "core/causal_mask.h"
#include "pacer/planner/cost_model.h"
#include "pacer/planner/layer_shapes.h"
#include "pacer/planner/model_math.h"

namespace pacer::worker {
namespace {

using planner::GemmShape;
using planner::Recompute;

double ActivationElementBytes(planner::Precision p) {
  return (p == planner::Precision::kFp32 || p == planner::Precision::kTf32) ? 4.0 : 2.0;
}

// Tensor-parallel collectives of one layer (Megatron-LM, with sequence
// parallelism when t > 1: each all-reduce becomes a reduce-scatter + all-
// gather of the same buffer, and backward re-gathers the inputs of the two
// weight-gradient GEMMs). The planner's model counts the same operations
// (docs/planner.md, "Step time").
void AddTensorParallelCollectives(const WorkerConfig& c, LayerWork* layer) {
  const int t = c.tensor_parallel;
  if (t == 1) return;
  const double bytes = static_cast<double>(c.micro_batch_size) * c.model.sequence_length *
                       c.model.hidden_size * ActivationElementBytes(c.precision);
  auto op = [&](const char* name, CollectiveKind kind) {
    return Collective{name, kind, Group::kTensor, t, bytes};
  };
  // Sequence parallel: the layer's input and the MLP's input are gathered,
  // the attention and MLP outputs reduce-scattered.
  const std::vector<Collective> forward = {
      op("attention-in", CollectiveKind::kAllGather),
      op("attention-out", CollectiveKind::kReduceScatter),
      op("mlp-in", CollectiveKind::kAllGather),
      op("mlp-out", CollectiveKind::kReduceScatter),
  };
  layer->forward_collectives = forward;
  // Conjugates in backward: gradients of the outputs are gathered, of the
  // inputs reduce-scattered.
  layer->backward_collectives = {
      op("mlp-out-grad", CollectiveKind::kAllGather),
      op("mlp-in-grad", CollectiveKind::kReduceScatter),
      op("attention-out-grad", CollectiveKind::kAllGather),
      op("attention-in-grad", CollectiveKind::kReduceScatter),
  };
  if (c.recompute == Recompute::kFull) {
    // The recomputed forward gathers again and keeps the gathered inputs.
    layer->recompute_collectives = forward;
  } else {
    // Only the sharded inputs were kept: gather them again for the weight
    // gradients of the QKV and MLP-in GEMMs.
    layer->backward_collectives.push_back(op("attention-in-regather", CollectiveKind::kAllGather));
    layer->backward_collectives.push_back(op("mlp-in-regather", CollectiveKind::kAllGather));
  }
}

// The tensor-parallel collectives of the vocabulary-parallel tables
// (StepSchedule::embedding_collectives, logits_collectives).
void AddTableCollectives(const WorkerConfig& c, StepSchedule* s) {
  const int t = c.tensor_parallel;
  if (t == 1) return;
  const double tokens = static_cast<double>(c.micro_batch_size) * c.model.sequence_length;
  const double bytes = tokens * c.model.hidden_size * ActivationElementBytes(c.precision);
  auto op = [&](const char* name, CollectiveKind kind, double b) {
    return Collective{name, kind, Group::kTensor, t, b};
  };
  if (s->holds_embedding) {
    s->embedding_collectives.forward = {op("embedding-out", CollectiveKind::kReduceScatter, bytes)};
    s->embedding_collectives.backward = {op("embedding-grad", CollectiveKind::kAllGather, bytes)};
  }
  if (s->holds_logits) {
    s->logits_collectives.forward = {
        op("logits-in", CollectiveKind::kAllGather, bytes),
        op("logits-stats", CollectiveKind::kAllGather, tokens * 2 * sizeof(float) * t)};
    s->logits_collectives.backward = {op("logits-in-grad", CollectiveKind::kReduceScatter, bytes)};
  }
}

// Gradient and parameter collectives of the data-parallel group, in
// kGradientBuckets buckets (ZeRO paper; Megatron's distributed optimizer is
// stage 1).
void AddDataParallelCollectives(const WorkerConfig& c, StepSchedule* s) {
  const int d = c.data_parallel;
  if (d == 1) return;
  const planner::StateBytesPerParameter state =
      planner::StateBytes(c.precision, c.optimizer, WorkerConfig::kFp32Gradients);
  const double grad_bytes = s->stage_parameters * state.gradients / kGradientBuckets;
  const double weight_bytes = s->stage_parameters * state.weights / kGradientBuckets;
  for (int i = 0; i < kGradientBuckets; ++i) {
    switch (c.zero_stage) {
      case 0:
        s->step_collectives.push_back(
            {"gradients", CollectiveKind::kAllReduce, Group::kData, d, grad_bytes});
        break;
      case 1:
        s->step_collectives.push_back(
            {"gradients", CollectiveKind::kReduceScatter, Group::kData, d, grad_bytes});
        s->step_collectives.push_back(
            {"parameters", CollectiveKind::kAllGather, Group::kData, d, weight_bytes});
        break;
      case 2:
        s->per_micro_batch_collectives.push_back(
            {"gradients", CollectiveKind::kReduceScatter, Group::kData, d, grad_bytes});
        s->step_collectives.push_back(
            {"parameters", CollectiveKind::kAllGather, Group::kData, d, weight_bytes});
        break;
      default:
        s->per_micro_batch_collectives.push_back(
            {"parameters-forward", CollectiveKind::kAllGather, Group::kData, d, weight_bytes});
        s->per_micro_batch_collectives.push_back(
            {"parameters-backward", CollectiveKind::kAllGather, Group::kData, d, weight_bytes});
        s->per_micro_batch_collectives.push_back(
            {"gradients", CollectiveKind::kReduceScatter, Group::kData, d, grad_bytes});
        break;
    }
  }
}

double SumFlops(const std::vector<GemmShape>& gemms) {
  double flops = 0;
  for (const GemmShape& g : gemms) flops += g.flops();
  return flops;
}

double SumBusBytes(const std::vector<Collective>& ops, Group group) {
  double bytes = 0;
  for (const Collective& op : ops) {
    if (op.group == group) bytes += op.BusBytes();
  }
  return bytes;
}

}  // namespace

const char* GroupName(Group g) {
  switch (g) {
    case Group::kTensor: return "tensor";
    case Group::kData: return "data";
    case Group::kPipeline: return "pipeline";
  }
  return "unknown";
}

const char* CollectiveKindName(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce: return "all-reduce";
    case CollectiveKind::kReduceScatter: return "reduce-scatter";
    case CollectiveKind::kAllGather: return "all-gather";
    case CollectiveKind::kSend: return "send";
    case CollectiveKind::kRecv: return "recv";
  }
  return "unknown";
}

double Collective::BusBytes() const {
  if (ranks <= 1) return 0;
  const double share = static_cast<double>(ranks - 1) / ranks;
  switch (kind) {
    case CollectiveKind::kAllReduce: return 2 * share * bytes;
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllGather: return share * bytes;
    case CollectiveKind::kSend:
    case CollectiveKind::kRecv: return bytes;
  }
  return 0;
}

RankCoordinates CoordinatesOf(const WorkerConfig& c, int global_rank) {
  RankCoordinates r;
  r.tensor_rank = global_rank % c.tensor_parallel;
  r.data_rank = (global_rank / c.tensor_parallel) % c.data_parallel;
  r.pipeline_rank = global_rank / (c.tensor_parallel * c.data_parallel);
  return r;
}

int GlobalRankOf(const WorkerConfig& c, RankCoordinates r) {
  return r.tensor_rank + c.tensor_parallel * (r.data_rank + c.data_parallel * r.pipeline_rank);
}

double LayerWork::ForwardFlops() const {
  double flops = 0;
  for (const GemmShape& g : forward_gemms) flops += g.flops();
  return flops;
}

double LayerWork::RecomputeFlops() const { return SumFlops(recompute_gemms); }

std::vector<PipelineAction> OneForwardOneBackward(int stage, int stages, int64_t micro_batches,
                                                  int chunks) {
  std::vector<PipelineAction> order;
  const int64_t total = micro_batches * chunks;
  order.reserve(static_cast<size_t>(2 * total));
  const int64_t p = stages, v = chunks;
  // Megatron's interleaved mapping from the i-th forward (or backward) of a
  // rank to its micro-batch and chunk; with one chunk it is the identity.
  auto forward_of = [&](int64_t i) {
    const int chunk = static_cast<int>((i % (p * v)) / p);
    const int mb = static_cast<int>((i / (p * v)) * p + i % p);
    return PipelineAction{PassKind::kForward, v == 1 ? static_cast<int>(i) : mb, chunk};
  };
  auto backward_of = [&](int64_t i) {
    const int chunk = static_cast<int>(v - 1 - (i % (p * v)) / p);
    const int mb = static_cast<int>((i / (p * v)) * p + i % p);
    return PipelineAction{PassKind::kBackward, v == 1 ? static_cast<int>(i) : mb, chunk};
  };
  // Warm-up forwards fill the pipeline: later stages need fewer.
  const int64_t warmup =
      v == 1 ? std::min<int64_t>(p - stage - 1, total)
             : std::min<int64_t>((p - stage - 1) * 2 + (v - 1) * p, total);
  for (int64_t i = 0; i < warmup; ++i) order.push_back(forward_of(i));
  for (int64_t i = 0; i < total - warmup; ++i) {
    order.push_back(forward_of(warmup + i));
    order.push_back(backward_of(i));
  }
  for (int64_t i = total - warmup; i < total; ++i) order.push_back(backward_of(i));
  return order;
}

StatusOr<StepSchedule> BuildStepSchedule(const WorkerConfig& c, int global_rank) {
  RETURN_IF_ERROR(ValidateConfig(c));
  if (global_rank < 0 || global_rank >= c.world_size) {
    return InvalidArgumentError("rank " + std::to_string(global_rank) + " is outside WORLD_SIZE " +
                                std::to_string(c.world_size));
  }
  const planner::ModelSpec& m = c.model;
  StepSchedule s;
  s.coordinates = CoordinatesOf(c, global_rank);
  const int p = c.pipeline_parallel, v = c.virtual_stages, t = c.tensor_parallel;
  s.chunks = v;
  s.layers_per_chunk = m.layers / (p * v);
  s.holds_embedding = s.coordinates.pipeline_rank == 0;
  s.holds_logits = s.coordinates.pipeline_rank == p - 1;
  s.micro_batches = c.gradient_accumulation_steps;

  s.layer.forward_gemms = planner::LayerForwardGemms(m, c.micro_batch_size, t);
  auto core = planner::AttentionCoreGemms(m, c.micro_batch_size, t);
  const bool fused = c.attention == planner::AttentionKernel::kFused;
  if (fused && m.causal_attention) {
    // A fused kernel under a causal mask computes a tile's scores against
    // the keys up to its last row only (causal_mask.h): the scores' keys
    // and the context's inner dimension shrink to that mean.
    const double f = CausalScoreFraction(m.sequence_length, kAttentionTileRows);
    core[0].n *= f;
    core[1].k *= f;
    s.layer.forward_gemms[1] = core[0];
    s.layer.forward_gemms[2] = core[1];
  }
  if (c.recompute == Recompute::kFull) {
    s.layer.recompute_gemms.assign(s.layer.forward_gemms.begin(), s.layer.forward_gemms.end());
  } else if (c.recompute == Recompute::kSelective && !fused) {
    // (A fused kernel stores no scores for selective recomputation to drop.)
    s.layer.recompute_gemms.assign(core.begin(), core.end());
  }
  // A fused kernel's backward recomputes the scores (Q K^T) it never stored.
  if (fused) s.layer.recompute_gemms.push_back(core[0]);
  AddTensorParallelCollectives(c, &s.layer);
  s.logits = planner::LogitsGemm(m, c.micro_batch_size, t);
  AddTableCollectives(c, &s);
  s.pipeline = OneForwardOneBackward(s.coordinates.pipeline_rank, p, s.micro_batches, v);
  if (p > 1) {
    // Megatron's scatter-gather: with sequence parallelism each TP rank sends
    // its 1/t share of the activations.
    s.p2p_bytes = static_cast<double>(c.micro_batch_size) * m.sequence_length * m.hidden_size *
                  ActivationElementBytes(c.precision) / t;
  }

  // Parameters on this rank: its layers and one V x h table (input embedding
  // on the first stage, output projection on the last; both on a single
  // stage unless tied), split t ways, the tables padded to whole rows
  // (VocabShardRows) — the planner's StageParameters.
  const double tables = (p == 1 && !m.tied_embeddings) ? 2.0 : 1.0;
  s.stage_parameters = static_cast<double>(m.layers) / p * planner::LayerParameters(m) / t +
                       tables * static_cast<double>(planner::VocabShardRows(m, t)) * m.hidden_size;
  s.optimizer_shard_parameters =
      s.stage_parameters / (c.zero_stage >= 1 ? c.data_parallel : 1);
  AddDataParallelCollectives(c, &s);
  return s;
}

double StepSchedule::GemmFlopsPerStep() const {
  const double per_layer = layer.ForwardFlops() + layer.BackwardFlops() + layer.RecomputeFlops();
  double flops = static_cast<double>(micro_batches) * chunks * layers_per_chunk * per_layer;
  if (holds_logits) flops += static_cast<double>(micro_batches) * 3 * logits.flops();
  return flops;
}

double StepSchedule::BusBytesPerStep(Group group) const {
  const double k = static_cast<double>(micro_batches);
  const double layers = static_cast<double>(chunks) * layers_per_chunk;
  double bytes = k * layers *
                 (SumBusBytes(layer.forward_collectives, group) +
                  SumBusBytes(layer.backward_collectives, group) +
                  SumBusBytes(layer.recompute_collectives, group));
  bytes += SumBusBytes(step_collectives, group) + k * SumBusBytes(per_micro_batch_collectives, group);
  for (const PassCollectives* table : {&embedding_collectives, &logits_collectives}) {
    bytes += k * (SumBusBytes(table->forward, group) + SumBusBytes(table->backward, group));
  }
  if (group == Group::kPipeline) {
    // Every forward except on the last chunk of the last stage sends its
    // output on; every backward except on the first chunk of the first stage
    // sends its input gradient back.
    for (const PipelineAction& a : pipeline) {
      const bool last = holds_logits && a.chunk == chunks - 1;
      const bool first = holds_embedding && a.chunk == 0;
      if (a.pass == PassKind::kForward && !last) bytes += p2p_bytes;
      if (a.pass == PassKind::kBackward && !first) bytes += p2p_bytes;
    }
  }
  return bytes;
}

}  // namespace pacer::worker
