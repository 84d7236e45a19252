// Transformer arithmetic: parameter counts and FLOPs from the architecture.
// Sources (docs/planner.md): Kaplan 2020 / "Transformer Math 101" (C ~= 6ND),
// PaLM appendix B (6N + 12 L h s per token), Narayanan et al. SC'21 (Megatron
// 72 B s L h^2 (1 + s/6h + V/12Lh) model FLOPs, 96 B s L h^2 (...) with full
// recomputation).
//
// Conventions: FLOPs count a multiply-add as 2. Attention FLOPs use the
// non-causal convention (the full s x s score matrix), as Megatron and PaLM
// report MFU; docs/planner.md says so wherever MFU appears.
// Thread-safety: pure functions.
#ifndef PACER_PLANNER_MODEL_MATH_H_
#define PACER_PLANNER_MODEL_MATH_H_

#include "pacer/planner/job_spec.h"

namespace pacer::planner {

// Parameters of one transformer layer's weight matrices (QKV with grouped-
// query attention, output projection, MLP with 2 or 3 matrices) plus its two
// norms.
double LayerParameters(const ModelSpec& m);
// Input embedding (and output projection unless tied) plus the final norm.
double EmbeddingParameters(const ModelSpec& m);
// The whole model: layers x LayerParameters + EmbeddingParameters.
double TotalParameters(const ModelSpec& m);

// Forward FLOPs of one layer for one sequence: the weight GEMMs (2 x params x s)
// plus attention scores and values (2 x 2 x s^2 x h).
double LayerForwardFlopsPerSequence(const ModelSpec& m);
// Forward FLOPs of the output (logits) GEMM for one sequence: 2 s h V.
double LogitsForwardFlopsPerSequence(const ModelSpec& m);
// Attention core (scores + values) forward FLOPs of one layer per sequence,
// the part selective recomputation re-runs: 4 s^2 h.
double AttentionCoreForwardFlopsPerSequence(const ModelSpec& m);

// Model FLOPs per sequence of training (forward + backward = 3 x forward),
// independent of recomputation: what MFU divides by.
double ModelFlopsPerSequence(const ModelSpec& m);
// Hardware FLOPs per sequence: model FLOPs plus what `recompute` re-executes
// (full: one more forward of every layer; selective: the attention core),
// plus, with a fused attention kernel, the scores (Q K^T, 2 s^2 h per
// layer) that its backward pass recomputes instead of storing. Under a
// fused kernel selective recomputation re-executes nothing more: the
// kernel stores no score matrix to drop.
double HardwareFlopsPerSequence(const ModelSpec& m, Recompute recompute,
                                AttentionKernel attention);

// Fills a standard GPT-like architecture for a parameter count (aspect ratio
// h / L ~= 128, head size 128, MLP 4h GELU, vocabulary 51200): used when a
// TrainJob gives only `parameters`. Keeps a sequence_length already set
// (default 2048).
ModelSpec InferArchitecture(double parameters, int sequence_length);

// Chinchilla's compute-optimal data: ~20 tokens per parameter.
inline constexpr double kChinchillaTokensPerParameter = 20.0;

}  // namespace pacer::planner

#endif  // PACER_PLANNER_MODEL_MATH_H_
