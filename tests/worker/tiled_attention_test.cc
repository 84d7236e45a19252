// The tiled (fused) attention of tiled_attention.h on the CPU device against
// the device's unfused attention: the same context and the same gradients
// of Q, K and V, for multi-head and grouped-query shapes over several
// sequences (Megatron's qkv rows, AttentionShape), with
// tiles that divide the sequence, tiles that do not, and a scratch bound
// that forces one pair per call; no buffer of s x s scores per pair; one
// more Q K^T in the backward pass and nothing else. Under a causal mask:
// the definition (row r attends to keys 0..r), outputs that never depend
// on later tokens, and tiles that skip the scores above the diagonal.
#include "core/tiled_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
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
      // The walk Device's default runs, under the case's scratch bound (as
      // the GPU passes its own): a small bound batches the backward's pairs
      // more finely than the forward's.
      EXPECT_TRUE(UnfusedAttentionBackward(dev_.get(), s_, qkv.data(), probs.data(), dctx.data(),
                                           dqkv.data(), o.max_scratch_bytes)
                      .ok());
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

const Case kCases[] = {
    // seq, head_dim, sequences, heads, kv_heads (full attention)
    {"multi-head, tiles of 4 divide 16", {16, 8, 2, 2, 2}, {4, size_t{64} << 20}},
    {"grouped-query, tiles of 5 do not divide 16", {16, 8, 2, 4, 1}, {5, size_t{64} << 20}},
    {"grouped-query, one pair per call", {16, 8, 2, 4, 2}, {4, 1}},
    {"grouped-query, groups of 3, tiles of 3", {10, 4, 1, 6, 2}, {3, size_t{64} << 20}},
    {"one tile of the whole sequence", {12, 8, 2, 2, 2}, {128, size_t{64} << 20}},
};

// Both paths over the same random Q, K, V and dC; the two agree.
struct BothPaths {
  std::vector<float> qkv, dctx;
  AttentionRun::Out unfused, tiled;
};
BothPaths RunBoth(const Case& c) {
  BothPaths r;
  r.qkv = Random(QkvElements(c.shape), 7);
  r.dctx = Random(CtxElements(c.shape), 11);
  r.unfused = AttentionRun(c.shape).Go(false, r.qkv, r.dctx, c.options);
  r.tiled = AttentionRun(c.shape).Go(true, r.qkv, r.dctx, c.options);
  ExpectClose(r.tiled.ctx, r.unfused.ctx, "ctx", c.name);
  ExpectClose(r.tiled.dqkv, r.unfused.dqkv, "dqkv", c.name);
  return r;
}

TEST(TiledAttentionTest, MatchesTheUnfusedAttentionWithoutStoringScores) {
  for (const Case& c : kCases) {
    const AttentionShape& s = c.shape;
    const BothPaths both = RunBoth(c);
    const AttentionRun::Out& unfused = both.unfused;
    const AttentionRun::Out& tiled = both.tiled;

    // The same forward GEMMs; the backward recomputes Q K^T (2 s^2 d per pair).
    const double scores = s.PairGemmFlops();
    EXPECT_DOUBLE_EQ(tiled.forward_flops, unfused.forward_flops) << c.name;
    EXPECT_DOUBLE_EQ(tiled.backward_flops, unfused.backward_flops + scores) << c.name;
    // What an on-chip kernel (cuDNN's SDPA on the GPU) counts for the same work.
    EXPECT_DOUBLE_EQ(tiled.forward_flops, s.OnChipForwardFlops()) << c.name;
    EXPECT_DOUBLE_EQ(tiled.backward_flops, s.OnChipBackwardFlops()) << c.name;

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

// The attention and its gradients computed directly from the definition,
// in doubles, pair by pair and row by row (no GEMM, no tile, no batch):
// row r of pair i attends to keys 0..r under a causal mask, to all keys
// otherwise, with P = softmax(q.k / sqrt(d)); ctx = P V; given dC,
// dV_j += sum_r P_rj dC_r, dP_rj = dC_r . V_j, dS = P (dP - rowsum(P dP)),
// dQ_r += sum_j dS_rj K_j / sqrt(d), dK_j += sum_r dS_rj Q_r / sqrt(d)
// (query heads of one group add into their K/V head's dK and dV).
struct Definition {
  std::vector<float> ctx, dqkv;
};
Definition FromTheDefinition(const AttentionShape& s, const std::vector<float>& qkv,
                             const std::vector<float>& dctx) {
  // The layout written out (not AttentionShape's offsets, which the code
  // uses): token t of sequence b is row b * seq + t; a qkv row holds the
  // query heads, then the K heads, then the V heads, d columns each; query
  // head h reads K/V head h / (heads / kv_heads); a context row holds the
  // query heads.
  const int64_t d = s.head_dim, w = (s.heads + 2 * s.kv_heads) * d, c_ld = s.heads * d;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const auto at = [](int64_t i) { return static_cast<size_t>(i); };
  std::vector<double> ctx(CtxElements(s)), dqkv(QkvElements(s));
  for (int64_t b = 0; b < s.sequences; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t kv = h / (s.heads / s.kv_heads);
      const auto q = [&](int64_t t) { return (b * s.seq + t) * w + h * d; };
      const auto k = [&](int64_t t) { return (b * s.seq + t) * w + (s.heads + kv) * d; };
      const auto v = [&](int64_t t) {
        return (b * s.seq + t) * w + (s.heads + s.kv_heads + kv) * d;
      };
      const auto o = [&](int64_t t) { return (b * s.seq + t) * c_ld + h * d; };
      for (int64_t r = 0; r < s.seq; ++r) {
        const int64_t keys = s.causal ? r + 1 : s.seq;
        std::vector<double> p(at(keys)), dp(at(keys));
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < keys; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < d; ++c) {
            dot += static_cast<double>(qkv[at(q(r) + c)]) * qkv[at(k(j) + c)];
          }
          p[at(j)] = dot * scale;
          mx = std::max(mx, p[at(j)]);
        }
        for (double& x : p) sum += (x = std::exp(x - mx));
        for (double& x : p) x /= sum;
        double row = 0;  // rowsum(P dP)
        for (int64_t j = 0; j < keys; ++j) {
          for (int64_t c = 0; c < d; ++c) {
            const double vj = qkv[at(v(j) + c)], dc = dctx[at(o(r) + c)];
            ctx[at(o(r) + c)] += p[at(j)] * vj;
            dqkv[at(v(j) + c)] += p[at(j)] * dc;
            dp[at(j)] += dc * vj;
          }
          row += p[at(j)] * dp[at(j)];
        }
        for (int64_t j = 0; j < keys; ++j) {
          const double ds = p[at(j)] * (dp[at(j)] - row) * scale;
          for (int64_t c = 0; c < d; ++c) {
            dqkv[at(q(r) + c)] += ds * qkv[at(k(j) + c)];
            dqkv[at(k(j) + c)] += ds * qkv[at(q(r) + c)];
          }
        }
      }
    }
  }
  return {std::vector<float>(ctx.begin(), ctx.end()), std::vector<float>(dqkv.begin(), dqkv.end())};
}

// Both paths against the definition: the unfused one (Device's default,
// StashedGemmsFor) and the tiled one share the GEMM description
// (TileGemmsFor), so their agreement alone would not catch an error in it.
TEST(TiledAttentionTest, BothPathsComputeTheDefinitionForwardAndBackward) {
  for (const bool causal : {false, true}) {
    for (Case c : kCases) {
      c.shape.causal = causal;
      const BothPaths both = RunBoth(c);
      const Definition want = FromTheDefinition(c.shape, both.qkv, both.dctx);
      const std::string name = std::string(c.name) + (causal ? ", causal" : ", full");
      ExpectClose(both.unfused.ctx, want.ctx, "unfused ctx", name.c_str());
      ExpectClose(both.unfused.dqkv, want.dqkv, "unfused dqkv", name.c_str());
      ExpectClose(both.tiled.ctx, want.ctx, "tiled ctx", name.c_str());
      ExpectClose(both.tiled.dqkv, want.dqkv, "tiled dqkv", name.c_str());
    }
  }
}

TEST(TiledAttentionTest, CausalMaskMatchesTheDefinitionAndSkipsTheTilesAboveTheDiagonal) {
  for (Case c : kCases) {
    const AttentionShape full = c.shape;
    c.shape.causal = true;
    const AttentionShape& s = c.shape;
    // The same context and gradients on both paths (RunBoth), and query
    // row r sees keys 0..r, itself included.
    const BothPaths both = RunBoth(c);
    const AttentionRun::Out& unfused = both.unfused;
    const AttentionRun::Out& tiled = both.tiled;
    ExpectClose(unfused.ctx, FromTheDefinition(s, both.qkv, both.dctx).ctx, "unfused ctx", c.name);
    // The mask changes the result: every row but each sequence's last.
    const AttentionRun::Out unmasked = AttentionRun(full).Go(true, both.qkv, both.dctx, c.options);
    EXPECT_NE(unmasked.ctx[static_cast<size_t>(s.Ctx(0))], tiled.ctx[static_cast<size_t>(s.Ctx(0))])
        << c.name;

    // The unfused kernel computes the whole s x s matrix; the tiles only
    // their rows' keys up to the tile's last row.
    const double f = CausalScoreFraction(s.seq, c.options.tile_rows);
    EXPECT_DOUBLE_EQ(unfused.forward_flops, unmasked.forward_flops) << c.name;
    EXPECT_DOUBLE_EQ(tiled.forward_flops, f * unmasked.forward_flops) << c.name;
    EXPECT_DOUBLE_EQ(tiled.backward_flops, f * unmasked.backward_flops) << c.name;
    if (c.options.tile_rows < s.seq) {
      EXPECT_LT(f, 1) << c.name;
    }
  }
}

TEST(TiledAttentionTest, CausalOutputsDoNotDependOnLaterTokens) {
  const AttentionShape s{16, 4, 1, 2, 1, true};
  const TiledAttentionOptions o{5, size_t{64} << 20};
  const std::vector<float> qkv = Random(QkvElements(s), 3);
  std::vector<float> later = qkv;
  // Change every Q, K and V of the last token of the sequence.
  const int64_t last = s.seq - 1;
  for (int64_t j = 0; j < s.qkv_ld(); ++j) later[static_cast<size_t>(last * s.qkv_ld() + j)] += 1;
  const std::vector<float> dctx = Random(CtxElements(s), 5);
  for (bool tiled : {false, true}) {
    const AttentionRun::Out a = AttentionRun(s).Go(tiled, qkv, dctx, o);
    const AttentionRun::Out b = AttentionRun(s).Go(tiled, later, dctx, o);
    for (int64_t r = 0; r < s.seq; ++r) {
      for (int64_t j = 0; j < s.ctx_ld(); ++j) {
        const size_t at = static_cast<size_t>(r * s.ctx_ld() + j);
        if (r < last) {
          EXPECT_EQ(a.ctx[at], b.ctx[at]) << "row " << r << (tiled ? " tiled" : " unfused");
        }
      }
    }
    // The last row does change: the perturbation reached the kernel.
    EXPECT_NE(a.ctx[static_cast<size_t>(last * s.ctx_ld())],
              b.ctx[static_cast<size_t>(last * s.ctx_ld())]);
  }
}

TEST(TiledAttentionTest, CausalScoreFractionCountsWholeAndPartialTiles) {
  EXPECT_DOUBLE_EQ(CausalScoreFraction(2048, 128), 17.0 / 32.0);  // (n + 1) / 2n, n = 16
  EXPECT_DOUBLE_EQ(CausalScoreFraction(100, 128), 1.0);           // one tile: every key
  // Tiles of 4, 4, 2 rows over 10 keys: 4 x 4 + 4 x 8 + 2 x 10 of 100.
  EXPECT_DOUBLE_EQ(CausalScoreFraction(10, 4), 68.0 / 100.0);
  const AttentionShape s{2048, 128, 1, 1, 1, true};
  EXPECT_DOUBLE_EQ(s.ScoreFraction(), CausalScoreFraction(2048, kAttentionTileRows));
  AttentionShape full = s;
  full.causal = false;
  EXPECT_DOUBLE_EQ(full.ScoreFraction(), 1.0);
  EXPECT_DOUBLE_EQ(s.PairGemmFlops(), full.PairGemmFlops() * s.ScoreFraction());
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
