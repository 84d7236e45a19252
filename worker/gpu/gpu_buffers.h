// DeviceAllocator: every cudaMalloc of the GPU backend goes through it, under
// a buffer class (weights, gradients, optimizer, activations, logits,
// workspace), so that the backend can report what it holds per class and its
// peak next to the planner's prediction (device_layout.h), and so that an
// out-of-memory error says what was asked for and what was free.
//
// Units: bytes. Thread-safety: not thread-safe; one per backend (one rank).
// The destructor frees everything still allocated.
#ifndef PACER_WORKER_GPU_GPU_BUFFERS_H_
#define PACER_WORKER_GPU_GPU_BUFFERS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/buffer_class.h"
#include "pacer/status.h"

namespace pacer::worker {

class DeviceAllocator {
 public:
  DeviceAllocator() = default;
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;
  ~DeviceAllocator();

  // cudaMalloc of `bytes` (rounded up to 256) under `name`. A failed
  // allocation is ResourceExhausted naming the buffer, the bytes requested
  // and the bytes free on the device; the sticky error is cleared so the
  // caller can still report it.
  StatusOr<void*> Allocate(const std::string& name, BufferClass c, std::size_t bytes);

  // Frees everything (also done by the destructor).
  void FreeAll();

  std::size_t bytes(BufferClass c) const { return by_class_[static_cast<int>(c)]; }
  std::size_t total_bytes() const { return total_; }
  std::size_t peak_bytes() const { return peak_; }

 private:
  struct Allocation {
    std::string name;
    BufferClass buffer_class;
    void* pointer;
    std::size_t bytes;
  };
  std::vector<Allocation> allocations_;
  std::array<std::size_t, kBufferClasses> by_class_{};
  std::size_t total_ = 0;
  std::size_t peak_ = 0;
};

}  // namespace pacer::worker

#endif  // PACER_WORKER_GPU_GPU_BUFFERS_H_
