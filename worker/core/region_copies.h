// RegionCopies: fp32 device regions that have a converted copy kept beside
// them, found by any slice of the region and marked stale when the region
// is written. The GPU device keeps two such tables under a bf16 plan
// (gpu_device.cu): its weights' bf16 copies (a GEMM reads the copy, which
// is converted again only after a write to the weights, so once per
// optimizer step or parameter all-gather, not once per GEMM), and the
// read-only scopes' copies (Device::BeginReadOnly; a write there is a
// broken promise). The GPU runs only on a GPU, so the lookups, the
// boundaries and the stale marks are written here, once, and tested on the
// CPU (tests/worker/region_copies_test.cc).
//
// Regions do not overlap: each is one allocation or one region a caller
// names once, and Add refuses one that overlaps another. A write is marked
// by the address it starts at (the GPU device's entry points know where an
// output starts, not every element they write; an output never spans two
// allocations).
//
// Units: elements (fp32). Thread-safety: none; a table belongs to one device
// (one thread). Pointers are compared as integers (uintptr_t), as
// std::less would, since two allocations' pointers have no ordering of their
// own in C++.
#ifndef PACER_WORKER_CORE_REGION_COPIES_H_
#define PACER_WORKER_CORE_REGION_COPIES_H_

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <utility>

namespace pacer::worker {

template <typename Copy>
class RegionCopies {
 public:
  struct Entry {
    const float* base = nullptr;
    size_t elements = 0;
    bool stale = true;  // written (or never converted) since the copy was made
    Copy copy{};
    // Where `p` lies in the region, in elements from base.
    size_t Offset(const float* p) const { return static_cast<size_t>(p - base); }
  };

  // Registers [base, base + elements) with `copy`, stale. nullptr (and
  // nothing registered) for an empty region or one that overlaps a
  // registered region.
  Entry* Add(const float* base, size_t elements, Copy copy = Copy{}) {
    if (base == nullptr || elements == 0 || Overlaps(base, elements)) return nullptr;
    Entry& entry = entries_[Address(base)];
    entry = Entry{base, elements, true, std::move(copy)};
    return &entry;
  }

  // Whether [base, base + elements) shares an element with a registered
  // region (true, too, for a range past the end of the address space).
  bool Overlaps(const float* base, size_t elements) const {
    if (elements == 0) return false;
    const uintptr_t b = Address(base);
    if (elements > (UINTPTR_MAX - b) / sizeof(float)) return true;
    const uintptr_t e = b + elements * sizeof(float);
    auto next = entries_.lower_bound(b);
    if (next != entries_.end() && next->first < e) return true;
    return next != entries_.begin() && End(std::prev(next)->second) > b;
  }

  // Removes the region that starts at `base` and returns it (its copy for
  // the caller to release); nullopt when no region starts there.
  std::optional<Entry> Remove(const float* base) {
    const auto it = entries_.find(Address(base));
    if (it == entries_.end()) return std::nullopt;
    std::optional<Entry> removed(std::move(it->second));
    entries_.erase(it);
    return removed;
  }

  // The region that holds all of [p, p + span) (span >= 1), or nullptr:
  // a slice that runs past its region's end has no copy to read.
  Entry* Find(const float* p, size_t span) {
    Entry* e = Holding(p);
    if (e == nullptr || span == 0) return nullptr;
    return span <= e->elements - e->Offset(p) ? e : nullptr;
  }

  // Marks the region that holds `p` stale; returns it, or nullptr when `p`
  // is in none.
  Entry* Wrote(const float* p) {
    Entry* e = Holding(p);
    if (e != nullptr) e->stale = true;
    return e;
  }

  // Calls f(entry) for every region, in address order.
  template <typename F>
  void ForEach(F&& f) {
    for (auto& kv : entries_) f(kv.second);
  }

  void Clear() { entries_.clear(); }
  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }

 private:
  static uintptr_t Address(const float* p) { return reinterpret_cast<uintptr_t>(p); }
  static uintptr_t End(const Entry& e) { return Address(e.base) + e.elements * sizeof(float); }
  // The region with p in [base, base + elements), or nullptr.
  Entry* Holding(const float* p) {
    if (p == nullptr || entries_.empty()) return nullptr;
    auto it = entries_.upper_bound(Address(p));
    if (it == entries_.begin()) return nullptr;
    --it;
    return Address(p) < End(it->second) ? &it->second : nullptr;
  }

  std::map<uintptr_t, Entry> entries_;  // by the region's start
};

}  // namespace pacer::worker

#endif  // PACER_WORKER_CORE_REGION_COPIES_H_
