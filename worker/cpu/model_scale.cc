#include "cpu/model_scale.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace pacer::worker::cpu {
namespace {

// round(value) to a positive multiple of `multiple`.
int RoundTo(double value, int multiple) {
  const double m = std::max(1, multiple);
  return static_cast<int>(std::max(m, std::round(value / m) * m));
}

}  // namespace

StatusOr<WorkerConfig> ScaledConfig(const WorkerConfig& config) {
  const double scale = config.scale;
  if (!(scale > 0 && scale <= 1)) {
    return InvalidArgumentError("--scale must be in (0, 1], got " + std::to_string(scale));
  }
  if (scale == 1) return config;
  WorkerConfig c = config;
  planner::ModelSpec& m = c.model;
  const int t = c.tensor_parallel;
  const int head_dim = m.attention_heads > 0 ? m.hidden_size / m.attention_heads : m.hidden_size;
  m.hidden_size = std::max(1, static_cast<int>(std::lround(head_dim * scale))) * m.attention_heads;
  m.ffn_hidden_size = RoundTo(m.ffn_hidden_size * scale, t);
  m.sequence_length = RoundTo(m.sequence_length * scale, t);
  m.layers = RoundTo(m.layers * std::sqrt(scale), c.pipeline_parallel * c.virtual_stages);
  m.parameters.reset();  // the given count no longer describes this model
  RETURN_IF_ERROR(ValidateConfig(c));
  return c;
}

}  // namespace pacer::worker::cpu
