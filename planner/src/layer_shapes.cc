#include "pacer/planner/layer_shapes.h"

#include <algorithm>
#include <utility>

namespace pacer::planner {

std::array<GemmShape, 6> LayerForwardGemms(const ModelSpec& m, int b, int t) {
  const double s = m.sequence_length, h = m.hidden_size;
  const double tokens = b * s;
  const double head_dim = h / m.attention_heads;
  const double qkv_width = h + 2.0 * m.kv_heads * head_dim;  // K, V narrower under GQA
  const double heads_per_rank = static_cast<double>(m.attention_heads) / t;
  const double mlp_in_width = (m.ffn_kind == FfnKind::kSwiglu ? 2.0 : 1.0) * m.ffn_hidden_size;
  return {{
      {"qkv", tokens, qkv_width / t, h, 1},
      {"scores", s, s, head_dim, b * heads_per_rank},
      {"context", s, head_dim, s, b * heads_per_rank},
      {"projection", tokens, h, h / t, 1},
      {"mlp-in", tokens, mlp_in_width / t, h, 1},
      {"mlp-out", tokens, h, static_cast<double>(m.ffn_hidden_size) / t, 1},
  }};
}

std::array<GemmShape, 2> AttentionCoreGemms(const ModelSpec& m, int b, int t) {
  const std::array<GemmShape, 6> all = LayerForwardGemms(m, b, t);
  return {all[1], all[2]};
}

std::string TensorParallelSplitError(const ModelSpec& m, int t) {
  const std::pair<const char*, int64_t> parts[] = {{"attention heads", m.attention_heads},
                                                   {"KV heads", m.kv_heads},
                                                   {"FFN hidden size", m.ffn_hidden_size},
                                                   {"sequence length", m.sequence_length}};
  for (const auto& [what, value] : parts) {
    if (t > 0 && value % t != 0) {
      return std::string("must divide the ") + what + " (" + std::to_string(value) + ")";
    }
  }
  return "";
}

int64_t VocabShardRows(const ModelSpec& m, int t) {
  const int64_t ranks = std::max(t, 1);
  return (static_cast<int64_t>(m.vocab_size) + ranks - 1) / ranks;
}

GemmShape LogitsGemm(const ModelSpec& m, int b, int t) {
  return {"logits", static_cast<double>(b) * m.sequence_length,
          static_cast<double>(VocabShardRows(m, t)), static_cast<double>(m.hidden_size), 1};
}

}  // namespace pacer::planner
