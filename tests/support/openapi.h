// The smallest OpenAPI v3 documents that satisfy kubectl: the root index
// (/openapi/v3) and one document per group version
// (/openapi/v3/apis/G/V, /openapi/v3/api/v1) whose PATCH operations declare
// the fieldValidation query parameter. kubectl then validates on the server
// (custom resources against their CRD's schema, schema_validation.h; the
// built-in resources accept any fields) instead of downloading schemas;
// no schemas are published here.
//
// Thread-safety: pure functions.
#ifndef PACER_TESTS_SUPPORT_OPENAPI_H_
#define PACER_TESTS_SUPPORT_OPENAPI_H_

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "resource_table.h"

namespace pacer::testing {

nlohmann::json OpenApiV3Root(const std::vector<std::shared_ptr<const ResourceInfo>>& resources);

// `group_version`: "api/v1" or "apis/pacer.dev/v1alpha1". nullopt when no
// resource is served there.
std::optional<nlohmann::json> OpenApiV3GroupVersion(
    const std::vector<std::shared_ptr<const ResourceInfo>>& resources,
    const std::string& group_version);

}  // namespace pacer::testing

#endif  // PACER_TESTS_SUPPORT_OPENAPI_H_
