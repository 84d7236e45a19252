// Admission of pod creation in the test API server, as kube-apiserver's
// ResourceQuota admission plugin does it: a namespace's ResourceQuotas
// (spec.hard `pods`, `count/pods`, `requests.<extended resource>` such as
// `requests.nvidia.com/gpu`) limit what its non-terminal pods may hold
// together; a pod that would go over any of them is refused with 403
// Forbidden and kube-apiserver's message:
//   pods "p" is forbidden: exceeded quota: gpus, requested:
//   requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=0, limited:
//   requests.nvidia.com/gpu=4
// Other resources (cpu, memory) are not counted. Pods in phase Succeeded
// or Failed hold no quota; pods being deleted hold theirs until they are gone.
//
// Thread-safety: pure functions.
#ifndef PACER_TESTS_SUPPORT_POD_ADMISSION_H_
#define PACER_TESTS_SUPPORT_POD_ADMISSION_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api_error.h"

namespace pacer::testing {

// The refusal of `pod` by `quotas` given the namespace's `pods`, or nullopt.
std::optional<ApiError> QuotaRefusal(const nlohmann::json& pod,
                                     const std::vector<nlohmann::json>& quotas,
                                     const std::vector<nlohmann::json>& pods);

// A validating admission webhook's denial of `pod` (kube-apiserver's
// wording): 403 `admission webhook "<hook>" denied the request: <message>`.
ApiError WebhookDenial(const nlohmann::json& pod, const std::string& hook,
                       const std::string& message);

}  // namespace pacer::testing

#endif  // PACER_TESTS_SUPPORT_POD_ADMISSION_H_
