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

double HardwareFlopsPerSequence(const ModelSpec& m, Recompute recompute,
                                AttentionKernel attention) {
  const bool fused = attention == AttentionKernel::kFused;
  // The fused backward recomputes Q K^T: half the core's forward.
  double extra = fused ? m.layers * AttentionCoreForwardFlopsPerSequence(m) / 2 : 0;
  switch (recompute) {
    case Recompute::kNone:
      break;
    case Recompute::kSelective:
      if (!fused) extra += m.layers * AttentionCoreForwardFlopsPerSequence(m);
      break;
    case Recompute::kFull:
      extra += m.layers * LayerForwardFlopsPerSequence(m);
      break;
  }
  return ModelFlopsPerSequence(m) + extra;
}

namespace {

// Widths and depths of published models, smallest first: Pythia 14M and 70M,
// GPT-3 Small, Medium, Large, XL and 2.7B, Llama 3.2 3B, Llama 2 7B and 13B,
// Llama 2 70B, GPT-3 175B, Llama 3.1 405B.
struct PublishedShape {
  int hidden, layers;
};
constexpr PublishedShape kPublishedShapes[] = {
    {128, 6},   {512, 6},   {768, 12},  {1024, 24}, {1536, 24},  {2048, 24},   {2560, 32},
    {3072, 28}, {4096, 32}, {5120, 40}, {8192, 80}, {12288, 96}, {16384, 126},
};
// Llama 2 keeps multi-head attention below 30B and uses 8 KV heads (and a
// 1.3x wider MLP) from 70B on.
constexpr double kGroupedQueryFromParameters = 30e9;

// The multiple of 8 that divides h and is nearest h / 128 (128-wide heads),
// the larger one on a tie; at least 8.
int HeadsFor(int h) {
  const double want = h / 128.0;
  int best = 8;
  for (int heads = 8; heads <= h; heads += 8) {
    if (h % heads != 0) continue;
    if (std::abs(heads - want) <= std::abs(best - want)) best = heads;
    if (heads > want) break;
  }
  return best;
}

ModelSpec LlamaShape(int h, int layers, bool grouped_query, int vocab) {
  ModelSpec m;
  m.hidden_size = h;
  m.layers = layers;
  m.attention_heads = HeadsFor(h);
  m.kv_heads = grouped_query ? 8 : m.attention_heads;
  m.ffn_kind = FfnKind::kSwiglu;
  // Llama's rule: 2/3 of 4h, times 1.3 for the 70B-class models, rounded up
  // to a multiple of 256 (4096 from 70B on).
  const double ffn = (grouped_query ? 1.3 : 1.0) * 8.0 * h / 3.0;
  const int multiple = grouped_query ? 4096 : 256;
  m.ffn_hidden_size = static_cast<int>(std::ceil(ffn / multiple)) * multiple;
  m.vocab_size = vocab;
  m.tied_embeddings = false;
  return m;
}

}  // namespace

ModelSpec InferArchitecture(double parameters, int sequence_length) {
  // The published width nearest in parameters (on a log scale), then the
  // depth that hits the count: a Llama-style model (SwiGLU, untied 32,000-
  // token embeddings, heads and KV heads multiples of 8). Models so small
  // that the embeddings would be most of them get a byte-level vocabulary.
  const bool grouped_query = parameters >= kGroupedQueryFromParameters;
  constexpr int kVocab = 32000;
  constexpr int kByteVocab = 256;
  const PublishedShape* best = &kPublishedShapes[0];
  double best_distance = 1e300;
  for (const PublishedShape& shape : kPublishedShapes) {
    const double n = TotalParameters(LlamaShape(shape.hidden, shape.layers, grouped_query, kVocab));
    const double distance = std::abs(std::log(n / parameters));
    if (distance < best_distance) {
      best_distance = distance;
      best = &shape;
    }
  }
  ModelSpec m = LlamaShape(best->hidden, 1, grouped_query, kVocab);
  if (EmbeddingParameters(m) > 0.5 * parameters) m.vocab_size = kByteVocab;
  const double body = parameters - EmbeddingParameters(m);
  m.layers = std::max(1, static_cast<int>(std::lround(body / LayerParameters(m))));
  m.parameters = parameters;
  m.sequence_length = sequence_length > 0 ? sequence_length : 2048;
  m.architecture_inferred = true;
  return m;
}

}  // namespace pacer::planner
