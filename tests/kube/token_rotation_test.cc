// Bound service-account tokens rotate: the API server starts refusing the
// old token (401) once the kubelet has written a new one to the token file.
// The client re-reads the file (after a 401, and every
// token_refresh_period) instead of holding the token it read at start.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "kube_test_env.h"

namespace pacer::controller {
namespace {

class TokenRotationTest : public KubeTest {
 protected:
  void SetUp() override {
    KubeTest::SetUp();
    dir_ = std::filesystem::temp_directory_path() /
           ("pacer-token-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    token_file_ = (dir_ / "token").string();
    WriteToken(server_->token() + "\n");  // the kubelet writes a trailing newline
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void WriteToken(const std::string& text) {
    // Written beside and renamed, as the kubelet swaps its projected volume.
    const std::string scratch = token_file_ + ".new";
    std::ofstream(scratch) << text;
    std::filesystem::rename(scratch, token_file_);
  }

  KubeConfig FileConfig() const {
    KubeConfig config = Config();
    config.token_file = token_file_;
    return config;
  }

  int64_t Unauthorized() const {
    int64_t n = 0;
    for (const auto& record : server_->AuditLog()) n += record.code == 401 ? 1 : 0;
    return n;
  }

  std::filesystem::path dir_;
  std::string token_file_;
};

TEST_F(TokenRotationTest, A401AfterRotationRereadsTheFileAndRetriesOnce) {
  KubeClientOptions options;
  options.token_refresh_period = std::chrono::hours(1);  // only the 401 triggers the re-read
  auto client = NewClient(FileConfig(), options);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Create(kTrainJobs, "default", TrainJob("a")).ok());

  const std::string rotated = "rotated-token-51c0e2";
  server_->RotateToken(rotated);
  WriteToken(rotated + "\n");
  StatusOr<nlohmann::json> got = client->Get(kTrainJobs, "default", "a");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)["metadata"]["name"], "a");
  EXPECT_EQ(Unauthorized(), 1);  // the old token once, then the new one

  // Later requests send the new token straight away.
  ASSERT_TRUE(client->Get(kTrainJobs, "default", "a").ok());
  EXPECT_EQ(Unauthorized(), 1);
}

TEST_F(TokenRotationTest, AStaleCachedTokenIsRereadBeforeTheRequest) {
  KubeClientOptions options;
  options.token_refresh_period = std::chrono::milliseconds(0);  // every request re-reads
  auto client = NewClient(FileConfig(), options);
  ASSERT_NE(client, nullptr);
  server_->RotateToken("second-token-9d81");
  WriteToken("second-token-9d81");
  EXPECT_TRUE(client->Get(kTrainJobs, "default", "missing").status().code() ==
              StatusCode::kNotFound);
  EXPECT_EQ(Unauthorized(), 0);  // never sent the old token
}

TEST_F(TokenRotationTest, AnUnchangedFileAfter401IsUnauthenticatedWithoutEchoingTokens) {
  auto client = NewClient(FileConfig());
  ASSERT_NE(client, nullptr);
  const std::string old_token = server_->token();
  server_->RotateToken("not-yet-on-disk-77aa");  // the file still holds the old token
  Status denied = client->Get(kTrainJobs, "default", "a").status();
  EXPECT_EQ(denied.code(), StatusCode::kUnauthenticated) << denied.ToString();
  EXPECT_EQ(Unauthorized(), 1);  // no retry with the same token
  EXPECT_EQ(denied.message().find(old_token), std::string::npos);
  EXPECT_EQ(denied.message().find("not-yet-on-disk-77aa"), std::string::npos);
}

TEST_F(TokenRotationTest, AnInformerKeepsWatchingAcrossARotation) {
  auto client = NewClient(FileConfig());
  ASSERT_NE(client, nullptr);
  // A watch refused with 401 re-reads the file, so the next watch or list
  // (the informer's retry) carries the new token.
  server_->RotateToken("watch-token-3e");
  WriteToken("watch-token-3e");
  std::atomic<bool> cancel{false};
  Status first = client->Watch(
      kTrainJobs, "default", WatchOptions{}, [](const WatchEvent&) {}, cancel);
  EXPECT_EQ(first.code(), StatusCode::kUnauthenticated) << first.ToString();
  ASSERT_TRUE(client->Create(kTrainJobs, "default", TrainJob("b")).ok());
  EXPECT_EQ(Unauthorized(), 1);
}

}  // namespace
}  // namespace pacer::controller
