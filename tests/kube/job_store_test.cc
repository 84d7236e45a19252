// The TrainJob store (daemon/kube_sources.h) against the test API server: a
// 404 for a TrainJob is NotFound, which makes the reconciler delete the
// job's workers, only when a list confirms that the TrainJob is gone. An
// API server that does not serve TrainJobs for a moment (restarting before
// it has loaded the CRD) answered 404 for a live job, and its workers were
// deleted and relaunched.
#include <string>

#include "daemon/kube_sources.h"
#include "kube_test_env.h"

namespace pacer::controller {
namespace {

constexpr char kCollection[] = "/apis/pacer.dev/v1alpha1/namespaces/research/trainjobs";

class KubeJobStoreTest : public KubeTest {
 protected:
  void PutJob(const std::string& name) {
    const nlohmann::json job = {{"apiVersion", "pacer.dev/v1alpha1"},
                                {"kind", "TrainJob"},
                                {"metadata", {{"name", name}, {"namespace", "research"}}},
                                {"spec", nlohmann::json::object()}};
    ASSERT_TRUE(server_->CreateObject(kCollection, job).ok());
  }
};

TEST_F(KubeJobStoreTest, AFalse404ForALiveJobIsUnavailableNotNotFound) {
  PutJob("llama");
  KubeJobStore store(client_.get(), nullptr);
  ASSERT_TRUE(store.Get("research/llama").ok());

  // Only the object's GET answers 404: the list finds it.
  server_->FailNextRequests("GET", "/trainjobs/llama", 404, 1);
  StatusOr<nlohmann::json> got = store.Get("research/llama");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable) << got.status().ToString();
  EXPECT_NE(got.status().message().find("a list finds it"), std::string::npos);

  // TrainJobs not served at all: the list answers 404 too.
  server_->FailNextRequests("GET", "/trainjobs", 404, 2);
  got = store.Get("research/llama");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable) << got.status().ToString();
  EXPECT_NE(got.status().message().find("listing TrainJobs failed"), std::string::npos);

  EXPECT_TRUE(store.Get("research/llama").ok());
}

TEST_F(KubeJobStoreTest, AJobThatIsGoneIsNotFound) {
  PutJob("other");
  KubeJobStore store(client_.get(), nullptr);
  StatusOr<nlohmann::json> got = store.Get("research/llama");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound) << got.status().ToString();
}

}  // namespace
}  // namespace pacer::controller
