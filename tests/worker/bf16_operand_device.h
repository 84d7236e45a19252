// A test Device: another device (the CPU device) whose GEMMs read their
// operands as the GPU device's do under a bf16 plan on fp32 storage (its
// default, PACER_GPU_BF16_ACTIVATIONS unset; gpu_device.cu Bf16Operand):
// rounded to bf16 (cuBLAS' bf16 inputs; fp32 accumulation and output), and
// taken from where the GPU takes them:
//   - inside a weights buffer: the buffer's rounded copy, kept in a
//     RegionCopies table (core/region_copies.h, the GPU's own) and rounded
//     again only when a write marked it stale;
//   - inside a read-only scope's region (BeginReadOnly): the scope's copy,
//     made at Begin;
//   - anything else: rounded afresh into operand scratch.
// A write marks the copy holding the start of its output stale at the
// entry points where the GPU device calls Wrote: copies, zeroing, host
// copies, GEMM outputs, adds, the optimizer, collectives and receives.
// With `cache` false every operand is rounded afresh, so a cached run and
// an uncached one take the same steps exactly when the executor writes the
// weights only through those entry points; `unmarked` names entry points
// to leave unmarked (a test that the comparison sees a missing mark).
//
// Units: elements. Thread-safety: one device per rank thread; the shared
// Bf16OperandCounts are atomic.
#ifndef PACER_TESTS_WORKER_BF16_OPERAND_DEVICE_H_
#define PACER_TESTS_WORKER_BF16_OPERAND_DEVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/region_copies.h"
#include "forwarding_device.h"
#include "narrow_storage_device.h"  // RoundToBf16

namespace pacer::worker::testing {

// Where the GEMM operands of a run came from, summed over ranks.
struct Bf16OperandCounts {
  std::atomic<int64_t> weight_reads{0};      // operands read from a weights copy
  std::atomic<int64_t> weight_roundings{0};  // weights copies rounded (again)
  std::atomic<int64_t> scope_reads{0};       // operands read from a read-only scope's copy
  std::atomic<int64_t> fresh_roundings{0};   // operands rounded into scratch
};

class Bf16OperandDevice final : public ForwardingDevice {
 public:
  Bf16OperandDevice(std::unique_ptr<Device> inner, bool cache,
                    std::shared_ptr<Bf16OperandCounts> counts, std::set<std::string> unmarked = {})
      : ForwardingDevice(std::move(inner)),
        cache_(cache),
        counts_(std::move(counts)),
        unmarked_(std::move(unmarked)) {}

  StatusOr<float*> Allocate(size_t n, BufferClass c, Fill f, Storage s) override {
    ASSIGN_OR_RETURN(float* p, inner()->Allocate(n, c, f, s));
    if (cache_ && c == BufferClass::kWeights) weights_.Add(p, n);
    return p;
  }
  void Free(float* p, size_t n) override {
    weights_.Remove(p);
    inner()->Free(p, n);
  }

  Status Copy(const float* src, size_t n, float* dst) override {
    Wrote("copy", dst);
    return inner()->Copy(src, n, dst);
  }
  Status Zero(float* p, size_t n) override {
    Wrote("zero", p);
    return inner()->Zero(p, n);
  }
  Status CopyFromHost(const float* h, size_t n, float* d) override {
    Wrote("copy-from-host", d);
    return inner()->CopyFromHost(h, n, d);
  }

  Status Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
              int64_t lda, const float* b, int64_t ldb, float beta, float* c,
              int64_t ldc) override {
    if (m <= 0 || n <= 0 || k <= 0) {
      return inner()->Gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    }
    const float* a16 = Operand(a, StridedMatrixElements(ta ? k : m, ta ? m : k, lda, 0, 1), 0);
    const float* b16 = Operand(b, StridedMatrixElements(tb ? n : k, tb ? k : n, ldb, 0, 1), 1);
    Wrote("gemm", c);
    return inner()->Gemm(ta, tb, m, n, k, alpha, a16, lda, b16, ldb, beta, c, ldc);
  }
  Status BatchedGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                     int64_t lda, int64_t sa, const float* b, int64_t ldb, int64_t sb, float beta,
                     float* c, int64_t ldc, int64_t sc, int64_t batch) override {
    if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) {
      return inner()->BatchedGemm(ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc,
                                  batch);
    }
    const float* a16 = Operand(a, StridedMatrixElements(ta ? k : m, ta ? m : k, lda, sa, batch), 0);
    const float* b16 = Operand(b, StridedMatrixElements(tb ? n : k, tb ? k : n, ldb, sb, batch), 1);
    Wrote("gemm", c);
    return inner()->BatchedGemm(ta, tb, m, n, k, alpha, a16, lda, sa, b16, ldb, sb, beta, c, ldc,
                                sc, batch);
  }
  Status BeginReadOnly(const std::vector<ReadOnlyRegion>& regions) override {
    RETURN_IF_ERROR(inner()->BeginReadOnly(regions));  // a refused scope keeps no copies
    if (cache_) {
      for (const ReadOnlyRegion& r : regions) {
        std::vector<float> rounded(r.data, r.data + r.elements);
        for (float& x : rounded) x = RoundToBf16(x);
        if (auto* scope = scopes_.Add(r.data, r.elements, std::move(rounded))) scope->stale = false;
      }
    }
    return Status::Ok();
  }
  Status EndReadOnly() override {
    scopes_.Clear();
    return inner()->EndReadOnly();
  }

  Status Add(float* y, const float* x, size_t n) override {
    Wrote("add", y);
    return inner()->Add(y, x, n);
  }
  Status AdamWUpdate(float* w, const float* g, float* m, float* v, size_t n, float grad_scale,
                     int64_t step, const AdamWParams& p) override {
    Wrote("optimizer", w);
    return inner()->AdamWUpdate(w, g, m, v, n, grad_scale, step, p);
  }

  Status AllReduce(Group g, float* data, size_t n, const std::string& what) override {
    Wrote("all-reduce", data);
    return inner()->AllReduce(g, data, n, what);
  }
  Status AllGather(Group g, const float* in, float* out, const std::vector<size_t>& counts,
                   const std::string& what) override {
    Wrote("all-gather", out);
    return inner()->AllGather(g, in, out, counts, what);
  }
  Status ReduceScatter(Group g, float* data, float* out, const std::vector<size_t>& counts,
                       const std::string& what) override {
    Wrote("reduce-scatter", data);
    Wrote("reduce-scatter", out);
    return inner()->ReduceScatter(g, data, out, counts, what);
  }
  Status Recv(int peer, PipeDirection d, float* data, size_t n, const std::string& what) override {
    Wrote("receive", data);
    return inner()->Recv(peer, d, data, n, what);
  }

 private:
  void Wrote(const std::string& entry_point, const float* p) {
    if (unmarked_.count(entry_point) != 0) return;
    weights_.Wrote(p);
    scopes_.Wrote(p);
  }
  // The bf16 rounding of the `span` elements at `p`, from where the GPU
  // device reads it (scratch `slot`: 0 for A, 1 for B).
  const float* Operand(const float* p, int64_t span, int slot) {
    const size_t n = static_cast<size_t>(span);
    if (const auto* scope = scopes_.Find(p, n); scope != nullptr && !scope->stale) {
      ++counts_->scope_reads;
      return scope->copy.data() + scope->Offset(p);
    }
    if (auto* w = weights_.Find(p, n)) {
      if (w->stale) {
        w->copy.assign(w->base, w->base + w->elements);
        for (float& x : w->copy) x = RoundToBf16(x);
        w->stale = false;
        ++counts_->weight_roundings;
      }
      ++counts_->weight_reads;
      return w->copy.data() + w->Offset(p);
    }
    std::vector<float>& scratch = scratch_[slot];
    scratch.assign(p, p + n);
    for (float& x : scratch) x = RoundToBf16(x);
    ++counts_->fresh_roundings;
    return scratch.data();
  }

  bool cache_;
  std::shared_ptr<Bf16OperandCounts> counts_;
  std::set<std::string> unmarked_;
  RegionCopies<std::vector<float>> weights_;  // the weights' rounded copies
  RegionCopies<std::vector<float>> scopes_;   // the read-only scope's
  std::vector<float> scratch_[2];
};

}  // namespace pacer::worker::testing

#endif  // PACER_TESTS_WORKER_BF16_OPERAND_DEVICE_H_
