// The three PATCH formats of the Kubernetes API: JSON merge patch (RFC 7386),
// strategic merge patch (a merge patch whose lists of objects with a "name"
// key merge by name; the $patch, $setElementOrder, $retainKeys and
// $deleteFromPrimitiveList directives kubectl sends are honoured or
// dropped) and JSON patch (RFC 6902: add, remove, replace, test, move, copy).
//
// Thread-safety: pure functions.
#ifndef PACER_TESTS_SUPPORT_JSON_PATCH_H_
#define PACER_TESTS_SUPPORT_JSON_PATCH_H_

#include <nlohmann/json.hpp>

#include "api_error.h"

namespace pacer::testing {

nlohmann::json MergePatch(nlohmann::json target, const nlohmann::json& patch);
nlohmann::json StrategicMergePatch(nlohmann::json target, const nlohmann::json& patch);
// 422 Invalid when a "test" fails, a path does not exist or an op is malformed.
ApiResult<nlohmann::json> JsonPatch(nlohmann::json target, const nlohmann::json& operations);

}  // namespace pacer::testing

#endif  // PACER_TESTS_SUPPORT_JSON_PATCH_H_
