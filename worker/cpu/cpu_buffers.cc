#include "cpu/cpu_buffers.h"

#include <algorithm>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

namespace pacer::worker::cpu {

void MemoryTracker::Charge(BufferClass c, double bytes) {
  by_class_[static_cast<size_t>(c)] += bytes;
  current_ += bytes;
  peak_ = std::max(peak_, current_);
}

void MemoryTracker::Release(BufferClass c, double bytes) {
  by_class_[static_cast<size_t>(c)] -= bytes;
  current_ -= bytes;
}

FloatBuffer::FloatBuffer(FloatBuffer&& other) noexcept
    : tracker_(other.tracker_), class_(other.class_), values_(std::move(other.values_)) {
  other.values_.clear();
  other.tracker_ = nullptr;
}

FloatBuffer& FloatBuffer::operator=(FloatBuffer&& other) noexcept {
  if (this != &other) {
    Clear();
    tracker_ = other.tracker_;
    class_ = other.class_;
    values_ = std::move(other.values_);
    other.values_.clear();
    other.tracker_ = nullptr;
  }
  return *this;
}

FloatBuffer::~FloatBuffer() { Clear(); }

void FloatBuffer::Recharge(size_t old_elements) {
  if (tracker_ == nullptr) return;
  tracker_->Release(class_, static_cast<double>(old_elements) * sizeof(float));
  tracker_->Charge(class_, static_cast<double>(values_.size()) * sizeof(float));
}

bool FloatBuffer::TryAssign(size_t elements) {
  const size_t old = values_.size();
  try {
    values_.assign(elements, 0.0f);
  } catch (const std::bad_alloc&) {
    values_.clear();
    values_.shrink_to_fit();
    Recharge(old);
    return false;
  } catch (const std::length_error&) {
    values_.clear();
    Recharge(old);
    return false;
  }
  Recharge(old);
  return true;
}

Status FloatBuffer::Assign(size_t elements) {
  if (!TryAssign(elements)) {
    return ResourceExhaustedError("cannot allocate " +
                                  std::to_string(static_cast<double>(elements) * 4 / 1e6) +
                                  " MB of host memory for " + BufferClassName(class_));
  }
  return Status::Ok();
}

void FloatBuffer::Clear() {
  const size_t old = values_.size();
  values_.clear();
  values_.shrink_to_fit();
  Recharge(old);
}

}  // namespace pacer::worker::cpu
