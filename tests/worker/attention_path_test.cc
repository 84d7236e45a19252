// The GPU device's choice of fused attention (gpu/attention_path.h): which
// path runs for a shape, plan precision, environment and cuDNN's answer,
// what the log line says, and that cuDNN is asked only when its answer
// matters (asking plans and trial-runs its SDPA on the GPU). Checked here
// because the device itself runs only on a GPU.
#include "gpu/attention_path.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace pacer::worker::gpu {
namespace {

AttentionShape Shape(int64_t seq, bool causal) {
  AttentionShape s{seq, 128, 1, 32, 8, false};
  s.causal = causal;
  return s;
}

FusedAttentionFacts Bf16() {
  FusedAttentionFacts f;
  f.bf16_operands = true;
  f.executed_precision = "bf16";
  return f;
}

CudnnProbe Answer(bool has_backward) {
  CudnnProbe p;
  p.version = "9.19.0";
  p.has_backward = has_backward;
  if (!has_backward) p.backward_refusal = "no SDPA backward engine on this GPU";
  return p;
}

// Runs the choice with a probe that counts its calls.
struct Chosen {
  FusedAttentionChoice choice;
  int probes = 0;
};
Chosen Choose(const AttentionShape& s, const FusedAttentionFacts& f, const CudnnProbe& answer) {
  Chosen c;
  c.choice = ChooseFusedAttention(s, f, [&] {
    ++c.probes;
    return answer;
  });
  return c;
}

TEST(AttentionPathTest, ACausalBf16PlanRunsTheCausalTilesWithoutAskingCudnn) {
  const Chosen c = Choose(Shape(2048, true), Bf16(), Answer(true));
  EXPECT_EQ(c.choice.path, FusedAttentionPath::kCausalTiles);
  EXPECT_TRUE(c.choice.OnChip());
  EXPECT_EQ(c.choice.description,
            "causal bf16 tiles of 128 query rows on cuBLAS (cuDNN's SDPA operation has no causal "
            "mask)");
  EXPECT_EQ(c.probes, 0);
}

TEST(AttentionPathTest, ACausalShapeFallsBackToTheTiledPathAndSaysWhy) {
  FusedAttentionFacts fp32;
  fp32.executed_precision = "fp32";
  FusedAttentionFacts off = Bf16();
  off.causal_tiles_disabled = true;
  const struct {
    AttentionShape shape;
    FusedAttentionFacts facts;
    const char* description;
  } cases[] = {
      {Shape(2048, true), fp32, "tiled (the causal tiles run bf16 only)"},
      {Shape(262145, true), Bf16(), "tiled (sequence too long for the causal tiles' scratch)"},
      {Shape(2048, true), off, "tiled (PACER_GPU_CAUSAL_TILES=0)"},
  };
  for (const auto& k : cases) {
    const Chosen c = Choose(k.shape, k.facts, Answer(true));
    EXPECT_EQ(c.choice.path, FusedAttentionPath::kTiled) << k.description;
    EXPECT_FALSE(c.choice.OnChip()) << k.description;
    EXPECT_EQ(c.choice.description, k.description);
    EXPECT_EQ(c.probes, 0) << k.description;
  }
  // Turning cuDNN off leaves the causal tiles alone.
  FusedAttentionFacts cudnn_off = Bf16();
  cudnn_off.cudnn_disabled = true;
  const Chosen tiles = Choose(Shape(2048, true), cudnn_off, Answer(true));
  EXPECT_EQ(tiles.choice.path, FusedAttentionPath::kCausalTiles);
  EXPECT_EQ(tiles.probes, 0);
  // The longest sequence whose tiles fit still runs them.
  EXPECT_EQ(Choose(Shape(262144, true), Bf16(), Answer(true)).choice.path,
            FusedAttentionPath::kCausalTiles);
}

TEST(AttentionPathTest, FullAttentionAsksCudnnOnlyForABf16PlanThatAllowsIt) {
  FusedAttentionFacts tf32;
  tf32.executed_precision = "tf32";
  const Chosen not_bf16 = Choose(Shape(2048, false), tf32, Answer(true));
  EXPECT_EQ(not_bf16.choice.path, FusedAttentionPath::kTiled);
  EXPECT_EQ(not_bf16.choice.description,
            "tiled (cuDNN's SDPA runs bf16 only; this plan's GEMMs run tf32)");
  EXPECT_EQ(not_bf16.probes, 0);

  FusedAttentionFacts off = Bf16();
  off.cudnn_disabled = true;
  const Chosen disabled = Choose(Shape(2048, false), off, Answer(true));
  EXPECT_EQ(disabled.choice.path, FusedAttentionPath::kTiled);
  EXPECT_EQ(disabled.choice.description, "tiled (PACER_CUDNN_ATTENTION=0)");
  EXPECT_EQ(disabled.probes, 0);

  CudnnProbe refused;
  refused.refusal = "cuDNN's SDPA failed its trial run: CUDNN_STATUS_NOT_SUPPORTED";
  const Chosen refusal = Choose(Shape(2048, false), Bf16(), refused);
  EXPECT_EQ(refusal.choice.path, FusedAttentionPath::kTiled);
  EXPECT_EQ(refusal.choice.description,
            "tiled (cuDNN's SDPA failed its trial run: CUDNN_STATUS_NOT_SUPPORTED)");
  EXPECT_EQ(refusal.probes, 1);
}

TEST(AttentionPathTest, CudnnsBackwardOrTheRecomputedOneOrTheTiledOneByWhatFits) {
  const Chosen whole = Choose(Shape(2048, false), Bf16(), Answer(true));
  EXPECT_EQ(whole.choice.path, FusedAttentionPath::kCudnn);
  EXPECT_EQ(whole.choice.description, "cuDNN 9.19.0's SDPA");
  EXPECT_EQ(whole.probes, 1);
  // Turning the causal tiles off leaves full attention on cuDNN.
  FusedAttentionFacts tiles_off = Bf16();
  tiles_off.causal_tiles_disabled = true;
  const Chosen still = Choose(Shape(2048, false), tiles_off, Answer(true));
  EXPECT_EQ(still.choice.path, FusedAttentionPath::kCudnn);
  EXPECT_EQ(still.probes, 1);

  // Without cuDNN's backward: the recomputed backward up to the longest
  // sequence whose one pair of scores fits the scratch (5,792), then tiled.
  for (const int64_t seq : {2048, 5792}) {
    const Chosen c = Choose(Shape(seq, false), Bf16(), Answer(false));
    EXPECT_EQ(c.choice.path, FusedAttentionPath::kCudnnRecomputedBackward) << seq;
    EXPECT_TRUE(c.choice.OnChip());
    EXPECT_EQ(c.choice.description,
              "cuDNN 9.19.0's SDPA forward and the bf16 backward on recomputed probabilities (no "
              "SDPA backward engine on this GPU)");
  }
  const Chosen longer = Choose(Shape(5793, false), Bf16(), Answer(false));
  EXPECT_EQ(longer.choice.path, FusedAttentionPath::kCudnnTiledBackward);
  EXPECT_TRUE(longer.choice.OnChip());
  EXPECT_EQ(longer.choice.description,
            "cuDNN 9.19.0's SDPA forward and the tiled backward (sequence 5793: one pair's "
            "recomputed scores exceed the attention scratch; no SDPA backward engine on this "
            "GPU)");
}

}  // namespace
}  // namespace pacer::worker::gpu
