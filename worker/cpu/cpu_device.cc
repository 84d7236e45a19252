#include "cpu/cpu_device.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <new>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "core/region_copies.h"
#include "cpu/cpu_kernels.h"
#include "cpu/gloo_comms.h"

namespace pacer::worker::cpu {
namespace {

using Clock = std::chrono::steady_clock;

Stream StreamOf(PipeDirection d) {
  return d == PipeDirection::kForward ? Stream::kForward : Stream::kBackward;
}

class CpuDevice final : public Device {
 public:
  const char* name() const override { return "cpu"; }

  Status CheckPlan(const WorkerConfig& c) const override {
    if (c.precision == planner::Precision::kFp8) {
      return InvalidArgumentError(
          "the CPU backend cannot run fp8 GEMMs: plan this job in bf16 or fp32 for the CPU "
          "(PACER_PRECISION), or run it on GPUs");
    }
    return Status::Ok();
  }

  Status Connect(const BackendContext& context) override {
    const WorkerConfig& c = *context.config;
    RETURN_IF_ERROR(CheckPlan(c));
    // Process-wide, so the same on every rank of this process: the cores
    // shared by the local ranks.
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    const int blas_threads = std::max(1, static_cast<int>(cores) / std::max(1, c.local_world_size));
    // Only when it changes: ranks sharing a process set the same value, and a
    // change while another rank is inside sgemm would not be safe.
    if (openblas_get_num_threads() != blas_threads) openblas_set_num_threads(blas_threads);
    if (context.local_rank == 0 && c.precision != planner::Precision::kFp32) {
      std::fprintf(stderr,
                   "pacer-worker cpu: the plan's %s GEMMs run in fp32 (OpenBLAS sgemm) and are "
                   "reported as fp32; bus bytes are counted at the plan's precision\n",
                   planner::PrecisionName(c.precision));
    }
    ASSIGN_OR_RETURN(comms_,
                     GlooComms::Connect(c, context.global_rank, context.store, context.timeout));
    return Status::Ok();
  }

  planner::Precision ExecutedPrecision(planner::Precision) const override {
    return planner::Precision::kFp32;
  }

  StatusOr<float*> Allocate(size_t elements, BufferClass, Fill fill, Storage) override {
    float* p = new (std::nothrow) float[elements];
    if (p == nullptr) {
      return ResourceExhaustedError("cannot allocate " +
                                    std::to_string(static_cast<double>(elements) * 4 / 1e6) +
                                    " MB of host memory");
    }
    // Undefined memory is NaN here, so a read before the caller's write
    // poisons the loss and the gradients that the tests check.
    std::fill_n(p, elements,
                fill == Fill::kZeros ? 0.0f : std::numeric_limits<float>::quiet_NaN());
    return p;
  }
  void Free(float* p, size_t) override { delete[] p; }

  Status Copy(const float* src, size_t n, float* dst) override {
    if (n > 0) std::memmove(dst, src, n * sizeof(float));
    return Status::Ok();
  }
  Status Zero(float* p, size_t n) override {
    if (n > 0) std::fill_n(p, n, 0.0f);
    return Status::Ok();
  }
  Status CopyToHost(const float* src, size_t n, float* host) override { return Copy(src, n, host); }
  Status CopyFromHost(const float* host, size_t n, float* dst) override {
    return Copy(host, n, dst);
  }

  Status Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
              const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
              int64_t ldc) override {
    Sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, &counters_.gemm_flops);
    return Status::Ok();
  }

  // The unfused attention: Device's default (tiled_attention.h's
  // UnfusedAttentionForward over BatchedGemm and SoftmaxRows below).

  Status BatchedGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const float* a, int64_t lda, int64_t stride_a, const float* b, int64_t ldb,
                     int64_t stride_b, float beta, float* c, int64_t ldc, int64_t stride_c,
                     int64_t batch) override {
    if (batch > 1 && stride_c == 0) {
      return InternalError("a batched GEMM writes the same output block twice");
    }
    for (int64_t i = 0; i < batch; ++i) {
      Sgemm(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta,
            c + i * stride_c, ldc, &counters_.gemm_flops);
    }
    return Status::Ok();
  }
  Status SoftmaxRows(float* x, int64_t rows, int64_t cols, float scale,
                     const CausalRows& mask) override {
    SoftmaxRowsInPlace(x, rows, cols, scale, mask);
    return Status::Ok();
  }
  Status SoftmaxBackward(const float* p, float* dp, int64_t rows, int64_t cols,
                         float scale) override {
    SoftmaxBackwardInPlace(p, dp, rows, cols, scale);
    return Status::Ok();
  }

  // The promise is checked, not used: a hash of each region's bytes at
  // the start, compared at the end (one pass over memory that the GEMMs in
  // between read many times over anyway).
  Status BeginReadOnly(const std::vector<ReadOnlyRegion>& regions) override {
    if (read_only_open_) return InternalError("CPU device: BeginReadOnly nested");
    // The GPU device keeps one bf16 copy per region, found by address.
    RegionCopies<bool> seen;
    for (const ReadOnlyRegion& r : regions) {
      if (seen.Overlaps(r.data, r.elements)) {
        return InternalError("CPU device: BeginReadOnly's regions overlap");
      }
      seen.Add(r.data, r.elements);
    }
    read_only_open_ = true;
    for (const ReadOnlyRegion& r : regions) read_only_.push_back({r, HashOf(r)});
    return Status::Ok();
  }
  Status EndReadOnly() override {
    std::vector<std::pair<ReadOnlyRegion, size_t>> regions;
    regions.swap(read_only_);
    read_only_open_ = false;
    for (size_t i = 0; i < regions.size(); ++i) {
      if (HashOf(regions[i].first) != regions[i].second) {
        return InternalError("CPU device: read-only region " + std::to_string(i) + " (" +
                             std::to_string(regions[i].first.elements) +
                             " elements) was written between BeginReadOnly and EndReadOnly");
      }
    }
    return Status::Ok();
  }

  Status RmsNormForward(const float* x, int64_t rows, int64_t cols, float* y,
                        float* inv_rms) override {
    cpu::RmsNormForward(x, rows, cols, y, inv_rms);
    return Status::Ok();
  }
  Status RmsNormBackward(const float* x, const float* inv_rms, const float* dy, int64_t rows,
                         int64_t cols, float* dx) override {
    cpu::RmsNormBackward(x, inv_rms, dy, rows, cols, dx);
    return Status::Ok();
  }
  Status GeluForward(const float* x, size_t n, float* y) override {
    cpu::GeluForward(x, n, y);
    return Status::Ok();
  }
  Status GeluBackward(const float* x, const float* dy, size_t n, float* dx) override {
    cpu::GeluBackward(x, dy, n, dx);
    return Status::Ok();
  }
  Status SwigluForward(const float* in, int64_t rows, int64_t f, float* out) override {
    cpu::SwigluForward(in, rows, f, out);
    return Status::Ok();
  }
  Status SwigluBackward(const float* in, const float* dout, int64_t rows, int64_t f,
                        float* din) override {
    cpu::SwigluBackward(in, dout, rows, f, din);
    return Status::Ok();
  }
  Status Add(float* y, const float* x, size_t n) override {
    AddInPlace(y, x, n);
    return Status::Ok();
  }
  Status EmbeddingForward(const float* table, const int32_t* tokens, int64_t rows, int64_t cols,
                          float* out) override {
    const size_t width = static_cast<size_t>(cols);
    for (int64_t i = 0; i < rows; ++i) {
      if (tokens[i] < 0) {
        std::fill_n(out + i * cols, width, 0.0f);
      } else {
        std::memcpy(out + i * cols, table + static_cast<int64_t>(tokens[i]) * cols,
                    width * sizeof(float));
      }
    }
    return Status::Ok();
  }
  Status EmbeddingBackward(const float* dout, const int32_t* tokens, int64_t rows, int64_t cols,
                           float* table_grad) override {
    for (int64_t i = 0; i < rows; ++i) {
      if (tokens[i] < 0) continue;
      AddInPlace(table_grad + static_cast<int64_t>(tokens[i]) * cols, dout + i * cols,
                 static_cast<size_t>(cols));
    }
    return Status::Ok();
  }
  Status LogitRowStats(const float* logits, const int32_t* labels, int64_t rows, int64_t cols,
                       float* stats) override {
    cpu::LogitRowStats(logits, labels, rows, cols, stats);
    return Status::Ok();
  }
  StatusOr<double> CrossEntropyGradInPlace(float* logits, const int32_t* labels, int64_t rows,
                                           int64_t cols, float grad_scale,
                                           const float* row_lse) override {
    return cpu::CrossEntropyGradInPlace(logits, labels, rows, cols, grad_scale, row_lse);
  }
  Status AdamWUpdate(float* w, const float* g, float* m, float* v, size_t n, float grad_scale,
                     int64_t step, const AdamWParams& p) override {
    cpu::AdamWUpdate(w, g, m, v, n, grad_scale, step, p);
    return Status::Ok();
  }

  Status AllReduce(Group g, float* data, size_t n, const std::string& what) override {
    return Timed([&] { return comms_->AllReduce(g, data, n, what); });
  }
  Status AllGather(Group g, const float* in, float* out, const std::vector<size_t>& counts,
                   const std::string& what) override {
    return Timed([&] { return comms_->AllGather(g, in, out, counts, what); });
  }
  Status ReduceScatter(Group g, float* data, float* out, const std::vector<size_t>& counts,
                       const std::string& what) override {
    return Timed([&] { return comms_->ReduceScatter(g, data, out, counts, what); });
  }
  Status Send(int peer, PipeDirection d, const float* data, size_t n,
              const std::string& what) override {
    return Timed([&] { return comms_->Send(peer, StreamOf(d), data, n, what); });
  }
  Status Recv(int peer, PipeDirection d, float* data, size_t n, const std::string& what) override {
    return Timed([&] { return comms_->Recv(peer, StreamOf(d), data, n, what); });
  }
  Status FlushSends() override {
    return Timed([&] { return comms_->FlushSends(); });
  }
  void SetStep(int64_t step) override {
    if (comms_) comms_->SetStep(step);
  }
  void Abort() override {
    if (comms_) comms_->Abort();
  }

  Status Synchronize() override { return Status::Ok(); }  // the host is synchronous
  DeviceCounters counters() const override { return counters_; }
  void ResetCounters() override { counters_ = DeviceCounters(); }

 private:
  // Wall time of a collective counts as collective time.
  template <typename F>
  Status Timed(F&& f) {
    if (!comms_) return FailedPreconditionError("the CPU device is not connected");
    const Clock::time_point start = Clock::now();
    Status s = f();
    counters_.collective_seconds += std::chrono::duration<double>(Clock::now() - start).count();
    return s;
  }

  static size_t HashOf(const ReadOnlyRegion& r) {
    return std::hash<std::string_view>()(
        std::string_view(reinterpret_cast<const char*>(r.data), r.elements * sizeof(float)));
  }

  std::unique_ptr<GlooComms> comms_;
  DeviceCounters counters_;
  std::vector<std::pair<ReadOnlyRegion, size_t>> read_only_;  // regions and their hashes
  bool read_only_open_ = false;
};

}  // namespace

std::unique_ptr<Device> MakeCpuDevice() { return std::make_unique<CpuDevice>(); }

}  // namespace pacer::worker::cpu
