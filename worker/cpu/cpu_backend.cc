#include "cpu/cpu_backend.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <utility>

#include "cpu/cpu_buffers.h"
#include "cpu/cpu_kernels.h"
#include "cpu/gloo_comms.h"

namespace pacer::worker {
namespace cpu {
namespace {

using Clock = std::chrono::steady_clock;

int64_t Dim(double v) { return static_cast<int64_t>(std::llround(v)); }
size_t Size(int64_t v) { return static_cast<size_t>(std::max<int64_t>(v, 0)); }

const Collective* Find(const std::vector<Collective>& list, const char* name) {
  for (const Collective& c : list) {
    if (std::strcmp(c.name, name) == 0) return &c;
  }
  return nullptr;
}

bool StartsWith(const char* s, const char* prefix) {
  return std::strncmp(s, prefix, std::strlen(prefix)) == 0;
}

// Offsets and lengths of the kGradientBuckets buckets over n parameters,
// and of each data-parallel rank's shard of a bucket.
struct Bucket {
  size_t offset = 0, length = 0;
  std::vector<size_t> shard_counts;  // per data-parallel rank
  size_t ShardOffset(int rank) const {
    size_t o = offset;
    for (int i = 0; i < rank; ++i) o += shard_counts[static_cast<size_t>(i)];
    return o;
  }
};

std::vector<Bucket> MakeBuckets(size_t n, int d) {
  std::vector<Bucket> buckets(kGradientBuckets);
  const size_t base = n / kGradientBuckets;
  for (size_t i = 0; i < buckets.size(); ++i) {
    Bucket& b = buckets[i];
    b.offset = i * base;
    b.length = i + 1 == buckets.size() ? n - b.offset : base;
    const size_t share = b.length / static_cast<size_t>(d);
    b.shard_counts.assign(static_cast<size_t>(d), share);
    b.shard_counts.back() = b.length - share * static_cast<size_t>(d - 1);
  }
  return buckets;
}

}  // namespace

// Everything of one layer kept from forward to backward (what the
// recompute policy keeps; the rest is recomputed or regathered).
struct LayerStash {
  FloatBuffer x, inv1, n1, n1_full, qkv, probs, ctx, x2, inv2, n2, n2_full, mlp_pre, act;
};

struct ChunkStash {
  std::vector<LayerStash> layers;
  FloatBuffer logits_input;  // [T x h], last stage
  FloatBuffer dlogits;       // [T x V/t], last stage
};

class CpuBackend::Impl {
 public:
  Status Initialize(const BackendContext& context, uint64_t seed);
  StatusOr<StepTiming> RunStep(int64_t step);

  MemoryTracker memory;
  FloatBuffer weights{&memory, BufferClass::kWeights};
  FloatBuffer grads{&memory, BufferClass::kGradients};
  FloatBuffer grad_shard{&memory, BufferClass::kGradients};  // ZeRO >= 1: reduced, owned
  FloatBuffer adam_m{&memory, BufferClass::kOptimizer};
  FloatBuffer adam_v{&memory, BufferClass::kOptimizer};
  std::vector<float> local_gradients, reduced_gradients;
  std::vector<std::pair<size_t, size_t>> owned;
  double last_loss = 0;

 private:
  // Layer weights of this rank: offsets into `weights` (and `grads`).
  struct LayerOffsets {
    size_t qkv = 0, proj = 0, mlp_in = 0, mlp_out = 0;
  };
  enum class Pass { kForward, kRecompute };

  Status Forward(int mb, int chunk, int64_t step);
  Status Backward(int mb, int chunk, int64_t step);
  Status LayerForward(int layer, const float* x_in, float* x_out, LayerStash* st, Pass pass);
  Status LayerBackward(int layer, LayerStash* st, const float* dx_out, float* dx);
  void AttentionCore(LayerStash* st);
  Status Alloc(FloatBuffer* b, BufferClass c, size_t n);

  // Tensor-parallel collectives on [T x h] activations (shard = T/t rows).
  Status TpAllGather(const Collective* c, const float* shard, FloatBuffer* full);
  Status TpReduceScatter(const Collective* c, float* full, float* shard);
  // Runs the entries of a data-parallel list that `select` accepts; each
  // name appears once per bucket, in bucket order.
  template <typename Select>
  Status DataParallel(const std::vector<Collective>& list, bool step_end, Select select);
  Status DataParallelOne(const Collective& c, size_t bucket, bool step_end);
  void UpdateShard(size_t bucket, int64_t step);
  std::vector<bool> updated_;   // per bucket, this step
  std::vector<bool> reduced_;   // per bucket, this step
  std::vector<size_t> owned_position_;  // per bucket: its offset in the owned buffers
  int64_t current_step_ = 0;
  void InitWeights(uint64_t seed);
  void FillTokens(int mb, int64_t step, int32_t* tokens, int64_t count, int64_t first_position,
                  int64_t modulo, uint64_t salt) const;

  // Wraps a communicator call: its time counts as collective time, and its
  // schedule entry's bus bytes are counted once it succeeded.
  template <typename F>
  Status Comm(const Collective* c, F&& f) {
    const Clock::time_point start = Clock::now();
    Status s = f();
    collective_seconds_ += std::chrono::duration<double>(Clock::now() - start).count();
    if (s.ok() && c != nullptr) bus_bytes_ += c->BusBytes();
    return s;
  }

  const WorkerConfig* config_ = nullptr;
  const StepSchedule* schedule_ = nullptr;
  std::unique_ptr<GlooComms> comms_;
  uint64_t seed_ = 0;
  int t_ = 1, d_ = 1, p_ = 1;
  int64_t tokens_ = 0, shard_tokens_ = 0, hidden_ = 0, qkv_width_ = 0, seq_ = 0, head_dim_ = 0,
          head_batches_ = 0, proj_in_ = 0, mlp_in_width_ = 0, mlp_out_in_ = 0, vocab_shard_ = 0;
  int64_t kv_blocks_ = 0;  // K and V blocks of s x head_dim in the qkv output
  bool swiglu_ = false;
  std::vector<LayerOffsets> layer_offsets_;
  size_t embedding_offset_ = 0, output_offset_ = 0;
  std::vector<Bucket> buckets_;
  std::map<std::pair<int, int>, ChunkStash> stash_;
  FloatBuffer scratch_{&memory, BufferClass::kActivations};
  double flops_ = 0, collective_seconds_ = 0, bus_bytes_ = 0, loss_sum_ = 0;
  int64_t loss_count_ = 0;
  AdamWParams adam_;
  bool broken_ = false;
};

Status CpuBackend::Impl::Alloc(FloatBuffer* b, BufferClass c, size_t n) {
  *b = FloatBuffer(&memory, c);
  return b->Assign(n);
}

Status CpuBackend::Impl::Initialize(const BackendContext& context, uint64_t seed) {
  if (context.config == nullptr || context.schedule == nullptr) {
    return InvalidArgumentError("the CPU backend needs a config and a schedule");
  }
  config_ = context.config;
  schedule_ = context.schedule;
  seed_ = seed;
  const WorkerConfig& c = *config_;
  const StepSchedule& s = *schedule_;
  t_ = c.tensor_parallel;
  d_ = c.data_parallel;
  p_ = c.pipeline_parallel;
  const auto& g = s.layer.forward_gemms;
  tokens_ = Dim(g[0].m);
  hidden_ = Dim(g[0].k);
  qkv_width_ = Dim(g[0].n);
  seq_ = Dim(g[1].m);
  head_dim_ = Dim(g[1].k);
  head_batches_ = Dim(g[1].batch);
  proj_in_ = Dim(g[3].k);
  mlp_in_width_ = Dim(g[4].n);
  mlp_out_in_ = Dim(g[5].k);
  vocab_shard_ = Dim(s.logits.n);
  swiglu_ = c.model.ffn_kind == planner::FfnKind::kSwiglu;
  if (tokens_ <= 0 || hidden_ <= 0 || seq_ <= 0 || head_dim_ <= 0 || head_batches_ <= 0 ||
      vocab_shard_ <= 0 || mlp_out_in_ <= 0) {
    return InvalidArgumentError("the CPU backend needs a model with positive dimensions");
  }
  if (tokens_ % t_ != 0) {
    return InvalidArgumentError("sequence parallelism needs micro-batch tokens (" +
                                std::to_string(tokens_) + ") divisible by t = " +
                                std::to_string(t_));
  }
  if (swiglu_ && mlp_in_width_ != 2 * mlp_out_in_) {
    return InvalidArgumentError("SwiGLU needs the MLP input width twice the FFN shard");
  }
  shard_tokens_ = tokens_ / t_;
  const int64_t block = seq_ * head_dim_;
  const int64_t q_elems = head_batches_ * block;
  kv_blocks_ = std::max<int64_t>(0, (tokens_ * qkv_width_ - q_elems) / 2 / block);

  // Process-wide, so the same on every rank of this process: the cores
  // shared by the local ranks.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const int blas_threads = std::max(1, static_cast<int>(cores) / std::max(1, c.local_world_size));
  // Only when it changes: ranks sharing a process set the same value, and a
  // change while another rank is inside sgemm would not be safe.
  if (openblas_get_num_threads() != blas_threads) openblas_set_num_threads(blas_threads);
  if (context.local_rank == 0) {
    std::fprintf(stderr,
                 "pacer-worker cpu: executing the plan's %s arithmetic in fp32 (OpenBLAS sgemm); "
                 "bus bytes are counted at the plan's precision\n",
                 c.precision == planner::Precision::kFp32 ? "fp32" : "reduced-precision");
  }

  // Weights: each layer's four matrices, the tables, then padding up to the
  // schedule's stage_parameters (norm weights and biases of the planner's
  // count, which this backend's gain-free norm does not use).
  size_t offset = 0;
  if (s.holds_embedding) {
    embedding_offset_ = offset;
    offset += Size(vocab_shard_ * hidden_);
  }
  const int layers = s.chunks * s.layers_per_chunk;
  layer_offsets_.resize(static_cast<size_t>(layers));
  for (LayerOffsets& l : layer_offsets_) {
    l.qkv = offset;
    offset += Size(hidden_ * qkv_width_);
    l.proj = offset;
    offset += Size(proj_in_ * hidden_);
    l.mlp_in = offset;
    offset += Size(hidden_ * mlp_in_width_);
    l.mlp_out = offset;
    offset += Size(mlp_out_in_ * hidden_);
  }
  if (s.holds_logits) {
    if (p_ == 1 && c.model.tied_embeddings) {
      output_offset_ = embedding_offset_;
    } else {
      output_offset_ = offset;
      offset += Size(vocab_shard_ * hidden_);
    }
  }
  const size_t n = std::max(offset, Size(Dim(s.stage_parameters)));
  RETURN_IF_ERROR(Alloc(&weights, BufferClass::kWeights, n));
  RETURN_IF_ERROR(Alloc(&grads, BufferClass::kGradients, n));
  buckets_ = MakeBuckets(n, d_);
  const int dp_rank = s.coordinates.data_rank;
  owned.clear();
  size_t owned_total = 0;
  for (const Bucket& b : buckets_) {
    if (c.zero_stage == 0) {
      owned.emplace_back(b.offset, b.length);
    } else {
      owned.emplace_back(b.ShardOffset(dp_rank), b.shard_counts[static_cast<size_t>(dp_rank)]);
    }
    owned_total += owned.back().second;
  }
  owned_position_.clear();
  size_t position = 0;
  for (const auto& range : owned) {
    owned_position_.push_back(position);
    position += range.second;
  }
  RETURN_IF_ERROR(Alloc(&adam_m, BufferClass::kOptimizer, owned_total));
  RETURN_IF_ERROR(Alloc(&adam_v, BufferClass::kOptimizer, owned_total));
  if (c.zero_stage >= 1) RETURN_IF_ERROR(Alloc(&grad_shard, BufferClass::kGradients, owned_total));
  InitWeights(seed);

  const auto timeout = context.timeout;
  ASSIGN_OR_RETURN(comms_, GlooComms::Connect(c, context.global_rank, context.store, timeout));
  return Status::Ok();
}

void CpuBackend::Impl::InitWeights(uint64_t seed) {
  // Identical on every data-parallel rank (the hash ignores the data rank),
  // distinct across tensor and pipeline shards. Scaled by 1/sqrt(fan-in) so
  // activations stay O(1) through the layers.
  const RankCoordinates& rc = schedule_->coordinates;
  float* w = weights.data();
  auto fill = [&](size_t offset, size_t count, double fan_in) {
    const float scale = static_cast<float>(1.0 / std::sqrt(std::max(fan_in, 1.0)));
    for (size_t i = 0; i < count; ++i) {
      const uint64_t h = HashKeys(seed, static_cast<uint64_t>(rc.tensor_rank),
                                  static_cast<uint64_t>(rc.pipeline_rank), offset + i, 0x77);
      w[offset + i] = UniformFromHash(h) * scale;
    }
  };
  if (schedule_->holds_embedding) fill(embedding_offset_, Size(vocab_shard_ * hidden_), 1);
  for (const LayerOffsets& l : layer_offsets_) {
    fill(l.qkv, Size(hidden_ * qkv_width_), static_cast<double>(hidden_));
    fill(l.proj, Size(proj_in_ * hidden_), static_cast<double>(proj_in_ * t_));
    fill(l.mlp_in, Size(hidden_ * mlp_in_width_), static_cast<double>(hidden_));
    fill(l.mlp_out, Size(mlp_out_in_ * hidden_), static_cast<double>(mlp_out_in_ * t_));
  }
  if (schedule_->holds_logits && output_offset_ != embedding_offset_) {
    fill(output_offset_, Size(vocab_shard_ * hidden_), static_cast<double>(hidden_));
  }
}

void CpuBackend::Impl::FillTokens(int mb, int64_t step, int32_t* tokens, int64_t count,
                                  int64_t first_position, int64_t modulo, uint64_t salt) const {
  const uint64_t dp = static_cast<uint64_t>(schedule_->coordinates.data_rank);
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t h = HashKeys(seed_, static_cast<uint64_t>(step), static_cast<uint64_t>(mb), dp,
                                static_cast<uint64_t>(first_position + i) * 2 + salt);
    tokens[i] = static_cast<int32_t>(h % static_cast<uint64_t>(modulo));
  }
}

Status CpuBackend::Impl::TpAllGather(const Collective* c, const float* shard, FloatBuffer* full) {
  const size_t shard_elems = Size(shard_tokens_ * hidden_);
  if (full->size() != shard_elems * Size(t_)) {
    RETURN_IF_ERROR(Alloc(full, BufferClass::kActivations, shard_elems * Size(t_)));
  }
  const std::vector<size_t> counts(Size(t_), shard_elems);
  return Comm(c, [&] {
    return comms_->AllGather(Group::kTensor, shard, full->data(), counts, c ? c->name : "gather");
  });
}

Status CpuBackend::Impl::TpReduceScatter(const Collective* c, float* full, float* shard) {
  const std::vector<size_t> counts(Size(t_), Size(shard_tokens_ * hidden_));
  return Comm(c, [&] {
    return comms_->ReduceScatter(Group::kTensor, full, shard, counts, c ? c->name : "scatter");
  });
}

// Scores, softmax and context of every (sequence, head) pair: the two
// batched GEMMs, as a loop. Q, K and V are s x head_dim blocks of the qkv
// output (K and V shared round-robin when grouped-query attention makes
// them fewer).
void CpuBackend::Impl::AttentionCore(LayerStash* st) {
  const int64_t block = seq_ * head_dim_;
  const int64_t q_elems = head_batches_ * block;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim_)));
  for (int64_t i = 0; i < head_batches_; ++i) {
    const float* q = st->qkv.data() + i * block;
    const int64_t kv = kv_blocks_ > 0 ? i % kv_blocks_ : 0;
    const float* k = st->qkv.data() + (kv_blocks_ > 0 ? q_elems + kv * block : 0);
    const float* v = st->qkv.data() + (kv_blocks_ > 0 ? q_elems + (kv_blocks_ + kv) * block : 0);
    float* p = st->probs.data() + i * seq_ * seq_;
    Sgemm(false, true, seq_, seq_, head_dim_, 1.0f, q, head_dim_, k, head_dim_, 0.0f, p, seq_,
          &flops_);
    SoftmaxRowsInPlace(p, seq_, seq_, scale);
    Sgemm(false, false, seq_, head_dim_, seq_, 1.0f, p, seq_, v, head_dim_, 0.0f,
          st->ctx.data() + i * block, head_dim_, &flops_);
  }
}

Status CpuBackend::Impl::LayerForward(int layer, const float* x_in, float* x_out, LayerStash* st,
                                      Pass pass) {
  const LayerWork& work = schedule_->layer;
  const std::vector<Collective>& tp =
      pass == Pass::kForward ? work.forward_collectives : work.recompute_collectives;
  const planner::Recompute recompute = config_->recompute;
  const bool keep_full = pass == Pass::kRecompute;  // backward follows at once
  const LayerOffsets& w = layer_offsets_[static_cast<size_t>(layer)];
  const float* W = weights.data();
  const size_t shard = Size(shard_tokens_ * hidden_);
  const size_t full = Size(tokens_ * hidden_);

  RETURN_IF_ERROR(Alloc(&st->x, BufferClass::kActivations, shard));
  std::memcpy(st->x.data(), x_in, shard * sizeof(float));
  RETURN_IF_ERROR(Alloc(&st->n1, BufferClass::kActivations, shard));
  RETURN_IF_ERROR(Alloc(&st->inv1, BufferClass::kActivations, Size(shard_tokens_)));
  RmsNormForward(st->x.data(), shard_tokens_, hidden_, st->n1.data(), st->inv1.data());
  RETURN_IF_ERROR(TpAllGather(Find(tp, "attention-in"), st->n1.data(), &st->n1_full));
  RETURN_IF_ERROR(Alloc(&st->qkv, BufferClass::kActivations, Size(tokens_ * qkv_width_)));
  Sgemm(false, false, tokens_, qkv_width_, hidden_, 1.0f, st->n1_full.data(), hidden_, W + w.qkv,
        qkv_width_, 0.0f, st->qkv.data(), qkv_width_, &flops_);
  RETURN_IF_ERROR(Alloc(&st->probs, BufferClass::kActivations, Size(head_batches_ * seq_ * seq_)));
  RETURN_IF_ERROR(Alloc(&st->ctx, BufferClass::kActivations,
                        Size(std::max(tokens_ * proj_in_, head_batches_ * seq_ * head_dim_))));
  AttentionCore(st);
  RETURN_IF_ERROR(Alloc(&scratch_, BufferClass::kActivations, full));
  Sgemm(false, false, tokens_, hidden_, proj_in_, 1.0f, st->ctx.data(), proj_in_, W + w.proj,
        hidden_, 0.0f, scratch_.data(), hidden_, &flops_);
  RETURN_IF_ERROR(Alloc(&st->x2, BufferClass::kActivations, shard));
  RETURN_IF_ERROR(TpReduceScatter(Find(tp, "attention-out"), scratch_.data(), st->x2.data()));
  AddInPlace(st->x2.data(), st->x.data(), shard);

  RETURN_IF_ERROR(Alloc(&st->n2, BufferClass::kActivations, shard));
  RETURN_IF_ERROR(Alloc(&st->inv2, BufferClass::kActivations, Size(shard_tokens_)));
  RmsNormForward(st->x2.data(), shard_tokens_, hidden_, st->n2.data(), st->inv2.data());
  RETURN_IF_ERROR(TpAllGather(Find(tp, "mlp-in"), st->n2.data(), &st->n2_full));
  RETURN_IF_ERROR(Alloc(&st->mlp_pre, BufferClass::kActivations, Size(tokens_ * mlp_in_width_)));
  Sgemm(false, false, tokens_, mlp_in_width_, hidden_, 1.0f, st->n2_full.data(), hidden_,
        W + w.mlp_in, mlp_in_width_, 0.0f, st->mlp_pre.data(), mlp_in_width_, &flops_);
  RETURN_IF_ERROR(Alloc(&st->act, BufferClass::kActivations, Size(tokens_ * mlp_out_in_)));
  if (swiglu_) {
    SwigluForward(st->mlp_pre.data(), tokens_, mlp_out_in_, st->act.data());
  } else {
    GeluForward(st->mlp_pre.data(), st->mlp_pre.size(), st->act.data());
  }
  Sgemm(false, false, tokens_, hidden_, mlp_out_in_, 1.0f, st->act.data(), mlp_out_in_,
        W + w.mlp_out, hidden_, 0.0f, scratch_.data(), hidden_, &flops_);
  RETURN_IF_ERROR(TpReduceScatter(Find(tp, "mlp-out"), scratch_.data(), x_out));
  AddInPlace(x_out, st->x2.data(), shard);

  if (keep_full) return Status::Ok();
  // What the recompute policy drops: the gathered inputs always (backward
  // regathers them), the attention core under selective, all but the
  // layer's input under full.
  st->n1_full.Clear();
  st->n2_full.Clear();
  if (recompute == planner::Recompute::kSelective) {
    st->probs.Clear();
    st->ctx.Clear();
  } else if (recompute == planner::Recompute::kFull) {
    FloatBuffer x = std::move(st->x);
    *st = LayerStash();
    st->x = std::move(x);
  }
  return Status::Ok();
}

Status CpuBackend::Impl::LayerBackward(int layer, LayerStash* st, const float* dx_out,
                                       float* dx) {
  const LayerWork& work = schedule_->layer;
  const std::vector<Collective>& tp = work.backward_collectives;
  const planner::Recompute recompute = config_->recompute;
  const LayerOffsets& w = layer_offsets_[static_cast<size_t>(layer)];
  const float* W = weights.data();
  float* G = grads.data();
  const size_t shard = Size(shard_tokens_ * hidden_);

  if (recompute == planner::Recompute::kFull) {
    // Rerun the layer's forward from its kept input, with the recompute
    // collectives, keeping everything (no regathers needed afterwards).
    FloatBuffer x = std::move(st->x);
    FloatBuffer out(&memory, BufferClass::kActivations);
    RETURN_IF_ERROR(out.Assign(shard));
    RETURN_IF_ERROR(LayerForward(layer, x.data(), out.data(), st, Pass::kRecompute));
  } else if (recompute == planner::Recompute::kSelective) {
    RETURN_IF_ERROR(
        Alloc(&st->probs, BufferClass::kActivations, Size(head_batches_ * seq_ * seq_)));
    RETURN_IF_ERROR(Alloc(&st->ctx, BufferClass::kActivations,
                          Size(std::max(tokens_ * proj_in_, head_batches_ * seq_ * head_dim_))));
    AttentionCore(st);
  }

  // MLP block.
  FloatBuffer dx2(&memory, BufferClass::kActivations), dfull(&memory, BufferClass::kActivations);
  RETURN_IF_ERROR(dx2.Assign(shard));
  std::memcpy(dx2.data(), dx_out, shard * sizeof(float));
  RETURN_IF_ERROR(TpAllGather(Find(tp, "mlp-out-grad"), dx_out, &dfull));
  FloatBuffer dact(&memory, BufferClass::kActivations);
  RETURN_IF_ERROR(dact.Assign(Size(tokens_ * mlp_out_in_)));
  Sgemm(false, true, tokens_, mlp_out_in_, hidden_, 1.0f, dfull.data(), hidden_, W + w.mlp_out,
        hidden_, 0.0f, dact.data(), mlp_out_in_, &flops_);
  Sgemm(true, false, mlp_out_in_, hidden_, tokens_, 1.0f, st->act.data(), mlp_out_in_,
        dfull.data(), hidden_, 1.0f, G + w.mlp_out, hidden_, &flops_);
  FloatBuffer dpre(&memory, BufferClass::kActivations);
  RETURN_IF_ERROR(dpre.Assign(Size(tokens_ * mlp_in_width_)));
  if (swiglu_) {
    SwigluBackward(st->mlp_pre.data(), dact.data(), tokens_, mlp_out_in_, dpre.data());
  } else {
    GeluBackward(st->mlp_pre.data(), dact.data(), dpre.size(), dpre.data());
  }
  dact.Clear();
  if (st->n2_full.size() == 0) {
    RETURN_IF_ERROR(TpAllGather(Find(tp, "mlp-in-regather"), st->n2.data(), &st->n2_full));
  }
  Sgemm(false, true, tokens_, hidden_, mlp_in_width_, 1.0f, dpre.data(), mlp_in_width_,
        W + w.mlp_in, mlp_in_width_, 0.0f, dfull.data(), hidden_, &flops_);
  Sgemm(true, false, hidden_, mlp_in_width_, tokens_, 1.0f, st->n2_full.data(), hidden_,
        dpre.data(), mlp_in_width_, 1.0f, G + w.mlp_in, mlp_in_width_, &flops_);
  dpre.Clear();
  FloatBuffer dn(&memory, BufferClass::kActivations);
  RETURN_IF_ERROR(dn.Assign(shard));
  RETURN_IF_ERROR(TpReduceScatter(Find(tp, "mlp-in-grad"), dfull.data(), dn.data()));
  RmsNormBackward(st->x2.data(), st->inv2.data(), dn.data(), shard_tokens_, hidden_, dx2.data());

  // Attention block.
  RETURN_IF_ERROR(TpAllGather(Find(tp, "attention-out-grad"), dx2.data(), &dfull));
  FloatBuffer dctx(&memory, BufferClass::kActivations);
  RETURN_IF_ERROR(dctx.Assign(st->ctx.size()));
  Sgemm(false, true, tokens_, proj_in_, hidden_, 1.0f, dfull.data(), hidden_, W + w.proj, hidden_,
        0.0f, dctx.data(), proj_in_, &flops_);
  Sgemm(true, false, proj_in_, hidden_, tokens_, 1.0f, st->ctx.data(), proj_in_, dfull.data(),
        hidden_, 1.0f, G + w.proj, hidden_, &flops_);
  FloatBuffer dqkv(&memory, BufferClass::kActivations), dp(&memory, BufferClass::kActivations);
  RETURN_IF_ERROR(dqkv.Assign(st->qkv.size()));
  RETURN_IF_ERROR(dp.Assign(Size(seq_ * seq_)));
  const int64_t block = seq_ * head_dim_;
  const int64_t q_elems = head_batches_ * block;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim_)));
  for (int64_t i = 0; i < head_batches_; ++i) {
    const int64_t kv = kv_blocks_ > 0 ? i % kv_blocks_ : 0;
    const int64_t k_off = kv_blocks_ > 0 ? q_elems + kv * block : 0;
    const int64_t v_off = kv_blocks_ > 0 ? q_elems + (kv_blocks_ + kv) * block : 0;
    const float* q = st->qkv.data() + i * block;
    const float* k = st->qkv.data() + k_off;
    const float* v = st->qkv.data() + v_off;
    const float* p = st->probs.data() + i * seq_ * seq_;
    const float* dc = dctx.data() + i * block;
    // context = P V: dP = dC V^T, dV += P^T dC.
    Sgemm(false, true, seq_, seq_, head_dim_, 1.0f, dc, head_dim_, v, head_dim_, 0.0f, dp.data(),
          seq_, &flops_);
    Sgemm(true, false, seq_, head_dim_, seq_, 1.0f, p, seq_, dc, head_dim_, 1.0f,
          dqkv.data() + v_off, head_dim_, &flops_);
    SoftmaxBackwardInPlace(p, dp.data(), seq_, seq_, scale);
    // scores = Q K^T: dQ += dS K, dK += dS^T Q.
    Sgemm(false, false, seq_, head_dim_, seq_, 1.0f, dp.data(), seq_, k, head_dim_, 1.0f,
          dqkv.data() + i * block, head_dim_, &flops_);
    Sgemm(true, false, seq_, head_dim_, seq_, 1.0f, dp.data(), seq_, q, head_dim_, 1.0f,
          dqkv.data() + k_off, head_dim_, &flops_);
  }
  dp.Clear();
  dctx.Clear();
  if (st->n1_full.size() == 0) {
    RETURN_IF_ERROR(TpAllGather(Find(tp, "attention-in-regather"), st->n1.data(), &st->n1_full));
  }
  Sgemm(false, true, tokens_, hidden_, qkv_width_, 1.0f, dqkv.data(), qkv_width_, W + w.qkv,
        qkv_width_, 0.0f, dfull.data(), hidden_, &flops_);
  Sgemm(true, false, hidden_, qkv_width_, tokens_, 1.0f, st->n1_full.data(), hidden_, dqkv.data(),
        qkv_width_, 1.0f, G + w.qkv, qkv_width_, &flops_);
  RETURN_IF_ERROR(TpReduceScatter(Find(tp, "attention-in-grad"), dfull.data(), dn.data()));
  std::memcpy(dx, dx2.data(), shard * sizeof(float));
  RmsNormBackward(st->x.data(), st->inv1.data(), dn.data(), shard_tokens_, hidden_, dx);
  *st = LayerStash();
  return Status::Ok();
}

Status CpuBackend::Impl::Forward(int mb, int chunk, int64_t step) {
  const StepSchedule& s = *schedule_;
  const size_t shard = Size(shard_tokens_ * hidden_);
  FloatBuffer x(&memory, BufferClass::kActivations), y(&memory, BufferClass::kActivations);
  RETURN_IF_ERROR(x.Assign(shard));
  RETURN_IF_ERROR(y.Assign(shard));
  const int pp = s.coordinates.pipeline_rank;
  if (s.holds_embedding && chunk == 0) {
    // Tokens of this rank's sequence shard, looked up in its vocabulary shard.
    std::vector<int32_t> tokens(Size(shard_tokens_));
    FillTokens(mb, step, tokens.data(), shard_tokens_,
               s.coordinates.tensor_rank * shard_tokens_, vocab_shard_, 0);
    const float* table = weights.data() + embedding_offset_;
    for (int64_t i = 0; i < shard_tokens_; ++i) {
      std::memcpy(x.data() + i * hidden_, table + tokens[Size(i)] * hidden_,
                  Size(hidden_) * sizeof(float));
    }
  } else {
    const int prev = (pp + p_ - 1) % p_;
    RETURN_IF_ERROR(Comm(nullptr, [&] {
      return comms_->Recv(prev, Stream::kForward, x.data(), shard, "activations");
    }));
  }
  ChunkStash& cs = stash_[{mb, chunk}];
  cs.layers.resize(Size(s.layers_per_chunk));
  for (int l = 0; l < s.layers_per_chunk; ++l) {
    RETURN_IF_ERROR(LayerForward(chunk * s.layers_per_chunk + l, x.data(), y.data(),
                                 &cs.layers[Size(l)], Pass::kForward));
    std::swap(x, y);
  }
  if (s.holds_logits && chunk == s.chunks - 1) {
    // Logits over this rank's vocabulary shard, the loss and its gradient.
    RETURN_IF_ERROR(Alloc(&cs.logits_input, BufferClass::kActivations, Size(tokens_ * hidden_)));
    for (int r = 0; r < t_; ++r) {
      std::memcpy(cs.logits_input.data() + Size(r) * shard, x.data(), shard * sizeof(float));
    }
    RETURN_IF_ERROR(Alloc(&cs.dlogits, BufferClass::kActivations, Size(tokens_ * vocab_shard_)));
    Sgemm(false, true, tokens_, vocab_shard_, hidden_, 1.0f, cs.logits_input.data(), hidden_,
          weights.data() + output_offset_, hidden_, 0.0f, cs.dlogits.data(), vocab_shard_,
          &flops_);
    std::vector<int32_t> labels(Size(tokens_));
    FillTokens(mb, step, labels.data(), tokens_, 0, vocab_shard_, 1);
    loss_sum_ += CrossEntropyGradInPlace(cs.dlogits.data(), labels.data(), tokens_, vocab_shard_,
                                         1.0f / static_cast<float>(tokens_));
    loss_count_ += tokens_;
    return Status::Ok();
  }
  const int next = (pp + 1) % p_;
  const Collective send{"activations", CollectiveKind::kSend, Group::kPipeline, 2, s.p2p_bytes};
  return Comm(&send, [&] {
    return comms_->Send(next, Stream::kForward, x.data(), shard, "activations");
  });
}

Status CpuBackend::Impl::Backward(int mb, int chunk, int64_t step) {
  const StepSchedule& s = *schedule_;
  const size_t shard = Size(shard_tokens_ * hidden_);
  const int pp = s.coordinates.pipeline_rank;
  auto it = stash_.find({mb, chunk});
  if (it == stash_.end()) {
    return InternalError("backward of micro-batch " + std::to_string(mb) + " chunk " +
                         std::to_string(chunk) + " before its forward");
  }
  ChunkStash& cs = it->second;
  FloatBuffer dy(&memory, BufferClass::kActivations), dx(&memory, BufferClass::kActivations);
  RETURN_IF_ERROR(dy.Assign(shard));
  RETURN_IF_ERROR(dx.Assign(shard));
  if (s.holds_logits && chunk == s.chunks - 1) {
    FloatBuffer dh(&memory, BufferClass::kActivations);
    RETURN_IF_ERROR(dh.Assign(Size(tokens_ * hidden_)));
    float* gout = grads.data() + output_offset_;
    Sgemm(false, false, tokens_, hidden_, vocab_shard_, 1.0f, cs.dlogits.data(), vocab_shard_,
          weights.data() + output_offset_, hidden_, 0.0f, dh.data(), hidden_, &flops_);
    Sgemm(true, false, vocab_shard_, hidden_, tokens_, 1.0f, cs.dlogits.data(), vocab_shard_,
          cs.logits_input.data(), hidden_, 1.0f, gout, hidden_, &flops_);
    // The logits read this shard t times: its gradient is the sum.
    for (int r = 0; r < t_; ++r) AddInPlace(dy.data(), dh.data() + Size(r) * shard, shard);
  } else {
    const int next = (pp + 1) % p_;
    RETURN_IF_ERROR(Comm(nullptr, [&] {
      return comms_->Recv(next, Stream::kBackward, dy.data(), shard, "gradients");
    }));
  }
  for (int l = s.layers_per_chunk - 1; l >= 0; --l) {
    RETURN_IF_ERROR(LayerBackward(chunk * s.layers_per_chunk + l, &cs.layers[Size(l)], dy.data(),
                                  dx.data()));
    std::swap(dx, dy);
  }
  stash_.erase(it);
  if (s.holds_embedding && chunk == 0) {
    // The embedding rows the forward pass read (same keys, same tokens).
    std::vector<int32_t> tokens(Size(shard_tokens_));
    FillTokens(mb, step, tokens.data(), shard_tokens_,
               s.coordinates.tensor_rank * shard_tokens_, vocab_shard_, 0);
    float* table = grads.data() + embedding_offset_;
    for (int64_t i = 0; i < shard_tokens_; ++i) {
      AddInPlace(table + tokens[Size(i)] * hidden_, dy.data() + i * hidden_, Size(hidden_));
    }
    return Status::Ok();
  }
  const int prev = (pp + p_ - 1) % p_;
  const Collective send{"gradients", CollectiveKind::kSend, Group::kPipeline, 2, s.p2p_bytes};
  return Comm(&send, [&] {
    return comms_->Send(prev, Stream::kBackward, dy.data(), shard, "gradients");
  });
}

template <typename Select>
Status CpuBackend::Impl::DataParallel(const std::vector<Collective>& list, bool step_end,
                                      Select select) {
  std::map<std::string, size_t> seen;
  for (const Collective& c : list) {
    const size_t bucket = seen[c.name]++;
    if (!select(c)) continue;
    RETURN_IF_ERROR(DataParallelOne(c, bucket, step_end));
  }
  return Status::Ok();
}

Status CpuBackend::Impl::DataParallelOne(const Collective& c, size_t bucket, bool step_end) {
  if (bucket >= buckets_.size()) return InternalError("more data-parallel buckets than expected");
  const Bucket& b = buckets_[bucket];
  const int dp = schedule_->coordinates.data_rank;
  switch (c.kind) {
    case CollectiveKind::kAllReduce: {
      AddInPlace(local_gradients.data() + b.offset, grads.data() + b.offset, b.length);
      reduced_[bucket] = true;
      return Comm(&c, [&] {
        return comms_->AllReduce(Group::kData, grads.data() + b.offset, b.length, c.name);
      });
    }
    case CollectiveKind::kReduceScatter: {
      AddInPlace(local_gradients.data() + b.offset, grads.data() + b.offset, b.length);
      std::vector<float> mine(b.shard_counts[static_cast<size_t>(dp)]);
      RETURN_IF_ERROR(Comm(&c, [&] {
        return comms_->ReduceScatter(Group::kData, grads.data() + b.offset, mine.data(),
                                     b.shard_counts, c.name);
      }));
      // The bucket was consumed as the ring's scratch: later micro-batches
      // accumulate from zero, their reductions add up in the shard.
      std::fill_n(grads.data() + b.offset, b.length, 0.0f);
      AddInPlace(grad_shard.data() + owned_position_[bucket], mine.data(), mine.size());
      reduced_[bucket] = true;
      return Status::Ok();
    }
    case CollectiveKind::kAllGather: {
      // Parameters: at the end of the step the bucket's shard is updated
      // first, then everyone's updated shards are gathered.
      if (step_end) UpdateShard(bucket, current_step_);
      std::vector<float> shard(weights.data() + b.ShardOffset(dp),
                               weights.data() + b.ShardOffset(dp) +
                                   b.shard_counts[static_cast<size_t>(dp)]);
      return Comm(&c, [&] {
        return comms_->AllGather(Group::kData, shard.data(), weights.data() + b.offset,
                                 b.shard_counts, c.name);
      });
    }
    case CollectiveKind::kSend:
    case CollectiveKind::kRecv:
      break;
  }
  return InternalError(std::string("unexpected data-parallel collective ") + c.name);
}

void CpuBackend::Impl::UpdateShard(size_t bucket, int64_t step) {
  if (updated_[bucket]) return;
  updated_[bucket] = true;
  const auto [offset, length] = owned[bucket];
  const size_t position = owned_position_[bucket];
  const float* g = config_->zero_stage == 0 ? grads.data() + offset : grad_shard.data() + position;
  if (config_->zero_stage >= 1 && !reduced_[bucket]) {
    // d = 1: nothing reduced the bucket, its own gradients are the sum.
    AddInPlace(local_gradients.data() + offset, grads.data() + offset, length);
    std::memcpy(grad_shard.data() + position, grads.data() + offset, length * sizeof(float));
  }
  const float scale =
      1.0f / static_cast<float>(static_cast<double>(d_) * static_cast<double>(schedule_->micro_batches));
  AdamWUpdate(weights.data() + offset, g, adam_m.data() + position, adam_v.data() + position,
              length, scale, step + 1, adam_);
}

StatusOr<StepTiming> CpuBackend::Impl::RunStep(int64_t step) {
  if (broken_) {
    return FailedPreconditionError("the CPU backend failed in an earlier step; restart the rank");
  }
  const StepSchedule& s = *schedule_;
  const Clock::time_point start = Clock::now();
  current_step_ = step;
  flops_ = 0;
  collective_seconds_ = 0;
  bus_bytes_ = 0;
  loss_sum_ = 0;
  loss_count_ = 0;
  comms_->MarkStep(step);
  std::fill(grads.values().begin(), grads.values().end(), 0.0f);
  std::fill(grad_shard.values().begin(), grad_shard.values().end(), 0.0f);
  local_gradients.assign(grads.size(), 0.0f);
  updated_.assign(buckets_.size(), false);
  reduced_.assign(buckets_.size(), false);

  auto run = [&]() -> Status {
    auto named = [](const char* prefix) {
      return [prefix](const Collective& c) { return StartsWith(c.name, prefix); };
    };
    auto gradients = [](const Collective& c) { return !StartsWith(c.name, "parameters"); };
    for (const PipelineAction& a : s.pipeline) {
      if (a.pass == PassKind::kForward) {
        if (a.chunk == 0) {
          RETURN_IF_ERROR(DataParallel(s.per_micro_batch_collectives, false,
                                       named("parameters-forward")));
        }
        RETURN_IF_ERROR(Forward(a.micro_batch, a.chunk, step));
      } else {
        if (a.chunk == s.chunks - 1) {
          RETURN_IF_ERROR(DataParallel(s.per_micro_batch_collectives, false,
                                       named("parameters-backward")));
        }
        RETURN_IF_ERROR(Backward(a.micro_batch, a.chunk, step));
        if (a.chunk == 0) {
          RETURN_IF_ERROR(DataParallel(s.per_micro_batch_collectives, false, gradients));
        }
      }
    }
    RETURN_IF_ERROR(Comm(nullptr, [&] { return comms_->FlushSends(); }));
    RETURN_IF_ERROR(
        DataParallel(s.step_collectives, true, [](const Collective&) { return true; }));
    for (size_t b = 0; b < buckets_.size(); ++b) {
      if (config_->zero_stage == 0 && !reduced_[b]) {
        AddInPlace(local_gradients.data() + owned[b].first, grads.data() + owned[b].first,
                   owned[b].second);
      }
      UpdateShard(b, step);
    }
    return Status::Ok();
  };
  Status status = run();
  stash_.clear();
  if (!status.ok()) {
    broken_ = true;
    comms_->Abort();
    return status.WithContext("cpu backend, step " + std::to_string(step));
  }

  if (config_->zero_stage == 0) {
    reduced_gradients = grads.values();
  } else {
    reduced_gradients.assign(grads.size(), 0.0f);
    for (size_t b = 0; b < owned.size(); ++b) {
      std::memcpy(reduced_gradients.data() + owned[b].first, grad_shard.data() + owned_position_[b],
                  owned[b].second * sizeof(float));
    }
  }
  last_loss = loss_count_ > 0 ? loss_sum_ / static_cast<double>(loss_count_) : 0.0;

  StepTiming timing;
  timing.step_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  timing.collective_seconds = collective_seconds_;
  // Nothing overlaps on CPU: what is not a collective is compute, and all
  // collective time is exposed.
  timing.compute_seconds = std::max(0.0, timing.step_seconds - collective_seconds_);
  timing.exposed_communication_seconds = collective_seconds_;
  timing.collective_bus_bytes = bus_bytes_;
  timing.gemm_flops = flops_;
  return timing;
}

}  // namespace cpu

// --- CpuBackend: the public face over Impl. ---

namespace cpu {

CpuBackend::CpuBackend() : impl_(std::make_unique<Impl>()) {}
CpuBackend::~CpuBackend() = default;

Status CpuBackend::Initialize(const BackendContext& context, uint64_t seed) {
  return impl_->Initialize(context, seed);
}

StatusOr<StepTiming> CpuBackend::RunStep(int64_t step) { return impl_->RunStep(step); }

double CpuBackend::PeakMemoryBytes() const { return impl_->memory.peak_bytes(); }

namespace {
std::vector<std::byte> ToBytes(const std::vector<float>& v) {
  std::vector<std::byte> out(v.size() * sizeof(float));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}
Status FromBytes(const NamedBuffers& buffers, const std::string& name, std::vector<float>* v) {
  for (const auto& [key, bytes] : buffers) {
    if (key != name) continue;
    if (bytes.size() != v->size() * sizeof(float)) {
      return InvalidArgumentError("checkpoint buffer '" + name + "' has " +
                                  std::to_string(bytes.size()) + " bytes, this rank expects " +
                                  std::to_string(v->size() * sizeof(float)));
    }
    std::memcpy(v->data(), bytes.data(), bytes.size());
    return Status::Ok();
  }
  return NotFoundError("checkpoint has no buffer '" + name + "'");
}
}  // namespace

StatusOr<NamedBuffers> CpuBackend::SaveBuffers() {
  NamedBuffers out;
  out.emplace_back("weights", ToBytes(impl_->weights.values()));
  out.emplace_back("optimizer/adamw-m", ToBytes(impl_->adam_m.values()));
  out.emplace_back("optimizer/adamw-v", ToBytes(impl_->adam_v.values()));
  return out;
}

Status CpuBackend::LoadBuffers(const NamedBuffers& buffers) {
  RETURN_IF_ERROR(FromBytes(buffers, "weights", &impl_->weights.values()));
  RETURN_IF_ERROR(FromBytes(buffers, "optimizer/adamw-m", &impl_->adam_m.values()));
  return FromBytes(buffers, "optimizer/adamw-v", &impl_->adam_v.values());
}

const std::vector<float>& CpuBackend::local_gradients_before_reduce() const {
  return impl_->local_gradients;
}
const std::vector<float>& CpuBackend::gradients_after_reduce() const {
  return impl_->reduced_gradients;
}
const std::vector<float>& CpuBackend::parameters() const { return impl_->weights.values(); }
const std::vector<std::pair<size_t, size_t>>& CpuBackend::owned_ranges() const {
  return impl_->owned;
}
double CpuBackend::last_loss() const { return impl_->last_loss; }

}  // namespace cpu

std::unique_ptr<StepBackend> MakeCpuBackend() { return std::make_unique<cpu::CpuBackend>(); }

}  // namespace pacer::worker
