// The tiled (fused) attention of tiled_attention.h on the CPU device against
// the device's unfused attention: the same context and the same gradients
// of Q, K and V, for multi-head and grouped-query shapes over several
// sequences (Megatron's qkv rows, AttentionShape), with
// tiles that divide the sequence, tiles that do not, and a scratch bound
// that forces one pair per call; no buffer of s x s scores per pair; one
// more Q K^T in the backward pass and nothing else.
#include "core/tiled_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "cpu/cpu_device.h"

namespace pacer::worker {
namespace {

struct Case {
  const char* name;
  AttentionShape shape;
  TiledAttentionOptions options;
};

size_t QkvElements(const AttentionShape& s) { return static_cast<size_t>(s.QkvElements()); }
size_t CtxElements(const AttentionShape& s) { return static_cast<size_t>(s.CtxElements()); }

std::vector<float> Random(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// One device, host arrays in, host arrays out.
class AttentionRun {
 public:
  explicit AttentionRun(const AttentionShape& s) : s_(s), dev_(cpu::MakeCpuDevice()) {}

  struct Out {
    std::vector<float> ctx, dqkv;
    double forward_flops = 0, backward_flops = 0;
    double peak_workspace_bytes = 0, peak_bytes = 0;
  };

  Out Go(bool tiled, const std::vector<float>& qkv_host, const std::vector<float>& dctx_host,
         const TiledAttentionOptions& o) {
    Out out;
    const size_t ctx_n = CtxElements(s_);
    DeviceBuffer qkv(dev_.get(), BufferClass::kActivations),
        ctx(dev_.get(), BufferClass::kActivations), dctx(dev_.get(), BufferClass::kActivations),
        dqkv(dev_.get(), BufferClass::kActivations), probs(dev_.get(), BufferClass::kActivations);
    EXPECT_TRUE(qkv.Assign(qkv_host.size()).ok());
    EXPECT_TRUE(dev_->CopyFromHost(qkv_host.data(), qkv_host.size(), qkv.data()).ok());
    EXPECT_TRUE(dctx.Assign(ctx_n).ok());
    EXPECT_TRUE(dev_->CopyFromHost(dctx_host.data(), ctx_n, dctx.data()).ok());
    EXPECT_TRUE(ctx.Assign(ctx_n, Fill::kUndefined).ok());
    EXPECT_TRUE(dqkv.Assign(qkv_host.size()).ok());  // the backward accumulates
    dev_->ResetCounters();
    if (tiled) {
      EXPECT_TRUE(TiledAttentionForward(dev_.get(), s_, qkv.data(), ctx.data(), o).ok());
    } else {
      EXPECT_TRUE(probs.Assign(dev_->AttentionStashElements(s_), Fill::kUndefined).ok());
      EXPECT_TRUE(dev_->AttentionForward(s_, qkv.data(), probs.data(), ctx.data()).ok());
    }
    out.forward_flops = dev_->counters().gemm_flops;
    dev_->ResetCounters();
    if (tiled) {
      EXPECT_TRUE(
          TiledAttentionBackward(dev_.get(), s_, qkv.data(), dctx.data(), dqkv.data(), o).ok());
    } else {
      EXPECT_TRUE(
          dev_->AttentionBackward(s_, qkv.data(), probs.data(), dctx.data(), dqkv.data()).ok());
    }
    out.backward_flops = dev_->counters().gemm_flops;
    out.ctx.resize(ctx_n);
    out.dqkv.resize(qkv_host.size());
    EXPECT_TRUE(dev_->CopyToHost(ctx.data(), ctx_n, out.ctx.data()).ok());
    EXPECT_TRUE(dev_->CopyToHost(dqkv.data(), out.dqkv.size(), out.dqkv.data()).ok());
    out.peak_workspace_bytes = dev_->memory().class_peak_bytes(BufferClass::kWorkspace);
    out.peak_bytes = dev_->memory().peak_bytes();
    EXPECT_EQ(dev_->memory().class_bytes(BufferClass::kWorkspace), 0) << "the scratch is freed";
    return out;
  }

 private:
  AttentionShape s_;
  std::unique_ptr<Device> dev_;
};

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, const char* what,
                 const char* name) {
  ASSERT_EQ(got.size(), want.size());
  double scale = 0;
  for (float v : want) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  ASSERT_GT(scale, 0) << what << " " << name;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-5 * scale) << what << "[" << i << "] " << name;
  }
}

TEST(TiledAttentionTest, MatchesTheUnfusedAttentionWithoutStoringScores) {
  const Case cases[] = {
      // seq, head_dim, sequences, heads, kv_heads
      {"multi-head, tiles of 4 divide 16", {16, 8, 2, 2, 2}, {4, size_t{64} << 20}},
      {"grouped-query, tiles of 5 do not divide 16", {16, 8, 2, 4, 1}, {5, size_t{64} << 20}},
      {"grouped-query, one pair per call", {16, 8, 2, 4, 2}, {4, 1}},
      {"grouped-query, groups of 3, tiles of 3", {10, 4, 1, 6, 2}, {3, size_t{64} << 20}},
      {"one tile of the whole sequence", {12, 8, 2, 2, 2}, {128, size_t{64} << 20}},
  };
  for (const Case& c : cases) {
    const AttentionShape& s = c.shape;
    const std::vector<float> qkv = Random(QkvElements(s), 7);
    const std::vector<float> dctx = Random(CtxElements(s), 11);
    const AttentionRun::Out unfused = AttentionRun(s).Go(false, qkv, dctx, c.options);
    const AttentionRun::Out tiled = AttentionRun(s).Go(true, qkv, dctx, c.options);
    ExpectClose(tiled.ctx, unfused.ctx, "ctx", c.name);
    ExpectClose(tiled.dqkv, unfused.dqkv, "dqkv", c.name);

    // The same forward GEMMs; the backward recomputes Q K^T (2 s^2 d per pair).
    const double scores = s.PairGemmFlops();
    EXPECT_DOUBLE_EQ(tiled.forward_flops, unfused.forward_flops) << c.name;
    EXPECT_DOUBLE_EQ(tiled.backward_flops, unfused.backward_flops + scores) << c.name;

    // The largest attention buffer is a tile's probabilities and their
    // gradients, for at most the pairs the scratch bound allows.
    const int64_t rows = std::min(c.options.tile_rows, s.seq);
    const double one_pair_tiles = 2.0 * static_cast<double>(rows * s.seq) * sizeof(float);
    EXPECT_LE(tiled.peak_workspace_bytes,
              std::max(static_cast<double>(c.options.max_scratch_bytes), one_pair_tiles))
        << c.name;
    if (rows < s.seq) {
      const double all_scores = static_cast<double>(s.ProbsElements()) * sizeof(float);
      EXPECT_LT(tiled.peak_bytes, unfused.peak_bytes) << c.name;
      EXPECT_LT(tiled.peak_workspace_bytes, all_scores) << c.name;
    }
  }
}

TEST(TiledAttentionTest, RejectsAnEmptyShapeAsABug) {
  std::unique_ptr<Device> dev = cpu::MakeCpuDevice();
  float unused = 0;
  const Status s =
      TiledAttentionForward(dev.get(), AttentionShape{0, 8, 1, 1, 1}, &unused, &unused);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  // Query heads that do not fall into whole K/V groups.
  EXPECT_EQ(
      TiledAttentionForward(dev.get(), AttentionShape{4, 2, 1, 3, 2}, &unused, &unused).code(),
      StatusCode::kInternal);
  TiledAttentionOptions zero_tiles;
  zero_tiles.tile_rows = 0;
  EXPECT_EQ(TiledAttentionBackward(dev.get(), AttentionShape{4, 2, 1, 1, 1}, &unused, &unused,
                                   &unused, zero_tiles)
                .code(),
            StatusCode::kInternal);
}

}  // namespace
}  // namespace pacer::worker
