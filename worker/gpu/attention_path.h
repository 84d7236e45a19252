// Which fused attention the GPU device runs for a layer's shape, and the
// words its log line says it with, decided in one pure function so that the
// path taken and the path logged cannot drift apart and CI checks the
// decision on the CPU (the device itself runs only on a GPU):
//
//   causal mask  -> the device's causal bf16 tiles, unless the plan's GEMMs
//                   are not bf16, the sequence is too long for their
//                   scratch (CausalTilesFit) or PACER_GPU_CAUSAL_TILES=0;
//   full         -> cuDNN's SDPA, unless the plan is not bf16,
//                   PACER_CUDNN_ATTENTION=0, or cuDNN refuses (no build,
//                   no engine, a failed trial run); without cuDNN's
//                   backward engine, its forward with the bf16 backward on
//                   recomputed probabilities (RecomputedBackwardFits) or,
//                   for longer sequences, with the tiled backward;
//   otherwise    -> the executor's tiled attention (core/tiled_attention.h).
//
// Units: sequence lengths in tokens. Thread-safety: a pure function; it
// calls `probe` (at most once) on the calling thread.
#ifndef PACER_WORKER_GPU_ATTENTION_PATH_H_
#define PACER_WORKER_GPU_ATTENTION_PATH_H_

#include <string>

#include "core/causal_mask.h"
#include "core/device.h"
#include "gpu/gpu_device.h"

namespace pacer::worker::gpu {

enum class FusedAttentionPath {
  kTiled,                    // the executor's tiled attention, forward and backward
  kCausalTiles,              // the device's causal bf16 tiles
  kCudnn,                    // cuDNN's SDPA forward and backward
  kCudnnRecomputedBackward,  // cuDNN's forward, the bf16 backward on recomputed probabilities
  kCudnnTiledBackward,       // cuDNN's forward, the executor's tiled backward
};

// What the device knows before it asks cuDNN.
struct FusedAttentionFacts {
  bool bf16_operands = false;          // the plan's GEMMs run on bf16 operands
  std::string executed_precision;      // what they run otherwise, for the message
  bool causal_tiles_disabled = false;  // PACER_GPU_CAUSAL_TILES=0
  bool cudnn_disabled = false;         // PACER_CUDNN_ATTENTION=0
};

// cuDNN's answer for a shape (the device plans and trial-runs its SDPA).
struct CudnnProbe {
  std::string refusal;           // empty: cuDNN's forward planned and ran
  bool has_backward = false;     // its backward engine too
  std::string backward_refusal;  // why not
  std::string version;           // the loaded library's, e.g. "9.19.0"
};

struct FusedAttentionChoice {
  FusedAttentionPath path = FusedAttentionPath::kTiled;
  std::string description;  // "fused attention runs <description>"
  bool OnChip() const { return path != FusedAttentionPath::kTiled; }
};

// `probe()` returns CudnnProbe and is called only for a full-attention
// bf16 shape with cuDNN not disabled (it plans cuDNN's SDPA: a side effect
// the other paths must not pay).
template <typename Probe>
FusedAttentionChoice ChooseFusedAttention(const AttentionShape& s, const FusedAttentionFacts& f,
                                          Probe&& probe) {
  FusedAttentionChoice c;
  if (s.causal) {
    const char* refusal = nullptr;
    if (!f.bf16_operands) {
      refusal = "the causal tiles run bf16 only";
    } else if (!CausalTilesFit(s)) {
      refusal = "sequence too long for the causal tiles' scratch";
    } else if (f.causal_tiles_disabled) {
      refusal = "PACER_GPU_CAUSAL_TILES=0";
    }
    if (refusal != nullptr) {
      c.description = "tiled (" + std::string(refusal) + ")";
      return c;
    }
    c.path = FusedAttentionPath::kCausalTiles;
    c.description = "causal bf16 tiles of " + std::to_string(kAttentionTileRows) +
                    " query rows on cuBLAS (cuDNN's SDPA operation has no causal mask)";
    return c;
  }
  if (!f.bf16_operands) {
    c.description =
        "tiled (cuDNN's SDPA runs bf16 only; this plan's GEMMs run " + f.executed_precision + ")";
    return c;
  }
  if (f.cudnn_disabled) {
    c.description = "tiled (PACER_CUDNN_ATTENTION=0)";
    return c;
  }
  const CudnnProbe cudnn = probe();
  if (!cudnn.refusal.empty()) {
    c.description = "tiled (" + cudnn.refusal + ")";
    return c;
  }
  const std::string name = "cuDNN " + cudnn.version + "'s SDPA";
  if (cudnn.has_backward) {
    c.path = FusedAttentionPath::kCudnn;
    c.description = name;
  } else if (RecomputedBackwardFits(s.seq)) {
    c.path = FusedAttentionPath::kCudnnRecomputedBackward;
    c.description = name + " forward and the bf16 backward on recomputed probabilities (" +
                    cudnn.backward_refusal + ")";
  } else {
    c.path = FusedAttentionPath::kCudnnTiledBackward;
    c.description = name + " forward and the tiled backward (sequence " + std::to_string(s.seq) +
                    ": one pair's recomputed scores exceed the attention scratch; " +
                    cudnn.backward_refusal + ")";
  }
  return c;
}

}  // namespace pacer::worker::gpu

#endif  // PACER_WORKER_GPU_ATTENTION_PATH_H_
