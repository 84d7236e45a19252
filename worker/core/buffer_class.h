// The classes of memory a worker allocates, as the planner's memory model
// splits them (planner/cost_model.h MemoryBreakdown): both backends track
// their buffers by these classes so measured memory can be compared with the
// prediction class by class. Thread-safety: constants and a pure function.
#ifndef PACER_WORKER_CORE_BUFFER_CLASS_H_
#define PACER_WORKER_CORE_BUFFER_CLASS_H_

namespace pacer::worker {

enum class BufferClass { kWeights, kGradients, kOptimizer, kActivations, kLogits, kWorkspace };
inline constexpr int kBufferClasses = 6;

// "weights", "gradients", "optimizer", "activations", "logits", "workspace".
const char* BufferClassName(BufferClass c);

}  // namespace pacer::worker

#endif  // PACER_WORKER_CORE_BUFFER_CLASS_H_
