// A test Device: another device (the CPU device) whose Storage::kCompute
// buffers behave, value for value, as the GPU device's bf16 activations
// and weights (PACER_GPU_BF16_ACTIVATIONS=1, gpu_device.h): every such buffer holds
// bf16 values (rounded to nearest even after each operation that writes
// it, as a GPU kernel or cuBLAS rounds at its store), and ElementBytes
// says 2, so the tracker charges what the GPU would. It also checks where
// the executor sends those buffers, against the GPU device's kernels:
//   - GEMMs, copies, adds, the attention's Q/K/V, context and their
//     gradients, RMS norm's input, output and output gradient, the
//     activations (all operands narrow or none) and the embedding's table
//     have narrow kernels;
//   - statistics (1/rms, logsumexp, the probabilities' stash), the
//     residual gradient RMS norm accumulates into, the embedding's output
//     and gradients, the loss, the optimizer (the master weights are fp32)
//     and the softmax of the tiled attention have none
//     (the GPU device would convert through fp32 views: a violation here);
//   - a GEMM that accumulates (beta != 0) into a narrow buffer would
//     round the sum at every step (the tiled backward's dK and dV over 16
//     tiles): a violation;
//   - collectives over more than one rank run through fp32 views on the
//     GPU: counted, not a violation (tensor parallelism's known cost).
//
// Units: elements; bytes from ElementBytes. Thread-safety: one device per
// rank thread; the shared NarrowLog is locked.
#ifndef PACER_TESTS_WORKER_NARROW_STORAGE_DEVICE_H_
#define PACER_TESTS_WORKER_NARROW_STORAGE_DEVICE_H_

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "forwarding_device.h"

namespace pacer::worker::testing {

// What the devices of a run saw, summed over ranks.
struct NarrowLog {
  std::mutex mu;
  std::map<std::string, int64_t> narrow_calls;  // entry point -> calls with a narrow operand
  std::set<std::string> violations;             // each kind once
  int64_t collective_views = 0;                 // multi-rank collectives on narrow buffers

  void Count(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    ++narrow_calls[what];
  }
  void Violation(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    violations.insert(what);
  }
  void CollectiveView() {
    std::lock_guard<std::mutex> lock(mu);
    ++collective_views;
  }
};

// x rounded to the nearest bf16 value (ties to even), as __float2bfloat16_rn.
inline float RoundToBf16(float x) {
  uint32_t u = 0;
  std::memcpy(&u, &x, sizeof(u));
  if ((u & 0x7f800000u) == 0x7f800000u) return x;  // inf and NaN unchanged
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  float y = 0;
  std::memcpy(&y, &u, sizeof(y));
  return y;
}

class NarrowStorageDevice final : public ForwardingDevice {
 public:
  NarrowStorageDevice(std::unique_ptr<Device> inner, std::shared_ptr<NarrowLog> log)
      : ForwardingDevice(std::move(inner)), log_(std::move(log)) {}

  Status Connect(const BackendContext& c) override {
    if (c.config != nullptr) {
      group_size_[static_cast<int>(Group::kTensor)] = c.config->tensor_parallel;
      group_size_[static_cast<int>(Group::kData)] = c.config->data_parallel;
      group_size_[static_cast<int>(Group::kPipeline)] = c.config->pipeline_parallel;
    }
    return inner()->Connect(c);
  }

  size_t ElementBytes(Storage s) const override { return s == Storage::kCompute ? 2 : 4; }
  StatusOr<float*> Allocate(size_t n, BufferClass c, Fill f, Storage s) override {
    ASSIGN_OR_RETURN(float* p, inner()->Allocate(n, c, f, Storage::kFp32));
    if (s == Storage::kCompute && n > 0) narrow_[p] = n;
    return p;
  }
  void Free(float* p, size_t n) override {
    narrow_.erase(p);
    inner()->Free(p, n);
  }

  Status Copy(const float* src, size_t n, float* dst) override {
    Note("copy", {src, dst});
    return Rounded(inner()->Copy(src, n, dst), {dst});
  }
  Status CopyFromHost(const float* h, size_t n, float* d) override {
    return Rounded(inner()->CopyFromHost(h, n, d), {d});
  }

  Status Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
              int64_t lda, const float* b, int64_t ldb, float beta, float* c,
              int64_t ldc) override {
    Note("gemm", {a, b, c});
    if (beta != 0.0f && Narrow(c)) Violate("a GEMM accumulates into a narrow buffer");
    return Rounded(inner()->Gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc), {c});
  }
  Status BatchedGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                     int64_t lda, int64_t sa, const float* b, int64_t ldb, int64_t sb, float beta,
                     float* c, int64_t ldc, int64_t sc, int64_t batch) override {
    Note("gemm", {a, b, c});
    if (beta != 0.0f && Narrow(c)) Violate("a batched GEMM accumulates into a narrow buffer");
    return Rounded(inner()->BatchedGemm(ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c,
                                        ldc, sc, batch),
                   {c});
  }
  Status AttentionForward(const AttentionShape& s, const float* qkv, float* probs,
                          float* ctx) override {
    Note("attention", {qkv, ctx});
    Forbid("the probabilities' stash", {probs});
    return Rounded(inner()->AttentionForward(s, qkv, probs, ctx), {ctx});
  }
  Status AttentionBackward(const AttentionShape& s, const float* qkv, float* probs,
                           const float* dctx, float* dqkv) override {
    Note("attention", {qkv, dctx, dqkv});
    Forbid("the probabilities' stash", {probs});
    return Rounded(inner()->AttentionBackward(s, qkv, probs, dctx, dqkv), {dqkv});
  }
  Status OnChipAttentionForward(const AttentionShape& s, const float* qkv, float* lse,
                                float* ctx) override {
    Note("attention", {qkv, ctx});
    Forbid("the logsumexp", {lse});
    return Rounded(inner()->OnChipAttentionForward(s, qkv, lse, ctx), {ctx});
  }
  Status OnChipAttentionBackward(const AttentionShape& s, const float* qkv, const float* ctx,
                                 const float* lse, const float* dctx, float* dqkv) override {
    Note("attention", {qkv, ctx, dctx, dqkv});
    Forbid("the logsumexp", {lse});
    return Rounded(inner()->OnChipAttentionBackward(s, qkv, ctx, lse, dctx, dqkv), {dqkv});
  }
  Status SoftmaxRows(float* x, int64_t rows, int64_t cols, float scale,
                     const CausalRows& mask) override {
    Forbid("the tiled softmax", {x});
    return inner()->SoftmaxRows(x, rows, cols, scale, mask);
  }
  Status SoftmaxBackward(const float* p, float* dp, int64_t rows, int64_t cols,
                         float scale) override {
    Forbid("the tiled softmax backward", {p, dp});
    return inner()->SoftmaxBackward(p, dp, rows, cols, scale);
  }

  Status RmsNormForward(const float* x, int64_t rows, int64_t cols, float* y, float* inv) override {
    Note("rms-norm", {x, y});
    Forbid("RMS norm's statistics", {inv});
    return Rounded(inner()->RmsNormForward(x, rows, cols, y, inv), {y});
  }
  Status RmsNormBackward(const float* x, const float* inv, const float* dy, int64_t rows,
                         int64_t cols, float* dx) override {
    Note("rms-norm", {x, dy});
    Forbid("RMS norm's statistics or input gradient", {inv, dx});
    return inner()->RmsNormBackward(x, inv, dy, rows, cols, dx);
  }
  Status GeluForward(const float* x, size_t n, float* y) override {
    Same("gelu", {x, y});
    return Rounded(inner()->GeluForward(x, n, y), {y});
  }
  Status GeluBackward(const float* x, const float* dy, size_t n, float* dx) override {
    Same("gelu", {x, dy, dx});
    return Rounded(inner()->GeluBackward(x, dy, n, dx), {dx});
  }
  Status SwigluForward(const float* in, int64_t rows, int64_t f, float* out) override {
    Same("swiglu", {in, out});
    return Rounded(inner()->SwigluForward(in, rows, f, out), {out});
  }
  Status SwigluBackward(const float* in, const float* dout, int64_t rows, int64_t f,
                        float* din) override {
    Same("swiglu", {in, dout, din});
    return Rounded(inner()->SwigluBackward(in, dout, rows, f, din), {din});
  }
  Status Add(float* y, const float* x, size_t n) override {
    Note("add", {y, x});
    return Rounded(inner()->Add(y, x, n), {y});
  }
  Status EmbeddingForward(const float* table, const int32_t* tokens, int64_t rows, int64_t cols,
                          float* out) override {
    Note("embedding", {table});
    Forbid("the embedding's output", {out});
    return inner()->EmbeddingForward(table, tokens, rows, cols, out);
  }
  Status EmbeddingBackward(const float* dout, const int32_t* tokens, int64_t rows, int64_t cols,
                           float* grad) override {
    Forbid("the embedding backward", {dout, grad});
    return inner()->EmbeddingBackward(dout, tokens, rows, cols, grad);
  }
  Status LogitRowStats(const float* logits, const int32_t* labels, int64_t rows, int64_t cols,
                       float* stats) override {
    Forbid("the logits' statistics", {logits, stats});
    return inner()->LogitRowStats(logits, labels, rows, cols, stats);
  }
  StatusOr<double> CrossEntropyGradInPlace(float* logits, const int32_t* labels, int64_t rows,
                                           int64_t cols, float grad_scale,
                                           const float* row_lse) override {
    Forbid("the cross-entropy", {logits, row_lse});
    return inner()->CrossEntropyGradInPlace(logits, labels, rows, cols, grad_scale, row_lse);
  }
  Status AdamWUpdate(float* w, const float* g, float* m, float* v, size_t n, float grad_scale,
                     int64_t step, const AdamWParams& p) override {
    Forbid("the optimizer", {w, g, m, v});
    return inner()->AdamWUpdate(w, g, m, v, n, grad_scale, step, p);
  }

  Status AllReduce(Group g, float* data, size_t n, const std::string& what) override {
    Collective(g, {data});
    return Rounded(inner()->AllReduce(g, data, n, what), {data});
  }
  Status AllGather(Group g, const float* in, float* out, const std::vector<size_t>& counts,
                   const std::string& what) override {
    Collective(g, {in, out});
    return Rounded(inner()->AllGather(g, in, out, counts, what), {out});
  }
  Status ReduceScatter(Group g, float* data, float* out, const std::vector<size_t>& counts,
                       const std::string& what) override {
    Collective(g, {data, out});
    return Rounded(inner()->ReduceScatter(g, data, out, counts, what), {out});
  }
  Status Send(int peer, PipeDirection d, const float* data, size_t n,
              const std::string& what) override {
    Note("send", {data});  // the GPU device's staging copy converts
    return inner()->Send(peer, d, data, n, what);
  }
  Status Recv(int peer, PipeDirection d, float* data, size_t n, const std::string& what) override {
    Collective(Group::kPipeline, {data});
    return Rounded(inner()->Recv(peer, d, data, n, what), {data});
  }

 private:
  // The narrow buffer holding p, if any: its start and elements.
  std::pair<float*, size_t> Holder(const float* p) const {
    if (p == nullptr || narrow_.empty()) return {nullptr, 0};
    auto it = narrow_.upper_bound(const_cast<float*>(p));
    if (it == narrow_.begin()) return {nullptr, 0};
    --it;
    if (p >= it->first + it->second) return {nullptr, 0};
    return *it;
  }
  bool Narrow(const float* p) const { return Holder(p).first != nullptr; }
  bool AnyNarrow(std::initializer_list<const float*> ps) const {
    for (const float* p : ps) {
      if (Narrow(p)) return true;
    }
    return false;
  }
  void Note(const char* what, std::initializer_list<const float*> ps) {
    if (AnyNarrow(ps)) log_->Count(what);
  }
  void Violate(const std::string& what) { log_->Violation(what); }
  void Forbid(const char* what, std::initializer_list<const float*> ps) {
    if (AnyNarrow(ps)) Violate(std::string(what) + " got a narrow buffer");
  }
  // Every operand narrow, or none (the GPU's activation kernels take one type).
  void Same(const char* what, std::initializer_list<const float*> ps) {
    int narrow = 0;
    for (const float* p : ps) narrow += Narrow(p) ? 1 : 0;
    if (narrow == 0) return;
    log_->Count(what);
    if (narrow != static_cast<int>(ps.size())) {
      Violate(std::string(what) + " got narrow and fp32 operands together");
    }
  }
  void Collective(Group g, std::initializer_list<const float*> ps) {
    if (!AnyNarrow(ps)) return;
    log_->Count("collective");
    if (group_size_[static_cast<int>(g)] > 1) log_->CollectiveView();
  }
  // After a successful call, the narrow buffers it wrote hold bf16 values.
  Status Rounded(Status s, std::initializer_list<float*> written) {
    if (!s.ok()) return s;
    for (float* p : written) {
      const auto [base, n] = Holder(p);
      if (base == nullptr) continue;
      for (size_t i = 0; i < n; ++i) base[i] = RoundToBf16(base[i]);
    }
    return s;
  }

  std::shared_ptr<NarrowLog> log_;
  std::map<float*, size_t> narrow_;  // by start: elements
  int group_size_[3] = {1, 1, 1};    // by Group
};

}  // namespace pacer::worker::testing

#endif  // PACER_TESTS_WORKER_NARROW_STORAGE_DEVICE_H_
