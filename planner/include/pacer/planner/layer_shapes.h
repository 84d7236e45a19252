// The GEMMs of one transformer layer as Megatron splits them over t tensor-
// parallel ranks (QKV and the first MLP GEMM split by columns, the output
// projection and the second MLP GEMM by rows, attention by heads). One
// source of truth: the cost model times these shapes and the worker executes
// them, so predicted and issued FLOPs agree by construction; the tests check
// the sum against the closed-form FLOPs of model_math.h.
//
// Units: dimensions in elements; flops() counts a multiply-add as 2.
// Thread-safety: pure functions.
#ifndef PACER_PLANNER_LAYER_SHAPES_H_
#define PACER_PLANNER_LAYER_SHAPES_H_

#include <array>
#include <cstdint>
#include <string>

#include "pacer/planner/job_spec.h"

namespace pacer::planner {

// C[m x n] = A[m x k] B[k x n], `batch` times (batched GEMMs for attention).
struct GemmShape {
  const char* name = "";
  double m = 0, n = 0, k = 0, batch = 1;
  double flops() const { return 2.0 * m * n * k * batch; }
};

// Forward GEMMs of one layer for one micro-batch of `b` sequences on one
// tensor-parallel rank: qkv, scores (Q K^T), context (P V), projection,
// mlp-in (two matrices fused for SwiGLU), mlp-out. The backward pass runs
// two GEMMs of the same FLOPs for each (input and weight gradients).
std::array<GemmShape, 6> LayerForwardGemms(const ModelSpec& m, int b, int t);

// The attention core (scores and context): what selective recomputation repeats.
std::array<GemmShape, 2> AttentionCoreGemms(const ModelSpec& m, int b, int t);

// Why t tensor-parallel ranks cannot split `m` evenly ("must divide the FFN
// hidden size (11000)"), or "" when they can:
// the heads and KV heads (split by head), the FFN hidden size (MLP columns
// and rows) and the sequence (sequence parallelism) must each divide by t.
// The workers' tensors need whole shares; a plan the search let through
// would fail at launch.
std::string TensorParallelSplitError(const ModelSpec& m, int t);

// Vocabulary rows one of t tensor-parallel ranks holds: ceil(V / t). A
// vocabulary t does not divide (GPT-2's 50257) is padded to t x that, as
// Megatron pads it; the padded rows are never a label. The cost model, the
// memory model and both workers count and run the padded tables and logits.
int64_t VocabShardRows(const ModelSpec& m, int t);

// The output projection to the vocabulary (VocabShardRows per rank).
GemmShape LogitsGemm(const ModelSpec& m, int b, int t);

}  // namespace pacer::planner

#endif  // PACER_PLANNER_LAYER_SHAPES_H_
