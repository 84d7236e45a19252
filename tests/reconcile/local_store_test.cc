// Local mode's job store takes the file's TrainJob as a new job, as the API
// server would create it from `kubectl apply`.
#include "local/local_store.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace pacer::controller {
namespace {

// An object as `kubectl get -o yaml` exports it: status and server-set
// metadata included.
nlohmann::json Exported() {
  return nlohmann::json::parse(R"({
    "apiVersion": "pacer.dev/v1alpha1", "kind": "TrainJob",
    "metadata": {"name": "j", "namespace": "ns", "uid": "1234", "generation": 7,
                 "resourceVersion": "99", "finalizers": ["pacer.dev/workers"],
                 "deletionTimestamp": "2026-11-30T00:00:00Z",
                 "creationTimestamp": "2026-11-29T00:00:00Z",
                 "managedFields": [{"manager": "kubectl"}], "labels": {"team": "a"}},
    "spec": {"model": {"parameters": "350M"}},
    "status": {"phase": "Succeeded", "observedGeneration": 7, "stepsCompleted": 150,
               "restarts": 3}
  })");
}

TEST(LocalJobStoreTest, AnExportedObjectBecomesANewJob) {
  nlohmann::json exported = Exported();
  AsNewJob(exported);
  LocalJobStore store(exported, [](const LocalEvent&) {});
  const nlohmann::json job = store.Snapshot();
  EXPECT_FALSE(job.contains("status")) << job.dump();
  const nlohmann::json& m = job["metadata"];
  // The old job's creation time too: maxDuration counts from this job's
  // first start (pacer run sets it), not from a day-old export's.
  for (const char* gone : {"deletionTimestamp", "finalizers", "resourceVersion", "managedFields",
                           "creationTimestamp"}) {
    EXPECT_FALSE(m.contains(gone)) << gone << ": " << m.dump();
  }
  EXPECT_EQ(m["generation"], 1);
  EXPECT_EQ(m["uid"], "local");
  // What the user wrote stays: the name and labels.
  EXPECT_EQ(m["name"], "j");
  EXPECT_EQ(m["labels"]["team"], "a");
  EXPECT_EQ(job["spec"], Exported()["spec"]);
}

// `kubectl create --dry-run=client -o yaml` writes `creationTimestamp: null`:
// no time. Kept, it counted as present, so the first start was never
// recorded and maxDuration slid with the clock.
TEST(LocalJobStoreTest, ANullCreationTimeIsNoCreationTime) {
  nlohmann::json job = Exported();
  job["metadata"]["creationTimestamp"] = nullptr;
  AsNewJob(job);
  EXPECT_FALSE(job["metadata"].contains("creationTimestamp")) << job.dump();
  job["metadata"]["creationTimestamp"] = 12;
  AsNewJob(job);
  EXPECT_FALSE(job["metadata"].contains("creationTimestamp")) << job.dump();
  // The store keeps the creation time pacer run sets after AsNewJob.
  job["metadata"]["creationTimestamp"] = "2026-12-01T00:00:00Z";
  LocalJobStore store(job, [](const LocalEvent&) {});
  EXPECT_EQ(store.Snapshot()["metadata"]["creationTimestamp"], "2026-12-01T00:00:00Z");
}

}  // namespace
}  // namespace pacer::controller
