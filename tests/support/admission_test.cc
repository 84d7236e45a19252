// Pod admission in the test API server: ResourceQuotas on pods and on an
// extended resource (nvidia.com/gpu), and a refusing admission webhook, with
// kube-apiserver's status codes and messages.
#include <gtest/gtest.h>

#include "apiserver_test_fixture.h"

namespace pacer::testing {
namespace {

using nlohmann::json;

constexpr char kTeamPods[] = "/api/v1/namespaces/team/pods";
constexpr char kQuotas[] = "/api/v1/namespaces/team/resourcequotas";

json GpuPod(const std::string& name, int gpus) {
  json pod = Pod(name);
  // Only a limit: Kubernetes defaults an extended resource's request to it.
  pod["spec"]["containers"][0]["resources"] = {
      {"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}};
  return pod;
}

json Quota(const std::string& name, json hard) {
  return {{"apiVersion", "v1"},
          {"kind", "ResourceQuota"},
          {"metadata", {{"name", name}}},
          {"spec", {{"hard", std::move(hard)}}}};
}

class AdmissionTest : public ApiServerTest {};

TEST_F(AdmissionTest, GpuQuotaRefusesThePodThatWouldExceedItWithTheRealMessage) {
  MustCreate(kQuotas, Quota("gpus", {{"requests.nvidia.com/gpu", "8"}}));
  MustCreate(kTeamPods, GpuPod("a", 8));
  HttpResponse refused = Call("POST", kTeamPods, GpuPod("b", 8));
  EXPECT_EQ(refused.status, 403) << refused.body;
  const json status = refused.Json();
  EXPECT_EQ(status["reason"], "Forbidden");
  EXPECT_EQ(status["message"],
            "pods \"b\" is forbidden: exceeded quota: gpus, requested: "
            "requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=8, limited: "
            "requests.nvidia.com/gpu=8");
  EXPECT_EQ(Call("GET", std::string(kTeamPods) + "/b").status, 404);  // not created

  // A finished pod holds no quota.
  auto a = server_->GetObject(std::string(kTeamPods) + "/a");
  ASSERT_TRUE(a.ok());
  (*a)["status"] = {{"phase", "Succeeded"}};
  ASSERT_TRUE(server_->UpdateObject(std::string(kTeamPods) + "/a", *a).ok());
  MustCreate(kTeamPods, GpuPod("b", 8));
}

TEST_F(AdmissionTest, PodCountQuotaAndRemovingTheQuota) {
  MustCreate(kQuotas, Quota("count", {{"pods", 1}}));
  MustCreate(kTeamPods, Pod("one"));
  HttpResponse refused = Call("POST", kTeamPods, Pod("two"));
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_NE(refused.body.find("exceeded quota: count, requested: pods=1, used: pods=1"),
            std::string::npos)
      << refused.body;
  EXPECT_EQ(Call("DELETE", std::string(kQuotas) + "/count").status, 200);
  MustCreate(kTeamPods, Pod("two"));
}

TEST_F(AdmissionTest, QuotaInAnotherNamespaceDoesNotApply) {
  MustCreate("/api/v1/namespaces/other/resourcequotas",
             Quota("gpus", {{"requests.nvidia.com/gpu", 0}}));
  MustCreate(kTeamPods, GpuPod("free", 8));
}

TEST_F(AdmissionTest, RefusingWebhookDeniesWithItsMessageUntilRemoved) {
  server_->SetPodAdmissionHook("policy.example.com", [](const json& pod) -> std::string {
    return pod["metadata"]["name"] == "denied" ? "GPU pods need a team label" : "";
  });
  HttpResponse refused = Call("POST", kTeamPods, GpuPod("denied", 1));
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_EQ(refused.Json()["message"],
            "admission webhook \"policy.example.com\" denied the request: GPU pods need a team "
            "label");
  MustCreate(kTeamPods, GpuPod("allowed", 1));
  server_->SetPodAdmissionHook("", nullptr);
  MustCreate(kTeamPods, GpuPod("denied", 1));
}

// Graceful deletion (TestApiServerOptions::graceful_pod_deletion): a
// deleted pod stays Terminating for its grace period, then is gone; grace
// 0 removes it at once.
class GracefulDeletionTest : public ApiServerTest {
 protected:
  TestApiServerOptions Options() override {
    TestApiServerOptions options = ApiServerTest::Options();
    options.graceful_pod_deletion = true;
    return options;
  }
};

// An hour's grace: what this test checks of a Terminating pod must not race
// the reaper, however slow the requests (three TLS calls once took more than
// a 1 s grace under ASan). The next test shows that the grace does end.
TEST_F(GracefulDeletionTest, DeletedPodIsTerminatingAndHoldsItsQuotaDuringItsGracePeriod) {
  MustCreate(kTeamPods, GpuPod("slow", 1));
  HttpResponse deleted =
      Call("DELETE", std::string(kTeamPods) + "/slow",
           json{{"kind", "DeleteOptions"}, {"apiVersion", "v1"}, {"gracePeriodSeconds", 3600}});
  EXPECT_EQ(deleted.status, 200) << deleted.body;
  HttpResponse terminating = Call("GET", std::string(kTeamPods) + "/slow");
  ASSERT_EQ(terminating.status, 200);  // still there, Terminating
  EXPECT_TRUE(terminating.Json()["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(terminating.Json()["metadata"]["deletionGracePeriodSeconds"], 3600);
  // A Terminating pod still holds its quota, as on a real server.
  MustCreate(kQuotas, Quota("gpus", {{"requests.nvidia.com/gpu", "1"}}));
  EXPECT_EQ(Call("POST", kTeamPods, GpuPod("next", 1)).status, 403);
}

// A short grace, and nothing checked while it runs: the pod goes once it is
// over, no sooner, and its quota goes with it.
TEST_F(GracefulDeletionTest, DeletedPodIsGoneAfterItsGracePeriod) {
  MustCreate(kQuotas, Quota("gpus", {{"requests.nvidia.com/gpu", "1"}}));
  MustCreate(kTeamPods, GpuPod("slow", 1));
  const auto start = std::chrono::steady_clock::now();
  HttpResponse deleted =
      Call("DELETE", std::string(kTeamPods) + "/slow",
           json{{"kind", "DeleteOptions"}, {"apiVersion", "v1"}, {"gracePeriodSeconds", 1}});
  EXPECT_EQ(deleted.status, 200) << deleted.body;
  ASSERT_TRUE(
      server_->WaitFor([&] { return !server_->GetObject(std::string(kTeamPods) + "/slow").ok(); },
                       std::chrono::seconds(20)));
  // A lower bound only: a slow machine makes the wait longer, never shorter.
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  MustCreate(kTeamPods, GpuPod("next", 1));  // its quota is free now
}

TEST_F(GracefulDeletionTest, GraceZeroRemovesAtOnce) {
  MustCreate(kTeamPods, Pod("quick"));
  EXPECT_EQ(Call("DELETE", std::string(kTeamPods) + "/quick",
                 json{{"kind", "DeleteOptions"}, {"apiVersion", "v1"}, {"gracePeriodSeconds", 0}})
                .status,
            200);
  EXPECT_EQ(Call("GET", std::string(kTeamPods) + "/quick").status, 404);
}

}  // namespace
}  // namespace pacer::testing
