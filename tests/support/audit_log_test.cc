// TestApiServer::AuditLog(): one record per request, with the verb,
// resource and object kube-apiserver's RequestInfo would give it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <tuple>

#include "apiserver_test_fixture.h"

namespace pacer::testing {
namespace {

using nlohmann::json;

// The fields a test compares, in one printable tuple.
using Entry =
    std::tuple<std::string, std::string, std::string, std::string, std::string, std::string, int>;

Entry Of(const AuditRecord& r) {
  return {r.verb, r.group, r.resource, r.subresource, r.namespace_, r.name, r.code};
}

TEST_F(ApiServerTest, AuditLogRecordsEveryRequestWithItsVerb) {
  const std::map<std::string, std::string> agent = {{"User-Agent", "audit-test/1.0"}};
  auto call = [&](const std::string& method, const std::string& target, const json& body,
                  const std::string& content_type = "application/json") {
    auto r =
        client_->Request(method, target, body.is_null() ? "" : body.dump(), content_type, agent);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->status : 0;
  };
  const std::string job = std::string(kTrainJobs) + "/j";
  EXPECT_EQ(call("POST", kTrainJobs, TrainJob("j")), 201);
  EXPECT_EQ(call("GET", job, nullptr), 200);
  EXPECT_EQ(call("GET", std::string(kTrainJobs) + "?labelSelector=a%3Db", nullptr), 200);
  EXPECT_EQ(
      call("GET", "/apis/pacer.dev/v1alpha1/trainjobs?fieldSelector=metadata.name%3Dj", nullptr),
      200);
  json current = server_->GetObject(job).value();
  EXPECT_EQ(call("PUT", job, current), 200);
  current = server_->GetObject(job).value();
  current["status"] = {{"phase", "Running"}};
  EXPECT_EQ(call("PUT", job + "/status", current), 200);
  EXPECT_EQ(call("PATCH", job, {{"metadata", {{"labels", {{"a", "b"}}}}}},
                 "application/merge-patch+json"),
            200);
  EXPECT_EQ(call("GET", std::string(kTrainJobs) + "/missing", nullptr), 404);
  EXPECT_EQ(call("DELETE", job, nullptr), 200);
  EXPECT_EQ(call("DELETE", kPods, nullptr), 200);
  EXPECT_EQ(call("GET", "/api/v1/namespaces/research", nullptr), 200);
  EXPECT_EQ(call("GET", "/api/v1/nodes", nullptr), 200);
  EXPECT_EQ(call("GET", "/version", nullptr), 200);
  {
    auto watch = client_->Watch(std::string(kPods) + "?watch=true&timeoutSeconds=1");
    ASSERT_TRUE(watch.ok()) << watch.status().ToString();
    EXPECT_EQ((*watch)->status(), 200);
  }
  HttpsTestClient anonymous(server_->url(), server_->ca_pem(), "");
  ASSERT_TRUE(anonymous.Get(kPods).ok());

  const std::vector<AuditRecord> log = server_->AuditLog();
  std::vector<Entry> entries;
  for (const AuditRecord& r : log) entries.push_back(Of(r));
  const std::vector<Entry> expected = {
      {"create", "pacer.dev", "trainjobs", "", "research", "", 201},
      {"get", "pacer.dev", "trainjobs", "", "research", "j", 200},
      {"list", "pacer.dev", "trainjobs", "", "research", "", 200},
      {"list", "pacer.dev", "trainjobs", "", "", "j", 200},
      {"update", "pacer.dev", "trainjobs", "", "research", "j", 200},
      {"update", "pacer.dev", "trainjobs", "status", "research", "j", 200},
      {"patch", "pacer.dev", "trainjobs", "", "research", "j", 200},
      {"get", "pacer.dev", "trainjobs", "", "research", "missing", 404},
      {"delete", "pacer.dev", "trainjobs", "", "research", "j", 200},
      {"deletecollection", "", "pods", "", "research", "", 200},
      {"get", "", "namespaces", "", "research", "research", 200},
      {"list", "", "nodes", "", "", "", 200},
      {"get", "", "", "", "", "", 200},  // /version: no resource
      {"watch", "", "pods", "", "research", "", 200},
      {"list", "", "pods", "", "research", "", 401},
  };
  EXPECT_EQ(entries, expected);
  ASSERT_EQ(log.size(), expected.size());
  for (size_t i = 0; i + 2 < log.size(); ++i) EXPECT_EQ(log[i].user_agent, "audit-test/1.0") << i;
}

TEST_F(ApiServerTest, AuditLogRecordsInjectedFailures) {
  server_->FailNextRequests("GET", "/pods", 503, 1);
  EXPECT_EQ(Call("GET", kPods).status, 503);
  EXPECT_EQ(Call("GET", kPods).status, 200);
  const std::vector<AuditRecord> log = server_->AuditLog();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(Of(log[0]), Entry("list", "", "pods", "", "research", "", 503));
  EXPECT_EQ(Of(log[1]), Entry("list", "", "pods", "", "research", "", 200));
}

}  // namespace
}  // namespace pacer::testing
