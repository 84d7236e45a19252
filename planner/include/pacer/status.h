// Status and StatusOr: Pacer's one error model.
//
// Every fallible function returns a Status (or a StatusOr<T> carrying a value
// on success). No exceptions cross module boundaries. The code tells the
// caller what to do next, following Abseil's canonical codes:
//
//   kInvalidArgument    the caller's input is wrong; terminal, do not retry.
//   kNotFound           the named thing does not exist; terminal for this input.
//   kFailedPrecondition the world is not in a state to do this; retry only after
//                       it changes (e.g. not enough free GPUs).
//   kAborted            a read-modify-write lost a race (HTTP 409); re-read, retry.
//   kUnavailable        transient (network, 5xx, 429); retry with backoff.
//   kDeadlineExceeded   an operation timed out; retry with backoff.
//   kResourceExhausted  a limit was hit (size limit, quota); terminal for this input.
//   kInternal           a bug; not retryable.
//   kHardwareFault      the hardware failed (a GPU's uncorrectable ECC or NVLink
//                       error): not retryable on it; another device may work.
//
// Thread-safety: Status and StatusOr are values; distinct objects may be used
// from different threads, a shared one needs external synchronization.
#ifndef PACER_STATUS_H_
#define PACER_STATUS_H_

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace pacer {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kFailedPrecondition,
  kAborted,
  kUnavailable,
  kDeadlineExceeded,
  kResourceExhausted,
  kPermissionDenied,
  kUnauthenticated,
  kInternal,
  kHardwareFault,
};

// "INVALID_ARGUMENT", "UNAVAILABLE", ...
std::string_view StatusCodeName(StatusCode code);

// Whether an operation that failed with `code` may succeed if simply retried
// (with backoff): Aborted, Unavailable and DeadlineExceeded.
bool IsRetryable(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  bool retryable() const { return IsRetryable(code_); }

  // "INVALID_ARGUMENT: spec.training.globalBatchSize: ..."
  std::string ToString() const;

  // Returns a copy whose message is "<prefix>: <message>" (context for callers).
  Status WithContext(std::string_view prefix) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgumentError(std::string m) {
  return Status(StatusCode::kInvalidArgument, std::move(m));
}
inline Status NotFoundError(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
inline Status FailedPreconditionError(std::string m) {
  return Status(StatusCode::kFailedPrecondition, std::move(m));
}
inline Status UnavailableError(std::string m) {
  return Status(StatusCode::kUnavailable, std::move(m));
}
inline Status ResourceExhaustedError(std::string m) {
  return Status(StatusCode::kResourceExhausted, std::move(m));
}
inline Status InternalError(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const T& value) : rep_(value) {}                  // NOLINT: implicit by design
  StatusOr(T&& value) : rep_(std::move(value)) {}            // NOLINT
  StatusOr(Status status) : rep_(std::move(status)) {         // NOLINT
    assert(!std::get<Status>(rep_).ok() && "StatusOr needs a value or an error");
    if (std::get<Status>(rep_).ok()) {
      rep_ = Status(StatusCode::kInternal, "StatusOr constructed from an OK status");
    }
  }

  bool ok() const { return std::holds_alternative<T>(rep_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(rep_); }

  const T& value() const& { return std::get<T>(rep_); }
  T& value() & { return std::get<T>(rep_); }
  T&& value() && { return std::get<T>(std::move(rep_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  std::variant<Status, T> rep_;
};

}  // namespace pacer

#define PACER_STATUS_CONCAT_INNER_(a, b) a##b
#define PACER_STATUS_CONCAT_(a, b) PACER_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (a Status) is not OK.
#define RETURN_IF_ERROR(expr)                     \
  do {                                            \
    ::pacer::Status pacer_status_ = (expr);       \
    if (!pacer_status_.ok()) return pacer_status_; \
  } while (0)

// `lhs = value of rexpr` or return its Status from the enclosing function.
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  ASSIGN_OR_RETURN_IMPL_(PACER_STATUS_CONCAT_(pacer_statusor_, __LINE__), lhs, rexpr)
#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                           \
  if (!tmp.ok()) return tmp.status();           \
  lhs = std::move(tmp).value()

#endif  // PACER_STATUS_H_
