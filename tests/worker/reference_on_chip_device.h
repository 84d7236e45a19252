// A test Device: the CPU device plus an on-chip attention kernel
// (Device::HasOnChipAttention) written as a plain host reference of what
// cuDNN's SDPA and FlashAttention compute: the forward keeps only the
// context and each query row's logsumexp; the backward rebuilds P from Q, K
// and the logsumexp, and takes rowsum(dP * P) as rowsum(dC * C), from the
// forward's context. So a step over it checks the executor's side of the
// on-chip path on the CPU, where no cuDNN runs: that it stashes the
// logsumexp and the context of the right layer and micro-batch through
// every recompute policy and the pipeline, and hands them back unchanged
// (the backward recomputes both from Q, K and V and fails the step on a
// mismatch).
//
// Units: elements; FLOPs as Device says (2 per multiply-add).
// Thread-safety: as the CPU device, one rank's thread.
#ifndef PACER_TESTS_WORKER_REFERENCE_ON_CHIP_DEVICE_H_
#define PACER_TESTS_WORKER_REFERENCE_ON_CHIP_DEVICE_H_

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "forwarding_device.h"

namespace pacer::worker::testing {

// Calls of the on-chip kernel, summed over the devices that share it (one
// per rank thread, hence atomics).
struct OnChipCalls {
  std::atomic<int64_t> forward{0}, backward{0};
};

class ReferenceOnChipDevice final : public ForwardingDevice {
 public:
  // `stash_tolerance`: how far (relative) the stashed context and
  // logsumexp may be from the backward's recomputation of them: rounding
  // only (1e-4 for fp32 storage; a bf16-stored context needs 1e-2), far
  // below what another layer's or micro-batch's would differ by.
  ReferenceOnChipDevice(std::unique_ptr<Device> inner, std::shared_ptr<OnChipCalls> calls,
                        double stash_tolerance = 1e-4)
      : ForwardingDevice(std::move(inner)), calls_(std::move(calls)), tolerance_(stash_tolerance) {}

  bool HasOnChipAttention(const AttentionShape&) override { return true; }

  Status OnChipAttentionForward(const AttentionShape& s, const float* qkv, float* lse,
                                float* ctx) override {
    ++calls_->forward;
    for (int64_t i = 0; i < s.pairs(); ++i) {
      const Pair p = PairOf(s, qkv, i);
      std::vector<double> prob(Size(s.seq));
      for (int64_t r = 0; r < s.seq; ++r) {
        lse[i * s.seq + r] = static_cast<float>(Probabilities(s, p, r, nullptr, &prob));
        for (int64_t c = 0; c < s.head_dim; ++c) {
          double o = 0;
          for (int64_t j = 0; j < s.seq; ++j) o += prob[Size(j)] * p.v[j * p.ld + c];
          ctx[s.Ctx(i) + r * s.ctx_ld() + c] = static_cast<float>(o);
        }
      }
    }
    extra_flops_ += s.OnChipForwardFlops();
    return Status::Ok();
  }

  Status OnChipAttentionBackward(const AttentionShape& s, const float* qkv, const float* ctx,
                                 const float* lse, const float* dctx, float* dqkv) override {
    ++calls_->backward;
    const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
    for (int64_t i = 0; i < s.pairs(); ++i) {
      const Pair p = PairOf(s, qkv, i);
      const int64_t w = p.ld;
      float* dq = dqkv + s.Q(i);
      float* dk = dqkv + s.K(i);
      float* dv = dqkv + s.V(i);
      std::vector<double> prob(Size(s.seq));
      for (int64_t r = 0; r < s.seq; ++r) {
        // P from the stashed logsumexp, which must be the forward's.
        const double stashed = lse[i * s.seq + r];
        const double fresh = Probabilities(s, p, r, &stashed, &prob);
        if (std::fabs(fresh - stashed) > tolerance_ * (1 + std::fabs(fresh))) {
          return InternalError("pair " + std::to_string(i) + " row " + std::to_string(r) +
                               ": the stashed logsumexp " + std::to_string(stashed) +
                               " is not the forward's " + std::to_string(fresh));
        }
        const float* o = ctx + s.Ctx(i) + r * s.ctx_ld();
        const float* d_o = dctx + s.Ctx(i) + r * s.ctx_ld();
        double delta = 0;  // rowsum(dP * P) = rowsum(dO * O)
        for (int64_t c = 0; c < s.head_dim; ++c) {
          double fresh_o = 0;
          for (int64_t j = 0; j < s.seq; ++j) fresh_o += prob[Size(j)] * p.v[j * w + c];
          if (std::fabs(fresh_o - o[c]) > tolerance_ * (1 + std::fabs(fresh_o))) {
            return InternalError("pair " + std::to_string(i) + " row " + std::to_string(r) +
                                 ": the stashed context is not the forward's");
          }
          delta += static_cast<double>(d_o[c]) * o[c];
        }
        for (int64_t j = 0; j < s.seq; ++j) {
          double dp = 0;
          for (int64_t c = 0; c < s.head_dim; ++c) dp += d_o[c] * p.v[j * w + c];
          const double ds = scale * prob[Size(j)] * (dp - delta);
          for (int64_t c = 0; c < s.head_dim; ++c) {
            dv[j * w + c] += static_cast<float>(prob[Size(j)] * d_o[c]);
            dq[r * w + c] += static_cast<float>(ds * p.k[j * w + c]);
            dk[j * w + c] += static_cast<float>(ds * p.q[r * w + c]);
          }
        }
      }
    }
    extra_flops_ += s.OnChipBackwardFlops();
    return Status::Ok();
  }

  // --- Everything else is the wrapped device's (ForwardingDevice), but
  // the FLOPs counted include the on-chip kernel's.
  DeviceCounters counters() const override {
    DeviceCounters c = inner()->counters();
    c.gemm_flops += extra_flops_;
    return c;
  }
  void ResetCounters() override {
    inner()->ResetCounters();
    extra_flops_ = 0;
  }

 private:
  // A pair's Q, K and V, rows `ld` apart.
  struct Pair {
    const float *q, *k, *v;
    int64_t ld;
  };
  static size_t Size(int64_t n) { return static_cast<size_t>(n); }
  static Pair PairOf(const AttentionShape& s, const float* qkv, int64_t i) {
    return {qkv + s.Q(i), qkv + s.K(i), qkv + s.V(i), s.qkv_ld()};
  }
  // Row r's probabilities into *prob, from the logsumexp `given` if any
  // (as an on-chip backward does) or from the scores; returns the
  // logsumexp computed from the scores.
  static double Probabilities(const AttentionShape& s, const Pair& p, int64_t r,
                              const double* given, std::vector<double>* prob) {
    const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
    const int64_t keys = s.causal ? r + 1 : s.seq;  // the causal mask: keys up to row r
    double mx = -INFINITY;
    for (int64_t j = 0; j < keys; ++j) {
      double dot = 0;
      for (int64_t c = 0; c < s.head_dim; ++c) {
        dot += static_cast<double>(p.q[r * p.ld + c]) * p.k[j * p.ld + c];
      }
      (*prob)[Size(j)] = scale * dot;
      mx = std::max(mx, scale * dot);
    }
    double sum = 0;
    for (int64_t j = 0; j < keys; ++j) sum += std::exp((*prob)[Size(j)] - mx);
    const double lse = mx + std::log(sum);
    const double use = given != nullptr ? *given : lse;
    for (int64_t j = 0; j < s.seq; ++j) {
      (*prob)[Size(j)] = j < keys ? std::exp((*prob)[Size(j)] - use) : 0.0;
    }
    return lse;
  }

  std::shared_ptr<OnChipCalls> calls_;
  double tolerance_ = 1e-4;
  double extra_flops_ = 0;
};

}  // namespace pacer::worker::testing

#endif  // PACER_TESTS_WORKER_REFERENCE_ON_CHIP_DEVICE_H_
