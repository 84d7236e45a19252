// Host float buffers of the CPU backend, with a byte count per buffer class
// (weights, gradients, optimizer state, activations, communication scratch)
// so the backend can report its peak memory the way the GPU backend reports
// device memory, and compare it with the plan's memory model.
//
// Units: elements (float, 4 bytes) for sizes, bytes for the tracked totals.
// Thread-safety: a MemoryTracker and the buffers charged to it belong to one
// rank's thread; not thread-safe.
#ifndef PACER_WORKER_CPU_CPU_BUFFERS_H_
#define PACER_WORKER_CPU_CPU_BUFFERS_H_

#include <array>
#include <cstddef>
#include <vector>

#include "core/buffer_class.h"
#include "pacer/status.h"

namespace pacer::worker::cpu {


// Current and peak bytes, per class and in total.
class MemoryTracker {
 public:
  void Charge(BufferClass c, double bytes);
  void Release(BufferClass c, double bytes);
  double current_bytes() const { return current_; }
  double peak_bytes() const { return peak_; }
  double class_bytes(BufferClass c) const { return by_class_[static_cast<size_t>(c)]; }

 private:
  std::array<double, kBufferClasses> by_class_{};
  double current_ = 0;
  double peak_ = 0;
};

// A float vector whose size is charged to a MemoryTracker (released when it
// shrinks or dies). Move-only, so a charge is never counted twice.
class FloatBuffer {
 public:
  FloatBuffer() = default;
  FloatBuffer(MemoryTracker* tracker, BufferClass c) : tracker_(tracker), class_(c) {}
  FloatBuffer(FloatBuffer&& other) noexcept;
  FloatBuffer& operator=(FloatBuffer&& other) noexcept;
  FloatBuffer(const FloatBuffer&) = delete;
  FloatBuffer& operator=(const FloatBuffer&) = delete;
  ~FloatBuffer();

  // Resizes to `elements` zeros (ResourceExhausted when the host is out of
  // memory, which the runner maps to kExitOutOfMemory).
  Status Assign(size_t elements);
  // Resizes without the Status, for scratch whose size was checked before;
  // still charged. Returns false on allocation failure.
  bool TryAssign(size_t elements);
  void Clear();

  float* data() { return values_.data(); }
  const float* data() const { return values_.data(); }
  size_t size() const { return values_.size(); }
  std::vector<float>& values() { return values_; }
  const std::vector<float>& values() const { return values_; }

 private:
  void Recharge(size_t old_elements);

  MemoryTracker* tracker_ = nullptr;
  BufferClass class_ = BufferClass::kActivations;
  std::vector<float> values_;
};

}  // namespace pacer::worker::cpu

#endif  // PACER_WORKER_CPU_CPU_BUFFERS_H_
