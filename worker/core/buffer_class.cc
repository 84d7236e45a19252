#include "core/buffer_class.h"

namespace pacer::worker {

const char* BufferClassName(BufferClass c) {
  switch (c) {
    case BufferClass::kWeights: return "weights";
    case BufferClass::kGradients: return "gradients";
    case BufferClass::kOptimizer: return "optimizer";
    case BufferClass::kActivations: return "activations";
    case BufferClass::kLogits: return "logits";
    case BufferClass::kWorkspace: return "workspace";
  }
  return "unknown";
}

}  // namespace pacer::worker
