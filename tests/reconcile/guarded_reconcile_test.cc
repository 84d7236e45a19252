// The work-queue loop's guard: a reconcile that throws becomes a retryable
// error for its key (counted and logged by the loop) instead of terminating
// the controller.
#include "reconcile/guarded_reconcile.h"

#include <gtest/gtest.h>

#include "core/clock.h"
#include "fakes.h"

namespace pacer::controller {
namespace {

using testing::FakeInventory;
using testing::FakeJobStore;
using testing::FakeLauncher;
using testing::FakeMetrics;

// A store whose reads throw as nlohmann's value() does on a field of the
// wrong type: the shape of the defect seen on a real cluster.
class ThrowingJobStore : public FakeJobStore {
 public:
  bool throw_on_get = true;
  StatusOr<nlohmann::json> Get(const std::string& key) override {
    if (throw_on_get) {
      const nlohmann::json wrong = {{"phase", 5}};
      (void)wrong.value("phase", std::string());  // throws type_error 302
    }
    return FakeJobStore::Get(key);
  }
};

TEST(GuardedReconcileTest, AnExceptionBecomesARetryableErrorNamingItAndTheJob) {
  ThrowingJobStore store;
  FakeLauncher launcher;
  FakeMetrics metrics;
  FakeInventory inventory;
  FakeClock clock;
  Reconciler reconciler({&store, &launcher, &metrics, &inventory, &clock}, ReconcilerOptions{});
  const auto reconcile = [&](const std::string& key) { return reconciler.Reconcile(key); };

  const GuardedReconcileResult thrown = GuardedReconcile(reconcile, "research/llama");
  EXPECT_TRUE(thrown.threw);
  EXPECT_EQ(thrown.result.status.code(), StatusCode::kInternal);
  // The work queue retries every code but InvalidArgument with backoff.
  EXPECT_NE(thrown.result.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(thrown.result.status.message().find("research/llama"), std::string::npos);
  EXPECT_NE(thrown.result.status.message().find("type_error"), std::string::npos)
      << thrown.result.status.ToString();

  // The same reconciler goes on serving keys once the object is readable.
  store.throw_on_get = false;
  const GuardedReconcileResult next = GuardedReconcile(reconcile, "research/gone");
  EXPECT_FALSE(next.threw);
  EXPECT_TRUE(next.result.status.ok()) << next.result.status.ToString();
}

TEST(GuardedReconcileTest, ANonStandardExceptionIsCaughtToo) {
  const GuardedReconcileResult r =
      GuardedReconcile([](const std::string&) -> ReconcileResult { throw 42; }, "ns/job");
  EXPECT_TRUE(r.threw);
  EXPECT_EQ(r.result.status.code(), StatusCode::kInternal);
}

TEST(GuardedReconcileTest, AResultPassesThroughUnchanged) {
  const GuardedReconcileResult r = GuardedReconcile(
      [](const std::string&) {
        return ReconcileResult{UnavailableError("later"), std::chrono::milliseconds(7)};
      },
      "ns/job");
  EXPECT_FALSE(r.threw);
  EXPECT_EQ(r.result.status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.result.requeue_after, std::chrono::milliseconds(7));
}

}  // namespace
}  // namespace pacer::controller
