#include "core/step_executor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <map>
#include <string>
#include <utility>

#include "core/hash_keys.h"
#include "core/initial_weights.h"
#include "core/tiled_attention.h"

namespace pacer::worker {
namespace {

using Clock = std::chrono::steady_clock;

// The checkpoint buffer of the fp32 master weights under 16-bit weights.
constexpr char kMasterWeightsBuffer[] = "optimizer/master-weights";

int64_t Dim(double v) { return static_cast<int64_t>(std::llround(v)); }
size_t Size(int64_t v) { return static_cast<size_t>(std::max<int64_t>(v, 0)); }

const Collective* Find(const std::vector<Collective>& list, const char* name) {
  for (const Collective& c : list) {
    if (std::strcmp(c.name, name) == 0) return &c;
  }
  return nullptr;
}

// FNV-1a: a stable number for a matrix name (std::hash may change between
// library versions, and the initial weights must not).
uint64_t NameHash(const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const char ch : name) {
    h ^= static_cast<unsigned char>(ch);
    h *= 0x100000001b3ULL;
  }
  return h;
}

bool StartsWith(const char* s, const char* prefix) {
  return std::strncmp(s, prefix, std::strlen(prefix)) == 0;
}

// Offsets and lengths of the data-parallel buckets over n parameters, and
// of each data-parallel rank's shard of a bucket.
struct Bucket {
  size_t offset = 0, length = 0;
  std::vector<size_t> shard_counts;  // per data-parallel rank
  size_t ShardOffset(int rank) const {
    size_t o = offset;
    for (int i = 0; i < rank; ++i) o += shard_counts[static_cast<size_t>(i)];
    return o;
  }
};

// Buckets starting at `starts` (increasing, the first 0), the last one
// ending at n; each split evenly over d ranks (the last rank takes the
// remainder).
std::vector<Bucket> MakeBuckets(const std::vector<size_t>& starts, size_t n, int d) {
  std::vector<Bucket> buckets(starts.size());
  for (size_t i = 0; i < buckets.size(); ++i) {
    Bucket& b = buckets[i];
    b.offset = starts[i];
    b.length = (i + 1 < starts.size() ? starts[i + 1] : n) - b.offset;
    const size_t share = b.length / static_cast<size_t>(d);
    b.shard_counts.assign(static_cast<size_t>(d), share);
    b.shard_counts.back() = b.length - share * static_cast<size_t>(d - 1);
  }
  return buckets;
}

// kGradientBuckets equal buckets (the last takes the remainder).
std::vector<Bucket> EqualBuckets(size_t n, int d) {
  std::vector<size_t> starts(kGradientBuckets);
  for (size_t i = 0; i < starts.size(); ++i) starts[i] = i * (n / kGradientBuckets);
  return MakeBuckets(starts, n, d);
}

}  // namespace

// Everything of one layer kept from forward to backward (what the
// recompute policy keeps; the rest is recomputed or regathered).
struct LayerStash {
  DeviceBuffer x, inv1, n1, n1_full, qkv, probs, lse, ctx, x2, inv2, n2, n2_full, mlp_pre, act;
};

struct ChunkStash {
  std::vector<LayerStash> layers;
  DeviceBuffer logits_input;  // [T x h], last stage
  DeviceBuffer dlogits;       // [T x ceil(V/t)], last stage
};

class StepExecutor::Impl {
  Device* dev_;  // first: the buffers below are constructed with it

 public:
  Impl(Device* device, bool host_copies) : dev_(device), host_copies_(host_copies) {}
  Status Initialize(const BackendContext& context, uint64_t seed);
  // After `weights` and the moments: the master weights from a checkpoint
  // written with or without them (LoadBuffers).
  Status LoadMasterWeights(const NamedBuffers& buffers);
  StatusOr<StepTiming> RunStep(int64_t step);
  // StepExecutor::UnsplitIndex, resolved once per matrix.
  UnsplitMap MapFor(const ParameterRange& r) const;

  DeviceBuffer weights{dev_, BufferClass::kWeights};
  DeviceBuffer grads{dev_, BufferClass::kGradients};
  DeviceBuffer grad_shard{dev_, BufferClass::kGradients};  // ZeRO >= 2: reduced, owned
  DeviceBuffer adam_m{dev_, BufferClass::kOptimizer};
  DeviceBuffer adam_v{dev_, BufferClass::kOptimizer};
  // With 16-bit weights (master_weights_): the fp32 master weights of this
  // rank's shards, at owned_position_, which AdamW updates.
  DeviceBuffer master{dev_, BufferClass::kOptimizer};
  // Test hooks: host copies (see step_executor.h).
  std::vector<float> local_gradients, reduced_gradients, parameters;
  std::vector<std::pair<size_t, size_t>> owned;
  std::vector<ParameterRange> ranges;
  double last_loss = 0;

 private:
  // Layer weights of this rank: offsets into `weights` (and `grads`).
  struct LayerOffsets {
    size_t qkv = 0, proj = 0, mlp_in = 0, mlp_out = 0;
  };
  enum class Pass { kForward, kRecompute };

  DeviceBuffer Activation(Storage storage = Storage::kFp32) {
    return DeviceBuffer(dev_, BufferClass::kActivations, storage);
  }
  Status Alloc(DeviceBuffer* b, size_t n) { return b->Assign(n); }
  // A stash or temporary activation buffer of n elements: zeros, or with
  // Fill::kUndefined for one the next operation writes whole (the large
  // GEMM outputs; zeroing them was 9% of a GPU step). Storage::kCompute
  // (device.h) for GEMM operands and outputs, which the device may keep in
  // the compute precision (bf16 on the GPU device); fp32 for the residual
  // stream, statistics and logits.
  Status Act(DeviceBuffer* b, size_t n, Fill fill = Fill::kZeros,
             Storage storage = Storage::kFp32) {
    *b = Activation(storage);
    return b->Assign(n, fill);
  }
  // Storage of the attention's Q/K/V gradient: the tiled backward
  // accumulates dK and dV over every tile of query rows (16 for a sequence
  // of 2,048), which bf16 storage would round at each step; the unfused
  // and on-chip backwards write each element once per query head of its
  // group.
  Storage DqkvStorage() const {
    return fused() && !on_chip_attention_ ? Storage::kFp32 : Storage::kCompute;
  }
  // The context into st->ctx; unfused, the probabilities into st->probs
  // (fused: tiled_attention.h, nothing stored besides the context; or the
  // device's on-chip kernel, which also keeps st->lse).
  Status Attention(LayerStash* st);
  bool fused() const { return config_->attention == planner::AttentionKernel::kFused; }
  Status Forward(int mb, int chunk, int64_t step);
  Status Backward(int mb, int chunk, int64_t step);
  Status LayerForward(int layer, const float* x_in, float* x_out, LayerStash* st, Pass pass);
  Status LayerBackward(int layer, LayerStash* st, const float* dx_out, float* dx);

  // Tensor-parallel collectives on [T x h] activations (shard = T/t rows).
  // A gathered activation is a GEMM operand (Storage::kCompute) unless
  // `storage` says otherwise (the embedding's gradient).
  Status TpAllGather(const Collective* c, const float* shard, DeviceBuffer* full,
                     Storage storage = Storage::kCompute);
  // Nothing when full == shard (TpPartial with t = 1).
  Status TpReduceScatter(const Collective* c, float* full, float* shard);
  // A single rank (t = 1) has nothing to gather or scatter, so it copies
  // nothing either: TpInput is the GEMM input gathered from `shard` into
  // *full, or `shard` itself with t = 1; TpPartial is where a GEMM writes
  // the [T x h] partial sum that TpReduceScatter sums into `shard`: *full
  // (allocated in `storage` unless it already is), or `shard` itself with
  // t = 1.
  StatusOr<const float*> TpInput(const Collective* c, const float* shard, DeviceBuffer* full);
  StatusOr<float*> TpPartial(float* shard, DeviceBuffer* full, Storage storage);
  // Runs the entries of a data-parallel list that `select` accepts; each
  // name appears once per bucket, in bucket order.
  template <typename Select>
  Status DataParallel(const std::vector<Collective>& list, bool step_end, Select select);
  Status DataParallelOne(const Collective& c, size_t bucket, bool step_end);
  Status UpdateShard(size_t bucket, int64_t step);
  // A layer's backward GEMM pair, which reads the output gradient `dy`
  // twice (for the input's gradient and the weight's), run with dy
  // read-only (Device::BeginReadOnly), so that a device converting GEMM
  // operands converts it once, not twice.
  template <typename Body>
  Status ReadTwice(const DeviceBuffer& dy, Body&& body) {
    return WithReadOnly(dev_, {{dy.data(), dy.size()}}, std::forward<Body>(body));
  }
  // Weight gradients. Under ZeRO 0 and 1 a GEMM accumulates in place into
  // `grads` (beta 1). Under ZeRO 2 and 3 there is no full-size gradient
  // buffer: the GEMM writes a temporary, CloseGrad adds it into the bucket
  // buffers (allocated on first write, workspace), and a bucket is
  // reduce-scattered into this rank's shard and freed as soon as the
  // micro-batch has written all of it.
  struct GradSink {
    float* out = nullptr;
    float beta = 1.0f;
    DeviceBuffer temp;
    size_t offset = 0, length = 0;
  };
  bool ShardedGradients() const { return config_->zero_stage >= 2; }
  Status OpenGrad(size_t offset, size_t length, GradSink* sink);
  Status CloseGrad(GradSink* sink);
  Status ReduceBucket(size_t bucket);
  std::vector<DeviceBuffer> bucket_grads_;  // ZeRO >= 2, per bucket
  std::vector<size_t> bucket_written_, bucket_expected_;
  // Where the reduced gradients of this rank's shard of `bucket` are: in
  // place in `grads` under ZeRO 0 and 1, in `grad_shard` under 2 and 3.
  const float* ReducedShard(size_t bucket) const {
    return config_->zero_stage <= 1 ? grads.data() + owned[bucket].first
                                    : grad_shard.data() + owned_position_[bucket];
  }

  // ZeRO 3 over d > 1 ranks shards the weights as FSDP does. The buckets
  // are then the gather units: the input table, each layer, the output
  // table (padding up to the schedule's parameter count joins the last
  // unit), and `weights` holds only this rank's shard of each, at
  // owned_position_. A pass gathers a unit's full weights (workspace) just
  // before it uses them, one unit ahead, and frees them after their last
  // use in the pass; a unit's gradients go straight into its bucket buffer
  // and are reduce-scattered once the micro-batch has written all of them.
  // So at most two units' weights and one unit's gradients are unsharded
  // at a time, the planner's ZeRO-3 buffers (docs/worker.md).
  size_t UnitOf(size_t offset) const;
  // The weights at flat offset `offset`: in `weights`, or (FSDP) in the
  // gathered copy of its unit, which the pass has gathered.
  const float* Param(size_t offset) const {
    if (!fsdp_) return weights.data() + offset;
    const size_t u = UnitOf(offset);
    return gathered_[u].data() + (offset - buckets_[u].offset);
  }
  // This rank's shard of `bucket` in `weights` (what AdamW updates).
  float* ShardWeights(size_t bucket) {
    return weights.data() + (fsdp_ ? owned_position_[bucket] : owned[bucket].first);
  }
  // The units a pass of `chunk` uses, in order.
  std::vector<size_t> PassUnits(int chunk, PassKind pass) const;
  // Before the i-th use of a pass: gathers order[i] unless held, and
  // order[i + 1] (one ahead). After it: frees order[i] unless the pass uses
  // it again. Both do nothing unless fsdp_.
  Status GatherAhead(const std::vector<size_t>& order, size_t i, PassKind pass);
  void ReleaseAfter(const std::vector<size_t>& order, size_t i);
  Status GatherUnit(size_t unit, PassKind pass);
  // A schedule total (bytes per micro-batch) spread over the units in
  // proportion to their elements, so the bus bytes counted add up to the
  // schedule's.
  Collective UnitCollective(const char* name, CollectiveKind kind, size_t unit) const;
  // The test hook: this bucket's local gradients, before its reduction.
  // `from` (default: `grads` at `offset`) holds the gradients.
  Status KeepLocal(size_t offset, size_t length, const float* from = nullptr);
  Status InitWeights(uint64_t seed);
  // This micro-batch's token ids (salt 0) or labels (salt 1), one per token
  // of the micro-batch over the whole vocabulary (the same on every rank of
  // the tensor group), as ids in this rank's vocabulary shard, -1 for those
  // in another rank's.
  std::vector<int32_t> VocabShardIds(int mb, int64_t step, uint64_t salt) const;
  // The summed cross-entropy of a micro-batch's logits (this rank's
  // vocabulary shard, [tokens x shard]), which become their gradient. With
  // t > 1 the shards' per-token logsumexp and target logit are gathered over
  // the tensor group and combined on the host (vocab-parallel
  // cross-entropy), so every rank has the whole vocabulary's loss.
  StatusOr<double> CrossEntropy(float* logits, const std::vector<int32_t>& labels);
  void FillTokens(int mb, int64_t step, int32_t* tokens, int64_t count, int64_t first_position,
                  int64_t modulo, uint64_t salt) const;
  // Counts a schedule entry's bus bytes once its collective succeeded.
  Status Counted(const Collective* c, Status s) {
    if (s.ok() && c != nullptr) bus_bytes_ += c->BusBytes();
    return s;
  }

  const WorkerConfig* config_ = nullptr;
  const StepSchedule* schedule_ = nullptr;
  uint64_t seed_ = 0;
  int t_ = 1, d_ = 1, p_ = 1;
  int64_t tokens_ = 0, shard_tokens_ = 0, hidden_ = 0, qkv_width_ = 0, proj_in_ = 0,
          mlp_in_width_ = 0, mlp_out_in_ = 0, vocab_shard_ = 0;
  AttentionShape attention_;
  bool on_chip_attention_ = false;  // fused, and the device has a kernel for attention_
  bool swiglu_ = false;
  std::vector<LayerOffsets> layer_offsets_;
  size_t embedding_offset_ = 0, output_offset_ = 0;
  std::vector<Bucket> buckets_;
  std::vector<bool> updated_;           // per bucket, this step
  std::vector<bool> reduced_;           // per bucket, this step
  std::vector<size_t> owned_position_;  // per bucket: its offset in the owned buffers
  size_t n_ = 0;                        // this rank's parameters, padded (unsharded)
  bool fsdp_ = false;
  // A 16-bit plan on a device that stores Storage::kCompute narrower than
  // fp32: `weights` (and FSDP's gathered units) hold the compute copy,
  // `master` the fp32 master weights of the owned shards, as Megatron's
  // distributed optimizer and the planner count them (2 bytes a parameter
  // of weights, 12 of optimizer state: master and moments). Otherwise
  // `weights` are the fp32 master copy and there is no `master`.
  bool master_weights_ = false;
  Storage weight_storage() const { return master_weights_ ? Storage::kCompute : Storage::kFp32; }
  std::vector<DeviceBuffer> gathered_;  // per unit under FSDP: its full weights while used
  int64_t current_step_ = 0;
  std::map<std::pair<int, int>, ChunkStash> stash_;
  DeviceBuffer scratch_{dev_, BufferClass::kActivations};
  double bus_bytes_ = 0, loss_sum_ = 0;
  int64_t loss_count_ = 0;
  AdamWParams adam_;
  bool host_copies_ = true;
  bool broken_ = false;
};

Status StepExecutor::Impl::Initialize(const BackendContext& context, uint64_t seed) {
  if (context.config == nullptr || context.schedule == nullptr) {
    return InvalidArgumentError("the step executor needs a config and a schedule");
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
  attention_.seq = Dim(g[1].m);
  attention_.head_dim = Dim(g[1].k);
  attention_.heads = c.model.attention_heads / t_;
  attention_.kv_heads = c.model.kv_heads / t_;
  attention_.sequences = attention_.heads > 0 ? Dim(g[1].batch) / attention_.heads : 0;
  attention_.causal = c.model.causal_attention;
  proj_in_ = Dim(g[3].k);
  mlp_in_width_ = Dim(g[4].n);
  mlp_out_in_ = Dim(g[5].k);
  vocab_shard_ = Dim(s.logits.n);
  swiglu_ = c.model.ffn_kind == planner::FfnKind::kSwiglu;
  if (tokens_ <= 0 || hidden_ <= 0 || !attention_.Valid() || vocab_shard_ <= 0 ||
      mlp_out_in_ <= 0) {
    return InvalidArgumentError("the step executor needs a model with positive dimensions");
  }
  // The schedule's GEMMs and Megatron's head layout must agree: the qkv
  // output holds this rank's Q, K and V heads per token, the projection
  // reads its query heads' context.
  if (tokens_ != attention_.sequences * attention_.seq || qkv_width_ != attention_.qkv_ld() ||
      proj_in_ != attention_.ctx_ld()) {
    return InternalError("the schedule's attention GEMMs (" + std::to_string(tokens_) +
                         " tokens, QKV width " + std::to_string(qkv_width_) +
                         ", projection input " + std::to_string(proj_in_) +
                         ") do not match " + std::to_string(attention_.heads) + " query and " +
                         std::to_string(attention_.kv_heads) + " K/V heads of " +
                         std::to_string(attention_.head_dim) + " per rank");
  }
  if (tokens_ % t_ != 0) {
    return InvalidArgumentError("sequence parallelism needs micro-batch tokens (" +
                                std::to_string(tokens_) +
                                ") divisible by t = " + std::to_string(t_));
  }
  if (swiglu_ && mlp_in_width_ != 2 * mlp_out_in_) {
    return InvalidArgumentError("SwiGLU needs the MLP input width twice the FFN shard");
  }
  shard_tokens_ = tokens_ / t_;

  // The device decides first whether it can run the plan (precision).
  RETURN_IF_ERROR(dev_->Connect(context));
  on_chip_attention_ = fused() && dev_->HasOnChipAttention(attention_);

  // Weights: each layer's four matrices, the tables, then padding up to the
  // schedule's stage_parameters (norm weights and biases of the planner's
  // count, which this model's gain-free norm does not use).
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
  ranges.clear();
  if (s.holds_embedding)
    ranges.push_back({"embedding", embedding_offset_, Size(vocab_shard_ * hidden_)});
  for (int chunk = 0; chunk < s.chunks; ++chunk) {
    for (int l = 0; l < s.layers_per_chunk; ++l) {
      const LayerOffsets& lo = layer_offsets_[Size(chunk * s.layers_per_chunk + l)];
      const int global = (chunk * p_ + s.coordinates.pipeline_rank) * s.layers_per_chunk + l;
      const std::string layer = "layer" + std::to_string(global);
      ranges.push_back({layer + "/qkv", lo.qkv, Size(hidden_ * qkv_width_)});
      ranges.push_back({layer + "/proj", lo.proj, Size(proj_in_ * hidden_)});
      ranges.push_back({layer + "/mlp_in", lo.mlp_in, Size(hidden_ * mlp_in_width_)});
      ranges.push_back({layer + "/mlp_out", lo.mlp_out, Size(mlp_out_in_ * hidden_)});
    }
  }
  if (s.holds_logits && output_offset_ != embedding_offset_) {
    ranges.push_back({"output", output_offset_, Size(vocab_shard_ * hidden_)});
  }
  const size_t n = std::max(offset, Size(Dim(s.stage_parameters)));
  n_ = n;
  fsdp_ = c.zero_stage >= 3 && d_ > 1;
  if (fsdp_) {
    // One unit per table and layer; they start where their matrices do.
    std::vector<size_t> starts;
    if (s.holds_embedding) starts.push_back(embedding_offset_);
    for (const LayerOffsets& l : layer_offsets_) starts.push_back(l.qkv);
    if (s.holds_logits && output_offset_ != embedding_offset_) starts.push_back(output_offset_);
    if (starts.empty() || starts.front() != 0) starts.insert(starts.begin(), 0);
    buckets_ = MakeBuckets(starts, n, d_);
  } else {
    buckets_ = EqualBuckets(n, d_);
  }
  if (c.zero_stage <= 1) RETURN_IF_ERROR(Alloc(&grads, n));
  master_weights_ = planner::IsMixedPrecision(c.precision) &&
                    dev_->ElementBytes(Storage::kCompute) < sizeof(float);
  weights = DeviceBuffer(dev_, BufferClass::kWeights, weight_storage());
  bucket_grads_.clear();
  gathered_.clear();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    bucket_grads_.emplace_back(dev_, BufferClass::kWorkspace);
    gathered_.emplace_back(dev_, BufferClass::kWorkspace, weight_storage());
  }
  bucket_written_.assign(buckets_.size(), 0);
  bucket_expected_.assign(buckets_.size(), 0);
  for (const ParameterRange& r : ranges) {
    // Elements each micro-batch writes per bucket (a tied table twice).
    const bool tied =
        r.name == "embedding" && s.holds_logits && output_offset_ == embedding_offset_;
    for (size_t b = 0; b < buckets_.size(); ++b) {
      const size_t lo = std::max(r.offset, buckets_[b].offset);
      const size_t hi = std::min(r.offset + r.length, buckets_[b].offset + buckets_[b].length);
      if (lo < hi) bucket_expected_[b] += (hi - lo) * (tied ? 2 : 1);
    }
  }
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
  RETURN_IF_ERROR(Alloc(&weights, fsdp_ ? owned_total : n));
  RETURN_IF_ERROR(Alloc(&adam_m, owned_total));
  RETURN_IF_ERROR(Alloc(&adam_v, owned_total));
  if (master_weights_) RETURN_IF_ERROR(Alloc(&master, owned_total));
  if (c.zero_stage >= 2) RETURN_IF_ERROR(Alloc(&grad_shard, owned_total));
  return InitWeights(seed);
}

Status StepExecutor::Impl::InitWeights(uint64_t seed) {
  // Each value is a hash of what it is: (matrix, element of the unsplit
  // matrix), the matrix named by its global layer (Megatron's interleaved
  // assignment: chunk c of pipeline rank r holds model chunk c p + r) or by
  // its table, the element by its UnsplitMap (MapFor). So the model does not depend on
  // how it is split into pipeline stages or tensor-parallel shards (the
  // PP=2 and TP=2 tests compare with one rank), and is identical on every
  // data-parallel rank. Scaled by 1/sqrt(fan-in) so activations stay O(1)
  // through the layers. Filled on the host one matrix at a time, so the host
  // never holds a second full copy.
  std::vector<float> host;
  auto fill = [&](const ParameterRange& r, double fan_in) -> Status {
    const float scale = static_cast<float>(1.0 / std::sqrt(std::max(fan_in, 1.0)));
    host.resize(r.length);
    FillInitialWeights(seed, NameHash(r.name), MapFor(r), scale, host.data(), r.length);
    // The pieces of the matrix in this rank's shards, into an owned buffer.
    auto to_shards = [&](DeviceBuffer* owned_buffer) -> Status {
      for (size_t b = 0; b < buckets_.size(); ++b) {
        const size_t lo = std::max(r.offset, owned[b].first);
        const size_t hi = std::min(r.offset + r.length, owned[b].first + owned[b].second);
        if (lo >= hi) continue;
        RETURN_IF_ERROR(
            dev_->CopyFromHost(host.data() + (lo - r.offset), hi - lo,
                               owned_buffer->data() + owned_position_[b] + (lo - owned[b].first)));
      }
      return Status::Ok();
    };
    // The master copy from the fp32 values, not from their 16-bit rounding.
    if (master_weights_) RETURN_IF_ERROR(to_shards(&master));
    if (!fsdp_) return dev_->CopyFromHost(host.data(), r.length, weights.data() + r.offset);
    return to_shards(&weights);  // FSDP: only this rank's shards exist
  };
  for (const ParameterRange& r : ranges) {
    double fan_in = static_cast<double>(hidden_);
    if (r.name == "embedding") fan_in = 1;
    if (r.name.ends_with("/proj")) fan_in = static_cast<double>(proj_in_ * t_);
    if (r.name.ends_with("/mlp_out")) fan_in = static_cast<double>(mlp_out_in_ * t_);
    RETURN_IF_ERROR(fill(r, fan_in));
  }
  return Status::Ok();
}

// Tables are split by vocabulary rows, the projection and MLP-out by input
// rows, QKV and MLP-in by output columns within each section of Megatron's
// layout (query, key and value heads; SwiGLU's gate and up halves), each
// rank holding the tensor_rank-th part of every section.
UnsplitMap StepExecutor::Impl::MapFor(const ParameterRange& r) const {
  const int64_t rank = schedule_->coordinates.tensor_rank;
  if (r.name == "embedding" || r.name == "output") {
    return UnsplitMap::Rows(rank, vocab_shard_, hidden_);
  }
  if (r.name.ends_with("/proj")) return UnsplitMap::Rows(rank, proj_in_, hidden_);
  if (r.name.ends_with("/mlp_out")) return UnsplitMap::Rows(rank, mlp_out_in_, hidden_);
  if (r.name.ends_with("/qkv")) {
    const int64_t d = attention_.head_dim;
    return UnsplitMap::Columns(
        {attention_.heads * d, attention_.kv_heads * d, attention_.kv_heads * d}, t_, rank);
  }
  if (r.name.ends_with("/mlp_in")) {
    return swiglu_ ? UnsplitMap::Columns({mlp_out_in_, mlp_out_in_}, t_, rank)
                   : UnsplitMap::Columns({mlp_in_width_}, t_, rank);
  }
  return UnsplitMap();
}

StatusOr<double> StepExecutor::Impl::CrossEntropy(float* logits,
                                                  const std::vector<int32_t>& labels) {
  const float scale = 1.0f / static_cast<float>(tokens_);
  if (t_ == 1) {
    return dev_->CrossEntropyGradInPlace(logits, labels.data(), tokens_, vocab_shard_, scale,
                                         nullptr);
  }
  const size_t rows = Size(tokens_);
  DeviceBuffer stats = Activation(), gathered = Activation();
  RETURN_IF_ERROR(stats.Assign(2 * rows, Fill::kUndefined));
  RETURN_IF_ERROR(dev_->LogitRowStats(logits, labels.data(), tokens_, vocab_shard_, stats.data()));
  RETURN_IF_ERROR(gathered.Assign(2 * rows * Size(t_), Fill::kUndefined));
  const std::vector<size_t> counts(Size(t_), 2 * rows);
  RETURN_IF_ERROR(Counted(
      Find(schedule_->logits_collectives.forward, "logits-stats"),
      dev_->AllGather(Group::kTensor, stats.data(), gathered.data(), counts, "logits-stats")));
  std::vector<float> host(gathered.size());
  RETURN_IF_ERROR(dev_->CopyToHost(gathered.data(), host.size(), host.data()));
  std::vector<float> lse(rows);
  double loss = 0;
  for (size_t r = 0; r < rows; ++r) {
    double most = -std::numeric_limits<double>::infinity(), target = 0;
    for (size_t k = 0; k < Size(t_); ++k) most = std::max(most, double{host[k * 2 * rows + r]});
    double sum = 0;
    for (size_t k = 0; k < Size(t_); ++k) {
      sum += std::exp(host[k * 2 * rows + r] - most);
      target += host[k * 2 * rows + rows + r];  // one shard holds the label
    }
    const double whole = most + std::log(sum);
    lse[r] = static_cast<float>(whole);
    loss += whole - target;
  }
  RETURN_IF_ERROR(dev_->CopyFromHost(lse.data(), rows, stats.data()));
  ASSIGN_OR_RETURN(const double shard_loss,
                   dev_->CrossEntropyGradInPlace(logits, labels.data(), tokens_, vocab_shard_,
                                                 scale, stats.data()));
  (void)shard_loss;  // this shard's labels only: the loss is the gathered one
  return loss;
}

std::vector<int32_t> StepExecutor::Impl::VocabShardIds(int mb, int64_t step, uint64_t salt) const {
  std::vector<int32_t> ids(Size(tokens_));
  // Ids of the model's vocabulary: the rows padding it to t x shard
  // (VocabShardRows) are never a token or a label.
  FillTokens(mb, step, ids.data(), tokens_, 0, config_->model.vocab_size, salt);
  const int64_t first = schedule_->coordinates.tensor_rank * vocab_shard_;
  for (int32_t& id : ids) {
    id = id >= first && id < first + vocab_shard_ ? static_cast<int32_t>(id - first) : -1;
  }
  return ids;
}

void StepExecutor::Impl::FillTokens(int mb, int64_t step, int32_t* tokens, int64_t count,
                                    int64_t first_position, int64_t modulo, uint64_t salt) const {
  const uint64_t dp = static_cast<uint64_t>(schedule_->coordinates.data_rank);
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t h = HashKeys(seed_, static_cast<uint64_t>(step), static_cast<uint64_t>(mb), dp,
                                static_cast<uint64_t>(first_position + i) * 2 + salt);
    tokens[i] = static_cast<int32_t>(h % static_cast<uint64_t>(modulo));
  }
}

Status StepExecutor::Impl::TpAllGather(const Collective* c, const float* shard, DeviceBuffer* full,
                                       Storage storage) {
  const size_t shard_elems = Size(shard_tokens_ * hidden_);
  if (full->size() != shard_elems * Size(t_) || full->storage() != storage) {
    RETURN_IF_ERROR(Act(full, shard_elems * Size(t_), Fill::kZeros, storage));
  }
  const std::vector<size_t> counts(Size(t_), shard_elems);
  return Counted(
      c, dev_->AllGather(Group::kTensor, shard, full->data(), counts, c ? c->name : "gather"));
}

Status StepExecutor::Impl::TpReduceScatter(const Collective* c, float* full, float* shard) {
  if (full == shard) return Status::Ok();
  const std::vector<size_t> counts(Size(t_), Size(shard_tokens_ * hidden_));
  return Counted(c,
                 dev_->ReduceScatter(Group::kTensor, full, shard, counts, c ? c->name : "scatter"));
}

StatusOr<const float*> StepExecutor::Impl::TpInput(const Collective* c, const float* shard,
                                                   DeviceBuffer* full) {
  if (t_ == 1) return shard;
  RETURN_IF_ERROR(TpAllGather(c, shard, full));
  return static_cast<const float*>(full->data());
}

StatusOr<float*> StepExecutor::Impl::TpPartial(float* shard, DeviceBuffer* full, Storage storage) {
  if (t_ == 1) return shard;
  const size_t elements = Size(tokens_ * hidden_);
  if (full->size() != elements || full->storage() != storage) {
    RETURN_IF_ERROR(Act(full, elements, Fill::kUndefined, storage));
  }
  return full->data();
}

size_t StepExecutor::Impl::UnitOf(size_t offset) const {
  const auto it = std::upper_bound(buckets_.begin(), buckets_.end(), offset,
                                   [](size_t o, const Bucket& b) { return o < b.offset; });
  return static_cast<size_t>(std::max<std::ptrdiff_t>(0, (it - buckets_.begin()) - 1));
}

std::vector<size_t> StepExecutor::Impl::PassUnits(int chunk, PassKind pass) const {
  std::vector<size_t> order;
  if (!fsdp_) return order;
  const StepSchedule& s = *schedule_;
  const bool first = s.holds_embedding && chunk == 0;
  const bool last = s.holds_logits && chunk == s.chunks - 1;
  const bool tied = first && last && output_offset_ == embedding_offset_;
  std::vector<size_t> layers;
  for (int l = 0; l < s.layers_per_chunk; ++l) {
    layers.push_back(UnitOf(layer_offsets_[Size(chunk * s.layers_per_chunk + l)].qkv));
  }
  if (pass == PassKind::kForward) {
    if (first) order.push_back(UnitOf(embedding_offset_));
    order.insert(order.end(), layers.begin(), layers.end());
    if (last) order.push_back(UnitOf(output_offset_));
  } else {
    if (last) order.push_back(UnitOf(output_offset_));
    order.insert(order.end(), layers.rbegin(), layers.rend());
    // The input table's gradient needs no weights, but FSDP gathers every
    // unit for backward, as the schedule and the planner count; a tied
    // table was gathered for the logits already.
    if (first && !tied) order.push_back(UnitOf(embedding_offset_));
  }
  return order;
}

Collective StepExecutor::Impl::UnitCollective(const char* name, CollectiveKind kind,
                                              size_t unit) const {
  double total = 0;
  for (const Collective& c : schedule_->per_micro_batch_collectives) {
    if (std::strcmp(c.name, name) == 0) total += c.bytes;
  }
  const double share =
      static_cast<double>(buckets_[unit].length) / static_cast<double>(std::max<size_t>(n_, 1));
  return Collective{name, kind, Group::kData, d_, total * share};
}

Status StepExecutor::Impl::GatherUnit(size_t unit, PassKind pass) {
  DeviceBuffer& full = gathered_[unit];
  if (full.size() > 0) return Status::Ok();
  const Bucket& b = buckets_[unit];
  const char* name = pass == PassKind::kForward ? "parameters-forward" : "parameters-backward";
  RETURN_IF_ERROR(full.Assign(b.length, Fill::kUndefined));  // the gather writes it whole
  const Collective c = UnitCollective(name, CollectiveKind::kAllGather, unit);
  return Counted(&c, dev_->AllGather(Group::kData, weights.data() + owned_position_[unit],
                                     full.data(), b.shard_counts, name));
}

Status StepExecutor::Impl::GatherAhead(const std::vector<size_t>& order, size_t i, PassKind pass) {
  if (!fsdp_ || i >= order.size()) return Status::Ok();
  RETURN_IF_ERROR(GatherUnit(order[i], pass));
  if (i + 1 < order.size()) RETURN_IF_ERROR(GatherUnit(order[i + 1], pass));
  return Status::Ok();
}

void StepExecutor::Impl::ReleaseAfter(const std::vector<size_t>& order, size_t i) {
  if (!fsdp_ || i >= order.size()) return;
  for (size_t j = i + 1; j < order.size(); ++j) {
    if (order[j] == order[i]) return;
  }
  gathered_[order[i]].Clear();
}

Status StepExecutor::Impl::Attention(LayerStash* st) {
  if (!fused()) {
    RETURN_IF_ERROR(Act(&st->probs, dev_->AttentionStashElements(attention_), Fill::kUndefined));
  } else if (on_chip_attention_) {
    RETURN_IF_ERROR(Act(&st->lse, Size(attention_.RowElements()), Fill::kUndefined));
  }
  // Every attention path writes the whole context.
  RETURN_IF_ERROR(
      Act(&st->ctx, Size(attention_.CtxElements()), Fill::kUndefined, Storage::kCompute));
  if (on_chip_attention_) {
    return dev_->OnChipAttentionForward(attention_, st->qkv.data(), st->lse.data(),
                                        st->ctx.data());
  }
  if (fused()) return TiledAttentionForward(dev_, attention_, st->qkv.data(), st->ctx.data());
  return dev_->AttentionForward(attention_, st->qkv.data(), st->probs.data(), st->ctx.data());
}

Status StepExecutor::Impl::LayerForward(int layer, const float* x_in, float* x_out, LayerStash* st,
                                        Pass pass) {
  const LayerWork& work = schedule_->layer;
  const std::vector<Collective>& tp =
      pass == Pass::kForward ? work.forward_collectives : work.recompute_collectives;
  const planner::Recompute recompute = config_->recompute;
  const bool keep_full = pass == Pass::kRecompute;  // backward follows at once
  const LayerOffsets& w = layer_offsets_[static_cast<size_t>(layer)];
  const size_t shard = Size(shard_tokens_ * hidden_);

  // The stashed input and the mid-layer residual are stored as Megatron
  // stores its residual stream by default (bf16 under a bf16 plan, which
  // is what the planner's activation bytes count); the residual stream
  // between layers (x_in, x_out) stays fp32.
  RETURN_IF_ERROR(Act(&st->x, shard, Fill::kUndefined, Storage::kCompute));
  RETURN_IF_ERROR(dev_->Copy(x_in, shard, st->x.data()));
  RETURN_IF_ERROR(Act(&st->n1, shard, Fill::kUndefined, Storage::kCompute));
  RETURN_IF_ERROR(Act(&st->inv1, Size(shard_tokens_), Fill::kUndefined));
  RETURN_IF_ERROR(
      dev_->RmsNormForward(st->x.data(), shard_tokens_, hidden_, st->n1.data(), st->inv1.data()));
  ASSIGN_OR_RETURN(const float* n1_full,
                   TpInput(Find(tp, "attention-in"), st->n1.data(), &st->n1_full));
  RETURN_IF_ERROR(Act(&st->qkv, Size(tokens_ * qkv_width_), Fill::kUndefined, Storage::kCompute));
  RETURN_IF_ERROR(dev_->Gemm(false, false, tokens_, qkv_width_, hidden_, 1.0f, n1_full, hidden_,
                             Param(w.qkv), qkv_width_, 0.0f, st->qkv.data(), qkv_width_));
  RETURN_IF_ERROR(Attention(st));
  RETURN_IF_ERROR(Act(&st->x2, shard, Fill::kUndefined, Storage::kCompute));
  ASSIGN_OR_RETURN(float* attention_out, TpPartial(st->x2.data(), &scratch_, Storage::kFp32));
  RETURN_IF_ERROR(dev_->Gemm(false, false, tokens_, hidden_, proj_in_, 1.0f, st->ctx.data(),
                             proj_in_, Param(w.proj), hidden_, 0.0f, attention_out, hidden_));
  RETURN_IF_ERROR(TpReduceScatter(Find(tp, "attention-out"), attention_out, st->x2.data()));
  RETURN_IF_ERROR(dev_->Add(st->x2.data(), st->x.data(), shard));

  RETURN_IF_ERROR(Act(&st->n2, shard, Fill::kUndefined, Storage::kCompute));
  RETURN_IF_ERROR(Act(&st->inv2, Size(shard_tokens_), Fill::kUndefined));
  RETURN_IF_ERROR(
      dev_->RmsNormForward(st->x2.data(), shard_tokens_, hidden_, st->n2.data(), st->inv2.data()));
  ASSIGN_OR_RETURN(const float* n2_full, TpInput(Find(tp, "mlp-in"), st->n2.data(), &st->n2_full));
  RETURN_IF_ERROR(
      Act(&st->mlp_pre, Size(tokens_ * mlp_in_width_), Fill::kUndefined, Storage::kCompute));
  RETURN_IF_ERROR(dev_->Gemm(false, false, tokens_, mlp_in_width_, hidden_, 1.0f, n2_full, hidden_,
                             Param(w.mlp_in), mlp_in_width_, 0.0f, st->mlp_pre.data(),
                             mlp_in_width_));
  RETURN_IF_ERROR(Act(&st->act, Size(tokens_ * mlp_out_in_), Fill::kUndefined, Storage::kCompute));
  if (swiglu_) {
    RETURN_IF_ERROR(dev_->SwigluForward(st->mlp_pre.data(), tokens_, mlp_out_in_, st->act.data()));
  } else {
    RETURN_IF_ERROR(dev_->GeluForward(st->mlp_pre.data(), st->mlp_pre.size(), st->act.data()));
  }
  ASSIGN_OR_RETURN(float* mlp_out, TpPartial(x_out, &scratch_, Storage::kFp32));
  RETURN_IF_ERROR(dev_->Gemm(false, false, tokens_, hidden_, mlp_out_in_, 1.0f, st->act.data(),
                             mlp_out_in_, Param(w.mlp_out), hidden_, 0.0f, mlp_out, hidden_));
  RETURN_IF_ERROR(TpReduceScatter(Find(tp, "mlp-out"), mlp_out, x_out));
  RETURN_IF_ERROR(dev_->Add(x_out, st->x2.data(), shard));

  if (keep_full) return Status::Ok();
  // What the recompute policy drops: the gathered inputs always (backward
  // regathers them), the attention core under selective (a fused kernel
  // stores no scores: nothing to drop), all but the layer's input under
  // full.
  st->n1_full.Clear();
  st->n2_full.Clear();
  if (recompute == planner::Recompute::kSelective && !fused()) {
    st->probs.Clear();
    st->ctx.Clear();
  } else if (recompute == planner::Recompute::kFull) {
    DeviceBuffer x = std::move(st->x);
    *st = LayerStash();
    st->x = std::move(x);
  }
  return Status::Ok();
}

Status StepExecutor::Impl::LayerBackward(int layer, LayerStash* st, const float* dx_out,
                                         float* dx) {
  const LayerWork& work = schedule_->layer;
  const std::vector<Collective>& tp = work.backward_collectives;
  const planner::Recompute recompute = config_->recompute;
  const LayerOffsets& w = layer_offsets_[static_cast<size_t>(layer)];
  const size_t shard = Size(shard_tokens_ * hidden_);

  if (recompute == planner::Recompute::kFull) {
    // Rerun the layer's forward from its kept input, with the recompute
    // collectives, keeping everything (no regathers needed afterwards).
    DeviceBuffer x = std::move(st->x);
    DeviceBuffer out;
    RETURN_IF_ERROR(Act(&out, shard, Fill::kUndefined));
    RETURN_IF_ERROR(LayerForward(layer, x.data(), out.data(), st, Pass::kRecompute));
  } else if (recompute == planner::Recompute::kSelective && !fused()) {
    RETURN_IF_ERROR(Attention(st));
  }

  // MLP block.
  DeviceBuffer dx2, dfull;
  RETURN_IF_ERROR(Act(&dx2, shard, Fill::kUndefined));
  RETURN_IF_ERROR(dev_->Copy(dx_out, shard, dx2.data()));
  RETURN_IF_ERROR(TpAllGather(Find(tp, "mlp-out-grad"), dx_out, &dfull));
  DeviceBuffer dact;
  RETURN_IF_ERROR(Act(&dact, Size(tokens_ * mlp_out_in_), Fill::kUndefined, Storage::kCompute));
  const auto mlp_out_grads = [&]() -> Status {
    RETURN_IF_ERROR(dev_->Gemm(false, true, tokens_, mlp_out_in_, hidden_, 1.0f, dfull.data(),
                               hidden_, Param(w.mlp_out), hidden_, 0.0f, dact.data(), mlp_out_in_));
    GradSink g;
    RETURN_IF_ERROR(OpenGrad(w.mlp_out, Size(mlp_out_in_ * hidden_), &g));
    RETURN_IF_ERROR(dev_->Gemm(true, false, mlp_out_in_, hidden_, tokens_, 1.0f, st->act.data(),
                               mlp_out_in_, dfull.data(), hidden_, g.beta, g.out, hidden_));
    return CloseGrad(&g);
  };
  RETURN_IF_ERROR(ReadTwice(dfull, mlp_out_grads));
  DeviceBuffer dpre;
  RETURN_IF_ERROR(Act(&dpre, Size(tokens_ * mlp_in_width_), Fill::kUndefined, Storage::kCompute));
  if (swiglu_) {
    RETURN_IF_ERROR(
        dev_->SwigluBackward(st->mlp_pre.data(), dact.data(), tokens_, mlp_out_in_, dpre.data()));
  } else {
    RETURN_IF_ERROR(dev_->GeluBackward(st->mlp_pre.data(), dact.data(), dpre.size(), dpre.data()));
  }
  dact.Clear();
  const float* n2_full = st->n2_full.data();
  if (st->n2_full.size() == 0) {
    ASSIGN_OR_RETURN(n2_full, TpInput(Find(tp, "mlp-in-regather"), st->n2.data(), &st->n2_full));
  }
  DeviceBuffer dn;
  RETURN_IF_ERROR(Act(&dn, shard, Fill::kUndefined));
  ASSIGN_OR_RETURN(float* mlp_in_grad, TpPartial(dn.data(), &dfull, Storage::kCompute));
  const auto mlp_in_grads = [&]() -> Status {
    RETURN_IF_ERROR(dev_->Gemm(false, true, tokens_, hidden_, mlp_in_width_, 1.0f, dpre.data(),
                               mlp_in_width_, Param(w.mlp_in), mlp_in_width_, 0.0f, mlp_in_grad,
                               hidden_));
    GradSink g;
    RETURN_IF_ERROR(OpenGrad(w.mlp_in, Size(hidden_ * mlp_in_width_), &g));
    RETURN_IF_ERROR(dev_->Gemm(true, false, hidden_, mlp_in_width_, tokens_, 1.0f, n2_full, hidden_,
                               dpre.data(), mlp_in_width_, g.beta, g.out, mlp_in_width_));
    return CloseGrad(&g);
  };
  RETURN_IF_ERROR(ReadTwice(dpre, mlp_in_grads));
  dpre.Clear();
  RETURN_IF_ERROR(TpReduceScatter(Find(tp, "mlp-in-grad"), mlp_in_grad, dn.data()));
  RETURN_IF_ERROR(dev_->RmsNormBackward(st->x2.data(), st->inv2.data(), dn.data(), shard_tokens_,
                                        hidden_, dx2.data()));

  // Attention block.
  RETURN_IF_ERROR(TpAllGather(Find(tp, "attention-out-grad"), dx2.data(), &dfull));
  DeviceBuffer dctx;
  RETURN_IF_ERROR(Act(&dctx, st->ctx.size(), Fill::kUndefined, Storage::kCompute));
  const auto proj_grads = [&]() -> Status {
    RETURN_IF_ERROR(dev_->Gemm(false, true, tokens_, proj_in_, hidden_, 1.0f, dfull.data(), hidden_,
                               Param(w.proj), hidden_, 0.0f, dctx.data(), proj_in_));
    GradSink g;
    RETURN_IF_ERROR(OpenGrad(w.proj, Size(proj_in_ * hidden_), &g));
    RETURN_IF_ERROR(dev_->Gemm(true, false, proj_in_, hidden_, tokens_, 1.0f, st->ctx.data(),
                               proj_in_, dfull.data(), hidden_, g.beta, g.out, hidden_));
    return CloseGrad(&g);
  };
  RETURN_IF_ERROR(ReadTwice(dfull, proj_grads));
  DeviceBuffer dqkv;
  RETURN_IF_ERROR(Act(&dqkv, st->qkv.size(), Fill::kZeros, DqkvStorage()));
  if (on_chip_attention_) {
    RETURN_IF_ERROR(dev_->OnChipAttentionBackward(attention_, st->qkv.data(), st->ctx.data(),
                                                  st->lse.data(), dctx.data(), dqkv.data()));
  } else if (fused()) {
    RETURN_IF_ERROR(
        TiledAttentionBackward(dev_, attention_, st->qkv.data(), dctx.data(), dqkv.data()));
  } else {
    RETURN_IF_ERROR(dev_->AttentionBackward(attention_, st->qkv.data(), st->probs.data(),
                                            dctx.data(), dqkv.data()));
  }
  dctx.Clear();
  const float* n1_full = st->n1_full.data();
  if (st->n1_full.size() == 0) {
    ASSIGN_OR_RETURN(n1_full,
                     TpInput(Find(tp, "attention-in-regather"), st->n1.data(), &st->n1_full));
  }
  ASSIGN_OR_RETURN(float* attention_in_grad, TpPartial(dn.data(), &dfull, Storage::kCompute));
  const auto qkv_grads = [&]() -> Status {
    RETURN_IF_ERROR(dev_->Gemm(false, true, tokens_, hidden_, qkv_width_, 1.0f, dqkv.data(),
                               qkv_width_, Param(w.qkv), qkv_width_, 0.0f, attention_in_grad,
                               hidden_));
    GradSink g;
    RETURN_IF_ERROR(OpenGrad(w.qkv, Size(hidden_ * qkv_width_), &g));
    RETURN_IF_ERROR(dev_->Gemm(true, false, hidden_, qkv_width_, tokens_, 1.0f, n1_full, hidden_,
                               dqkv.data(), qkv_width_, g.beta, g.out, qkv_width_));
    return CloseGrad(&g);
  };
  RETURN_IF_ERROR(ReadTwice(dqkv, qkv_grads));
  RETURN_IF_ERROR(TpReduceScatter(Find(tp, "attention-in-grad"), attention_in_grad, dn.data()));
  RETURN_IF_ERROR(dev_->Copy(dx2.data(), shard, dx));
  RETURN_IF_ERROR(
      dev_->RmsNormBackward(st->x.data(), st->inv1.data(), dn.data(), shard_tokens_, hidden_, dx));
  *st = LayerStash();
  return Status::Ok();
}

Status StepExecutor::Impl::Forward(int mb, int chunk, int64_t step) {
  const StepSchedule& s = *schedule_;
  const size_t shard = Size(shard_tokens_ * hidden_);
  // The embedding or the receive writes x whole, each layer its output.
  DeviceBuffer x, y;
  RETURN_IF_ERROR(Act(&x, shard, Fill::kUndefined));
  RETURN_IF_ERROR(Act(&y, shard, Fill::kUndefined));
  const int pp = s.coordinates.pipeline_rank;
  const std::vector<size_t> units = PassUnits(chunk, PassKind::kForward);  // FSDP only
  size_t use = 0;
  if (s.holds_embedding && chunk == 0) {
    // Megatron's vocabulary-parallel embedding: every token of the
    // micro-batch looked up in this rank's vocabulary shard (zeros for the
    // others'), summed over the tensor group and scattered by sequence.
    const std::vector<int32_t> tokens = VocabShardIds(mb, step, 0);
    RETURN_IF_ERROR(GatherAhead(units, use, PassKind::kForward));
    if (t_ == 1) {
      RETURN_IF_ERROR(dev_->EmbeddingForward(Param(embedding_offset_), tokens.data(), tokens_,
                                             hidden_, x.data()));
    } else {
      DeviceBuffer full;
      RETURN_IF_ERROR(Act(&full, Size(tokens_ * hidden_), Fill::kUndefined));
      RETURN_IF_ERROR(dev_->EmbeddingForward(Param(embedding_offset_), tokens.data(), tokens_,
                                             hidden_, full.data()));
      RETURN_IF_ERROR(TpReduceScatter(Find(s.embedding_collectives.forward, "embedding-out"),
                                      full.data(), x.data()));
    }
    ReleaseAfter(units, use++);
  } else {
    const int prev = (pp + p_ - 1) % p_;
    RETURN_IF_ERROR(dev_->Recv(prev, PipeDirection::kForward, x.data(), shard, "activations"));
  }
  ChunkStash& cs = stash_[{mb, chunk}];
  cs.layers.resize(Size(s.layers_per_chunk));
  for (int l = 0; l < s.layers_per_chunk; ++l) {
    RETURN_IF_ERROR(GatherAhead(units, use, PassKind::kForward));
    RETURN_IF_ERROR(LayerForward(chunk * s.layers_per_chunk + l, x.data(), y.data(),
                                 &cs.layers[Size(l)], Pass::kForward));
    ReleaseAfter(units, use++);
    std::swap(x, y);
  }
  if (s.holds_logits && chunk == s.chunks - 1) {
    // Logits over this rank's vocabulary shard for the whole micro-batch
    // (its sequence shards gathered), the loss and its gradient.
    if (t_ == 1) {
      RETURN_IF_ERROR(
          Act(&cs.logits_input, Size(tokens_ * hidden_), Fill::kUndefined, Storage::kCompute));
      RETURN_IF_ERROR(dev_->Copy(x.data(), shard, cs.logits_input.data()));
    } else {
      RETURN_IF_ERROR(
          TpAllGather(Find(s.logits_collectives.forward, "logits-in"), x.data(), &cs.logits_input));
    }
    RETURN_IF_ERROR(Act(&cs.dlogits, Size(tokens_ * vocab_shard_), Fill::kUndefined));
    RETURN_IF_ERROR(GatherAhead(units, use, PassKind::kForward));
    RETURN_IF_ERROR(dev_->Gemm(false, true, tokens_, vocab_shard_, hidden_, 1.0f,
                               cs.logits_input.data(), hidden_, Param(output_offset_), hidden_,
                               0.0f, cs.dlogits.data(), vocab_shard_));
    ReleaseAfter(units, use++);
    const std::vector<int32_t> labels = VocabShardIds(mb, step, 1);
    ASSIGN_OR_RETURN(const double loss, CrossEntropy(cs.dlogits.data(), labels));
    loss_sum_ += loss;
    loss_count_ += tokens_;
    return Status::Ok();
  }
  const int next = (pp + 1) % p_;
  const Collective send{"activations", CollectiveKind::kSend, Group::kPipeline, 2, s.p2p_bytes};
  return Counted(&send, dev_->Send(next, PipeDirection::kForward, x.data(), shard, "activations"));
}

Status StepExecutor::Impl::Backward(int mb, int chunk, int64_t step) {
  const StepSchedule& s = *schedule_;
  const size_t shard = Size(shard_tokens_ * hidden_);
  const int pp = s.coordinates.pipeline_rank;
  auto it = stash_.find({mb, chunk});
  if (it == stash_.end()) {
    return InternalError("backward of micro-batch " + std::to_string(mb) + " chunk " +
                         std::to_string(chunk) + " before its forward");
  }
  ChunkStash& cs = it->second;
  // The logits' GEMM (or scatter) or the receive writes dy whole, each
  // layer's backward its input gradient.
  DeviceBuffer dy, dx;
  RETURN_IF_ERROR(Act(&dy, shard, Fill::kUndefined));
  RETURN_IF_ERROR(Act(&dx, shard, Fill::kUndefined));
  const std::vector<size_t> units = PassUnits(chunk, PassKind::kBackward);  // FSDP only
  size_t use = 0;
  if (s.holds_logits && chunk == s.chunks - 1) {
    // Each rank's dh is its vocabulary shard's part: summed over the
    // tensor group, this rank's sequence shard kept (with t = 1, dh is dy).
    DeviceBuffer dh;
    ASSIGN_OR_RETURN(float* partial, TpPartial(dy.data(), &dh, Storage::kFp32));
    RETURN_IF_ERROR(GatherAhead(units, use, PassKind::kBackward));
    const auto output_grads = [&]() -> Status {
      RETURN_IF_ERROR(dev_->Gemm(false, false, tokens_, hidden_, vocab_shard_, 1.0f,
                                 cs.dlogits.data(), vocab_shard_, Param(output_offset_), hidden_,
                                 0.0f, partial, hidden_));
      GradSink g;
      RETURN_IF_ERROR(OpenGrad(output_offset_, Size(vocab_shard_ * hidden_), &g));
      RETURN_IF_ERROR(dev_->Gemm(true, false, vocab_shard_, hidden_, tokens_, 1.0f,
                                 cs.dlogits.data(), vocab_shard_, cs.logits_input.data(), hidden_,
                                 g.beta, g.out, hidden_));
      return CloseGrad(&g);
    };
    RETURN_IF_ERROR(ReadTwice(cs.dlogits, output_grads));
    ReleaseAfter(units, use++);
    RETURN_IF_ERROR(
        TpReduceScatter(Find(s.logits_collectives.backward, "logits-in-grad"), partial, dy.data()));
  } else {
    const int next = (pp + 1) % p_;
    RETURN_IF_ERROR(dev_->Recv(next, PipeDirection::kBackward, dy.data(), shard, "gradients"));
  }
  for (int l = s.layers_per_chunk - 1; l >= 0; --l) {
    RETURN_IF_ERROR(GatherAhead(units, use, PassKind::kBackward));
    RETURN_IF_ERROR(
        LayerBackward(chunk * s.layers_per_chunk + l, &cs.layers[Size(l)], dy.data(), dx.data()));
    ReleaseAfter(units, use++);
    std::swap(dx, dy);
  }
  stash_.erase(it);
  if (s.holds_embedding && chunk == 0) {
    // The embedding rows the forward pass read (same keys, same tokens),
    // with the whole micro-batch's gradient gathered from the sequence
    // shards.
    const std::vector<int32_t> tokens = VocabShardIds(mb, step, 0);
    DeviceBuffer dfull;
    if (t_ > 1) {
      RETURN_IF_ERROR(TpAllGather(Find(s.embedding_collectives.backward, "embedding-grad"),
                                  dy.data(), &dfull, Storage::kFp32));
    }
    const float* dout = t_ > 1 ? dfull.data() : dy.data();
    // FSDP gathers the (untied) table as it gathers every unit; a tied
    // one was gathered for the logits, and units ends there.
    RETURN_IF_ERROR(GatherAhead(units, use, PassKind::kBackward));
    GradSink g;
    RETURN_IF_ERROR(OpenGrad(embedding_offset_, Size(vocab_shard_ * hidden_), &g));
    RETURN_IF_ERROR(dev_->EmbeddingBackward(dout, tokens.data(), tokens_, hidden_, g.out));
    ReleaseAfter(units, use++);
    return CloseGrad(&g);
  }
  const int prev = (pp + p_ - 1) % p_;
  const Collective send{"gradients", CollectiveKind::kSend, Group::kPipeline, 2, s.p2p_bytes};
  return Counted(&send, dev_->Send(prev, PipeDirection::kBackward, dy.data(), shard, "gradients"));
}

template <typename Select>
Status StepExecutor::Impl::DataParallel(const std::vector<Collective>& list, bool step_end,
                                        Select select) {
  std::map<std::string, size_t> seen;
  for (const Collective& c : list) {
    const size_t bucket = seen[c.name]++;
    if (!select(c)) continue;
    RETURN_IF_ERROR(DataParallelOne(c, bucket, step_end));
  }
  return Status::Ok();
}

Status StepExecutor::Impl::KeepLocal(size_t offset, size_t length, const float* from) {
  if (!host_copies_) return Status::Ok();
  std::vector<float> host(length);
  RETURN_IF_ERROR(
      dev_->CopyToHost(from != nullptr ? from : grads.data() + offset, length, host.data()));
  for (size_t i = 0; i < length; ++i) local_gradients[offset + i] += host[i];
  return Status::Ok();
}

Status StepExecutor::Impl::OpenGrad(size_t offset, size_t length, GradSink* sink) {
  sink->offset = offset;
  sink->length = length;
  if (!ShardedGradients()) {
    sink->out = grads.data() + offset;
    sink->beta = 1.0f;
    return Status::Ok();
  }
  if (fsdp_) {
    // A matrix lies inside one unit: the GEMM accumulates straight into the
    // unit's gradient buffer (zeros when the micro-batch first writes it).
    const size_t u = UnitOf(offset);
    DeviceBuffer& buffer = bucket_grads_[u];
    if (buffer.size() == 0) RETURN_IF_ERROR(buffer.Assign(buckets_[u].length));
    sink->out = buffer.data() + (offset - buckets_[u].offset);
    sink->beta = 1.0f;
    return Status::Ok();
  }
  RETURN_IF_ERROR(Act(&sink->temp, length));  // zeros
  sink->out = sink->temp.data();
  sink->beta = 0.0f;
  return Status::Ok();
}

Status StepExecutor::Impl::CloseGrad(GradSink* sink) {
  if (!ShardedGradients()) return Status::Ok();
  if (fsdp_) {
    const size_t u = UnitOf(sink->offset);
    bucket_written_[u] += sink->length;
    if (bucket_written_[u] >= bucket_expected_[u]) RETURN_IF_ERROR(ReduceBucket(u));
    return Status::Ok();
  }
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const Bucket& bucket = buckets_[b];
    const size_t lo = std::max(sink->offset, bucket.offset);
    const size_t hi = std::min(sink->offset + sink->length, bucket.offset + bucket.length);
    if (lo >= hi) continue;
    DeviceBuffer& buffer = bucket_grads_[b];
    if (buffer.size() == 0) RETURN_IF_ERROR(buffer.Assign(bucket.length));
    RETURN_IF_ERROR(dev_->Add(buffer.data() + (lo - bucket.offset),
                              sink->temp.data() + (lo - sink->offset), hi - lo));
    bucket_written_[b] += hi - lo;
    if (bucket_written_[b] >= bucket_expected_[b]) RETURN_IF_ERROR(ReduceBucket(b));
  }
  sink->temp.Clear();
  return Status::Ok();
}

Status StepExecutor::Impl::ReduceBucket(size_t bucket) {
  const Bucket& b = buckets_[bucket];
  DeviceBuffer& buffer = bucket_grads_[bucket];
  if (buffer.size() == 0) RETURN_IF_ERROR(buffer.Assign(b.length));
  RETURN_IF_ERROR(KeepLocal(b.offset, b.length, buffer.data()));
  float* shard = grad_shard.data() + owned_position_[bucket];
  if (d_ == 1) {
    RETURN_IF_ERROR(dev_->Add(shard, buffer.data(), b.length));
  } else {
    // The schedule's entry for this bucket: the bucket-th "gradients"
    // (FSDP: the unit's share of them).
    Collective unit_entry;
    const Collective* entry = nullptr;
    if (fsdp_) {
      unit_entry = UnitCollective("gradients", CollectiveKind::kReduceScatter, bucket);
      entry = &unit_entry;
    } else {
      size_t seen = 0;
      for (const Collective& c : schedule_->per_micro_batch_collectives) {
        if (std::strcmp(c.name, "gradients") == 0 && seen++ == bucket) entry = &c;
      }
    }
    const int dp = schedule_->coordinates.data_rank;
    const size_t count = b.shard_counts[static_cast<size_t>(dp)];
    DeviceBuffer mine(dev_, BufferClass::kWorkspace);
    RETURN_IF_ERROR(mine.Assign(count));
    RETURN_IF_ERROR(Counted(entry, dev_->ReduceScatter(Group::kData, buffer.data(), mine.data(),
                                                       b.shard_counts, "gradients")));
    RETURN_IF_ERROR(dev_->Add(shard, mine.data(), count));
  }
  buffer.Clear();
  bucket_written_[bucket] = 0;
  reduced_[bucket] = true;
  return Status::Ok();
}

Status StepExecutor::Impl::DataParallelOne(const Collective& c, size_t bucket, bool step_end) {
  if (bucket >= buckets_.size()) return InternalError("more data-parallel buckets than expected");
  const Bucket& b = buckets_[bucket];
  const int dp = schedule_->coordinates.data_rank;
  switch (c.kind) {
    case CollectiveKind::kAllReduce: {
      RETURN_IF_ERROR(KeepLocal(b.offset, b.length));
      reduced_[bucket] = true;
      return Counted(&c, dev_->AllReduce(Group::kData, grads.data() + b.offset, b.length, c.name));
    }
    case CollectiveKind::kReduceScatter: {
      RETURN_IF_ERROR(KeepLocal(b.offset, b.length));
      const size_t count = b.shard_counts[static_cast<size_t>(dp)];
      DeviceBuffer mine(dev_, BufferClass::kWorkspace);
      RETURN_IF_ERROR(mine.Assign(count));
      RETURN_IF_ERROR(Counted(&c, dev_->ReduceScatter(Group::kData, grads.data() + b.offset,
                                                      mine.data(), b.shard_counts, c.name)));
      // The bucket was consumed as the ring's scratch: later micro-batches
      // accumulate from zero.
      RETURN_IF_ERROR(dev_->Zero(grads.data() + b.offset, b.length));
      reduced_[bucket] = true;
      if (config_->zero_stage == 1) {
        // Once per step (at its end): the reduced shard goes back in place,
        // so ZeRO 1 holds one gradient buffer, as the planner counts.
        if (!step_end) return InternalError("ZeRO 1 reduce-scatter before the step's end");
        return dev_->Copy(mine.data(), count, grads.data() + b.ShardOffset(dp));
      }
      // ZeRO 2 and 3: the micro-batches' reductions add up in the shard.
      return dev_->Add(grad_shard.data() + owned_position_[bucket], mine.data(), count);
    }
    case CollectiveKind::kAllGather: {
      // Parameters: at the end of the step the bucket's shard is updated
      // first, then everyone's updated shards are gathered.
      if (step_end) RETURN_IF_ERROR(UpdateShard(bucket, current_step_));
      const size_t count = b.shard_counts[static_cast<size_t>(dp)];
      DeviceBuffer shard(dev_, BufferClass::kWorkspace, weight_storage());
      RETURN_IF_ERROR(shard.Assign(count, Fill::kUndefined));
      RETURN_IF_ERROR(dev_->Copy(weights.data() + b.ShardOffset(dp), count, shard.data()));
      return Counted(&c, dev_->AllGather(Group::kData, shard.data(), weights.data() + b.offset,
                                         b.shard_counts, c.name));
    }
    case CollectiveKind::kSend:
    case CollectiveKind::kRecv:
      break;
  }
  return InternalError(std::string("unexpected data-parallel collective ") + c.name);
}

Status StepExecutor::Impl::UpdateShard(size_t bucket, int64_t step) {
  if (updated_[bucket]) return Status::Ok();
  updated_[bucket] = true;
  const auto [offset, length] = owned[bucket];
  const size_t position = owned_position_[bucket];
  const float* g = ReducedShard(bucket);
  if (config_->zero_stage >= 1 && !reduced_[bucket]) {
    // d = 1: nothing reduced the bucket, its own gradients are the sum.
    RETURN_IF_ERROR(KeepLocal(offset, length));
    if (config_->zero_stage >= 2) {
      RETURN_IF_ERROR(dev_->Copy(grads.data() + offset, length, grad_shard.data() + position));
    }
  }
  const float scale = 1.0f / static_cast<float>(static_cast<double>(d_) *
                                                static_cast<double>(schedule_->micro_batches));
  if (!master_weights_) {
    return dev_->AdamWUpdate(ShardWeights(bucket), g, adam_m.data() + position,
                             adam_v.data() + position, length, scale, step + 1, adam_);
  }
  // The fp32 master shard takes the update; the weights its rounding.
  RETURN_IF_ERROR(dev_->AdamWUpdate(master.data() + position, g, adam_m.data() + position,
                                    adam_v.data() + position, length, scale, step + 1, adam_));
  return dev_->Copy(master.data() + position, length, ShardWeights(bucket));
}

StatusOr<StepTiming> StepExecutor::Impl::RunStep(int64_t step) {
  if (broken_) {
    return FailedPreconditionError(std::string("the ") + dev_->name() +
                                   " backend failed in an earlier step; restart the rank");
  }
  const StepSchedule& s = *schedule_;
  const Clock::time_point start = Clock::now();
  current_step_ = step;
  dev_->ResetCounters();
  bus_bytes_ = 0;
  loss_sum_ = 0;
  loss_count_ = 0;
  dev_->SetStep(step);
  if (host_copies_) local_gradients.assign(n_, 0.0f);
  updated_.assign(buckets_.size(), false);
  reduced_.assign(buckets_.size(), false);

  auto run = [&]() -> Status {
    RETURN_IF_ERROR(dev_->Zero(grads.data(), grads.size()));
    RETURN_IF_ERROR(dev_->Zero(grad_shard.data(), grad_shard.size()));
    auto named = [](const char* prefix) {
      return [prefix](const Collective& c) { return StartsWith(c.name, prefix); };
    };
    auto gradients = [](const Collective& c) { return !StartsWith(c.name, "parameters"); };
    for (const PipelineAction& a : s.pipeline) {
      if (a.pass == PassKind::kForward) {
        if (a.chunk == 0 && !fsdp_) {
          RETURN_IF_ERROR(
              DataParallel(s.per_micro_batch_collectives, false, named("parameters-forward")));
        }
        RETURN_IF_ERROR(Forward(a.micro_batch, a.chunk, step));
      } else {
        if (a.chunk == s.chunks - 1 && !fsdp_) {
          RETURN_IF_ERROR(
              DataParallel(s.per_micro_batch_collectives, false, named("parameters-backward")));
        }
        RETURN_IF_ERROR(Backward(a.micro_batch, a.chunk, step));
        if (a.chunk == 0 && ShardedGradients()) {
          // The micro-batch is done on this stage: buckets it never wrote
          // (padding) or left partly written (interleaved chunks) go now.
          for (size_t b = 0; b < buckets_.size(); ++b) {
            if (bucket_expected_[b] == 0 || bucket_written_[b] > 0) {
              RETURN_IF_ERROR(ReduceBucket(b));
            }
          }
        } else if (a.chunk == 0) {
          RETURN_IF_ERROR(DataParallel(s.per_micro_batch_collectives, false, gradients));
        }
      }
    }
    RETURN_IF_ERROR(dev_->FlushSends());
    RETURN_IF_ERROR(DataParallel(s.step_collectives, true, [](const Collective&) { return true; }));
    for (size_t b = 0; b < buckets_.size(); ++b) {
      if (config_->zero_stage == 0 && !reduced_[b]) {
        RETURN_IF_ERROR(KeepLocal(owned[b].first, owned[b].second));
      }
      RETURN_IF_ERROR(UpdateShard(b, step));
    }
    return dev_->Synchronize();
  };
  Status status = run();
  stash_.clear();
  for (DeviceBuffer& b : bucket_grads_) b.Clear();
  for (DeviceBuffer& b : gathered_) b.Clear();
  bucket_written_.assign(buckets_.size(), 0);
  if (!status.ok()) {
    broken_ = true;
    dev_->Abort();
    return status.WithContext(std::string(dev_->name()) + " backend, step " + std::to_string(step));
  }
  const double step_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const DeviceCounters counters = dev_->counters();

  // Test hooks, after the step's clock stopped.
  if (host_copies_) {
    reduced_gradients.assign(n_, 0.0f);
    for (size_t b = 0; b < owned.size(); ++b) {
      RETURN_IF_ERROR(dev_->CopyToHost(ReducedShard(b), owned[b].second,
                                       reduced_gradients.data() + owned[b].first));
    }
    if (fsdp_ || master_weights_) {
      // The owned shards' master values (FSDP: only those exist; the rest
      // stays zero).
      parameters.assign(n_, 0.0f);
      if (!fsdp_) RETURN_IF_ERROR(dev_->CopyToHost(weights.data(), n_, parameters.data()));
      const DeviceBuffer& source = master_weights_ ? master : weights;
      for (size_t b = 0; b < owned.size(); ++b) {
        RETURN_IF_ERROR(dev_->CopyToHost(source.data() + owned_position_[b], owned[b].second,
                                         parameters.data() + owned[b].first));
      }
    } else {
      parameters.resize(n_);
      RETURN_IF_ERROR(dev_->CopyToHost(weights.data(), n_, parameters.data()));
    }
  }
  last_loss = loss_count_ > 0 ? loss_sum_ / static_cast<double>(loss_count_) : 0.0;

  StepTiming timing;
  timing.step_seconds = step_seconds;
  timing.collective_seconds = std::min(counters.collective_seconds, step_seconds);
  // Nothing overlaps in this executor: what is not a collective is compute,
  // and all collective time is exposed.
  timing.compute_seconds = std::max(0.0, step_seconds - timing.collective_seconds);
  timing.exposed_communication_seconds = timing.collective_seconds;
  timing.collective_bus_bytes = bus_bytes_;
  timing.gemm_flops = counters.gemm_flops;
  return timing;
}

// --- StepExecutor: the public face over Impl. ---

StepExecutor::StepExecutor(std::unique_ptr<Device> device, bool host_copies)
    : device_(std::move(device)), impl_(std::make_unique<Impl>(device_.get(), host_copies)) {}

StepExecutor::~StepExecutor() {
  // Buffers go back to the device before the device goes.
  impl_.reset();
}

const char* StepExecutor::name() const { return device_->name(); }

Status StepExecutor::CheckPlan(const WorkerConfig& c) const { return device_->CheckPlan(c); }

Status StepExecutor::Initialize(const BackendContext& context, uint64_t seed) {
  return impl_->Initialize(context, seed);
}

StatusOr<StepTiming> StepExecutor::RunStep(int64_t step) { return impl_->RunStep(step); }

double StepExecutor::PeakMemoryBytes() const { return device_->memory().peak_bytes(); }

planner::Precision StepExecutor::ExecutedPrecision(planner::Precision planned) const {
  return device_->ExecutedPrecision(planned);
}

namespace {
StatusOr<std::vector<std::byte>> ToBytes(Device& device, const DeviceBuffer& b) {
  std::vector<std::byte> out(b.size() * sizeof(float));
  std::vector<float> host(b.size());
  RETURN_IF_ERROR(device.CopyToHost(b.data(), b.size(), host.data()));
  std::memcpy(out.data(), host.data(), out.size());
  return out;
}
// The checkpoint buffer `name` as floats, `floats` of them as this rank
// holds.
StatusOr<std::vector<float>> ReadFloats(const NamedBuffers& buffers, const std::string& name,
                                        size_t floats) {
  for (const auto& [key, bytes] : buffers) {
    if (key != name) continue;
    if (bytes.size() != floats * sizeof(float)) {
      return InvalidArgumentError("checkpoint buffer '" + name + "' has " +
                                  std::to_string(bytes.size()) + " bytes, this rank expects " +
                                  std::to_string(floats * sizeof(float)));
    }
    std::vector<float> host(floats);
    std::memcpy(host.data(), bytes.data(), bytes.size());
    return host;
  }
  return NotFoundError("checkpoint has no buffer '" + name + "'");
}
bool HasBuffer(const NamedBuffers& buffers, const std::string& name) {
  return std::any_of(buffers.begin(), buffers.end(),
                     [&](const auto& named) { return named.first == name; });
}
Status FromBytes(Device& device, const NamedBuffers& buffers, const std::string& name,
                 DeviceBuffer* b) {
  ASSIGN_OR_RETURN(const std::vector<float> host, ReadFloats(buffers, name, b->size()));
  return device.CopyFromHost(host.data(), host.size(), b->data());
}
}  // namespace

StatusOr<NamedBuffers> StepExecutor::SaveBuffers() {
  NamedBuffers out;
  ASSIGN_OR_RETURN(auto weights, ToBytes(*device_, impl_->weights));
  ASSIGN_OR_RETURN(auto m, ToBytes(*device_, impl_->adam_m));
  ASSIGN_OR_RETURN(auto v, ToBytes(*device_, impl_->adam_v));
  out.emplace_back("weights", std::move(weights));
  out.emplace_back("optimizer/adamw-m", std::move(m));
  out.emplace_back("optimizer/adamw-v", std::move(v));
  if (impl_->master.size() > 0) {
    // The fp32 master weights: resuming from `weights` alone would lose
    // what their 16-bit rounding dropped.
    ASSIGN_OR_RETURN(auto master, ToBytes(*device_, impl_->master));
    out.emplace_back(kMasterWeightsBuffer, std::move(master));
  }
  return out;
}

uint64_t StepExecutor::CheckpointBufferBytes() const {
  // SaveBuffers' buffers, as ToBytes writes them: fp32 whatever the storage.
  uint64_t floats = 0;
  for (const DeviceBuffer* b : {&impl_->weights, &impl_->adam_m, &impl_->adam_v, &impl_->master}) {
    floats += b->size();
  }
  return floats * sizeof(float);
}

Status StepExecutor::LoadBuffers(const NamedBuffers& buffers) {
  RETURN_IF_ERROR(FromBytes(*device_, buffers, "weights", &impl_->weights));
  RETURN_IF_ERROR(FromBytes(*device_, buffers, "optimizer/adamw-m", &impl_->adam_m));
  RETURN_IF_ERROR(FromBytes(*device_, buffers, "optimizer/adamw-v", &impl_->adam_v));
  return impl_->LoadMasterWeights(buffers);
}

// The plan fingerprint does not say how the device stored the weights (an
// environment switch of the GPU device, or a new worker image, can change
// it between save and resume), so either kind of checkpoint resumes under
// either storage.
Status StepExecutor::Impl::LoadMasterWeights(const NamedBuffers& buffers) {
  const bool saved_master = HasBuffer(buffers, kMasterWeightsBuffer);
  if (master_weights_ && saved_master) {
    return FromBytes(*dev_, buffers, kMasterWeightsBuffer, &master);
  }
  if (!master_weights_ && !saved_master) return Status::Ok();
  // The other kind: `host` is the saved fp32 weights (in `weights`'
  // layout) or the saved master weights (the owned buffers' layout, as the
  // moments).
  ASSIGN_OR_RETURN(const std::vector<float> host,
                   master_weights_ ? ReadFloats(buffers, "weights", weights.size())
                                   : ReadFloats(buffers, kMasterWeightsBuffer, adam_m.size()));
  for (size_t b = 0; b < owned.size(); ++b) {
    const size_t in_weights = fsdp_ ? owned_position_[b] : owned[b].first;
    if (master_weights_) {
      // Written with fp32 weights (fp32 storage): they are the master
      // values, and `weights` now holds their rounding.
      RETURN_IF_ERROR(dev_->CopyFromHost(host.data() + in_weights, owned[b].second,
                                         master.data() + owned_position_[b]));
    } else {
      // Written under 16-bit weights: the owned shards take the master
      // values. The rest of `weights` (ZeRO 1 and 2 over several ranks) is
      // the rounding until the step's parameter all-gather brings the
      // owners' master values; the forward GEMMs round to bf16 anyway.
      RETURN_IF_ERROR(dev_->CopyFromHost(host.data() + owned_position_[b], owned[b].second,
                                         weights.data() + in_weights));
    }
  }
  return Status::Ok();
}

std::vector<double> RangeNorms(const std::vector<float>& values,
                               const std::vector<ParameterRange>& ranges) {
  std::vector<double> norms;
  norms.reserve(ranges.size());
  for (const ParameterRange& r : ranges) {
    double sum = 0;
    for (size_t i = r.offset; i < r.offset + r.length && i < values.size(); ++i) {
      sum += static_cast<double>(values[i]) * values[i];
    }
    norms.push_back(std::sqrt(sum));
  }
  return norms;
}

const std::vector<float>& StepExecutor::local_gradients_before_reduce() const {
  return impl_->local_gradients;
}
const std::vector<float>& StepExecutor::gradients_after_reduce() const {
  return impl_->reduced_gradients;
}
const std::vector<float>& StepExecutor::parameters() const { return impl_->parameters; }
const std::vector<std::pair<size_t, size_t>>& StepExecutor::owned_ranges() const {
  return impl_->owned;
}
double StepExecutor::last_loss() const { return impl_->last_loss; }
const std::vector<ParameterRange>& StepExecutor::parameter_ranges() const { return impl_->ranges; }

uint64_t StepExecutor::UnsplitIndex(const ParameterRange& r, size_t i) const {
  return impl_->MapFor(r)(i);
}

}  // namespace pacer::worker
