// StorageMap: handles for device buffers stored narrower than fp32.
//
// The step executor addresses every buffer as float* and does pointer
// arithmetic on it in 4-byte elements (device.h). A device that stores a
// buffer in 2-byte elements (the GPU device's bf16 activations,
// gpu_device.h) cannot hand out the buffer's real address: `base + i`
// would land in the middle of element 2i. It hands out a handle instead:
// the start of an address range of the buffer's fp32 size that this map
// has reserved from the operating system without access (mmap PROT_NONE,
// no memory behind it). So a handle is never the address of anything else
// in the process (host memory and, under CUDA's unified addressing, device
// memory are mapped from the same address space), and a handle used as
// memory by mistake, by the host or by a GPU kernel, faults at once
// instead of reading a neighbour's data. Resolve turns any float* inside a
// handle's range into the physical address of that element.
//
// Units: elements (fp32-sized, as the executor counts them) and bytes where
// named. Thread-safety: none; a map belongs to one device (one thread).
#ifndef PACER_WORKER_CORE_STORAGE_MAP_H_
#define PACER_WORKER_CORE_STORAGE_MAP_H_

#include <cstddef>
#include <cstdint>
#include <map>

#include "pacer/status.h"

namespace pacer::worker {

class StorageMap {
 public:
  StorageMap() = default;
  StorageMap(const StorageMap&) = delete;
  StorageMap& operator=(const StorageMap&) = delete;
  ~StorageMap();  // releases every reservation (not the physical memory)

  // A handle for `elements` elements stored at `physical`, `element_bytes`
  // bytes each (1 to 3: narrower than the fp32 the handle pretends).
  // ResourceExhausted when the address space cannot be reserved.
  StatusOr<float*> Add(size_t elements, void* physical, size_t element_bytes);
  // Forgets the handle `handle` (as Add returned it) and returns its
  // physical address; nullptr when `handle` is not one.
  void* Remove(const float* handle);

  // Where the element at `p` lives.
  struct Resolved {
    void* physical = nullptr;  // `p` itself when not inside a handle
    size_t element_bytes = sizeof(float);
    bool narrow = false;       // inside a handle's range
    size_t elements_left = 0;  // narrow: elements from `p` to the end of its buffer
  };
  Resolved Resolve(const void* p) const;
  bool Contains(const void* p) const { return Resolve(p).narrow; }
  size_t size() const { return blocks_.size(); }

 private:
  struct Block {
    size_t elements = 0;
    size_t reserved_bytes = 0;
    char* physical = nullptr;
    size_t element_bytes = 0;
  };
  std::map<uintptr_t, Block> blocks_;  // by handle address
};

}  // namespace pacer::worker

#endif  // PACER_WORKER_CORE_STORAGE_MAP_H_
