// A GoogleTest fixture for apiserver_tests: a running TestApiServer and an
// HTTPS client for it, with small helpers to create and fetch objects.
//
// Thread-safety: as GoogleTest fixtures are, one test thread.
#ifndef PACER_TESTS_SUPPORT_APISERVER_TEST_FIXTURE_H_
#define PACER_TESTS_SUPPORT_APISERVER_TEST_FIXTURE_H_

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "https_test_client.h"
#include "test_api_server.h"

namespace pacer::testing {

inline constexpr char kTrainJobs[] = "/apis/pacer.dev/v1alpha1/namespaces/research/trainjobs";
inline constexpr char kPods[] = "/api/v1/namespaces/research/pods";
// Generous: the machine is shared and loaded.
inline constexpr std::chrono::seconds kWaitTimeout{30};

inline nlohmann::json TrainJob(const std::string& name) {
  return {{"apiVersion", "pacer.dev/v1alpha1"},
          {"kind", "TrainJob"},
          {"metadata", {{"name", name}}},
          {"spec", {{"deadline", "2030-01-01T00:00:00Z"}, {"model", {{"parameters", "1.3B"}}}}}};
}

// metadata.resourceVersion of an object the server returned.
inline std::string VersionOf(const nlohmann::json& object) {
  return object["metadata"]["resourceVersion"].get<std::string>();
}

inline nlohmann::json Pod(const std::string& name,
                          nlohmann::json labels = nlohmann::json::object()) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"labels", labels}}},
          {"spec", {{"containers", {{{"name", "worker"}, {"image", "pacer-worker:1"}}}}}}};
}

class ApiServerTest : public ::testing::Test {
 protected:
  virtual TestApiServerOptions Options() {
    TestApiServerOptions options;
    options.bookmark_interval = std::chrono::milliseconds(100);
    return options;
  }

  void SetUp() override {
    auto started = TestApiServer::Start(Options());
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(started).value();
    client_ =
        std::make_unique<HttpsTestClient>(server_->url(), server_->ca_pem(), server_->token());
  }

  // The response to a request that must get an answer (any status).
  HttpResponse Call(const std::string& method, const std::string& target,
                    const nlohmann::json& body = nullptr,
                    const std::string& content_type = "application/json") {
    auto response =
        client_->Request(method, target, body.is_null() ? "" : body.dump(), content_type);
    EXPECT_TRUE(response.ok()) << response.status().ToString();
    return response.ok() ? *response : HttpResponse{};
  }

  nlohmann::json MustCreate(const std::string& collection, const nlohmann::json& object) {
    HttpResponse r = Call("POST", collection, object);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.Json();
  }

  std::unique_ptr<TestApiServer> server_;
  std::unique_ptr<HttpsTestClient> client_;
};

}  // namespace pacer::testing

#endif  // PACER_TESTS_SUPPORT_APISERVER_TEST_FIXTURE_H_
