// The walk of a fused attention over batches of pairs and tiles of query
// rows (core/attention_tiles.h), which both the executor's tiled attention
// (run by the CPU device in CI) and the GPU device's bf16 causal tiles
// follow: every query row of every pair once, each tile against exactly
// the keys its last row sees, the scores the step schedule counts, batches
// that respect the scratch bound, and the GPU's causal tiles within their
// scratch wherever the device chooses them; and the unfused attention's
// GEMMs (one whole-sequence tile per pair, P in its stash block). Checked
// here because the GPU paths themselves run only on a GPU.
#include "core/attention_tiles.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gpu/gpu_device.h"

namespace pacer::worker {
namespace {

struct WalkCase {
  AttentionShape shape;
  int64_t tile_rows;
};

std::string Describe(const AttentionShape& s, int64_t tile_rows, int64_t most) {
  return "seq " + std::to_string(s.seq) + ", " + std::to_string(s.heads) + "/" +
         std::to_string(s.kv_heads) + " heads, " + (s.causal ? "causal" : "full") + ", tiles of " +
         std::to_string(tile_rows) + ", batches of " + std::to_string(most);
}

TEST(AttentionTilesTest, EveryQueryRowOfEveryPairOnceAgainstTheKeysItSees) {
  // seq, head_dim, sequences, heads, kv_heads, causal: multi-head and
  // grouped-query; tiles that divide the sequence, that do not, and one
  // longer than the sequence.
  const WalkCase cases[] = {
      {AttentionShape{10, 2, 2, 4, 2, true}, 4}, {AttentionShape{10, 2, 2, 4, 2, false}, 4},
      {AttentionShape{12, 2, 1, 6, 3, true}, 4}, {AttentionShape{7, 2, 3, 2, 2, true}, 16},
      {AttentionShape{9, 2, 2, 8, 1, true}, 3},  {AttentionShape{9, 2, 2, 8, 8, false}, 2},
  };
  for (const WalkCase& c : cases) {
    const AttentionShape& s = c.shape;
    for (int64_t most = 1; most <= s.kv_heads + 1; ++most) {
      const std::string what = Describe(s, c.tile_rows, most);
      std::set<std::pair<int64_t, int64_t>> rows_seen;  // (pair, query row)
      double scores = 0;
      int64_t previous_first = -1;
      const Status walked = ForAttentionTiles(
          s, c.tile_rows, most, [&](const AttentionBatch& b, const AttentionTile& t) -> Status {
            EXPECT_GE(b.count, 1) << what;
            EXPECT_LE(b.count, std::min(most, s.kv_heads)) << what;
            // Whole tiles but the last; the keys are those of the tile's
            // last row, so no score is computed that the mask discards
            // entirely, and none is missing.
            EXPECT_EQ(t.rows, std::min(c.tile_rows, s.seq - t.first_row)) << what;
            EXPECT_EQ(t.first_row % std::min(c.tile_rows, s.seq), 0) << what;
            EXPECT_EQ(t.keys, s.causal ? t.first_row + t.rows : s.seq) << what;
            EXPECT_EQ(t.mask.on(), s.causal) << what;
            for (int64_t i = 0; i < b.count * t.rows; ++i) {
              const int64_t row = t.first_row + i % t.rows;
              EXPECT_EQ(t.mask.Keys(i, t.keys), s.causal ? row + 1 : s.seq) << what << " row " << i;
            }
            // Tiles of a batch in order from the first query row.
            if (t.first_row != 0) {
              EXPECT_GT(t.first_row, previous_first) << what;
            }
            previous_first = t.first_row;
            for (int64_t i = 0; i < b.count; ++i) {
              const int64_t pair = b.first + i * s.group();
              // The batch's constant strides reach this pair's Q and K.
              EXPECT_EQ(s.Q(pair), s.Q(b.first) + i * b.q_stride) << what;
              EXPECT_EQ(s.K(pair), s.K(b.first) + i * b.kv_stride) << what;
              for (int64_t r = t.first_row; r < t.first_row + t.rows; ++r) {
                EXPECT_TRUE(rows_seen.insert({pair, r}).second)
                    << what << ": pair " << pair << " row " << r << " twice";
              }
            }
            scores += static_cast<double>(b.count) * static_cast<double>(t.rows) *
                      static_cast<double>(t.keys);
            return Status::Ok();
          });
      ASSERT_TRUE(walked.ok()) << what << ": " << walked.ToString();
      EXPECT_EQ(static_cast<int64_t>(rows_seen.size()), s.pairs() * s.seq) << what;
      const double fraction = s.causal ? CausalScoreFraction(s.seq, c.tile_rows) : 1.0;
      EXPECT_DOUBLE_EQ(scores, static_cast<double>(s.pairs()) * static_cast<double>(s.seq) *
                                   static_cast<double>(s.seq) * fraction)
          << what;
    }
  }
}

// One past the last element a matrix of `rows` x `cols` (as stored)
// touches over `count` items, in its operand's buffer: the extent the GPU
// device converts for cuBLAS (StridedMatrixElements).
int64_t EndElement(const TileMatrix& x, int64_t rows, int64_t cols, int64_t count) {
  return x.offset + StridedMatrixElements(rows, cols, x.ld, x.stride, count);
}

// StridedMatrixElements against the elements a strided matrix touches,
// enumerated: the GPU converts that many for cuBLAS, so one too few leaves
// its last row's tail unconverted.
TEST(AttentionTilesTest, AStridedMatrixSpansToOnePastItsLastElement) {
  for (const int64_t rows : {1, 2, 5}) {
    for (const int64_t cols : {1, 3}) {
      for (const int64_t batch : {1, 4}) {
        const int64_t ld = cols + 2, stride = rows * ld + 1;
        int64_t end = 0;
        for (int64_t i = 0; i < batch; ++i) {
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t c = 0; c < cols; ++c) end = std::max(end, i * stride + r * ld + c + 1);
          }
        }
        EXPECT_EQ(StridedMatrixElements(rows, cols, ld, stride, batch), end)
            << rows << "x" << cols << " x" << batch;
      }
    }
  }
  EXPECT_EQ(StridedMatrixElements(0, 3, 3, 9, 2), 0);
  EXPECT_EQ(StridedMatrixElements(2, 3, 3, 9, 0), 0);
}

// Every GEMM of every tile (TileGemmsFor, the description both the tiled
// path and the GPU's causal tiles run) stays inside its operand's buffer:
// qkv (and its gradient), the context (and dC), and the tile scratch of
// count x rows x keys scores; its shapes chain (S is Q K^T's m x n, P V
// reads it as m x k, ...) and each output is the operand the algorithm
// writes. On the GPU an out-of-bounds operand is a memory fault or a
// silent wrong gradient; here it fails.
// The elements of each operand's buffer: qkv (and its gradient), the
// context (and dC), P (a tile scratch, or the unfused path's stash) and
// the dP / dS scratch.
struct OperandSizes {
  int64_t qkv = 0, ctx = 0, probs = 0, scratch = 0;
  int64_t Of(TileOperand o) const {
    switch (o) {
      case TileOperand::kQuery:
      case TileOperand::kKey:
      case TileOperand::kValue:
      case TileOperand::kQueryGrad:
      case TileOperand::kKeyGrad:
      case TileOperand::kValueGrad:
        return qkv;
      case TileOperand::kContext:
      case TileOperand::kContextGrad:
        return ctx;
      case TileOperand::kProbs:
        return probs;
      case TileOperand::kProbsGrad:
      case TileOperand::kScoresGrad:
        return scratch;
    }
    return 0;
  }
};

// Every GEMM of `g` inside its operand's buffer, with the shapes and
// outputs of the algorithm: S = Q K^T is rows x keys x head_dim, and the
// outputs are the operands it writes, overwritten (S, dP) or accumulated
// (dQ, dK, dV).
void ExpectTheAlgorithmInside(const AttentionShape& s, const AttentionBatch& b,
                              const AttentionTile& t, const TileGemms& g, const OperandSizes& sizes,
                              const std::string& what) {
  const auto inside = [&](const TileMatrix& x, int64_t rows, int64_t cols, const char* name) {
    EXPECT_GE(x.offset, 0) << what << " " << name;
    EXPECT_GE(x.ld, cols) << what << " " << name;
    EXPECT_LE(EndElement(x, rows, cols, b.count), sizes.Of(x.operand)) << what << " " << name;
  };
  const struct {
    const TileGemm* gemm;
    const char* name;
  } all[] = {{&g.scores, "S = Q K^T"},        {&g.context, "ctx = P V"},
             {&g.value_grad, "dV += P^T dC"}, {&g.probs_grad, "dP = dC V^T"},
             {&g.query_grad, "dQ += dS K"},   {&g.key_grad, "dK += dS^T Q"}};
  for (const auto& e : all) {
    const TileGemm& m = *e.gemm;
    inside(m.a, m.trans_a ? m.k : m.m, m.trans_a ? m.m : m.k, e.name);
    inside(m.b, m.trans_b ? m.n : m.k, m.trans_b ? m.k : m.n, e.name);
    inside(m.c, m.m, m.n, e.name);
  }
  EXPECT_EQ(g.scores.c.operand, TileOperand::kProbs) << what;
  EXPECT_EQ(g.scores.m, t.rows) << what;
  EXPECT_EQ(g.scores.n, t.keys) << what;
  EXPECT_EQ(g.scores.k, s.head_dim) << what;
  EXPECT_EQ(g.context.c.operand, TileOperand::kContext) << what;
  EXPECT_EQ(g.probs_grad.c.operand, TileOperand::kProbsGrad) << what;
  EXPECT_EQ(g.value_grad.c.operand, TileOperand::kValueGrad) << what;
  EXPECT_EQ(g.query_grad.c.operand, TileOperand::kQueryGrad) << what;
  EXPECT_EQ(g.key_grad.c.operand, TileOperand::kKeyGrad) << what;
  EXPECT_EQ(g.query_grad.a.operand, TileOperand::kScoresGrad) << what;
  EXPECT_EQ(g.key_grad.a.operand, TileOperand::kScoresGrad) << what;
  EXPECT_EQ(g.scores.beta, 0.0f) << what;
  EXPECT_EQ(g.probs_grad.beta, 0.0f) << what;
  EXPECT_EQ(g.value_grad.beta, 1.0f) << what;
  EXPECT_EQ(g.query_grad.beta, 1.0f) << what;
  EXPECT_EQ(g.key_grad.beta, 1.0f) << what;
}

const AttentionShape kGemmShapes[] = {AttentionShape{10, 4, 2, 4, 2, true},
                                      AttentionShape{9, 2, 3, 6, 3, false},
                                      AttentionShape{12, 8, 1, 8, 1, true}};

// Every GEMM of every tile (TileGemmsFor, the description both the tiled
// path and the GPU's causal tiles run) stays inside its operand's buffer:
// qkv (and its gradient), the context (and dC), and the tile scratch of
// count x rows x keys scores; its shapes chain (S is Q K^T's m x n, P V
// reads it as m x k, ...) and each output is the operand the algorithm
// writes. On the GPU an out-of-bounds operand is a memory fault or a
// silent wrong gradient; here it fails.
TEST(AttentionTilesTest, EveryTileGemmStaysInsideItsBuffers) {
  for (const AttentionShape& s : kGemmShapes) {
    for (const int64_t tile_rows : {1, 4, 5, 64}) {
      for (int64_t most = 1; most <= s.kv_heads; ++most) {
        const std::string what = Describe(s, tile_rows, most);
        const Status walked = ForAttentionTiles(
            s, tile_rows, most, [&](const AttentionBatch& b, const AttentionTile& t) {
              const int64_t scores = b.count * t.rows * t.keys;
              ExpectTheAlgorithmInside(s, b, t, TileGemmsFor(s, b, t),
                                       {s.QkvElements(), s.CtxElements(), scores, scores}, what);
              return Status::Ok();
            });
        ASSERT_TRUE(walked.ok()) << walked.ToString();
      }
    }
  }
}

// The unfused attention's GEMMs (StashedGemmsFor: the CPU device's, and
// the GPU's under fp32 and bf16 plans) are those of one whole-sequence
// tile, masked or not (an unfused kernel computes every score), with P in
// the stash: each pair's s x s block at its slot, every block of the stash
// written by exactly one forward batch and read back by the backward
// however it batches the pairs (one per K/V head forward, PairsPerCall
// backward), and dP / dS in a scratch of the batch's blocks.
TEST(AttentionTilesTest, TheUnfusedGemmsKeepEachPairsProbabilitiesInItsOwnStashBlock) {
  for (const AttentionShape& s : kGemmShapes) {
    const int64_t ss = s.seq * s.seq;
    const AttentionTile whole = WholeSequenceTile(s);
    EXPECT_EQ(whole.first_row, 0);
    EXPECT_EQ(whole.rows, s.seq);
    EXPECT_EQ(whole.keys, s.seq);
    EXPECT_EQ(whole.mask.on(), s.causal);
    for (int64_t most = 1; most <= s.kv_heads; ++most) {
      const std::string what = Describe(s, s.seq, most);
      std::vector<int> written(static_cast<size_t>(s.ProbsElements()), 0);
      ASSERT_TRUE(ForAttentionBatches(s, most, [&](const AttentionBatch& b) {
                    const TileGemms g = StashedGemmsFor(s, b);
                    ExpectTheAlgorithmInside(
                        s, b, whole, g,
                        {s.QkvElements(), s.CtxElements(), s.ProbsElements(), b.count * ss}, what);
                    // P written, read by P V and by dV += P^T dC, at the batch's blocks.
                    for (const TileMatrix* p : {&g.scores.c, &g.context.a, &g.value_grad.a}) {
                      EXPECT_EQ(p->operand, TileOperand::kProbs) << what;
                      EXPECT_EQ(p->offset, b.slot * ss) << what;
                      EXPECT_EQ(p->ld, s.seq) << what;
                      EXPECT_EQ(p->stride, ss) << what;
                    }
                    for (int64_t e = g.scores.c.offset; e < g.scores.c.offset + b.count * ss; ++e) {
                      if (e < 0 || e >= s.ProbsElements()) {
                        ADD_FAILURE() << what << ": P written outside the stash at " << e;
                        break;
                      }
                      ++written[static_cast<size_t>(e)];
                    }
                    return Status::Ok();
                  }).ok());
      for (size_t e = 0; e < written.size(); ++e) {
        ASSERT_EQ(written[e], 1) << what << ": stash element " << e;
      }
    }
  }
}

// A batch's `slot` places its items in one order whatever the batch size:
// the GPU device writes the unfused kernel's probabilities in batches of
// one per K/V head and reads them back in batches of PairsPerCall, both at
// slot x s^2 (gpu_device.cu), so slot + i must name the same pair in every
// batching and the slots must cover [0, pairs) once.
TEST(AttentionTilesTest, SlotsNameThePairsAlikeWhateverTheBatchSize) {
  for (const AttentionShape s : {AttentionShape{4, 2, 2, 4, 2}, AttentionShape{4, 2, 3, 6, 3},
                                 AttentionShape{4, 2, 2, 8, 1}, AttentionShape{4, 2, 1, 4, 4}}) {
    std::map<int64_t, int64_t> pair_of_slot;  // from the batches of one item
    for (int64_t most = 1; most <= s.kv_heads + 1; ++most) {
      std::set<int64_t> slots;
      ASSERT_TRUE(ForAttentionBatches(s, most, [&](const AttentionBatch& b) {
                    for (int64_t i = 0; i < b.count; ++i) {
                      const int64_t slot = b.slot + i, pair = b.first + i * s.group();
                      EXPECT_TRUE(slots.insert(slot).second) << "slot " << slot << " twice";
                      EXPECT_GE(slot, 0);
                      EXPECT_LT(slot, s.pairs());
                      if (most == 1) {
                        pair_of_slot[slot] = pair;
                      } else {
                        EXPECT_EQ(pair_of_slot[slot], pair)
                            << "slot " << slot << " in batches of " << most;
                      }
                    }
                    return Status::Ok();
                  }).ok());
      EXPECT_EQ(static_cast<int64_t>(slots.size()), s.pairs()) << most;
    }
  }
}

// With the default tile the walk's scores are the step schedule's
// (AttentionShape::ScoreFraction): 17/32 of s x s at s = 2048.
TEST(AttentionTilesTest, DefaultTilesComputeTheScheduledScoreFraction) {
  const AttentionShape s{2048, 128, 1, 4, 2, true};
  double scores = 0;
  ASSERT_TRUE(ForAttentionTiles(s, kAttentionTileRows, s.kv_heads,
                                [&](const AttentionBatch& b, const AttentionTile& t) {
                                  scores += static_cast<double>(b.count * t.rows * t.keys);
                                  return Status::Ok();
                                })
                  .ok());
  EXPECT_DOUBLE_EQ(scores / (static_cast<double>(s.pairs()) * 2048.0 * 2048.0), 17.0 / 32.0);
  EXPECT_DOUBLE_EQ(s.ScoreFraction(), 17.0 / 32.0);
}

TEST(AttentionTilesTest, AWalkStopsAtTheFirstErrorAndRefusesEmptyTiles) {
  const AttentionShape s{8, 2, 2, 2, 2, true};
  int calls = 0;
  const Status stopped =
      ForAttentionTiles(s, 2, 1, [&](const AttentionBatch&, const AttentionTile&) {
        return ++calls == 3 ? UnavailableError("the device is gone") : Status::Ok();
      });
  EXPECT_EQ(stopped.code(), StatusCode::kUnavailable);
  EXPECT_EQ(calls, 3);

  calls = 0;
  const Status refused =
      ForAttentionTiles(s, 0, 1, [&](const AttentionBatch&, const AttentionTile&) {
        ++calls;
        return Status::Ok();
      });
  EXPECT_EQ(refused.code(), StatusCode::kInternal);
  EXPECT_EQ(calls, 0);
}

// As many pairs as the scratch holds, at least one, at most one per K/V head.
TEST(AttentionTilesTest, PairsPerCallFillsTheScratchBoundAndNoMore) {
  const AttentionShape s{64, 2, 1, 16, 8, true};
  const int64_t scores = LargestTileScores(s, 16);
  EXPECT_EQ(scores, 16 * 64);
  for (const size_t bytes_per_score : {size_t{2}, size_t{4}, size_t{8}}) {
    for (size_t scratch = 0; scratch <= size_t{12} * 8 * 1024 * 8; scratch += 1000) {
      const int64_t most = PairsPerCall(s, scores, scratch, bytes_per_score);
      const auto bytes = [&](int64_t pairs) {
        return static_cast<size_t>(pairs * scores) * bytes_per_score;
      };
      ASSERT_GE(most, 1) << scratch;
      ASSERT_LE(most, s.kv_heads) << scratch;
      if (most > 1) {
        EXPECT_LE(bytes(most), scratch) << scratch;
      }
      if (most < s.kv_heads) {
        EXPECT_GT(bytes(most + 1), scratch) << scratch;
      }
    }
  }
  EXPECT_EQ(PairsPerCall(s, 0, 1 << 20, 4), 1);
  EXPECT_EQ(PairsPerCall(s, scores, 1 << 20, 0), 1);
}

// Wherever the GPU device runs its causal tiles (CausalTilesFit), their
// scratch (kRecomputedBackwardBytesPerScore a score, the backward's)
// stays within kAttentionScratchBytes, as the fused plan's memory assumes.
TEST(AttentionTilesTest, TheGpusCausalTilesFitTheirScratchWhereverTheyRun) {
  for (const int64_t seq : {1, 127, 128, 2048, 8192, 65536, 262144, 262145, 1 << 20}) {
    const AttentionShape s{seq, 128, 1, 32, 8, true};
    if (!gpu::CausalTilesFit(s)) {
      EXPECT_GT(seq, 262144) << seq;
      continue;
    }
    const int64_t tile = LargestTileScores(s, kAttentionTileRows);
    const int64_t most =
        PairsPerCall(s, tile, gpu::kAttentionScratchBytes, gpu::kRecomputedBackwardBytesPerScore);
    EXPECT_LE(static_cast<double>(most) * static_cast<double>(tile) *
                  static_cast<double>(gpu::kRecomputedBackwardBytesPerScore),
              static_cast<double>(gpu::kAttentionScratchBytes))
        << seq;
  }
}

}  // namespace
}  // namespace pacer::worker
