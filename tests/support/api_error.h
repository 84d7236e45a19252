// ApiError: an error as the Kubernetes API server reports it (an HTTP code, a
// metav1 Status reason and a message like the real server's), and its
// conversions to the metav1 Status JSON body and to pacer::Status.
//
// Thread-safety: plain values and pure functions.
#ifndef PACER_TESTS_SUPPORT_API_ERROR_H_
#define PACER_TESTS_SUPPORT_API_ERROR_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pacer/status.h"

namespace pacer::testing {

struct ApiError {
  ApiError() = default;
  ApiError(int code_, std::string reason_, std::string message_, std::string name_ = "",
           std::string group_ = "", std::string kind_ = "")
      : code(code_),
        reason(std::move(reason_)),
        message(std::move(message_)),
        name(std::move(name_)),
        group(std::move(group_)),
        kind(std::move(kind_)) {}

  int code = 500;
  std::string reason = "InternalError";  // metav1 StatusReason
  std::string message;
  std::string name;   // details.name
  std::string group;  // details.group
  std::string kind;   // details.kind (the plural, as the real server reports it for most errors)
  // details.causes: [{"reason","message","field"}], for 422 Invalid.
  nlohmann::json causes = nlohmann::json::array();
};

// {"kind":"Status","apiVersion":"v1","status":"Failure",...,"code":N}
nlohmann::json StatusJson(const ApiError& error);

// The reason the real server uses for an HTTP code ("NotFound" for 404, ...).
std::string ReasonForCode(int http_code);

// 404 -> NotFound, 409 AlreadyExists -> AlreadyExists, 409 Conflict ->
// Aborted, 400/422 -> InvalidArgument, 410/429/5xx -> Unavailable, ...
Status ToStatus(const ApiError& error);

// "trainjobs.pacer.dev" or "pods" (core group): how messages name a resource.
std::string QualifiedResource(const std::string& plural, const std::string& group);

ApiError NotFound(const std::string& plural, const std::string& group, const std::string& name);
ApiError AlreadyExists(const std::string& plural, const std::string& group,
                       const std::string& name);
ApiError Conflict(const std::string& plural, const std::string& group, const std::string& name,
                  const std::string& why);
ApiError Invalid(const std::string& plural, const std::string& group, const std::string& name,
                 const std::string& why);
ApiError BadRequest(const std::string& message);

struct FieldError;
// 422 Invalid as kube-apiserver's errors.NewInvalid reports field errors:
// `Kind.group "name" is invalid: <field error, or [e1, e2]>`, details.kind
// the Kind, one cause per error.
ApiError InvalidFields(const std::string& kind, const std::string& group, const std::string& name,
                       const std::vector<FieldError>& errors);

// A JSON value or the ApiError that explains why there is none.
template <typename T>
class ApiResult {
 public:
  ApiResult(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  ApiResult(ApiError error) : error_(std::move(error)) {}  // NOLINT
  bool ok() const { return !error_.has_value(); }
  const ApiError& error() const { return *error_; }
  T& value() { return value_; }
  const T& value() const { return value_; }

 private:
  T value_{};
  std::optional<ApiError> error_;
};

}  // namespace pacer::testing

#endif  // PACER_TESTS_SUPPORT_API_ERROR_H_
