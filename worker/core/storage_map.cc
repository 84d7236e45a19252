#include "core/storage_map.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace pacer::worker {

StorageMap::~StorageMap() {
  for (const auto& [handle, block] : blocks_) {
    (void)munmap(reinterpret_cast<void*>(handle), block.reserved_bytes);
  }
}

StatusOr<float*> StorageMap::Add(size_t elements, void* physical, size_t element_bytes) {
  if (elements == 0 || physical == nullptr || element_bytes == 0 ||
      element_bytes >= sizeof(float)) {
    return InternalError("storage map: a handle needs elements, memory and 1 to 3 bytes each");
  }
  // The fp32 size the executor will address; a page at least.
  const size_t bytes = elements * sizeof(float);
  // MAP_NORESERVE: no swap or commit charge; PROT_NONE: any access faults.
  void* range = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (range == MAP_FAILED) {
    return ResourceExhaustedError("storage map: cannot reserve " + std::to_string(bytes) +
                                  " bytes of address space for a handle: " + std::strerror(errno));
  }
  blocks_[reinterpret_cast<uintptr_t>(range)] =
      Block{elements, bytes, static_cast<char*>(physical), element_bytes};
  return static_cast<float*>(range);
}

void* StorageMap::Remove(const float* handle) {
  const auto it = blocks_.find(reinterpret_cast<uintptr_t>(handle));
  if (it == blocks_.end()) return nullptr;
  void* physical = it->second.physical;
  (void)munmap(reinterpret_cast<void*>(it->first), it->second.reserved_bytes);
  blocks_.erase(it);
  return physical;
}

StorageMap::Resolved StorageMap::Resolve(const void* p) const {
  Resolved r;
  r.physical = const_cast<void*>(p);
  if (blocks_.empty()) return r;
  const auto address = reinterpret_cast<uintptr_t>(p);
  auto it = blocks_.upper_bound(address);
  if (it == blocks_.begin()) return r;
  --it;
  const Block& b = it->second;
  const uintptr_t offset_bytes = address - it->first;
  // Inside the range and on an element boundary of the fp32 view.
  if (offset_bytes >= b.elements * sizeof(float) || offset_bytes % sizeof(float) != 0) return r;
  const size_t element = offset_bytes / sizeof(float);
  r.physical = b.physical + element * b.element_bytes;
  r.element_bytes = b.element_bytes;
  r.narrow = true;
  r.elements_left = b.elements - element;
  return r;
}

}  // namespace pacer::worker
