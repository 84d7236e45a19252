// Device: what the step executor (step_executor.h) needs from the hardware
// under one rank, and nothing else: allocation with a per-class byte
// tracker, copies, the GEMMs (an unfused attention's batched GEMMs as one
// call; batched GEMMs and the softmax for the tiled one), the elementwise
// kernels of a transformer layer, the collectives of the
// tensor-, data- and pipeline-parallel groups, and counters for the FLOPs
// issued and the time spent inside collectives. The orchestration of a step
// (the pipeline walk, gradient buckets, ZeRO staging, activation slots,
// recomputation, timing) is written once, in the executor, over this
// interface; a backend is only a Device.
//
// Implementations: the CPU device (worker/cpu/cpu_device.h: OpenBLAS sgemm,
// fp32 kernels, Gloo over TCP), which CI runs, and the GPU device
// (worker/gpu/gpu_device.h: cuBLAS, CUDA kernels, NCCL). Both backends are
// this executor over their device; neither has an orchestration of its own.
//
// Pointers: every float* below is a device pointer that came from
// Allocate (or points inside such a block). The executor does pointer
// arithmetic on them in fp32 elements but never dereferences them, so a
// device whose memory the host cannot read (a GPU) can implement the
// interface unchanged, and a device may store a buffer allocated with
// Storage::kCompute narrower than fp32 behind a handle (storage_map.h; the
// GPU device's bf16 activations): every entry point then accepts any mix
// of fp32 and narrow operands. Data that originates on the host (token
// ids, labels) is passed as host arrays, and host copies are fp32 whatever
// the storage. A device computes in the precision it reports from
// ExecutedPrecision, which is what the worker's metrics label shows.
//
// Errors: ResourceExhausted for a failed allocation, Unavailable /
// DeadlineExceeded for a failed collective (the device has aborted its
// communicators, so no peer hangs), InvalidArgument for a plan the device
// cannot run, Internal for a bug (step_backend.h maps them onto exit codes).
//
// Units: elements for sizes and counts (4 bytes each as addressed; stored
// in ElementBytes(storage) bytes), bytes for the memory tracker, seconds
// for the counters, FLOPs with multiply-add = 2.
// Thread-safety: a Device belongs to one rank's thread; not thread-safe.
// Several devices may live in one process, one thread each.
#ifndef PACER_WORKER_CORE_DEVICE_H_
#define PACER_WORKER_CORE_DEVICE_H_

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/buffer_class.h"
#include "core/causal_mask.h"
#include "core/kernel_math.h"  // AdamWParams
#include "core/step_backend.h"
#include "core/step_schedule.h"
#include "pacer/planner/job_spec.h"
#include "pacer/status.h"

namespace pacer::worker {

// What a new allocation holds: zeros, or values the caller will overwrite
// before reading (the CPU device fills those with NaN, so that a read
// before the write shows up in the CPU tests instead of silently reading
// zeros there and garbage on a GPU).
enum class Fill { kZeros, kUndefined };

// How a buffer is stored. kFp32: 4-byte floats, on every device. kCompute:
// in the precision the device computes the plan in where the device stores
// activations narrower (the GPU device under a bf16 plan with
// PACER_GPU_BF16_ACTIVATIONS=1: bf16, 2 bytes), fp32 everywhere else. The
// executor asks for kCompute only for activations that are GEMM operands
// or outputs (which the GEMMs round to the compute precision anyway), their
// gradients, and a layer's stashed input and mid-layer residual (Megatron's
// bf16 residual); the residual stream between layers, per-row statistics
// (1/rms, logsumexp), logits, parameters, gradients and optimizer state
// stay fp32, as in Megatron's mixed precision (docs/worker.md).
enum class Storage { kFp32, kCompute };

// Current and peak bytes, in total and per buffer class. The executor's
// memory test compares the peak with the planner's prediction.
class MemoryTracker {
 public:
  void Charge(BufferClass c, double bytes);
  void Release(BufferClass c, double bytes);
  double current_bytes() const { return current_; }
  double peak_bytes() const { return peak_; }
  double class_bytes(BufferClass c) const { return by_class_[static_cast<size_t>(c)]; }
  // Highest bytes each class held at once (not necessarily at the same time).
  double class_peak_bytes(BufferClass c) const { return class_peak_[static_cast<size_t>(c)]; }
  // Takes back the peaks reached since `before` (a copy of this tracker)
  // beyond what is held now: for trial work that is not the step's (the
  // GPU device's cuDNN trial run), whose buffers are freed again.
  void ForgetPeaksSince(const MemoryTracker& before);

 private:
  std::array<double, kBufferClasses> by_class_{};
  std::array<double, kBufferClasses> class_peak_{};
  double current_ = 0;
  double peak_ = 0;
};

// Elements a row-major matrix operand of `rows` x `cols` (as stored) with
// leading dimension `ld` spans over `batch` items `stride` apart, from its
// first element to one past its last (Device::Gemm's and BatchedGemm's
// operands); 0 when it has none.
inline int64_t StridedMatrixElements(int64_t rows, int64_t cols, int64_t ld, int64_t stride,
                                     int64_t batch) {
  if (rows <= 0 || cols <= 0 || batch <= 0) return 0;
  return (batch - 1) * stride + (rows - 1) * ld + cols;
}

// The attention core of one layer, over the qkv GEMM's output: each
// token's row holds this rank's query heads, then its K heads, then its V
// heads, head_dim columns each (Megatron's fused QKV interleaves them per
// query group; weights initialised here make either order the same
// model) ([tokens x qkv_ld()],
// tokens in `sequences` sequences of `seq`); the context is [tokens x
// ctx_ld()], one head_dim column block per query head. Query head j reads
// K/V head j / group() (grouped-query attention: consecutive query heads
// share one, as Megatron and cuDNN group them). A (sequence, query head)
// pair i is sequence i / heads, head i % heads. Because a tensor-parallel
// rank holds whole heads, a rank's attention is exactly its heads' share of
// the unsplit layer's. Offsets in elements.
//
// Causal (spec.model.causalAttention): query row r attends to keys 0..r of
// its sequence only, as a decoder language model's attention does; the
// masked probabilities are exactly 0. A fused kernel skips the work above
// the diagonal at the granularity of tiles of kAttentionTileRows query rows
// (each tile computes the scores of its rows against the keys up to its
// last row: ScoreFraction of the s x s matrix; causal_mask.h); an unfused
// kernel computes the whole matrix and masks it.
struct AttentionShape {
  int64_t seq = 0;        // tokens per sequence
  int64_t head_dim = 0;
  int64_t sequences = 0;  // the micro-batch
  int64_t heads = 0;      // query heads on this rank
  int64_t kv_heads = 0;   // K/V heads on this rank; divides heads
  bool causal = false;    // a causal mask (above)

  // Written out: the CUDA sources that include this compile as C++17.
  bool operator==(const AttentionShape& o) const {
    return seq == o.seq && head_dim == o.head_dim && sequences == o.sequences && heads == o.heads &&
           kv_heads == o.kv_heads && causal == o.causal;
  }
  // The share of the s x s scores a fused kernel computes (1 without a mask).
  double ScoreFraction() const { return causal ? CausalScoreFraction(seq, kAttentionTileRows) : 1; }
  // Keys that query rows [row0, row0 + rows) of a sequence attend to: all
  // of them, or under the mask those up to the last of these rows.
  int64_t KeysFor(int64_t row0, int64_t rows) const {
    return causal ? std::min(seq, row0 + rows) : seq;
  }
  // The softmax mask of query rows [row0, row0 + rows) of every item of a
  // call (none without a causal mask); an unfused kernel's is MaskFor(0, seq).
  CausalRows MaskFor(int64_t row0, int64_t rows) const {
    return causal ? CausalRows{row0, rows} : CausalRows{};
  }
  // The softmax's scale of the scores, 1/sqrt(head_dim): every attention
  // path (the tiled and unfused walks, the GPU's bf16 kernels, cuDNN's SDPA)
  // scales by this one value.
  float SoftmaxScale() const {
    return static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  }
  int64_t pairs() const { return sequences * heads; }
  int64_t group() const { return kv_heads > 0 ? heads / kv_heads : 1; }
  int64_t qkv_ld() const { return (heads + 2 * kv_heads) * head_dim; }
  int64_t ctx_ld() const { return heads * head_dim; }
  int64_t QkvElements() const { return sequences * seq * qkv_ld(); }
  int64_t CtxElements() const { return sequences * seq * ctx_ld(); }
  int64_t ProbsElements() const { return pairs() * seq * seq; }
  // One value per query row of every pair (an on-chip kernel's statistics).
  int64_t RowElements() const { return pairs() * seq; }
  // FLOPs of one seq x seq x head_dim GEMM for every pair (Q K^T, P V, ...),
  // of the scores a fused kernel computes (ScoreFraction).
  double PairGemmFlops() const {
    return 2.0 * static_cast<double>(pairs()) * static_cast<double>(seq) *
           static_cast<double>(seq) * static_cast<double>(head_dim) * ScoreFraction();
  }
  // The GEMM FLOPs a device counts for its on-chip kernel: what the tiled
  // path issues for the same work (the step schedule's), forward Q K^T and
  // P V, backward the recomputed Q K^T, dV, dP, dQ and dK.
  double OnChipForwardFlops() const { return 2 * PairGemmFlops(); }
  double OnChipBackwardFlops() const { return 5 * PairGemmFlops(); }
  // Where pair i's Q, K, V (rows qkv_ld() apart) and context (rows
  // ctx_ld() apart) start.
  int64_t Q(int64_t i) const { return Row(i, qkv_ld()) + (i % heads) * head_dim; }
  int64_t K(int64_t i) const { return Row(i, qkv_ld()) + (heads + KvHead(i)) * head_dim; }
  int64_t V(int64_t i) const {
    return Row(i, qkv_ld()) + (heads + kv_heads + KvHead(i)) * head_dim;
  }
  int64_t Ctx(int64_t i) const { return Row(i, ctx_ld()) + (i % heads) * head_dim; }
  bool Valid() const {
    return seq > 0 && head_dim > 0 && sequences > 0 && heads > 0 && kv_heads > 0 &&
           heads % kv_heads == 0;
  }

 private:
  int64_t Row(int64_t i, int64_t ld) const { return (i / heads) * seq * ld; }
  int64_t KvHead(int64_t i) const { return (i % heads) / group(); }
};

// Pairs that one batched call can take with constant strides: sequence b,
// query heads m, m + group, m + 2 group, ... (one per K/V head, so no two
// write the same dK or dV), `count` of them from K/V head kv0. Strides
// between consecutive items, in elements: Q and context group() x
// head_dim, K and V head_dim. `slot`: the first item's place in the order
// ForAttentionBatches visits every pair (whatever the batch size), so a
// device that keeps per-pair data (the unfused kernel's probabilities) in
// that order finds a batch's items side by side.
struct AttentionBatch {
  int64_t first = 0;  // the first pair
  int64_t slot = 0;
  int64_t count = 0;
  int64_t q_stride = 0, kv_stride = 0;
};

// Runs body(batch) over every pair of `s` in batches of at most
// `max_count` (at least 1) items.
template <typename Body>
Status ForAttentionBatches(const AttentionShape& s, int64_t max_count, Body&& body) {
  const int64_t g = s.group(), per = std::max<int64_t>(1, max_count);
  for (int64_t b = 0; b < s.sequences; ++b) {
    for (int64_t m = 0; m < g; ++m) {
      for (int64_t kv0 = 0; kv0 < s.kv_heads; kv0 += per) {
        AttentionBatch batch;
        batch.first = b * s.heads + kv0 * g + m;
        batch.slot = b * s.heads + m * s.kv_heads + kv0;
        batch.count = std::min(per, s.kv_heads - kv0);
        batch.q_stride = g * s.head_dim;
        batch.kv_stride = s.head_dim;
        RETURN_IF_ERROR(body(batch));
      }
    }
  }
  return Status::Ok();
}

// The two directions of pipeline point-to-point traffic; a send of one
// direction matches the receive of the same direction on the peer.
enum class PipeDirection { kForward = 0, kBackward = 1 };

// What a device counted since ResetCounters.
struct DeviceCounters {
  double gemm_flops = 0;          // FLOPs of the GEMMs issued
  double collective_seconds = 0;  // time inside collectives and point-to-point
};

class Device {
 public:
  virtual ~Device() = default;

  virtual const char* name() const = 0;  // "cpu" or "gpu"

  // What this kind of device cannot run on any hardware (the CPU's fp8
  // GEMMs): InvalidArgument naming the fix. Needs no device and no peer, so
  // the runner asks before the rendezvous: every rank refuses at once,
  // instead of rank 0 failing after it started the store and a peer,
  // cut off mid-rendezvous, reporting a lost store (exit 4) first.
  virtual Status CheckPlan(const WorkerConfig&) const { return Status::Ok(); }
  // Connects this rank's communicators and fixes how the plan will run.
  // InvalidArgument when the device cannot run the plan's precision.
  virtual Status Connect(const BackendContext& context) = 0;
  // The GEMM precision this device runs a plan of `planned` precision in.
  virtual planner::Precision ExecutedPrecision(planner::Precision planned) const = 0;

  // --- Memory. Allocate returns `elements` elements for a buffer of class
  // `c` (a device may keep derived copies of some classes, e.g. the GPU
  // device's bf16 copy of the weights), zeros or, with Fill::kUndefined,
  // whatever the device likes (the caller writes every element before it
  // reads one; saves zeroing large activations), stored as `storage` says;
  // Free takes what it gave. ElementBytes: the bytes one element of that
  // storage takes on this device (what DeviceBuffer charges the tracker);
  // fixed once Connect returned.
  virtual StatusOr<float*> Allocate(size_t elements, BufferClass c, Fill fill, Storage storage) = 0;
  virtual void Free(float* p, size_t elements) = 0;
  virtual size_t ElementBytes(Storage storage) const {
    (void)storage;
    return sizeof(float);
  }
  MemoryTracker& memory() { return memory_; }
  const MemoryTracker& memory() const { return memory_; }

  // --- Copies.
  virtual Status Copy(const float* src, size_t n, float* dst) = 0;
  virtual Status Zero(float* p, size_t n) = 0;
  virtual Status CopyToHost(const float* src, size_t n, float* host) = 0;
  virtual Status CopyFromHost(const float* host, size_t n, float* dst) = 0;

  // --- GEMMs, row-major: C[m x n] = alpha op(A) op(B) + beta C.
  virtual Status Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                      const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                      float* c, int64_t ldc) = 0;
  // Scores (Q K^T), row softmax scaled by 1/sqrt(head_dim) (masked when
  // shape.causal), and context (P V) for every pair of `shape`: the two
  // batched GEMMs over the whole s x s matrix and the softmax. `probs`
  // (AttentionStashElements(shape) elements) keeps P for the backward pass in the device's own
  // format: the interface of an unfused kernel (the s x s matrix is stored), for a plan with
  // `attention: unfused`; a fused plan runs tiled_attention.h instead. The
  // GEMMs count in the FLOP counter.
  // The default runs tiled_attention.h's UnfusedAttentionForward over this
  // device's BatchedGemm and SoftmaxRows inside a read-only scope of Q, K
  // and V (so not inside another scope: devices refuse nesting); a device
  // that keeps P in another format (the GPU in bf16) overrides both
  // directions.
  virtual Status AttentionForward(const AttentionShape& shape, const float* qkv, float* probs,
                                  float* ctx);
  // dqkv += the gradients of Q, K and V given dctx; `probs` is the
  // forward's P, no longer needed afterwards (the default only reads it,
  // in a read-only scope of Q, K, V and dC, and takes a dP workspace).
  virtual Status AttentionBackward(const AttentionShape& shape, const float* qkv, float* probs,
                                   const float* dctx, float* dqkv);
  // The elements (4 bytes each) of the `probs` stash: P in fp32 unless the
  // device keeps it narrower (the GPU device in bf16 under a bf16 plan).
  virtual size_t AttentionStashElements(const AttentionShape& shape) const {
    return static_cast<size_t>(shape.ProbsElements());
  }

  // --- The pieces of the tiled (fused) attention, which the executor runs
  // for a plan with a fused attention kernel (tiled_attention.h): one code
  // over every device, storing no s x s matrix.
  // C_i = alpha op(A_i) op(B_i) + beta C_i for i < batch, where X_i = x +
  // i * stride_x (row-major as Gemm). The items may run concurrently, so
  // no two may write the same C elements. Counts in the FLOP counter.
  virtual Status BatchedGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                             float alpha, const float* a, int64_t lda, int64_t stride_a,
                             const float* b, int64_t ldb, int64_t stride_b, float beta, float* c,
                             int64_t ldc, int64_t stride_c, int64_t batch) = 0;
  // x = softmax(scale * x) over each of `rows` rows of `cols`, in place;
  // under `mask` (CausalRows) over each row's visible keys, the rest 0.
  virtual Status SoftmaxRows(float* x, int64_t rows, int64_t cols, float scale,
                             const CausalRows& mask) = 0;
  // dp = scale * p * (dp - rowsum(dp * p)), in place over dp: the scores'
  // gradient from the probabilities' (p = SoftmaxRows' output).
  virtual Status SoftmaxBackward(const float* p, float* dp, int64_t rows, int64_t cols,
                                 float scale) = 0;

  // --- An on-chip attention kernel, which a fused plan runs instead of
  // tiled_attention.h where HasOnChipAttention(shape) says the device has
  // one (the GPU device: cuDNN's SDPA under a bf16 plan, gpu_device.h).
  // The scores never leave the chip; what the backward pass needs besides
  // Q, K, V and the context is one float per query row of every pair
  // (RowElements): the log of the row's softmax denominator, max included
  // (logsumexp of the scaled scores, natural log), which the forward
  // writes to `lse`. Arithmetic: Device::AttentionForward's. FLOPs count
  // as the tiled path's GEMMs: Q K^T and P V forward; Q K^T again, dV, dP,
  // dQ and dK backward. Devices without one keep these defaults.
  virtual bool HasOnChipAttention(const AttentionShape& shape) {
    (void)shape;
    return false;
  }
  virtual Status OnChipAttentionForward(const AttentionShape& shape, const float* qkv, float* lse,
                                        float* ctx) {
    (void)shape, (void)qkv, (void)lse, (void)ctx;
    return FailedPreconditionError(std::string(name()) + " device has no on-chip attention");
  }
  // dqkv += the gradients of Q, K and V given dctx; ctx and lse are the
  // forward's.
  virtual Status OnChipAttentionBackward(const AttentionShape& shape, const float* qkv,
                                         const float* ctx, const float* lse, const float* dctx,
                                         float* dqkv) {
    (void)shape, (void)qkv, (void)ctx, (void)lse, (void)dctx, (void)dqkv;
    return FailedPreconditionError(std::string(name()) + " device has no on-chip attention");
  }

  // --- Read-only operands. Between BeginReadOnly and EndReadOnly the
  // regions are only read (as GEMM operands), never written, so a device
  // that converts GEMM operands (the GPU device's bf16 copies under a bf16
  // plan) may convert each region once instead of at every GEMM that reads
  // a part of it: the tiled attention reads Q, K, V and dC in many small
  // GEMMs, a linear layer's backward reads dY in two. The CPU device checks
  // the promise: its EndReadOnly returns
  // Internal when a region changed in between. Not nested; the regions do
  // not overlap (a device keeps one copy per region; the CPU and GPU
  // devices refuse overlapping ones, Internal). Defaults: nothing to do.
  struct ReadOnlyRegion {
    const float* data = nullptr;
    size_t elements = 0;
  };
  virtual Status BeginReadOnly(const std::vector<ReadOnlyRegion>& regions) {
    (void)regions;
    return Status::Ok();
  }
  virtual Status EndReadOnly() { return Status::Ok(); }

  // --- Elementwise kernels (cpu_kernels.h documents the arithmetic).
  virtual Status RmsNormForward(const float* x, int64_t rows, int64_t cols, float* y,
                                float* inv_rms) = 0;
  // dx += d(norm)/dx applied to dy.
  virtual Status RmsNormBackward(const float* x, const float* inv_rms, const float* dy,
                                 int64_t rows, int64_t cols, float* dx) = 0;
  virtual Status GeluForward(const float* x, size_t n, float* y) = 0;
  virtual Status GeluBackward(const float* x, const float* dy, size_t n, float* dx) = 0;
  virtual Status SwigluForward(const float* in, int64_t rows, int64_t f, float* out) = 0;
  virtual Status SwigluBackward(const float* in, const float* dout, int64_t rows, int64_t f,
                                float* din) = 0;
  // y += x.
  virtual Status Add(float* y, const float* x, size_t n) = 0;
  // out row i = table row tokens[i], or zeros where tokens[i] < 0 (a token
  // of another rank's vocabulary shard); tokens on the host.
  virtual Status EmbeddingForward(const float* table, const int32_t* tokens, int64_t rows,
                                  int64_t cols, float* out) = 0;
  // table_grad row tokens[i] += dout row i (rows with tokens[i] < 0 skipped).
  virtual Status EmbeddingBackward(const float* dout, const int32_t* tokens, int64_t rows,
                                   int64_t cols, float* table_grad) = 0;
  // A vocabulary shard's share of each row's cross-entropy statistics:
  // stats[r] = log sum_j exp(logits[r, j]) over this shard's `cols`, and
  // stats[rows + r] = logits[r, labels[r]], or 0 where labels[r] < 0 (the
  // label is in another shard); labels on the host, 2 x rows floats out.
  virtual Status LogitRowStats(const float* logits, const int32_t* labels, int64_t rows,
                               int64_t cols, float* stats) = 0;
  // In place: logits become (softmax - onehot(label)) * grad_scale and the
  // summed cross-entropy of the rows is returned (labels on the host). The
  // softmax is over this shard's columns when row_lse is null; otherwise it
  // is exp(logits - row_lse[r]), row_lse being the logsumexp over the whole
  // vocabulary (on the device), labels < 0 get no one-hot and the return
  // value is meaningless (the caller has the loss from LogitRowStats).
  virtual StatusOr<double> CrossEntropyGradInPlace(float* logits, const int32_t* labels,
                                                   int64_t rows, int64_t cols, float grad_scale,
                                                   const float* row_lse) = 0;
  virtual Status AdamWUpdate(float* w, const float* g, float* m, float* v, size_t n,
                             float grad_scale, int64_t step, const AdamWParams& p) = 0;

  // --- Collectives over this rank's groups (sums of fp32). A group of one
  // returns at once. `what` names the operation in error messages.
  virtual Status AllReduce(Group g, float* data, size_t n, const std::string& what) = 0;
  // out (sum of counts) = every member's `in` (counts[rank] elements), in order.
  virtual Status AllGather(Group g, const float* in, float* out, const std::vector<size_t>& counts,
                           const std::string& what) = 0;
  // `data` (sum of counts, consumed as scratch) summed; this rank's part to `out`.
  virtual Status ReduceScatter(Group g, float* data, float* out, const std::vector<size_t>& counts,
                               const std::string& what) = 0;
  // Pipeline point-to-point with pipeline-group member `peer`. Send may
  // return before the peer received; FlushSends waits for every send.
  virtual Status Send(int peer, PipeDirection direction, const float* data, size_t n,
                      const std::string& what) = 0;
  virtual Status Recv(int peer, PipeDirection direction, float* data, size_t n,
                      const std::string& what) = 0;
  virtual Status FlushSends() = 0;
  // The step the next collectives belong to (for error messages only; no
  // communication).
  virtual void SetStep(int64_t step) = 0;
  // Closes every communicator so that peers fail promptly (idempotent).
  virtual void Abort() = 0;

  // --- Counters and timing. Synchronize waits for all enqueued work.
  virtual Status Synchronize() = 0;
  virtual DeviceCounters counters() const = 0;
  virtual void ResetCounters() = 0;

 private:
  MemoryTracker memory_;
};

// body() between device->BeginReadOnly(regions) and EndReadOnly(); the
// first error of the three.
template <typename Body>
Status WithReadOnly(Device* device, const std::vector<Device::ReadOnlyRegion>& regions,
                    Body&& body) {
  RETURN_IF_ERROR(device->BeginReadOnly(regions));
  const Status ran = body();
  const Status ended = device->EndReadOnly();
  return ran.ok() ? ended : ran;
}

// A block of device memory charged to its device's tracker under a class,
// released when it shrinks or dies. Move-only, so a charge is never counted
// twice.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Device* device, BufferClass c, Storage storage = Storage::kFp32)
      : device_(device), class_(c), storage_(storage) {}
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { Clear(); }

  // `elements` zeros (or undefined values: Device::Allocate), replacing
  // what the buffer held.
  Status Assign(size_t elements, Fill fill = Fill::kZeros);
  void Clear();

  float* data() { return data_; }
  const float* data() const { return data_; }
  size_t size() const { return size_; }
  BufferClass buffer_class() const { return class_; }
  Storage storage() const { return storage_; }
  // What the buffer takes on its device (its elements at their storage).
  double bytes() const { return static_cast<double>(size_) * static_cast<double>(element_bytes_); }

 private:
  Device* device_ = nullptr;
  BufferClass class_ = BufferClass::kActivations;
  Storage storage_ = Storage::kFp32;
  size_t element_bytes_ = sizeof(float);  // at Assign, so Clear releases what was charged
  float* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace pacer::worker

#endif  // PACER_WORKER_CORE_DEVICE_H_
