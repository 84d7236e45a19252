#include "core/gloo_store.h"

#include <gloo/common/error.h>

#include <string_view>

namespace pacer::worker {
namespace {

// Gloo tells I/O failures (which a caller may retry) from the rest by type;
// keep that distinction from our codes.
[[noreturn]] void ThrowForGloo(const Status& status) {
  const std::string message = "pacer store: " + status.ToString();
  if (status.code() == StatusCode::kUnavailable || status.code() == StatusCode::kDeadlineExceeded) {
    throw gloo::IoException(message);
  }
  throw gloo::Exception(message);
}

}  // namespace

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  Status status = client_.Set(key, std::string_view(data.data(), data.size()));
  if (!status.ok()) ThrowForGloo(status);
}

std::vector<char> GlooStore::get(const std::string& key) {
  StatusOr<std::string> value = client_.Get(key, timeout_);
  if (!value.ok()) ThrowForGloo(value.status());
  return std::vector<char>(value->begin(), value->end());
}

void GlooStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void GlooStore::wait(const std::vector<std::string>& keys,
                     const std::chrono::milliseconds& timeout) {
  const std::chrono::milliseconds bounded = timeout.count() > 0 ? timeout : timeout_;
  Status status = client_.Wait(keys, bounded);
  if (!status.ok()) ThrowForGloo(status);
}

}  // namespace pacer::worker
