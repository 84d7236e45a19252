// A test Device that passes every call to another device (the CPU device):
// the base of the test devices that change a few entry points and leave
// the rest to the device they wrap (narrow_storage_device.h,
// reference_on_chip_device.h, bf16_operand_device.h). A new Device entry
// point is forwarded here once, not in each of them.
//
// Units: those of core/device.h. Thread-safety: that of the wrapped device
// (one rank's thread).
#ifndef PACER_TESTS_WORKER_FORWARDING_DEVICE_H_
#define PACER_TESTS_WORKER_FORWARDING_DEVICE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"

namespace pacer::worker::testing {

class ForwardingDevice : public Device {
 public:
  explicit ForwardingDevice(std::unique_ptr<Device> inner) : in_(std::move(inner)) {}

  const char* name() const override { return in_->name(); }
  Status Connect(const BackendContext& c) override { return in_->Connect(c); }
  planner::Precision ExecutedPrecision(planner::Precision p) const override {
    return in_->ExecutedPrecision(p);
  }

  StatusOr<float*> Allocate(size_t n, BufferClass c, Fill f, Storage s) override {
    return in_->Allocate(n, c, f, s);
  }
  void Free(float* p, size_t n) override { in_->Free(p, n); }
  size_t ElementBytes(Storage s) const override { return in_->ElementBytes(s); }

  Status Copy(const float* src, size_t n, float* dst) override { return in_->Copy(src, n, dst); }
  Status Zero(float* p, size_t n) override { return in_->Zero(p, n); }
  Status CopyToHost(const float* s, size_t n, float* h) override {
    return in_->CopyToHost(s, n, h);
  }
  Status CopyFromHost(const float* h, size_t n, float* d) override {
    return in_->CopyFromHost(h, n, d);
  }

  Status Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
              int64_t lda, const float* b, int64_t ldb, float beta, float* c,
              int64_t ldc) override {
    return in_->Gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  // AttentionForward, AttentionBackward and AttentionStashElements:
  // Device's defaults, the unfused walk over this device's BatchedGemm and
  // softmax below (so a wrapper that changes those sees the unfused
  // attention's calls too) on an fp32 stash of the size that walk fills.
  Status BatchedGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                     int64_t lda, int64_t sa, const float* b, int64_t ldb, int64_t sb, float beta,
                     float* c, int64_t ldc, int64_t sc, int64_t batch) override {
    return in_->BatchedGemm(ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc,
                            batch);
  }
  Status SoftmaxRows(float* x, int64_t rows, int64_t cols, float scale,
                     const CausalRows& mask) override {
    return in_->SoftmaxRows(x, rows, cols, scale, mask);
  }
  Status SoftmaxBackward(const float* p, float* dp, int64_t rows, int64_t cols,
                         float scale) override {
    return in_->SoftmaxBackward(p, dp, rows, cols, scale);
  }
  bool HasOnChipAttention(const AttentionShape& s) override { return in_->HasOnChipAttention(s); }
  Status OnChipAttentionForward(const AttentionShape& s, const float* qkv, float* lse,
                                float* ctx) override {
    return in_->OnChipAttentionForward(s, qkv, lse, ctx);
  }
  Status OnChipAttentionBackward(const AttentionShape& s, const float* qkv, const float* ctx,
                                 const float* lse, const float* dctx, float* dqkv) override {
    return in_->OnChipAttentionBackward(s, qkv, ctx, lse, dctx, dqkv);
  }
  Status BeginReadOnly(const std::vector<ReadOnlyRegion>& regions) override {
    return in_->BeginReadOnly(regions);
  }
  Status EndReadOnly() override { return in_->EndReadOnly(); }

  Status RmsNormForward(const float* x, int64_t rows, int64_t cols, float* y, float* inv) override {
    return in_->RmsNormForward(x, rows, cols, y, inv);
  }
  Status RmsNormBackward(const float* x, const float* inv, const float* dy, int64_t rows,
                         int64_t cols, float* dx) override {
    return in_->RmsNormBackward(x, inv, dy, rows, cols, dx);
  }
  Status GeluForward(const float* x, size_t n, float* y) override {
    return in_->GeluForward(x, n, y);
  }
  Status GeluBackward(const float* x, const float* dy, size_t n, float* dx) override {
    return in_->GeluBackward(x, dy, n, dx);
  }
  Status SwigluForward(const float* in, int64_t rows, int64_t f, float* out) override {
    return in_->SwigluForward(in, rows, f, out);
  }
  Status SwigluBackward(const float* in, const float* dout, int64_t rows, int64_t f,
                        float* din) override {
    return in_->SwigluBackward(in, dout, rows, f, din);
  }
  Status Add(float* y, const float* x, size_t n) override { return in_->Add(y, x, n); }
  Status EmbeddingForward(const float* table, const int32_t* tokens, int64_t rows, int64_t cols,
                          float* out) override {
    return in_->EmbeddingForward(table, tokens, rows, cols, out);
  }
  Status EmbeddingBackward(const float* dout, const int32_t* tokens, int64_t rows, int64_t cols,
                           float* grad) override {
    return in_->EmbeddingBackward(dout, tokens, rows, cols, grad);
  }
  Status LogitRowStats(const float* logits, const int32_t* labels, int64_t rows, int64_t cols,
                       float* stats) override {
    return in_->LogitRowStats(logits, labels, rows, cols, stats);
  }
  StatusOr<double> CrossEntropyGradInPlace(float* logits, const int32_t* labels, int64_t rows,
                                           int64_t cols, float grad_scale,
                                           const float* row_lse) override {
    return in_->CrossEntropyGradInPlace(logits, labels, rows, cols, grad_scale, row_lse);
  }
  Status AdamWUpdate(float* w, const float* g, float* m, float* v, size_t n, float grad_scale,
                     int64_t step, const AdamWParams& p) override {
    return in_->AdamWUpdate(w, g, m, v, n, grad_scale, step, p);
  }

  Status AllReduce(Group g, float* data, size_t n, const std::string& what) override {
    return in_->AllReduce(g, data, n, what);
  }
  Status AllGather(Group g, const float* in, float* out, const std::vector<size_t>& counts,
                   const std::string& what) override {
    return in_->AllGather(g, in, out, counts, what);
  }
  Status ReduceScatter(Group g, float* data, float* out, const std::vector<size_t>& counts,
                       const std::string& what) override {
    return in_->ReduceScatter(g, data, out, counts, what);
  }
  Status Send(int peer, PipeDirection d, const float* data, size_t n,
              const std::string& what) override {
    return in_->Send(peer, d, data, n, what);
  }
  Status Recv(int peer, PipeDirection d, float* data, size_t n, const std::string& what) override {
    return in_->Recv(peer, d, data, n, what);
  }
  Status FlushSends() override { return in_->FlushSends(); }
  void SetStep(int64_t step) override { in_->SetStep(step); }
  void Abort() override { in_->Abort(); }
  Status Synchronize() override { return in_->Synchronize(); }
  DeviceCounters counters() const override { return in_->counters(); }
  void ResetCounters() override { in_->ResetCounters(); }

 protected:
  Device* inner() const { return in_.get(); }

 private:
  std::unique_ptr<Device> in_;
};

}  // namespace pacer::worker::testing

#endif  // PACER_TESTS_WORKER_FORWARDING_DEVICE_H_
