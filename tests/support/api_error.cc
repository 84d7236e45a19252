#include "api_error.h"

#include "schema_validation.h"

namespace pacer::testing {

nlohmann::json StatusJson(const ApiError& error) {
  nlohmann::json status = {
      {"kind", "Status"},    {"apiVersion", "v1"},       {"metadata", nlohmann::json::object()},
      {"status", "Failure"}, {"message", error.message}, {"reason", error.reason},
      {"code", error.code}};
  nlohmann::json details = nlohmann::json::object();
  if (!error.name.empty()) details["name"] = error.name;
  if (!error.group.empty()) details["group"] = error.group;
  if (!error.kind.empty()) details["kind"] = error.kind;
  if (!error.causes.empty()) details["causes"] = error.causes;
  if (!details.empty()) status["details"] = details;
  return status;
}

std::string ReasonForCode(int http_code) {
  switch (http_code) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 409:
      return "Conflict";
    case 410:
      return "Expired";
    case 413:
      return "RequestEntityTooLarge";
    case 415:
      return "UnsupportedMediaType";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return "InternalError";
  }
}

Status ToStatus(const ApiError& error) {
  StatusCode code = StatusCode::kInternal;
  switch (error.code) {
    case 400:
    case 422:
      code = StatusCode::kInvalidArgument;
      break;
    case 401:
      code = StatusCode::kUnauthenticated;
      break;
    case 403:
      code = StatusCode::kPermissionDenied;
      break;
    case 404:
      code = StatusCode::kNotFound;
      break;
    case 409:
      code = error.reason == "AlreadyExists" ? StatusCode::kAlreadyExists : StatusCode::kAborted;
      break;
    case 413:
      code = StatusCode::kResourceExhausted;
      break;
    case 410:
    case 429:
    case 503:
      code = StatusCode::kUnavailable;
      break;
    case 504:
      code = StatusCode::kDeadlineExceeded;
      break;
    default:
      break;
  }
  return Status(code, error.message);
}

std::string QualifiedResource(const std::string& plural, const std::string& group) {
  return group.empty() ? plural : plural + "." + group;
}

ApiError NotFound(const std::string& plural, const std::string& group, const std::string& name) {
  return {404,  "NotFound", QualifiedResource(plural, group) + " \"" + name + "\" not found",
          name, group,      plural};
}

ApiError AlreadyExists(const std::string& plural, const std::string& group,
                       const std::string& name) {
  return {
      409,  "AlreadyExists", QualifiedResource(plural, group) + " \"" + name + "\" already exists",
      name, group,           plural};
}

ApiError Conflict(const std::string& plural, const std::string& group, const std::string& name,
                  const std::string& why) {
  return {409,
          "Conflict",
          "Operation cannot be fulfilled on " + QualifiedResource(plural, group) + " \"" + name +
              "\": " + why,
          name,
          group,
          plural};
}

ApiError Invalid(const std::string& plural, const std::string& group, const std::string& name,
                 const std::string& why) {
  return {
      422,  "Invalid", QualifiedResource(plural, group) + " \"" + name + "\" is invalid: " + why,
      name, group,     plural};
}

ApiError BadRequest(const std::string& message) { return {400, "BadRequest", message, "", "", ""}; }

ApiError InvalidFields(const std::string& kind, const std::string& group, const std::string& name,
                       const std::vector<FieldError>& errors) {
  const std::string qualified_kind = group.empty() ? kind : kind + "." + group;
  ApiError error(422, "Invalid",
                 qualified_kind + " \"" + name + "\" is invalid: " + AggregateMessage(errors), name,
                 group, kind);
  for (const FieldError& e : errors) {
    error.causes.push_back({{"reason", e.type}, {"message", e.body}, {"field", e.field}});
  }
  return error;
}

}  // namespace pacer::testing
