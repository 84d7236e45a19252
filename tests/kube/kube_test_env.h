// The fixture of the kube tests: a TestApiServer per test, a KubeClient
// configured for it, TrainJob objects, and a deadline-bounded wait.
#ifndef PACER_TESTS_KUBE_KUBE_TEST_ENV_H_
#define PACER_TESTS_KUBE_KUBE_TEST_ENV_H_

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "kube/kube_client.h"
#include "test_api_server.h"

namespace pacer::controller {

// Generous: the machine running the tests may be loaded.
inline constexpr std::chrono::milliseconds kWait{20000};

// Polls `pred` until it holds or `timeout` passes; returns its last value.
// For state without a notification (IsLeader); never a fixed sleep.
inline bool Eventually(const std::function<bool()>& pred,
                       std::chrono::milliseconds timeout = kWait) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return pred();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

class KubeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = pacer::testing::TestApiServer::Start();
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
    client_ = NewClient(Config());
    ASSERT_NE(client_, nullptr);
  }

  KubeConfig Config() const {
    KubeConfig config;
    config.server = server_->url();
    config.ca_pem = server_->ca_pem();
    config.bearer_token = server_->token();
    config.namespace_name = "default";
    return config;
  }

  static std::unique_ptr<KubeClient> NewClient(const KubeConfig& config,
                                               KubeClientOptions options = {}) {
    auto client = KubeClient::Create(config, std::move(options));
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(client).value() : nullptr;
  }

  static nlohmann::json TrainJob(const std::string& name, const std::string& ns = "default",
                                 const std::string& job_label = "") {
    nlohmann::json job = {
        {"apiVersion", "pacer.dev/v1alpha1"},
        {"kind", "TrainJob"},
        {"metadata", {{"name", name}, {"namespace", ns}}},
        {"spec", {{"model", "llama-7b"}, {"training", {{"totalSteps", 1000}}}}},
    };
    if (!job_label.empty()) job["metadata"]["labels"] = {{"pacer.dev/job", job_label}};
    return job;
  }

  static std::string TrainJobsPath(const std::string& ns = "default") {
    return "/apis/pacer.dev/v1alpha1/namespaces/" + ns + "/trainjobs";
  }

  std::unique_ptr<pacer::testing::TestApiServer> server_;
  std::unique_ptr<KubeClient> client_;
};

}  // namespace pacer::controller

#endif  // PACER_TESTS_KUBE_KUBE_TEST_ENV_H_
