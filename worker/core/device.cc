#include "core/device.h"

#include <algorithm>
#include <utility>

#include "core/tiled_attention.h"

namespace pacer::worker {

Status Device::AttentionForward(const AttentionShape& shape, const float* qkv, float* probs,
                                float* ctx) {
  return UnfusedAttentionForward(this, shape, qkv, probs, ctx);
}

Status Device::AttentionBackward(const AttentionShape& shape, const float* qkv, float* probs,
                                 const float* dctx, float* dqkv) {
  return UnfusedAttentionBackward(this, shape, qkv, probs, dctx, dqkv);
}

void MemoryTracker::Charge(BufferClass c, double bytes) {
  const size_t i = static_cast<size_t>(c);
  by_class_[i] += bytes;
  class_peak_[i] = std::max(class_peak_[i], by_class_[i]);
  current_ += bytes;
  peak_ = std::max(peak_, current_);
}

void MemoryTracker::Release(BufferClass c, double bytes) {
  by_class_[static_cast<size_t>(c)] -= bytes;
  current_ -= bytes;
}

void MemoryTracker::ForgetPeaksSince(const MemoryTracker& before) {
  peak_ = std::max(before.peak_, current_);
  for (size_t i = 0; i < kBufferClasses; ++i) {
    class_peak_[i] = std::max(before.class_peak_[i], by_class_[i]);
  }
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : device_(other.device_),
      class_(other.class_),
      storage_(other.storage_),
      element_bytes_(other.element_bytes_),
      data_(other.data_),
      size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Clear();
    device_ = other.device_;
    class_ = other.class_;
    storage_ = other.storage_;
    element_bytes_ = other.element_bytes_;
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

Status DeviceBuffer::Assign(size_t elements, Fill fill) {
  Clear();
  if (elements == 0) return Status::Ok();
  if (device_ == nullptr) return InternalError("a device buffer without a device");
  const size_t element_bytes = device_->ElementBytes(storage_);
  StatusOr<float*> p = device_->Allocate(elements, class_, fill, storage_);
  if (!p.ok()) {
    return p.status().WithContext(
        std::string("allocating ") + BufferClassName(class_) + " (" +
        std::to_string(static_cast<double>(elements) * static_cast<double>(element_bytes) / 1e6) +
        " MB)");
  }
  data_ = *p;
  size_ = elements;
  element_bytes_ = element_bytes;
  device_->memory().Charge(class_, bytes());
  return Status::Ok();
}

void DeviceBuffer::Clear() {
  if (data_ == nullptr) return;
  device_->Free(data_, size_);
  device_->memory().Release(class_, bytes());
  data_ = nullptr;
  size_ = 0;
}

}  // namespace pacer::worker
