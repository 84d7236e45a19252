// The meta.k8s.io/v1 Table form of objects that `kubectl get` asks for
// (Accept: application/json;as=Table;v=v1;g=meta.k8s.io): NAME, then the
// resource's printer columns (a CRD's additionalPrinterColumns; AGE when it
// has none), or kind-specific defaults for built-ins (pods: READY, STATUS,
// RESTARTS, AGE). Date columns are shown as ages ("5m"), future dates as
// "in 5m".
//
// Thread-safety: pure functions (they read the wall clock).
#ifndef PACER_TESTS_SUPPORT_TABLE_OUTPUT_H_
#define PACER_TESTS_SUPPORT_TABLE_OUTPUT_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "resource_table.h"

namespace pacer::testing {

// `include_object`: "None", "Metadata" (PartialObjectMetadata, the default)
// or "Object". `list_metadata` becomes the Table's metadata.
nlohmann::json ToTable(const ResourceInfo& resource, const std::vector<nlohmann::json>& objects,
                       const nlohmann::json& list_metadata, const std::string& include_object);

// Kubernetes' HumanDuration: "45s", "3m20s", "5h", "12d", "2y30d".
std::string HumanDuration(int64_t seconds);

}  // namespace pacer::testing

#endif  // PACER_TESTS_SUPPORT_TABLE_OUTPUT_H_
