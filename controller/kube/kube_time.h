// Kubernetes timestamps: metav1.Time ("2026-11-22T00:00:00Z", whole
// seconds) and metav1.MicroTime ("2026-11-22T00:00:00.000000Z"), UTC.
//
// Units: std::chrono::system_clock time points.
// Thread-safety: pure functions.
#ifndef PACER_CONTROLLER_KUBE_KUBE_TIME_H_
#define PACER_CONTROLLER_KUBE_KUBE_TIME_H_

#include <chrono>
#include <optional>
#include <string>

namespace pacer::controller {

std::string FormatKubeTime(std::chrono::system_clock::time_point t);
std::string FormatKubeMicroTime(std::chrono::system_clock::time_point t);

// RFC 3339 with optional fraction and a Z or +hh:mm offset; nullopt when malformed.
std::optional<std::chrono::system_clock::time_point> ParseKubeTime(const std::string& text);

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_KUBE_KUBE_TIME_H_
