#include "gpu/gpu_buffers.h"

#include <cuda_runtime.h>

#include "gpu/cuda_check.h"

namespace pacer::worker {

DeviceAllocator::~DeviceAllocator() { FreeAll(); }

StatusOr<void*> DeviceAllocator::Allocate(const std::string& name, BufferClass c,
                                          std::size_t bytes) {
  const std::size_t rounded = (std::max<std::size_t>(bytes, 1) + 255) / 256 * 256;
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, rounded);
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clear the error so later calls still work
    std::size_t free_bytes = 0, total_bytes = 0;
    (void)cudaMemGetInfo(&free_bytes, &total_bytes);
    return ResourceExhaustedError(
        GpuErrorWhere(__FILE__, __LINE__) + ": CUDA out of memory allocating " + name + " (" +
        BufferClassName(c) + "): requested " + std::to_string(rounded) + " bytes, " +
        std::to_string(free_bytes) + " of " + std::to_string(total_bytes) +
        " bytes free; this rank already holds " + std::to_string(total_) + " bytes");
  }
  CUDACHECK(err);
  allocations_.push_back({name, c, p, rounded});
  by_class_[static_cast<int>(c)] += rounded;
  total_ += rounded;
  peak_ = std::max(peak_, total_);
  return p;
}

void DeviceAllocator::FreeAll() {
  for (const Allocation& a : allocations_) (void)cudaFree(a.pointer);
  allocations_.clear();
  by_class_.fill(0);
  total_ = 0;
}

}  // namespace pacer::worker
