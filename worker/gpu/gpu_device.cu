#include "gpu/gpu_device.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/attention_tiles.h"
#include "core/region_copies.h"
#include "core/storage_map.h"
#include "core/tiled_attention.h"
#include "gpu/attention_path.h"
#include "gpu/cuda_check.h"
#if PACER_HAVE_CUDNN
#include "gpu/cudnn_attention.h"
#endif
#include "gpu/device_info.h"
#include "gpu/device_kernels.h"
#include "gpu/gpu_kernels.h"
#include "gpu/nccl_comms.h"
#include "gpu/sdpa_layout.h"  // the logsumexp layout, cuDNN or not

namespace pacer::worker::gpu {
namespace {

using Clock = std::chrono::steady_clock;

// How a plan's precision runs (gpu_device.h's table). bf16_operands: the
// GEMMs read bf16 copies of their fp32 operands (native bf16 tensor-core
// kernels, fp32 accumulation and output), because cuBLAS' bf16 mode on fp32
// operands runs at about TF32 speed (calibrate's "bf16-on-fp32" row).
struct GemmMode {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  planner::Precision executed = planner::Precision::kFp32;
  bool bf16_operands = false;
};

GemmMode ModeFor(planner::Precision planned) {
  switch (planned) {
    case planner::Precision::kFp32: return {CUBLAS_COMPUTE_32F, planner::Precision::kFp32, false};
    case planner::Precision::kBf16: return {CUBLAS_COMPUTE_32F, planner::Precision::kBf16, true};
    case planner::Precision::kTf32:
    case planner::Precision::kFp16:
    case planner::Precision::kFp8:  // refused at Connect; never runs
      return {CUBLAS_COMPUTE_32F_FAST_TF32, planner::Precision::kTf32, false};
  }
  return {CUBLAS_COMPUTE_32F, planner::Precision::kFp32, false};
}

// What the optional per-operation GPU timing (PACER_GPU_OP_TIMES=1) sorts
// the compute stream's time into.
enum OpKind {
  kOpGemm,
  kOpAttentionGemm,
  kOpConvert,
  kOpSoftmax,
  kOpNorm,
  kOpActivation,
  kOpAdd,
  kOpEmbedding,
  kOpLoss,
  kOpOptimizer,
  kOpCopy,
  kOpCollective,
  kOpKinds
};
constexpr const char* kOpNames[kOpKinds] = {
    "gemm",   "attention-gemm", "bf16-convert", "softmax",   "rms-norm", "gelu-swiglu",
    "add",    "embedding",      "cross-entropy", "adamw",    "copy-zero", "collective"};

// Elements a GEMM operand spans (core/device.h StridedMatrixElements).
size_t Span(int64_t rows, int64_t cols, int64_t ld, int64_t stride, int64_t batch) {
  return static_cast<size_t>(StridedMatrixElements(rows, cols, ld, stride, batch));
}

Status CheckDims(int64_t m, int64_t n, int64_t k, int64_t batch) {
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (m > kMax || n > kMax || k > kMax || batch > kMax) {
    return InvalidArgumentError("GEMM dimensions out of cuBLAS' int range: " + std::to_string(m) +
                                " x " + std::to_string(n) + " x " + std::to_string(k) + " (x " +
                                std::to_string(batch) + ")");
  }
  return Status::Ok();
}

cublasOperation_t Op(bool transpose) { return transpose ? CUBLAS_OP_T : CUBLAS_OP_N; }

double MegaBytes(size_t bytes) { return static_cast<double>(bytes) / 1e6; }

class GpuDevice final : public Device {
 public:
  GpuDevice() = default;
  GpuDevice(const GpuDevice&) = delete;
  GpuDevice& operator=(const GpuDevice&) = delete;

  ~GpuDevice() override {
    // Nothing may still run on memory this frees; an aborted communicator
    // has already released kernels waiting for peers.
    for (cudaStream_t s : {compute_, send_[0], send_[1]}) {
      if (s != nullptr) (void)cudaStreamSynchronize(s);
    }
    for (const PendingSend& p : pending_) (void)cudaEventDestroy(p.done);
    for (void* p : {ints_, losses_, cublas_workspace_, operand_[0], operand_[1]}) {
      if (p != nullptr) (void)cudaFree(p);
    }
    weight_copies_.ForEach([](const auto& w) {
      if (w.copy != nullptr) (void)cudaFree(w.copy);
    });
    mirrors_.Clear();  // normally empty (EndReadOnly); before the stream goes
    for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
    if (switches_.op_times) PrintOpTimes();
    for (const OpSpan& o : op_spans_) {
      (void)cudaEventDestroy(o.start);
      (void)cudaEventDestroy(o.end);
    }
    for (cudaEvent_t e : op_event_pool_) (void)cudaEventDestroy(e);
#if PACER_HAVE_CUDNN
    sdpa_.reset();  // its handle is bound to compute_
#endif
    if (cublas_ != nullptr) (void)cublasDestroy(cublas_);
    for (cudaStream_t s : {compute_, send_[0], send_[1]}) {
      if (s != nullptr) (void)cudaStreamDestroy(s);
    }
  }

  const char* name() const override { return "gpu"; }

  Status Connect(const BackendContext& context) override {
    if (compute_ != nullptr) return FailedPreconditionError("GPU device: connected twice");
    const WorkerConfig& c = *context.config;
    if (c.precision == planner::Precision::kFp8) {
      return InvalidArgumentError(
          "the GPU backend cannot run fp8 GEMMs (no fp8 GEMM path with per-tensor scales is "
          "built): plan this job in bf16");
    }
    ASSIGN_OR_RETURN(std::vector<DeviceInfo> devices, QueryDevices());
    if (devices.empty()) {
      return FailedPreconditionError(
          "GPU backend: no CUDA device visible (no NVIDIA driver or GPU); use --backend cpu");
    }
    // One GPU per local rank: sharing a GPU between ranks would break the
    // plan's memory and time, so fail before touching a device.
    if (static_cast<int>(devices.size()) < c.local_world_size ||
        context.local_rank >= static_cast<int>(devices.size())) {
      return InvalidArgumentError(
          "GPU backend: " + std::to_string(c.local_world_size) + " local ranks but only " +
          std::to_string(devices.size()) +
          " CUDA devices visible; set the ranks per node (LOCAL_WORLD_SIZE / the pod's GPU "
          "request) to at most the GPUs, or check CUDA_VISIBLE_DEVICES");
    }
    gpu_ = context.local_rank;
    local_rank_ = context.local_rank;
    timeout_ = context.timeout;
    CUDACHECK(cudaSetDevice(gpu_));
    CUDACHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
    for (cudaStream_t& s : send_) CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    // The executor allocates and frees activations every layer: keep freed
    // memory in the pool instead of returning it to the driver at each
    // synchronisation.
    cudaMemPool_t pool = nullptr;
    CUDACHECK(cudaDeviceGetDefaultMemPool(&pool, gpu_));
    uint64_t keep = std::numeric_limits<uint64_t>::max();
    CUDACHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));

    mode_ = ModeFor(c.precision);
    switches_ = c.gpu;  // the validated environment's (WorkerConfig::gpu)
    if (Bf16Activations() && context.local_rank == 0) {
      std::fprintf(stderr,
                   "pacer-worker gpu: activations that are GEMM operands are stored in "
                   "bf16 (PACER_GPU_BF16_ACTIVATIONS=1)\n");
    }
    CUBLASCHECK(cublasCreate(&cublas_));
    CUBLASCHECK(cublasSetStream(cublas_, compute_));
    RETURN_IF_ERROR(AllocateRaw(kCublasWorkspaceBytes, &cublas_workspace_));
    memory().Charge(BufferClass::kWorkspace, static_cast<double>(kCublasWorkspaceBytes));
    CUBLASCHECK(cublasSetWorkspace(cublas_, cublas_workspace_, kCublasWorkspaceBytes));
    if (context.local_rank == 0 && mode_.executed != c.precision) {
      std::fprintf(stderr,
                   "pacer-worker gpu: the plan's %s GEMMs run as %s on fp32 storage and are "
                   "reported as %s; bus bytes are counted at the plan's precision\n",
                   planner::PrecisionName(c.precision), planner::PrecisionName(mode_.executed),
                   planner::PrecisionName(mode_.executed));
    }
    return comms_.Connect(c, context.schedule->coordinates, context.store, context.timeout);
  }

  planner::Precision ExecutedPrecision(planner::Precision planned) const override {
    return ModeFor(planned).executed;
  }

  // --- Memory.
  size_t ElementBytes(Storage storage) const override {
    return storage == Storage::kCompute && Bf16Activations() ? 2 : sizeof(float);
  }
  // A narrow buffer (bf16) is allocated at its own size and handed out as
  // a handle (storage_map.h) that every entry point resolves.
  StatusOr<float*> Allocate(size_t elements, BufferClass c, Fill fill, Storage storage) override {
    RETURN_IF_ERROR(Usable());
    void* p = nullptr;
    const size_t element_bytes = elements > 0 ? ElementBytes(storage) : sizeof(float);
    const size_t bytes = elements * element_bytes;
    RETURN_IF_ERROR(Allocated(cudaMallocAsync(&p, bytes, compute_), bytes));
    if (fill == Fill::kZeros) {
      RETURN_IF_ERROR(TimedOp(kOpCopy, [&]() -> Status {
        CUDACHECK(cudaMemsetAsync(p, 0, bytes, compute_));
        return Status::Ok();
      }));
    }
    if (element_bytes < sizeof(float)) {
      StatusOr<float*> handle = narrow_.Add(elements, p, element_bytes);
      if (!handle.ok()) (void)cudaFreeAsync(p, compute_);
      return handle;
    }
    float* f = static_cast<float*>(p);
    if (c == BufferClass::kWeights && mode_.bf16_operands && elements > 0) {
      weight_copies_.Add(f, elements, nullptr);
    }
    return f;
  }
  void Free(float* p, size_t) override {
    if (p == nullptr) return;
    if (void* physical = narrow_.Remove(p)) {
      (void)cudaFreeAsync(physical, compute_);
      return;
    }
    if (const auto removed = weight_copies_.Remove(p); removed && removed->copy != nullptr) {
      (void)cudaFreeAsync(removed->copy, compute_);
      memory().Release(BufferClass::kWeights, static_cast<double>(removed->elements) * 2);
    }
    (void)cudaFreeAsync(p, compute_);
  }

  // --- Copies.
  // Between storages (fp32 and bf16) a copy converts.
  Status Copy(const float* src, size_t n, float* dst) override {
    if (n == 0 || src == dst) return Status::Ok();
    Wrote(dst);
    ASSIGN_OR_RETURN(const Typed from, At(src, n));
    ASSIGN_OR_RETURN(const Typed to, At(dst, n));
    if (from.type != to.type) {
      return TimedOp(kOpConvert,
                     [&] { return Convert(from.p, from.type, n, to.p, to.type, false, compute_); });
    }
    return TimedOp(kOpCopy, [&]() -> Status {
      CUDACHECK(cudaMemcpyAsync(to.p, from.p, n * static_cast<size_t>(DTypeBytes(to.type)),
                                cudaMemcpyDeviceToDevice, compute_));
      return Status::Ok();
    });
  }
  Status Zero(float* p, size_t n) override {
    Wrote(p);
    if (n == 0) return Status::Ok();
    ASSIGN_OR_RETURN(const Typed to, At(p, n));
    return TimedOp(kOpCopy, [&]() -> Status {
      CUDACHECK(cudaMemsetAsync(to.p, 0, n * static_cast<size_t>(DTypeBytes(to.type)), compute_));
      return Status::Ok();
    });
  }
  // Runs `chunk_step(done, count, wide)` over `n` elements, `count` at a
  // time through one fp32 device temporary `wide` of at most
  // kHostCopyStagingBytes.
  Status ThroughStaging(size_t n, const std::function<Status(size_t, size_t, float*)>& chunk_step) {
    const size_t chunk = std::min(n, kHostCopyStagingBytes / sizeof(float));
    DeviceBuffer wide(this, BufferClass::kWorkspace);
    RETURN_IF_ERROR(wide.Assign(chunk, Fill::kUndefined));
    for (size_t done = 0; done < n; done += chunk) {
      RETURN_IF_ERROR(chunk_step(done, std::min(chunk, n - done), wide.data()));
    }
    return Status::Ok();
  }
  // Host copies are fp32: a narrow buffer goes through an fp32 temporary,
  // kHostCopyStagingBytes at a time.
  Status CopyToHost(const float* src, size_t n, float* host) override {
    if (n == 0) return Status::Ok();
    RETURN_IF_ERROR(Usable());
    if (Narrow(src)) {
      return ThroughStaging(n, [&](size_t done, size_t count, float* wide) -> Status {
        RETURN_IF_ERROR(Copy(src + done, count, wide));
        return CopyToHost(wide, count, host + done);
      });
    }
    CUDACHECK(cudaMemcpyAsync(host, src, n * sizeof(float), cudaMemcpyDeviceToHost, compute_));
    return Wait(compute_, "copy to host");
  }
  Status CopyFromHost(const float* host, size_t n, float* dst) override {
    if (n == 0) return Status::Ok();
    RETURN_IF_ERROR(Usable());
    if (Narrow(dst)) {
      return ThroughStaging(n, [&](size_t done, size_t count, float* wide) -> Status {
        // Both on the compute stream: the next chunk's copy into `wide`
        // runs after this conversion has read it.
        RETURN_IF_ERROR(CopyFromHost(host + done, count, wide));
        return Copy(wide, count, dst + done);
      });
    }
    Wrote(dst);
    CUDACHECK(cudaMemcpyAsync(dst, host, n * sizeof(float), cudaMemcpyHostToDevice, compute_));
    // Waited for, so the caller may free `host` at once.
    return Wait(compute_, "copy from host");
  }

  // --- GEMMs (RawGemm below maps row-major onto cuBLAS' column-major).
  Status Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
              const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
              int64_t ldc) override {
    return StridedGemm(trans_a, trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
  }

  size_t AttentionStashElements(const AttentionShape& s) const override {
    const size_t probs = static_cast<size_t>(s.ProbsElements());
    return mode_.bf16_operands ? (probs + 1) / 2 : probs;  // bf16: two per element
  }

  // The unfused attention (a plan's `attention: unfused`): under an fp32
  // or tf32 plan Device's default, the walk of tiled_attention.h that the CPU
  // device runs in CI (StashedGemmsFor over BatchedGemm and the softmax
  // kernels); under a bf16 plan the same GEMMs with P kept in bf16
  // (AttentionForwardBf16). Each pair's P block lies at its slot
  // (ForAttentionBatches' order), so a batch's blocks lie side by side.
  Status AttentionForward(const AttentionShape& s, const float* qkv, float* probs,
                          float* ctx) override {
    const AttentionScope scope(this);
    if (!unfused_logged_ && local_rank_ == 0) {
      // Which code ran, for gpu-validate.sh's comparisons (as the fused
      // path's line in HasOnChipAttention).
      unfused_logged_ = true;
      std::fprintf(stderr, "pacer-worker gpu: unfused attention runs %s\n",
                   mode_.bf16_operands ? "in bf16 (P stored in bf16)"
                                       : "the default walk (P stored in fp32)");
    }
    if (mode_.bf16_operands) return AttentionForwardBf16(s, qkv, probs, ctx);
    return UnfusedAttentionForward(this, s, qkv, probs, ctx);
  }

  Status AttentionBackward(const AttentionShape& s, const float* qkv, float* probs,
                           const float* dctx, float* dqkv) override {
    const AttentionScope scope(this);
    if (mode_.bf16_operands) return AttentionBackwardBf16(s, qkv, probs, dctx, dqkv);
    return UnfusedAttentionBackward(this, s, qkv, probs, dctx, dqkv, kAttentionScratchBytes);
  }

  // --- The tiled attention's pieces (the executor's tiled_attention.h).
  Status BatchedGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const float* a, int64_t lda, int64_t stride_a, const float* b, int64_t ldb,
                     int64_t stride_b, float beta, float* c, int64_t ldc, int64_t stride_c,
                     int64_t batch) override {
    if (batch > 1 && stride_c == 0) {
      return InternalError(GpuErrorWhere(__FILE__, __LINE__) +
                           ": a batched GEMM writes the same output block twice");
    }
    const AttentionScope scope(this);  // only attention batches its GEMMs
    return StridedGemm(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta,
                       c, ldc, stride_c, batch);
  }
  // Entry points without a kernel for narrow storage take fp32 views of
  // narrow operands (Fp32Views): correct for any mix, at two conversions
  // per narrow operand. The executor passes narrow buffers only to the
  // typed ones (GEMMs, copies, the attention, RMS norm, the activations,
  // adds, single-rank collectives), which tests/worker check on the CPU.
  Status SoftmaxRows(float* x, int64_t rows, int64_t cols, float scale,
                     const CausalRows& mask) override {
    if (Narrow(x)) {
      Fp32Views v(this);
      RETURN_IF_ERROR(v.InOut(x, Count(rows, cols)));
      RETURN_IF_ERROR(SoftmaxRows(x, rows, cols, scale, mask));
      return v.Finish();
    }
    return TimedOp(kOpSoftmax,
                   [&] { return gpu::SoftmaxRows(x, rows, cols, scale, mask, compute_); });
  }
  Status SoftmaxBackward(const float* p, float* dp, int64_t rows, int64_t cols,
                         float scale) override {
    if (Narrow(p) || Narrow(dp)) {
      Fp32Views v(this);
      RETURN_IF_ERROR(v.In(p, Count(rows, cols)));
      RETURN_IF_ERROR(v.InOut(dp, Count(rows, cols)));
      RETURN_IF_ERROR(SoftmaxBackward(p, dp, rows, cols, scale));
      return v.Finish();
    }
    return TimedOp(kOpSoftmax,
                   [&] { return gpu::SoftmaxBackward(p, dp, rows, cols, scale, compute_); });
  }

  // --- Elementwise kernels: RMS norm, GELU, SwiGLU and adds run on any
  // storage (a bf16 norm output, bf16 MLP activations) directly.
  Status RmsNormForward(const float* x, int64_t rows, int64_t cols, float* y,
                        float* inv_rms) override {
    if (Narrow(inv_rms)) {
      Fp32Views v(this);
      RETURN_IF_ERROR(v.Out(inv_rms, Count(rows, 1)));
      RETURN_IF_ERROR(RmsNormForward(x, rows, cols, y, inv_rms));
      return v.Finish();
    }
    ASSIGN_OR_RETURN(const Typed in, At(x, Count(rows, cols)));
    ASSIGN_OR_RETURN(const Typed out, At(y, Count(rows, cols)));
    return TimedOp(kOpNorm, [&] {
      return gpu::RmsNormForward(in.p, in.type, rows, cols, out.p, out.type, inv_rms, compute_);
    });
  }
  Status RmsNormBackward(const float* x, const float* inv_rms, const float* dy, int64_t rows,
                         int64_t cols, float* dx) override {
    if (Narrow(inv_rms) || Narrow(dx)) {
      Fp32Views v(this);
      RETURN_IF_ERROR(v.In(inv_rms, Count(rows, 1)));
      RETURN_IF_ERROR(v.InOut(dx, Count(rows, cols)));
      RETURN_IF_ERROR(RmsNormBackward(x, inv_rms, dy, rows, cols, dx));
      return v.Finish();
    }
    ASSIGN_OR_RETURN(const Typed in, At(x, Count(rows, cols)));
    ASSIGN_OR_RETURN(const Typed grad, At(dy, Count(rows, cols)));
    return TimedOp(kOpNorm, [&] {
      return gpu::RmsNormBackward(in.p, in.type, inv_rms, grad.p, grad.type, rows, cols, dx,
                                  compute_);
    });
  }
  Status GeluForward(const float* x, size_t n, float* y) override {
    if (Narrow(x) != Narrow(y)) {
      Fp32Views v(this);
      RETURN_IF_ERROR(v.In(x, n));
      RETURN_IF_ERROR(v.Out(y, n));
      RETURN_IF_ERROR(GeluForward(x, n, y));
      return v.Finish();
    }
    ASSIGN_OR_RETURN(const Typed in, At(x, n));
    ASSIGN_OR_RETURN(const Typed out, At(y, n));
    return TimedOp(kOpActivation, [&] {
      return ::pacer::worker::GeluForward(in.p, out.p, static_cast<int64_t>(n), in.type, compute_);
    });
  }
  Status GeluBackward(const float* x, const float* dy, size_t n, float* dx) override {
    if (Narrow(x) != Narrow(dx) || Narrow(dy) != Narrow(dx)) {
      Fp32Views v(this);
      RETURN_IF_ERROR(v.In(x, n));
      RETURN_IF_ERROR(v.In(dy, n));
      RETURN_IF_ERROR(v.Out(dx, n));
      RETURN_IF_ERROR(GeluBackward(x, dy, n, dx));
      return v.Finish();
    }
    ASSIGN_OR_RETURN(const Typed in, At(x, n));
    ASSIGN_OR_RETURN(const Typed grad_out, At(dy, n));
    ASSIGN_OR_RETURN(const Typed grad_in, At(dx, n));
    return TimedOp(kOpActivation, [&] {
      return ::pacer::worker::GeluBackward(grad_out.p, in.p, grad_in.p, static_cast<int64_t>(n),
                                           in.type, compute_);
    });
  }
  Status SwigluForward(const float* in, int64_t rows, int64_t f, float* out) override {
    if (Narrow(in) != Narrow(out)) {
      Fp32Views v(this);
      RETURN_IF_ERROR(v.In(in, Count(rows, 2 * f)));
      RETURN_IF_ERROR(v.Out(out, Count(rows, f)));
      RETURN_IF_ERROR(SwigluForward(in, rows, f, out));
      return v.Finish();
    }
    ASSIGN_OR_RETURN(const Typed x, At(in, Count(rows, 2 * f)));
    ASSIGN_OR_RETURN(const Typed y, At(out, Count(rows, f)));
    return TimedOp(kOpActivation, [&] {
      return ::pacer::worker::SwigluForward(x.p, y.p, rows, f, x.type, compute_);
    });
  }
  Status SwigluBackward(const float* in, const float* dout, int64_t rows, int64_t f,
                        float* din) override {
    if (Narrow(in) != Narrow(din) || Narrow(dout) != Narrow(din)) {
      Fp32Views v(this);
      RETURN_IF_ERROR(v.In(in, Count(rows, 2 * f)));
      RETURN_IF_ERROR(v.In(dout, Count(rows, f)));
      RETURN_IF_ERROR(v.Out(din, Count(rows, 2 * f)));
      RETURN_IF_ERROR(SwigluBackward(in, dout, rows, f, din));
      return v.Finish();
    }
    ASSIGN_OR_RETURN(const Typed x, At(in, Count(rows, 2 * f)));
    ASSIGN_OR_RETURN(const Typed dy, At(dout, Count(rows, f)));
    ASSIGN_OR_RETURN(const Typed dx, At(din, Count(rows, 2 * f)));
    return TimedOp(kOpActivation, [&] {
      return ::pacer::worker::SwigluBackward(dy.p, x.p, dx.p, rows, f, x.type, compute_);
    });
  }
  // y += x: in y's storage, summed in fp32.
  Status Add(float* y, const float* x, size_t n) override {
    Wrote(y);
    ASSIGN_OR_RETURN(const Typed to, At(y, n));
    ASSIGN_OR_RETURN(const Typed from, At(x, n));
    if (to.type != from.type) {
      return TimedOp(kOpAdd,
                     [&] { return Convert(from.p, from.type, n, to.p, to.type, true, compute_); });
    }
    return TimedOp(kOpAdd, [&] {
      return ::pacer::worker::Add(to.p, from.p, to.p, static_cast<int64_t>(n), to.type, compute_);
    });
  }
  Status EmbeddingForward(const float* table, const int32_t* tokens, int64_t rows, int64_t cols,
                          float* out) override {
    if (Narrow(out)) {
      Fp32Views v(this);
      RETURN_IF_ERROR(v.Out(out, Count(rows, cols)));
      RETURN_IF_ERROR(EmbeddingForward(table, tokens, rows, cols, out));
      return v.Finish();
    }
    // A bf16 table (16-bit weights) is read as it is stored: rows are
    // gathered by token, so its extent is not known here (At's span: 0).
    ASSIGN_OR_RETURN(const Typed t, At(table, 0));
    ASSIGN_OR_RETURN(const int32_t* ids, Upload(tokens, rows));
    return TimedOp(kOpEmbedding, [&] {
      return gpu::EmbeddingForward(t.p, t.type, ids, rows, cols, out, compute_);
    });
  }
  Status EmbeddingBackward(const float* dout, const int32_t* tokens, int64_t rows, int64_t cols,
                           float* table_grad) override {
    if (Narrow(dout) || Narrow(table_grad)) {
      Fp32Views v(this);
      RETURN_IF_ERROR(v.In(dout, Count(rows, cols)));
      RETURN_IF_ERROR(v.InOut(table_grad, 0));
      RETURN_IF_ERROR(EmbeddingBackward(dout, tokens, rows, cols, table_grad));
      return v.Finish();
    }
    ASSIGN_OR_RETURN(const int32_t* ids, Upload(tokens, rows));
    return TimedOp(kOpEmbedding, [&] {
      return gpu::EmbeddingBackward(dout, ids, rows, cols, table_grad, compute_);
    });
  }
  Status LogitRowStats(const float* logits, const int32_t* labels, int64_t rows, int64_t cols,
                       float* stats) override {
    if (Narrow(logits) || Narrow(stats)) {
      Fp32Views v(this);
      RETURN_IF_ERROR(v.In(logits, Count(rows, cols)));
      RETURN_IF_ERROR(v.Out(stats, Count(rows, 2)));
      RETURN_IF_ERROR(LogitRowStats(logits, labels, rows, cols, stats));
      return v.Finish();
    }
    ASSIGN_OR_RETURN(const int32_t* ids, Upload(labels, rows));
    return TimedOp(kOpLoss,
                   [&] { return gpu::LogitRowStats(logits, ids, rows, cols, stats, compute_); });
  }
  // The loss comes back to the host at once (the interface returns it), so
  // the last stage waits for its logits once per micro-batch.
  StatusOr<double> CrossEntropyGradInPlace(float* logits, const int32_t* labels, int64_t rows,
                                           int64_t cols, float grad_scale,
                                           const float* row_lse) override {
    if (rows <= 0) return 0.0;
    if (Narrow(logits) || Narrow(row_lse)) {
      Fp32Views v(this);
      RETURN_IF_ERROR(v.InOut(logits, Count(rows, cols)));
      RETURN_IF_ERROR(v.In(row_lse, row_lse != nullptr ? Count(rows, 1) : 0));
      ASSIGN_OR_RETURN(const double loss,
                       CrossEntropyGradInPlace(logits, labels, rows, cols, grad_scale, row_lse));
      RETURN_IF_ERROR(v.Finish());
      return loss;
    }
    ASSIGN_OR_RETURN(const int32_t* ids, Upload(labels, rows));
    RETURN_IF_ERROR(Reserve(&losses_, &losses_capacity_, static_cast<size_t>(rows) * 8));
    double* row_loss = static_cast<double*>(losses_);
    RETURN_IF_ERROR(TimedOp(kOpLoss, [&] {
      return CrossEntropyGrad(logits, ids, rows, cols, grad_scale, row_lse, row_loss, compute_);
    }));
    std::vector<double> host(static_cast<size_t>(rows));
    CUDACHECK(cudaMemcpyAsync(host.data(), row_loss, host.size() * sizeof(double),
                              cudaMemcpyDeviceToHost, compute_));
    RETURN_IF_ERROR(Wait(compute_, "copy of the loss to the host"));
    double loss = 0;
    for (const double l : host) loss += l;
    return loss;
  }
  Status AdamWUpdate(float* w, const float* g, float* m, float* v, size_t n, float grad_scale,
                     int64_t step, const AdamWParams& p) override {
    if (Narrow(w) || Narrow(g) || Narrow(m) || Narrow(v)) {
      Fp32Views views(this);
      RETURN_IF_ERROR(views.InOut(w, n));
      RETURN_IF_ERROR(views.In(g, n));
      RETURN_IF_ERROR(views.InOut(m, n));
      RETURN_IF_ERROR(views.InOut(v, n));
      RETURN_IF_ERROR(AdamWUpdate(w, g, m, v, n, grad_scale, step, p));
      return views.Finish();
    }
    Wrote(w);
    return TimedOp(kOpOptimizer,
                   [&] { return AdamW(w, g, m, v, n, grad_scale, step, p, compute_); });
  }

  // --- Collectives, on the compute stream.
  // Collectives run in fp32: a narrow buffer of a group of more than one
  // goes through an fp32 view (single-rank groups are copies).
  Status AllReduce(Group g, float* data, size_t n, const std::string& what) override {
    if (comms_.size(g) > 1 && Narrow(data)) {
      Fp32Views v(this);
      RETURN_IF_ERROR(v.InOut(data, n));
      RETURN_IF_ERROR(AllReduce(g, data, n, what));
      return v.Finish();
    }
    Wrote(data);
    return Timed(compute_, [&] {
      return comms_.AllReduce(g, data, n, compute_, Due(), Named(what));
    });
  }
  Status AllGather(Group g, const float* in, float* out, const std::vector<size_t>& counts,
                   const std::string& what) override {
    if (comms_.size(g) == 1) return Copy(in, counts.empty() ? 0 : counts[0], out);
    if (Narrow(in) || Narrow(out)) {
      const GroupCounts n = CountsOf(g, counts);
      Fp32Views v(this);
      RETURN_IF_ERROR(v.In(in, n.mine));
      RETURN_IF_ERROR(v.Out(out, n.total));
      RETURN_IF_ERROR(AllGather(g, in, out, counts, what));
      return v.Finish();
    }
    Wrote(out);
    return Timed(compute_, [&] {
      return comms_.AllGather(g, in, out, counts, compute_, Due(), Named(what));
    });
  }
  Status ReduceScatter(Group g, float* data, float* out, const std::vector<size_t>& counts,
                       const std::string& what) override {
    if (comms_.size(g) == 1) return Copy(data, counts.empty() ? 0 : counts[0], out);
    if (Narrow(data) || Narrow(out)) {
      const GroupCounts n = CountsOf(g, counts);
      Fp32Views v(this);
      RETURN_IF_ERROR(v.In(data, n.total));
      RETURN_IF_ERROR(v.Out(out, n.mine));
      RETURN_IF_ERROR(ReduceScatter(g, data, out, counts, what));
      return v.Finish();
    }
    Wrote(data);
    Wrote(out);
    return Timed(compute_, [&] {
      return comms_.ReduceScatter(g, data, out, counts, compute_, Due(), Named(what));
    });
  }

  // A send copies `data` into a staging buffer on the compute stream; the
  // direction's send stream waits for the copy, sends, and frees the
  // staging buffer (stream-ordered), so the executor may reuse `data` at
  // once and the compute stream never waits for a receiver.
  Status Send(int peer, PipeDirection d, const float* data, size_t n,
              const std::string& what) override {
    if (comms_.size(Group::kPipeline) == 1 || n == 0) return Status::Ok();
    RETURN_IF_ERROR(ReapSends());
    ASSIGN_OR_RETURN(float* staging,
                     Allocate(n, BufferClass::kWorkspace, Fill::kUndefined, Storage::kFp32));
    const double bytes = static_cast<double>(n) * sizeof(float);
    memory().Charge(BufferClass::kWorkspace, bytes);
    PendingSend pending{nullptr, bytes};
    CUDACHECK(cudaEventCreateWithFlags(&pending.done, cudaEventDisableTiming));
    pending_.push_back(pending);  // released (tracker and event) once done
    RETURN_IF_ERROR(Copy(data, n, staging));
    cudaStream_t stream = send_[static_cast<int>(d)];
    cudaEvent_t copied = nullptr;
    CUDACHECK(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));
    CUDACHECK(cudaEventRecord(copied, compute_));
    CUDACHECK(cudaStreamWaitEvent(stream, copied, 0));
    CUDACHECK(cudaEventDestroy(copied));  // released once the wait is done
    const Status sent = Timed(stream, [&] {
      return comms_.Send(d, peer, staging, n, stream, Due(), Named(what));
    });
    CUDACHECK(cudaFreeAsync(staging, stream));
    CUDACHECK(cudaEventRecord(pending.done, stream));
    return sent;
  }
  Status Recv(int peer, PipeDirection d, float* data, size_t n, const std::string& what) override {
    if (comms_.size(Group::kPipeline) == 1 || n == 0) return Status::Ok();
    if (Narrow(data)) {
      Fp32Views v(this);
      RETURN_IF_ERROR(v.Out(data, n));
      RETURN_IF_ERROR(Recv(peer, d, data, n, what));
      return v.Finish();
    }
    RETURN_IF_ERROR(ReapSends());
    Wrote(data);
    return Timed(compute_, [&] {
      return comms_.Recv(d, peer, data, n, compute_, Due(), Named(what));
    });
  }
  Status FlushSends() override {
    for (cudaStream_t s : send_) {
      if (s != nullptr) RETURN_IF_ERROR(Wait(s, "pipeline sends"));
    }
    return ReapSends();
  }
  void SetStep(int64_t step) override { step_ = step; }
  void Abort() override { comms_.AbortAll(); }

  // --- Counters and timing.
  Status Synchronize() override {
    RETURN_IF_ERROR(Usable());
    RETURN_IF_ERROR(Wait(compute_, "end of step"));
    for (cudaStream_t s : send_) RETURN_IF_ERROR(Wait(s, "end of step"));
    RETURN_IF_ERROR(ReapSends());
    const bool counted = switches_.op_times && synchronized_steps_ > 0;  // not the warm-up step
    for (size_t i = 0; i + 1 < used_events_; i += 2) {
      float ms = 0;
      CUDACHECK(cudaEventElapsedTime(&ms, events_[i], events_[i + 1]));
      counters_.collective_seconds += static_cast<double>(ms) / 1e3;
      if (counted) op_seconds_[kOpCollective] += static_cast<double>(ms) / 1e3;
    }
    used_events_ = 0;
    for (const OpSpan& o : op_spans_) {
      float ms = 0;
      CUDACHECK(cudaEventElapsedTime(&ms, o.start, o.end));
      if (counted) op_seconds_[o.kind] += static_cast<double>(ms) / 1e3;
      op_event_pool_.push_back(o.start);
      op_event_pool_.push_back(o.end);
    }
    op_spans_.clear();
    if (counted) ++timed_steps_;
    ++synchronized_steps_;
    return Status::Ok();
  }
  DeviceCounters counters() const override { return counters_; }
  void ResetCounters() override {
    counters_ = DeviceCounters();
    used_events_ = 0;
  }

 private:
  // --- Narrow storage (Storage::kCompute under bf16 activations): the
  // executor's handles resolved to where the elements are and their type.
  struct Typed {
    void* p = nullptr;
    DType type = DType::kFp32;
  };
  bool Narrow(const float* p) const { return narrow_.size() > 0 && narrow_.Contains(p); }
  // `p` resolved, `span` elements from it; Internal when they run past the
  // end of a narrow buffer (a bug: the executor's shapes are wrong).
  StatusOr<Typed> At(const float* p, size_t span) const {
    const StorageMap::Resolved r = narrow_.Resolve(p);
    if (r.narrow && span > r.elements_left) {
      return InternalError(GpuErrorWhere(__FILE__, __LINE__) + ": " + std::to_string(span) +
                           " elements from a bf16 activation with " +
                           std::to_string(r.elements_left) + " left");
    }
    return Typed{r.physical, r.narrow ? DType::kBf16 : DType::kFp32};
  }
  static size_t Count(int64_t rows, int64_t cols) {
    return rows > 0 && cols > 0 ? static_cast<size_t>(rows) * static_cast<size_t>(cols) : 0;
  }

  // fp32 stand-ins for the narrow operands of one call without a narrow
  // kernel: In converts a narrow operand into an fp32 temporary
  // (workspace) and points the caller's pointer at it; Out allocates one
  // that Finish converts back into the narrow buffer; InOut both. fp32
  // operands are left alone. n = 0: to the end of the operand's buffer
  // (an embedding table, whose size the call does not say).
  class Fp32Views {
   public:
    explicit Fp32Views(GpuDevice* d) : d_(d) {}
    Status In(const float*& p, size_t n) { return View(&p, nullptr, n); }
    Status In(float*& p, size_t n) {
      const float* c = p;
      RETURN_IF_ERROR(View(&c, nullptr, n));
      p = const_cast<float*>(c);
      return Status::Ok();
    }
    Status InOut(float*& p, size_t n) { return View(nullptr, &p, n); }
    Status Out(float*& p, size_t n) {
      write_only_ = true;
      const Status s = View(nullptr, &p, n);
      write_only_ = false;
      return s;
    }
    // The written temporaries back into their narrow buffers.
    Status Finish() {
      for (Temp& t : temps_) {
        if (t.written) RETURN_IF_ERROR(d_->Copy(t.wide.data(), t.wide.size(), t.narrow));
      }
      return Status::Ok();
    }

   private:
    struct Temp {
      float* narrow = nullptr;
      bool written = false;
      DeviceBuffer wide;
    };
    Status View(const float** in, float** out, size_t n) {
      float* p = in != nullptr ? const_cast<float*>(*in) : *out;
      if (p == nullptr || !d_->Narrow(p)) return Status::Ok();
      if (n == 0) n = d_->narrow_.Resolve(p).elements_left;
      Temp t{p, out != nullptr, DeviceBuffer(d_, BufferClass::kWorkspace)};
      RETURN_IF_ERROR(t.wide.Assign(n, Fill::kUndefined));
      if (!write_only_) RETURN_IF_ERROR(d_->Copy(p, n, t.wide.data()));
      if (in != nullptr) *in = t.wide.data();
      if (out != nullptr) *out = t.wide.data();
      temps_.push_back(std::move(t));
      return Status::Ok();
    }
    GpuDevice* d_;
    bool write_only_ = false;
    std::vector<Temp> temps_;
  };

  struct PendingSend {
    cudaEvent_t done = nullptr;
    double bytes = 0;
  };

  // fp32 operands and output; under a bf16 plan the operands go to cuBLAS
  // as bf16 copies (Bf16Operand).
  Status StridedGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const float* a, int64_t lda, int64_t stride_a, const float* b, int64_t ldb,
                     int64_t stride_b, float beta, float* c, int64_t ldc, int64_t stride_c,
                     int64_t batch) {
    if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return Status::Ok();
    if (!mode_.bf16_operands) {
      return RawGemm(trans_a, trans_b, m, n, k, alpha, {a, CUDA_R_32F, lda, stride_a},
                     {b, CUDA_R_32F, ldb, stride_b}, beta, {c, CUDA_R_32F, ldc, stride_c}, batch);
    }
    ASSIGN_OR_RETURN(const void* a16, Bf16Operand(a, Span(trans_a ? k : m, trans_a ? m : k, lda,
                                                            stride_a, batch),
                                                  0));
    ASSIGN_OR_RETURN(const void* b16, Bf16Operand(b, Span(trans_b ? n : k, trans_b ? k : n, ldb,
                                                            stride_b, batch),
                                                  1));
    // The output in its own storage: a narrow (bf16) one is written in
    // bf16 by cuBLAS (fp32 accumulation, one rounding at the store).
    RETURN_IF_ERROR(At(c, Span(m, n, ldc, stride_c, batch)).status());
    return RawGemm(trans_a, trans_b, m, n, k, alpha, {a16, CUDA_R_16BF, lda, stride_a},
                   {b16, CUDA_R_16BF, ldb, stride_b}, beta, Out(c, ldc, stride_c), batch);
  }

  // A GEMM operand or output as cuBLAS takes it: pointer, element type,
  // leading dimension, stride between batch items (elements).
  struct Matrix {
    const void* p = nullptr;
    cudaDataType_t type = CUDA_R_32F;
    int64_t ld = 0, stride = 0;
  };

  // A collective's elements in all (the sum of `counts`) and this rank's.
  struct GroupCounts {
    size_t total = 0, mine = 0;
  };
  GroupCounts CountsOf(Group g, const std::vector<size_t>& counts) const {
    GroupCounts n;
    for (const size_t c : counts) n.total += c;
    const auto rank = static_cast<size_t>(comms_.rank(g));
    n.mine = rank < counts.size() ? counts[rank] : 0;
    return n;
  }

  // A GEMM output at `p` as cuBLAS takes it: bf16 where stored narrow.
  Matrix Out(float* p, int64_t ld, int64_t stride) const {
    const StorageMap::Resolved r = narrow_.Resolve(p);
    return {r.physical, r.narrow ? CUDA_R_16BF : CUDA_R_32F, ld, stride};
  }

  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap
  // the operands, keep each operand's own transpose flag.
  Status RawGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const Matrix& a, const Matrix& b, float beta, const Matrix& c, int64_t batch) {
    if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return Status::Ok();
    RETURN_IF_ERROR(Usable());
    RETURN_IF_ERROR(CheckDims(m, n, k, batch));
    void* out = const_cast<void*>(c.p);
    if (c.type == CUDA_R_32F) Wrote(static_cast<const float*>(c.p));
    OpSpan span;
    if (switches_.op_times) {
      RETURN_IF_ERROR(BeginOp(in_attention_ ? kOpAttentionGemm : kOpGemm, &span));
    }
    if (batch == 1) {
      CUBLASCHECK(cublasGemmEx(cublas_, Op(trans_b), Op(trans_a), static_cast<int>(n),
                               static_cast<int>(m), static_cast<int>(k), &alpha, b.p, b.type,
                               static_cast<int>(b.ld), a.p, a.type, static_cast<int>(a.ld), &beta,
                               out, c.type, static_cast<int>(c.ld), mode_.compute,
                               CUBLAS_GEMM_DEFAULT));
    } else {
      CUBLASCHECK(cublasGemmStridedBatchedEx(
          cublas_, Op(trans_b), Op(trans_a), static_cast<int>(n), static_cast<int>(m),
          static_cast<int>(k), &alpha, b.p, b.type, static_cast<int>(b.ld), b.stride, a.p, a.type,
          static_cast<int>(a.ld), a.stride, &beta, out, c.type, static_cast<int>(c.ld), c.stride,
          static_cast<int>(batch), mode_.compute, CUBLAS_GEMM_DEFAULT));
    }
    if (switches_.op_times) RETURN_IF_ERROR(EndOp(span));
    counters_.gemm_flops += 2.0 * static_cast<double>(m) * static_cast<double>(n) *
                            static_cast<double>(k) * static_cast<double>(batch);
    return Status::Ok();
  }

  // --- Read-only operands (Device::BeginReadOnly): under a bf16 plan each
  // region is converted to bf16 once, here, and Bf16Operand hands out
  // slices of that copy until EndReadOnly, instead of converting every
  // tiled-attention GEMM's slice of Q, K, V or dC again (the conversions
  // would outweigh those small GEMMs). Workspace bytes: 2 per element
  // while the scope lasts.
  // A region whose copy does not fit in memory is left out: its GEMMs
  // convert their slices as without the scope. A failed Begin leaves the
  // scope closed (WithReadOnly calls no End then).
  Status BeginReadOnly(const std::vector<ReadOnlyRegion>& regions) override {
    if (read_only_open_) return InternalError("GPU device: BeginReadOnly nested");
    read_only_written_ = false;
    if (mode_.bf16_operands) {
      RegionCopies<DeviceBuffer> made;
      for (const ReadOnlyRegion& r : regions) {
        if (r.elements == 0 || Narrow(r.data)) continue;  // bf16 already
        if (made.Overlaps(r.data, r.elements)) {
          return InternalError("GPU device: BeginReadOnly's regions overlap");
        }
        DeviceBuffer bf16(this, BufferClass::kWorkspace);
        const Status allocated = bf16.Assign((r.elements + 1) / 2, Fill::kUndefined);
        if (allocated.code() == StatusCode::kResourceExhausted) continue;
        RETURN_IF_ERROR(allocated);
        RETURN_IF_ERROR(
            TimedOp(kOpConvert, [&] { return ToBf16(r.data, r.elements, bf16.data(), compute_); }));
        made.Add(r.data, r.elements, std::move(bf16))->stale = false;  // no overlap (above)
      }
      mirrors_ = std::move(made);
    }
    read_only_open_ = true;
    return Status::Ok();
  }
  Status EndReadOnly() override {
    mirrors_.Clear();  // freed in stream order, after the GEMMs that read them
    read_only_open_ = false;
    if (read_only_written_) {
      read_only_written_ = false;
      // Wrote() sees the start of what copies, zeroing, GEMMs, the
      // optimizer and collectives write, not the elementwise kernels'
      // outputs: the CPU device's check is the full one.
      return InternalError(
          "GPU device: a copy, GEMM, collective or optimizer step wrote a read-only "
          "region before EndReadOnly");
    }
    return Status::Ok();
  }

  // --- The on-chip attention of a fused bf16 plan: cuDNN's SDPA
  // (cudnn_attention.h) for full attention, the device's causal tiles
  // (CausalAttentionForwardBf16) under a causal mask, which cuDNN's SDPA
  // operation cannot express (its backend descriptor has a block mask but
  // no causal one). Decided once, at the executor's first question, by
  // ChooseFusedAttention (attention_path.h, tested on the CPU), and logged
  // by local rank 0. Everything else (fp32 and tf32 plans, a build
  // without cuDNN, PACER_CUDNN_ATTENTION=0, a shape or GPU cuDNN has no
  // engine for) runs the executor's tiled attention.
  bool HasOnChipAttention(const AttentionShape& s) override {
    if (!attention_decided_) {
      attention_decided_ = true;
      attention_shape_ = s;
      FusedAttentionFacts facts;
      facts.bf16_operands = mode_.bf16_operands;
      facts.executed_precision = planner::PrecisionName(mode_.executed);
      // Off: the executor's tiled path instead (for comparisons, and a way
      // around a path should it misbehave).
      facts.causal_tiles_disabled = !switches_.causal_tiles;
      facts.cudnn_disabled = !switches_.cudnn_attention;
      attention_ = ChooseFusedAttention(s, facts, [&] { return AskCudnn(s); });
      if (local_rank_ == 0) {
        std::fprintf(stderr, "pacer-worker gpu: fused attention runs %s\n",
                     attention_.description.c_str());
      }
    }
    return s == attention_shape_ && attention_.OnChip();
  }

  Status OnChipAttentionForward(const AttentionShape& s, const float* qkv, float* lse,
                                float* ctx) override {
    if (!HasOnChipAttention(s)) return Device::OnChipAttentionForward(s, qkv, lse, ctx);
    if (attention_.path == FusedAttentionPath::kCausalTiles) {
      return CausalAttentionForwardBf16(s, qkv, lse, ctx);
    }
#if PACER_HAVE_CUDNN
    return CudnnAttentionForward(s, qkv, lse, ctx);
#else
    return Device::OnChipAttentionForward(s, qkv, lse, ctx);
#endif
  }

  Status OnChipAttentionBackward(const AttentionShape& s, const float* qkv, const float* ctx,
                                 const float* lse, const float* dctx, float* dqkv) override {
    if (!HasOnChipAttention(s)) {
      return Device::OnChipAttentionBackward(s, qkv, ctx, lse, dctx, dqkv);
    }
    switch (attention_.path) {
      case FusedAttentionPath::kCausalTiles:
      case FusedAttentionPath::kCudnnTiledBackward: {
        // dK and dV accumulate over the tiles: in fp32, then added to a
        // narrow dqkv once.
        const auto backward = [&] {
          return attention_.path == FusedAttentionPath::kCausalTiles
                     ? CausalAttentionBackwardBf16(s, qkv, lse, dctx, dqkv)
                     : TiledAttentionBackward(this, s, qkv, dctx, dqkv);
        };
        if (!Narrow(dqkv)) return backward();
        Fp32Views views(this);
        RETURN_IF_ERROR(views.InOut(dqkv, static_cast<size_t>(s.QkvElements())));
        RETURN_IF_ERROR(backward());
        return views.Finish();
      }
      case FusedAttentionPath::kCudnnRecomputedBackward:
#if PACER_HAVE_CUDNN
        // Needs Q, K, V, dC and the forward's logsumexp, and issues the
        // same GEMM FLOPs as cuDNN's backward (five s x s x d products).
        return RecomputedAttentionBackwardBf16(s, qkv, lse, dctx, dqkv);
#else
        break;
#endif
      case FusedAttentionPath::kCudnn:
#if PACER_HAVE_CUDNN
        return CudnnAttentionBackward(s, qkv, ctx, lse, dctx, dqkv);
#else
        break;
#endif
      case FusedAttentionPath::kTiled:
        break;
    }
    return InternalError("GPU device: no on-chip attention backward for the chosen path");
  }

#if PACER_HAVE_CUDNN
  Status CudnnAttentionForward(const AttentionShape& s, const float* qkv, float* lse, float* ctx) {
    const auto ctx_elems = static_cast<size_t>(s.CtxElements());
    ASSIGN_OR_RETURN(const void* qkv16, Bf16Operand(qkv, static_cast<size_t>(s.QkvElements()), 0));
    ASSIGN_OR_RETURN(const Typed out, At(ctx, ctx_elems));
    const bool direct = out.type == DType::kBf16;  // cuDNN writes the context itself
    // O in bf16 (the context's layout) unless direct, then cuDNN's workspace.
    const size_t o_bytes = direct ? 0 : AlignedBytes(ctx_elems);
    DeviceBuffer scratch(this, BufferClass::kWorkspace);
    RETURN_IF_ERROR(
        scratch.Assign(Elements(o_bytes + sdpa_->workspace_bytes()), Fill::kUndefined));
    char* base = reinterpret_cast<char*>(scratch.data());
    char* o16 = direct ? static_cast<char*>(out.p) : base;
    RETURN_IF_ERROR(TimedOp(kOpAttentionGemm, [&] {
      return sdpa_->Forward(qkv16, Bf16At(qkv16, sdpa_layout_.key_offset),
                            Bf16At(qkv16, sdpa_layout_.value_offset), o16, lse, base + o_bytes);
    }));
    counters_.gemm_flops += s.OnChipForwardFlops();
    if (direct) return Status::Ok();
    return TimedOp(kOpConvert, [&] { return FromBf16(o16, ctx_elems, ctx, false, compute_); });
  }

  // cuDNN's backward engine (FusedAttentionPath::kCudnn).
  Status CudnnAttentionBackward(const AttentionShape& s, const float* qkv, const float* ctx,
                                const float* lse, const float* dctx, float* dqkv) {
    const auto ctx_elems = static_cast<size_t>(s.CtxElements());
    const auto qkv_elems = static_cast<size_t>(s.QkvElements());
    ASSIGN_OR_RETURN(const void* qkv16, Bf16Operand(qkv, qkv_elems, 0));
    ASSIGN_OR_RETURN(const void* o16, Bf16Operand(ctx, ctx_elems, 1));
    // dO in bf16 (the context's layout), dQ dK dV in bf16 (qkv's layout),
    // then cuDNN's workspace.
    const size_t do_bytes = AlignedBytes(ctx_elems), d_bytes = AlignedBytes(qkv_elems);
    DeviceBuffer scratch(this, BufferClass::kWorkspace);
    RETURN_IF_ERROR(scratch.Assign(Elements(do_bytes + d_bytes + sdpa_->workspace_bytes()),
                                   Fill::kUndefined));
    char* d16 = reinterpret_cast<char*>(scratch.data()) + do_bytes;
    // dO: dC itself when stored in bf16, else converted into the scratch.
    const void* do16 = nullptr;
    if (Narrow(dctx)) {
      ASSIGN_OR_RETURN(do16, Bf16Operand(dctx, ctx_elems, 1));
    } else {
      do16 = scratch.data();
      RETURN_IF_ERROR(TimedOp(
          kOpConvert, [&] { return ToBf16(dctx, ctx_elems, const_cast<void*>(do16), compute_); }));
    }
    RETURN_IF_ERROR(TimedOp(kOpAttentionGemm, [&] {
      return sdpa_->Backward(qkv16, Bf16At(qkv16, sdpa_layout_.key_offset),
                             Bf16At(qkv16, sdpa_layout_.value_offset), o16, do16, lse, d16,
                             d16 + sdpa_layout_.key_offset * 2,
                             d16 + sdpa_layout_.value_offset * 2, d16 + d_bytes);
    }));
    counters_.gemm_flops += s.OnChipBackwardFlops();
    ASSIGN_OR_RETURN(const Typed grad, At(dqkv, qkv_elems));
    return TimedOp(kOpConvert, [&] {
      return Convert(d16, DType::kBf16, qkv_elems, grad.p, grad.type, true, compute_);
    });
  }
#endif

  // A bf16 plan's attention: the scores GEMM writes P in bf16 into the
  // stash, the softmax runs on it in place, and the GEMMs that read P or
  // dS read them as bf16 directly, so the s x s matrices move half the
  // bytes and take half the memory; Q, K, V and dC are converted once per
  // call. Bf16At: element `element` of a bf16 array.
  static char* Bf16At(float* base, int64_t element) {
    return reinterpret_cast<char*>(base) + element * 2;
  }
  static const void* Bf16At(const void* base, int64_t element) {
    return static_cast<const char*>(base) + element * 2;
  }

  Status AttentionForwardBf16(const AttentionShape& s, const float* qkv, float* probs,
                              float* ctx) {
    const float scale = s.SoftmaxScale();
    TileStorage st;
    // Q, K and V of every pair in bf16, converted once (operand scratch 0).
    ASSIGN_OR_RETURN(st.qkv16, Bf16Operand(qkv, static_cast<size_t>(s.QkvElements()), 0));
    st.probs16 = probs;  // the stash: P in bf16, each pair's block at its slot
    st.ctx = ctx;
    const CausalRows mask = WholeSequenceTile(s).mask;
    return ForAttentionBatches(s, s.kv_heads, [&](const AttentionBatch& b) -> Status {
      const TileGemms g = StashedGemmsFor(s, b);
      // S = Q K^T into the batch's blocks, P = softmax in place, ctx = P V.
      RETURN_IF_ERROR(RunTileGemm(g.scores, st, b.count));
      RETURN_IF_ERROR(TimedOp(kOpSoftmax, [&] {
        return SoftmaxRowsBf16(Bf16At(probs, g.scores.c.offset), b.count * s.seq, s.seq, scale,
                               mask, LseRows{}, compute_);
      }));
      return RunTileGemm(g.context, st, b.count);
    });
  }

  Status AttentionBackwardBf16(const AttentionShape& s, const float* qkv, float* probs,
                               const float* dctx, float* dqkv) {
    TileStorage st;
    // Q, K, V and dC in bf16, converted once (operand scratch 0 and 1).
    ASSIGN_OR_RETURN(st.qkv16, Bf16Operand(qkv, static_cast<size_t>(s.QkvElements()), 0));
    ASSIGN_OR_RETURN(st.dc16, Bf16Operand(dctx, static_cast<size_t>(s.CtxElements()), 1));
    st.probs16 = probs;
    st.dqkv = dqkv;
    // Scratch per score: dP in fp32 (4 bytes), then dS in bf16 (2).
    return ForBackwardBatches(
        s, 6, [&](const AttentionBatch& b, float* dp, int64_t batch_scores) -> Status {
          st.probs_grad = dp;
          st.scores_grad16 = dp + batch_scores;
          return BackwardFromProbsBf16(s, StashedGemmsFor(s, b), st, b.count, s.seq, s.seq);
        });
  }

#if PACER_HAVE_CUDNN
  // cuDNN's SDPA forward without its backward (on an H100, cuDNN refuses
  // its SDPA backward operation's graph): the bf16 backward above, batch by
  // batch, on probabilities recomputed from Q, K and the forward's
  // logsumexp (FlashAttention's recomputation, with each batch's s x s
  // blocks in device memory rather than on chip), so nothing of the s x s
  // matrices outlives the call, as the fused plan's memory model assumes.
  // Against the unfused backward: one more GEMM (Q K^T) and one pass over
  // the bf16 scores; against the tiled backward, whole rows per pair
  // (GEMMs of s x s, not 128 x s) and P and dS in bf16 (no per-GEMM
  // conversions).
  Status RecomputedAttentionBackwardBf16(const AttentionShape& s, const float* qkv,
                                         const float* lse, const float* dctx, float* dqkv) {
    const AttentionScope scope(this);
    TileStorage st;
    ASSIGN_OR_RETURN(st.qkv16, Bf16Operand(qkv, static_cast<size_t>(s.QkvElements()), 0));
    ASSIGN_OR_RETURN(st.dc16, Bf16Operand(dctx, static_cast<size_t>(s.CtxElements()), 1));
    st.dqkv = dqkv;
    const AttentionTile whole = WholeSequenceTile(s);
    return ForBackwardBatches(
        s, kRecomputedBackwardBytesPerScore,
        [&](const AttentionBatch& b, float* scratch, int64_t batch_scores) -> Status {
          return RecomputedTileBackwardBf16(s, b, whole,
                                            RecomputeScratch(st, scratch, batch_scores), lse);
        });
  }

#endif

  // A causal bf16 plan's fused attention: the tiled algorithm of
  // core/tiled_attention.h in bf16 on this device's kernels. Each tile of
  // kAttentionTileRows query rows computes its scores against the keys up
  // to its last row only (so the GEMMs issue the FLOPs the step schedule
  // counts: causal_mask.h), for a whole batch of pairs per call; P and dS
  // stay in bf16 and only their tile is in device memory, so nothing of
  // the s x s matrices outlives a tile, as the fused plan's memory model
  // assumes. The forward keeps each query row's logsumexp (in the layout of
  // cuDNN's statistics, sdpa_layout.h), from which the backward rebuilds P.
  Status CausalAttentionForwardBf16(const AttentionShape& s, const float* qkv, float* lse,
                                    float* ctx) {
    const AttentionScope scope(this);
    const float scale = s.SoftmaxScale();
    TileStorage st;
    ASSIGN_OR_RETURN(st.qkv16, Bf16Operand(qkv, static_cast<size_t>(s.QkvElements()), 0));
    st.ctx = ctx;
    // Scratch per score: P in bf16 (2 bytes).
    return ForCausalTiles(
        s, 2,
        [&](const AttentionBatch& b, const AttentionTile& tile, float* scratch, int64_t) -> Status {
          st.probs16 = scratch;
          const TileGemms g = TileGemmsFor(s, b, tile);
          // S = Q_tile K^T; P = softmax in place, each row's logsumexp kept;
          // ctx_tile = P V.
          RETURN_IF_ERROR(RunTileGemm(g.scores, st, b.count));
          const StatsRows rows = StatsRowsFor(s, b).Tile(tile);
          RETURN_IF_ERROR(TimedOp(kOpSoftmax, [&] {
            return SoftmaxRowsBf16(scratch, b.count * tile.rows, tile.keys, scale, tile.mask,
                                   LseRows{lse, rows}, compute_);
          }));
          return RunTileGemm(g.context, st, b.count);
        });
  }

  // dqkv (fp32) += the gradients of Q, K and V, tile by tile: P rebuilt
  // from Q, K and the forward's logsumexp, then dV += P^T dC, dP = dC V^T,
  // dS, dQ += dS K and dK += dS^T Q over the tile's keys.
  Status CausalAttentionBackwardBf16(const AttentionShape& s, const float* qkv, const float* lse,
                                     const float* dctx, float* dqkv) {
    const AttentionScope scope(this);
    TileStorage st;
    ASSIGN_OR_RETURN(st.qkv16, Bf16Operand(qkv, static_cast<size_t>(s.QkvElements()), 0));
    ASSIGN_OR_RETURN(st.dc16, Bf16Operand(dctx, static_cast<size_t>(s.CtxElements()), 1));
    st.dqkv = dqkv;
    return ForCausalTiles(s, kRecomputedBackwardBytesPerScore,
                          [&](const AttentionBatch& b, const AttentionTile& tile, float* scratch,
                              int64_t capacity) -> Status {
                            return RecomputedTileBackwardBf16(
                                s, b, tile, RecomputeScratch(st, scratch, capacity), lse);
                          });
  }

  // Where the bf16 attention keeps the operands of its GEMMs (TileGemmsFor,
  // StashedGemmsFor): Q, K, V and dC as bf16 copies (Bf16Operand), P in
  // bf16 (the stash of the unfused path, else scratch), dS in bf16 scratch,
  // dP in fp32 scratch, the context and dQ, dK, dV in their own storage
  // (Out).
  struct TileStorage {
    const void* qkv16 = nullptr;
    const void* dc16 = nullptr;
    void* probs16 = nullptr;
    void* scores_grad16 = nullptr;
    float* probs_grad = nullptr;
    float* ctx = nullptr;
    float* dqkv = nullptr;
  };

  StatusOr<Matrix> TileOperandMatrix(const TileStorage& st, const TileMatrix& x) const {
    const auto bf16 = [&](const void* base) -> StatusOr<Matrix> {
      if (base == nullptr) return InternalError("GPU attention GEMMs: an operand without storage");
      return Matrix{Bf16At(base, x.offset), CUDA_R_16BF, x.ld, x.stride};
    };
    const auto out = [&](float* base) -> StatusOr<Matrix> {
      if (base == nullptr) return InternalError("GPU attention GEMMs: an output without storage");
      return Out(base + x.offset, x.ld, x.stride);
    };
    switch (x.operand) {
      case TileOperand::kQuery:
      case TileOperand::kKey:
      case TileOperand::kValue:
        return bf16(st.qkv16);
      case TileOperand::kContextGrad:
        return bf16(st.dc16);
      case TileOperand::kProbs:
        return bf16(st.probs16);
      case TileOperand::kScoresGrad:
        return bf16(st.scores_grad16);
      case TileOperand::kProbsGrad:
        if (st.probs_grad == nullptr) return InternalError("GPU attention GEMMs: no dP scratch");
        return Matrix{st.probs_grad + x.offset, CUDA_R_32F, x.ld, x.stride};
      case TileOperand::kContext:
        return out(st.ctx);
      case TileOperand::kQueryGrad:
      case TileOperand::kKeyGrad:
      case TileOperand::kValueGrad:
        return out(st.dqkv);
    }
    return InternalError("GPU attention GEMMs: an unknown operand");
  }

  Status RunTileGemm(const TileGemm& g, const TileStorage& st, int64_t count) {
    ASSIGN_OR_RETURN(const Matrix a, TileOperandMatrix(st, g.a));
    ASSIGN_OR_RETURN(const Matrix b, TileOperandMatrix(st, g.b));
    ASSIGN_OR_RETURN(const Matrix c, TileOperandMatrix(st, g.c));
    return RawGemm(g.trans_a, g.trans_b, g.m, g.n, g.k, 1.0f, a, b, g.beta, c, count);
  }

  // Runs body(batch, tile, scratch, capacity) over every tile of
  // kAttentionTileRows query rows of every batch of pairs
  // (ForAttentionTiles, as the executor's tiled attention walks them), the
  // batches as large as a workspace of kAttentionScratchBytes holds at
  // `bytes_per_score` for a full tile of every item: `capacity` scores.
  template <typename Body>
  Status ForCausalTiles(const AttentionShape& s, size_t bytes_per_score, Body&& body) {
    const int64_t tile = LargestTileScores(s, kAttentionTileRows);
    const int64_t most = PairsPerCall(s, tile, kAttentionScratchBytes, bytes_per_score);
    const int64_t capacity = most * tile;
    DeviceBuffer scratch(this, BufferClass::kWorkspace);
    RETURN_IF_ERROR(scratch.Assign(
        (static_cast<size_t>(capacity) * bytes_per_score + sizeof(float) - 1) / sizeof(float),
        Fill::kUndefined));
    return ForAttentionTiles(s, kAttentionTileRows, most,
                             [&](const AttentionBatch& b, const AttentionTile& t) {
                               return body(b, t, scratch.data(), capacity);
                             });
  }

  // One batch's bf16 attention backward given its probabilities (P in
  // bf16 where g's P operand lies in `st`, each item's rows x keys):
  // dV += P^T dC, dP = dC V^T (fp32), dS (bf16), dQ += dS K, dK += dS^T Q.
  Status BackwardFromProbsBf16(const AttentionShape& s, const TileGemms& g, const TileStorage& st,
                               int64_t count, int64_t rows, int64_t keys) {
    const float scale = s.SoftmaxScale();
    ASSIGN_OR_RETURN(const Matrix p, TileOperandMatrix(st, g.value_grad.a));
    ASSIGN_OR_RETURN(const Matrix dp, TileOperandMatrix(st, g.probs_grad.c));
    ASSIGN_OR_RETURN(const Matrix ds, TileOperandMatrix(st, g.query_grad.a));
    // context = P V: dV += P^T dC, dP = dC V^T.
    RETURN_IF_ERROR(RunTileGemm(g.value_grad, st, count));
    RETURN_IF_ERROR(RunTileGemm(g.probs_grad, st, count));
    // Every row holds every key it sees and a masked key's P is 0, so the
    // row sums are exact and a masked dS is 0.
    RETURN_IF_ERROR(TimedOp(kOpSoftmax, [&] {
      return SoftmaxBackwardBf16(p.p, static_cast<const float*>(dp.p), const_cast<void*>(ds.p),
                                 count * rows, keys, scale, compute_);
    }));
    // scores = Q K^T: dQ += dS K, dK += dS^T Q.
    RETURN_IF_ERROR(RunTileGemm(g.query_grad, st, count));
    return RunTileGemm(g.key_grad, st, count);
  }

  // The scratch of a recomputing backward, `capacity` scores of 8 bytes
  // (kRecomputedBackwardBytesPerScore): dP in fp32, then dS and P in bf16.
  static TileStorage RecomputeScratch(TileStorage st, float* scratch, int64_t capacity) {
    st.probs_grad = scratch;
    st.scores_grad16 = scratch + capacity;
    st.probs16 = Bf16At(scratch + capacity, capacity);
    return st;
  }

  // One tile's backward from Q, K and the forward's logsumexp (the
  // recomputation of the causal tiles and of the backward after cuDNN's
  // forward): S = Q K^T, P rebuilt in bf16 from each row's logsumexp (in
  // the layout of cuDNN's statistics, sdpa_layout.h), then
  // BackwardFromProbsBf16.
  Status RecomputedTileBackwardBf16(const AttentionShape& s, const AttentionBatch& b,
                                    const AttentionTile& tile, const TileStorage& st,
                                    const float* lse) {
    const float scale = s.SoftmaxScale();
    const TileGemms g = TileGemmsFor(s, b, tile);
    RETURN_IF_ERROR(RunTileGemm(g.scores, st, b.count));
    const StatsRows rows = StatsRowsFor(s, b).Tile(tile);
    RETURN_IF_ERROR(TimedOp(kOpSoftmax, [&] {
      return ProbsFromLseBf16(st.probs16, lse, rows, b.count * tile.rows, tile.keys, scale,
                              tile.mask, compute_);
    }));
    return BackwardFromProbsBf16(s, g, st, b.count, tile.rows, tile.keys);
  }

  // Runs body(batch, scratch, batch_scores) over the attention backward's
  // batches (ForAttentionBatches: no two items of a call write the same dK
  // or dV), each of at most what a scratch of kAttentionScratchBytes holds
  // at `bytes_per_score` per score. The scratch (workspace) holds
  // batch_scores = batch x seq^2 scores.
  template <typename Body>
  Status ForBackwardBatches(const AttentionShape& s, size_t bytes_per_score, Body&& body) {
    const int64_t ss = s.seq * s.seq;
    const int64_t most = PairsPerCall(s, ss, kAttentionScratchBytes, bytes_per_score);
    const size_t elements =
        (static_cast<size_t>(most * ss) * bytes_per_score + sizeof(float) - 1) / sizeof(float);
    float* scratch = nullptr;
    ASSIGN_OR_RETURN(scratch,
                     Allocate(elements, BufferClass::kWorkspace, Fill::kUndefined, Storage::kFp32));
    const double scratch_bytes = static_cast<double>(elements) * sizeof(float);
    memory().Charge(BufferClass::kWorkspace, scratch_bytes);
    const Status status = ForAttentionBatches(
        s, most, [&](const AttentionBatch& b) { return body(b, scratch, most * ss); });
    Free(scratch, elements);
    memory().Release(BufferClass::kWorkspace, scratch_bytes);
    return status;
  }

  Status OutOfMemory(size_t bytes) const {
    size_t free_bytes = 0, total_bytes = 0;
    (void)cudaMemGetInfo(&free_bytes, &total_bytes);
    return ResourceExhaustedError(
        GpuErrorWhere(__FILE__, __LINE__) + ": GPU " + std::to_string(gpu_) +
        " is out of memory: asked for " + std::to_string(MegaBytes(bytes)) + " MB with " +
        std::to_string(MegaBytes(free_bytes)) + " MB free of " +
        std::to_string(MegaBytes(total_bytes)) + " MB (this rank holds " +
        std::to_string(memory().current_bytes() / 1e6) +
        " MB); plan a smaller micro-batch, more recomputation or more GPUs");
  }

  // The result of an allocation of `bytes`: out of memory is
  // ResourceExhausted (the error is not sticky: cleared so the caller can
  // report), any other error Internal.
  Status Allocated(cudaError_t e, size_t bytes) const {
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return OutOfMemory(bytes);
    }
    CUDACHECK(e);
    return Status::Ok();
  }

  // cudaMalloc outside the stream-ordered pool (long-lived buffers).
  Status AllocateRaw(size_t bytes, void** p) { return Allocated(cudaMalloc(p, bytes), bytes); }

  // Grows a long-lived scratch buffer (tracked as workspace) to `bytes`.
  Status Reserve(void** buffer, size_t* capacity, size_t bytes) {
    if (bytes <= *capacity) return Status::Ok();
    if (*buffer != nullptr) {
      // Kernels queued on the compute stream may still read it.
      RETURN_IF_ERROR(Wait(compute_, "scratch resize"));
      CUDACHECK(cudaFree(*buffer));
      *buffer = nullptr;
      memory().Release(BufferClass::kWorkspace, static_cast<double>(*capacity));
      *capacity = 0;
    }
    RETURN_IF_ERROR(AllocateRaw(bytes, buffer));
    *capacity = bytes;
    memory().Charge(BufferClass::kWorkspace, static_cast<double>(bytes));
    return Status::Ok();
  }

  // Host token ids or labels to the device. The copy is ordered on the
  // compute stream before the kernel that reads them and after any kernel
  // that read the previous ids.
  StatusOr<const int32_t*> Upload(const int32_t* host, int64_t rows) {
    const size_t bytes = static_cast<size_t>(rows) * sizeof(int32_t);
    RETURN_IF_ERROR(Reserve(&ints_, &ints_capacity_, bytes));
    CUDACHECK(cudaMemcpyAsync(ints_, host, bytes, cudaMemcpyHostToDevice, compute_));
    // Pageable host memory: the copy is staged before cudaMemcpyAsync
    // returns, but waiting keeps `host` (a short-lived vector) obviously safe.
    RETURN_IF_ERROR(Wait(compute_, "copy of token ids"));
    return static_cast<const int32_t*>(ints_);
  }

  // A bf16 copy of the `span` elements at `p` for a GEMM operand: inside
  // a weights buffer, its bf16 copy (converted whole after any write to the
  // buffer, so once per optimizer step or parameter all-gather, not per
  // GEMM); anything else converted into operand scratch `slot` (0 for A, 1
  // for B; the compute stream orders a GEMM's reads before the next
  // conversion).
  StatusOr<const void*> Bf16Operand(const float* p, size_t span, int slot) {
    if (Narrow(p)) {  // stored in bf16 already: no conversion
      ASSIGN_OR_RETURN(const Typed t, At(p, span));
      return static_cast<const void*>(t.p);
    }
    // A read-only copy written since BeginReadOnly (EndReadOnly reports
    // it) is not read: the slice is converted afresh below.
    if (const auto* m = mirrors_.Find(p, span); m != nullptr && !m->stale) {
      return static_cast<const void*>(reinterpret_cast<const char*>(m->copy.data()) +
                                      m->Offset(p) * 2);
    }
    if (auto* w = weight_copies_.Find(p, span)) {
      if (w->copy == nullptr) {
        const size_t bytes = w->elements * 2;
        const Status allocated = Allocated(cudaMallocAsync(&w->copy, bytes, compute_), bytes);
        if (!allocated.ok()) {
          w->copy = nullptr;
          return allocated;
        }
        memory().Charge(BufferClass::kWeights, static_cast<double>(bytes));
        w->stale = true;
      }
      if (w->stale) {
        RETURN_IF_ERROR(
            TimedOp(kOpConvert, [&] { return ToBf16(w->base, w->elements, w->copy, compute_); }));
        w->stale = false;
      }
      return static_cast<const void*>(static_cast<const char*>(w->copy) + w->Offset(p) * 2);
    }
    RETURN_IF_ERROR(Reserve(&operand_[slot], &operand_capacity_[slot], span * 2));
    RETURN_IF_ERROR(
        TimedOp(kOpConvert, [&] { return ToBf16(p, span, operand_[slot], compute_); }));
    return static_cast<const void*>(operand_[slot]);
  }

  // --- Per-operation timing (PACER_GPU_OP_TIMES=1): CUDA events around
  // each operation on the compute stream, summed by kind at Synchronize
  // (after the first step, which includes warm-up) and printed to stderr
  // when the device is destroyed. Gaps between operations (the GPU
  // waiting for the host) belong to no kind: the step time minus the sum.
  struct OpSpan {
    int kind = 0;
    cudaEvent_t start = nullptr, end = nullptr;
  };
  StatusOr<cudaEvent_t> PooledEvent() {
    if (!op_event_pool_.empty()) {
      cudaEvent_t e = op_event_pool_.back();
      op_event_pool_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    CUDACHECK(cudaEventCreate(&e));
    return e;
  }
  Status BeginOp(int kind, OpSpan* span) {
    span->kind = kind;
    ASSIGN_OR_RETURN(span->start, PooledEvent());
    ASSIGN_OR_RETURN(span->end, PooledEvent());
    CUDACHECK(cudaEventRecord(span->start, compute_));
    return Status::Ok();
  }
  Status EndOp(const OpSpan& span) {
    CUDACHECK(cudaEventRecord(span.end, compute_));
    op_spans_.push_back(span);
    return Status::Ok();
  }
  template <typename F>
  Status TimedOp(int kind, F&& f) {
    RETURN_IF_ERROR(Usable());
    if (!switches_.op_times) return f();
    OpSpan span;
    RETURN_IF_ERROR(BeginOp(kind, &span));
    RETURN_IF_ERROR(f());
    return EndOp(span);
  }
  void PrintOpTimes() const {
    double total = 0;
    for (const double t : op_seconds_) total += t;
    const double steps = std::max<int64_t>(timed_steps_, 1);
    std::fprintf(stderr, "pacer-worker gpu op_times: %lld steps after the first, %.4f s per step in "
                         "timed operations\n",
                 static_cast<long long>(timed_steps_), total / steps);
    for (int k = 0; k < kOpKinds; ++k) {
      std::fprintf(stderr, "pacer-worker gpu op_times: %-15s %9.4f s per step  %5.1f%%\n",
                   kOpNames[k], op_seconds_[k] / steps,
                   total > 0 ? 100.0 * op_seconds_[k] / total : 0.0);
    }
  }
  // Marks RawGemm calls inside the attention core as attention GEMMs.
  // Scopes nest (AttentionForward runs the unfused walk, whose
  // BatchedGemm opens its own): each restores the mark it found.
  class AttentionScope {
   public:
    explicit AttentionScope(GpuDevice* d) : d_(d), outer_(d->in_attention_) {
      d_->in_attention_ = true;
    }
    ~AttentionScope() { d_->in_attention_ = outer_; }
    AttentionScope(const AttentionScope&) = delete;
    AttentionScope& operator=(const AttentionScope&) = delete;

   private:
    GpuDevice* d_;
    bool outer_;
  };

  // cuDNN's SDPA for shape `s` (ChooseFusedAttention asks only for a
  // full-attention bf16 shape): on success sdpa_ holds its plans.
  CudnnProbe AskCudnn(const AttentionShape& s) {
    CudnnProbe answer;
#if PACER_HAVE_CUDNN
    StatusOr<std::unique_ptr<CudnnAttention>> sdpa = CudnnAttention::Create(s, compute_);
    if (!sdpa.ok()) {
      answer.refusal = sdpa.status().message();
      return answer;
    }
    sdpa_ = std::move(*sdpa);
    sdpa_layout_ = *SdpaLayoutFor(s);  // Create checked it
    // One forward and backward on zeros now: an engine that plans but
    // refuses to run on this GPU shows here, before the first step, and the
    // worker keeps the tiled path instead of failing the job. The trial's
    // buffers are not the step's: they leave no peak in the tracker.
    const MemoryTracker before = memory();
    const Status probe = ProbeCudnnAttention(s);
    memory().ForgetPeaksSince(before);
    if (!probe.ok()) {
      sdpa_.reset();
      answer.refusal = "cuDNN's SDPA failed its trial run: " + probe.message();
      return answer;
    }
    answer.has_backward = sdpa_->has_backward();
    answer.backward_refusal = sdpa_->backward_refusal();
    answer.version = CudnnAttention::LibraryVersion();
#else
    (void)s;
    answer.refusal = "pacer-worker was built without cuDNN";
#endif
    return answer;
  }
#if PACER_HAVE_CUDNN
  Status ProbeCudnnAttention(const AttentionShape& s) {
    const auto ctx_elems = static_cast<size_t>(s.CtxElements());
    const auto qkv_elems = static_cast<size_t>(s.QkvElements());
    DeviceBuffer qkv(this, BufferClass::kWorkspace), ctx(this, BufferClass::kWorkspace),
        lse(this, BufferClass::kWorkspace), dctx(this, BufferClass::kWorkspace),
        dqkv(this, BufferClass::kWorkspace);
    RETURN_IF_ERROR(qkv.Assign(qkv_elems));
    RETURN_IF_ERROR(ctx.Assign(ctx_elems));
    RETURN_IF_ERROR(lse.Assign(static_cast<size_t>(s.RowElements())));
    RETURN_IF_ERROR(dctx.Assign(ctx_elems));
    RETURN_IF_ERROR(dqkv.Assign(qkv_elems));
    // The trial's FLOPs are not a step's, whatever happens.
    const DeviceCounters before = counters_;
    // cuDNN's own calls, not the public dispatch: this runs while
    // HasOnChipAttention is still deciding (its choice is not made yet, so
    // the dispatch would send the trial to the tiled path's refusal).
    const Status enqueued = [&]() -> Status {
      RETURN_IF_ERROR(CudnnAttentionForward(s, qkv.data(), lse.data(), ctx.data()));
      if (!sdpa_->has_backward()) return Status::Ok();
      return CudnnAttentionBackward(s, qkv.data(), ctx.data(), lse.data(), dctx.data(),
                                    dqkv.data());
    }();
    counters_ = before;
    RETURN_IF_ERROR(enqueued);
    // A refusal returned by cuDNN's calls above falls back cleanly, but a
    // kernel that failed on the device has most likely left the CUDA
    // context unusable (and Wait has aborted the communicators): that is
    // fatal, with its cause, for every later operation (Usable), rather
    // than a fallback that fails further on with an unrelated message.
    const Status ran = Wait(compute_, "cuDNN attention trial run");
    if (!ran.ok()) {
      fatal_ = "cuDNN's SDPA trial run failed on the device (" + ran.message() +
               "); rerun with PACER_CUDNN_ATTENTION=0 to use the tiled attention";
      std::fprintf(stderr, "pacer-worker gpu: %s\n", fatal_.c_str());
      return InternalError(fatal_);
    }
    return Status::Ok();
  }
  // Bytes of `elements` bf16 values, rounded up to 256 (cuDNN's pointers
  // must be 16-byte aligned; 256 is cudaMalloc's own alignment).
  static size_t AlignedBytes(size_t elements) {
    return (elements * 2 + 255) / 256 * 256;
  }
  static size_t Elements(size_t bytes) { return (bytes + sizeof(float) - 1) / sizeof(float); }
#endif

  // The sticky failure (fatal_) for the entry points: allocation, copies,
  // GEMMs, kernels (TimedOp), collectives and point-to-point, and the
  // end of a step.
  Status Usable() const { return fatal_.empty() ? Status::Ok() : InternalError(fatal_); }

  // bf16 storage of Storage::kCompute buffers: a bf16 plan's, opted into
  // with PACER_GPU_BF16_ACTIVATIONS=1 while it waits for its first GPU
  // measurement.
  bool Bf16Activations() const { return mode_.bf16_operands && switches_.bf16_activations; }

  // A write starting at `p`: marks the bf16 copy of the weights buffer or
  // read-only region holding `p` (if any) stale, and a read-only region's
  // write as the broken promise EndReadOnly reports.
  void Wrote(const float* p) {
    if (mirrors_.Wrote(p) != nullptr) read_only_written_ = true;
    weight_copies_.Wrote(p);
  }

  // Releases the staging buffers of sends that completed.
  Status ReapSends() {
    while (!pending_.empty()) {
      const cudaError_t q = cudaEventQuery(pending_.front().done);
      if (q == cudaErrorNotReady) return Status::Ok();
      CUDACHECK(q);
      memory().Release(BufferClass::kWorkspace, pending_.front().bytes);
      CUDACHECK(cudaEventDestroy(pending_.front().done));
      pending_.pop_front();
    }
    return Status::Ok();
  }

  // Brackets a collective with timing events on `stream`; any failure
  // leaves the communicators aborted (nccl_comms.h).
  template <typename F>
  Status Timed(cudaStream_t stream, F&& f) {
    RETURN_IF_ERROR(Usable());
    while (events_.size() < used_events_ + 2) {
      cudaEvent_t e = nullptr;
      CUDACHECK(cudaEventCreate(&e));
      events_.push_back(e);
    }
    CUDACHECK(cudaEventRecord(events_[used_events_], stream));
    Status s = f();
    if (!s.ok()) {
      comms_.AbortAll();
      return s;
    }
    CUDACHECK(cudaEventRecord(events_[used_events_ + 1], stream));
    used_events_ += 2;
    return Status::Ok();
  }

  Status Wait(cudaStream_t stream, const char* what) {
    return comms_.WaitForStream(stream, Due(), Named(what));
  }
  Deadline Due() const { return Clock::now() + timeout_; }
  std::string Named(const std::string& what) const {
    return what + " (step " + std::to_string(step_) + ")";
  }

  int gpu_ = 0;
  int local_rank_ = 0;
  std::chrono::milliseconds timeout_{300'000};
  GemmMode mode_;
  // The handles of the buffers stored in bf16 (Bf16Activations).
  StorageMap narrow_;
  cudaStream_t compute_ = nullptr;
  cudaStream_t send_[2] = {nullptr, nullptr};  // by PipeDirection
  cublasHandle_t cublas_ = nullptr;
  void* cublas_workspace_ = nullptr;
  void* ints_ = nullptr;  // int32 token ids or labels
  size_t ints_capacity_ = 0;
  void* losses_ = nullptr;
  size_t losses_capacity_ = 0;
  // BeginReadOnly's bf16 copies, until EndReadOnly.
  RegionCopies<DeviceBuffer> mirrors_;
  bool read_only_open_ = false, read_only_written_ = false;
  // bf16 plans: GEMM operand scratch (A, B) and the weights' bf16 copies.
  void* operand_[2] = {nullptr, nullptr};
  size_t operand_capacity_[2] = {0, 0};
  // Each weights buffer's bf16 copy (nullptr until the first GEMM that
  // reads the buffer), by the fp32 buffer's address.
  RegionCopies<void*> weight_copies_;
  // Per-operation timing (switches_.op_times: PACER_GPU_OP_TIMES=1).
  bool in_attention_ = false;
  std::vector<OpSpan> op_spans_;
  std::vector<cudaEvent_t> op_event_pool_;
  std::array<double, kOpKinds> op_seconds_{};
  int64_t synchronized_steps_ = 0, timed_steps_ = 0;
  std::deque<PendingSend> pending_;
  std::vector<cudaEvent_t> events_;  // (start, end) pairs of timed collectives
  size_t used_events_ = 0;
  DeviceCounters counters_;
  int64_t step_ = 0;
  // The on-chip attention (HasOnChipAttention): decided once, for one
  // shape (attention_shape_); cuDNN's paths run on sdpa_'s plans.
  GpuSwitches switches_;  // the environment's (WorkerConfig::gpu), from Connect
  bool attention_decided_ = false;
  bool unfused_logged_ = false;  // AttentionForward's line, once
  FusedAttentionChoice attention_;
  // A failure that left this device unusable (the cuDNN trial run's):
  // every later operation returns it, as Internal (Usable).
  std::string fatal_;
  AttentionShape attention_shape_;
#if PACER_HAVE_CUDNN
  std::unique_ptr<CudnnAttention> sdpa_;
  SdpaLayout sdpa_layout_;
#endif
  // Last member: destroyed first after the destructor body, which has
  // drained the streams.
  NcclCommunicators comms_;
};

}  // namespace

std::unique_ptr<Device> MakeGpuDevice() { return std::make_unique<GpuDevice>(); }

}  // namespace pacer::worker::gpu
