#include "pacer/planner/model_math.h"

#include <algorithm>
#include <cmath>

namespace pacer::planner {
namespace {

double HeadDim(const ModelSpec& m) {
  return static_cast<double>(m.hidden_size) / m.attention_heads;
}

// Weight-matrix parameters of one layer (what the GEMMs multiply by).
double LayerMatrixParameters(const ModelSpec& m) {
  const double h = m.hidden_size;
  const double kv_width = m.kv_heads * HeadDim(m);  // K and V projections are narrower under GQA
  const double attention = h * h + 2 * h * kv_width + h * h;
  const double mlp_matrices = m.ffn_kind == FfnKind::kSwiglu ? 3 : 2;
  return attention + mlp_matrices * h * m.ffn_hidden_size;
}

}  // namespace

double LayerParameters(const ModelSpec& m) {
  return LayerMatrixParameters(m) + 2.0 * m.hidden_size;  // + two norm weight vectors
}

double EmbeddingParameters(const ModelSpec& m) {
  const double table = static_cast<double>(m.vocab_size) * m.hidden_size;
  return table * (m.tied_embeddings ? 1 : 2) + m.hidden_size;  // + final norm
}

double TotalParameters(const ModelSpec& m) {
  return m.layers * LayerParameters(m) + EmbeddingParameters(m);
}

double AttentionCoreForwardFlopsPerSequence(const ModelSpec& m) {
  const double s = m.sequence_length;
  // Q K^T and (softmax) V: each 2 s^2 h, non-causal convention.
  return 4.0 * s * s * m.hidden_size;
}

double LayerForwardFlopsPerSequence(const ModelSpec& m) {
  return 2.0 * m.sequence_length * LayerMatrixParameters(m) +
         AttentionCoreForwardFlopsPerSequence(m);
}

double LogitsForwardFlopsPerSequence(const ModelSpec& m) {
  return 2.0 * m.sequence_length * m.hidden_size * static_cast<double>(m.vocab_size);
}

double ModelFlopsPerSequence(const ModelSpec& m) {
  // Backward is twice the forward (gradients w.r.t. inputs and weights).
  return 3.0 * (m.layers * LayerForwardFlopsPerSequence(m) + LogitsForwardFlopsPerSequence(m));
}

double HardwareFlopsPerSequence(const ModelSpec& m, Recompute recompute) {
  double extra = 0;
  switch (recompute) {
    case Recompute::kNone: break;
    case Recompute::kSelective: extra = m.layers * AttentionCoreForwardFlopsPerSequence(m); break;
    case Recompute::kFull: extra = m.layers * LayerForwardFlopsPerSequence(m); break;
  }
  return ModelFlopsPerSequence(m) + extra;
}

ModelSpec InferArchitecture(double parameters, int sequence_length) {
  // GPT-3's larger models keep h / L ~= 128 and 128-wide heads; with
  // N ~= 12 L h^2 that gives h = cbrt(128 N / 12).
  constexpr int kVocab = 51200;
  constexpr double kAspect = 128;
  ModelSpec m;
  m.parameters = parameters;
  const double h_exact = std::cbrt(kAspect * parameters / 12.0);
  const int h = std::max(256, static_cast<int>(std::lround(h_exact / 128.0)) * 128);
  const double body = std::max(parameters - static_cast<double>(kVocab) * h, 12.0 * h * h);
  m.layers = std::max(1, static_cast<int>(std::lround(body / (12.0 * h * h + 2.0 * h))));
  m.hidden_size = h;
  m.attention_heads = h / 128;
  m.kv_heads = m.attention_heads;
  m.ffn_hidden_size = 4 * h;
  m.ffn_kind = FfnKind::kGelu;
  m.vocab_size = kVocab;
  m.sequence_length = sequence_length > 0 ? sequence_length : 2048;
  m.tied_embeddings = true;  // GPT ties input and output embeddings
  m.architecture_inferred = true;
  return m;
}

}  // namespace pacer::planner
