// Parses a TrainJob document into a validated JobSpec. One parser serves YAML
// files and the JSON the Kubernetes API server returns (JSON is YAML).
//
// Every error is InvalidArgument (or ResourceExhausted for oversized input)
// and names the field path and the fix, e.g.
//   "spec.training.globalBatchSize: must be a positive integer, got -4".
// Unknown fields under spec are errors too (a typo must not silently fall
// back to a default). Thread-safety: stateless.
#ifndef PACER_PLANNER_JOB_PARSER_H_
#define PACER_PLANNER_JOB_PARSER_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "pacer/planner/job_spec.h"
#include "pacer/status.h"

namespace pacer::planner {

// Input documents (TrainJobs, inventories, calibrations) larger than this are
// refused before parsing: 1 MiB, the same order as etcd's object size limit.
inline constexpr std::size_t kMaxDocumentBytes = 1 << 20;

// The largest spec.training.globalBatchSize the parser accepts (sequences).
inline constexpr int64_t kMaxGlobalBatchSize = 100'000'000;

// Parses a full TrainJob (apiVersion pacer.dev/v1alpha1, kind TrainJob,
// metadata, spec; status ignored).
StatusOr<JobSpec> ParseTrainJob(const std::string& document);

}  // namespace pacer::planner

#endif  // PACER_PLANNER_JOB_PARSER_H_
