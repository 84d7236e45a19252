// Local mode's work directory: one `pacer run` at a time, the step the
// checkpoints resume from, and the first start kept across resumes.
#include "local/work_dir.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace pacer::controller {
namespace {

class WorkDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("pacer-work-dir-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Touch(const std::string& relative) {
    std::filesystem::create_directories((dir_ / relative).parent_path());
    std::ofstream(dir_ / relative) << "x";
  }
  std::filesystem::path dir_;
};

TEST_F(WorkDirTest, TheLockIsHeldUntilReleased) {
  StatusOr<WorkDirLock> first = WorkDirLock::Acquire(dir_.string());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  {
    // flock locks belong to the open file description: a second open in this
    // process conflicts just as another process would.
    StatusOr<WorkDirLock> second = WorkDirLock::Acquire(dir_.string());
    ASSERT_FALSE(second.ok());
    EXPECT_NE(second.status().message().find("pid " + std::to_string(::getpid())),
              std::string::npos)
        << second.status().message();
    EXPECT_NE(second.status().message().find("--work-dir"), std::string::npos);
  }
  { WorkDirLock released = std::move(*first); }
  EXPECT_TRUE(WorkDirLock::Acquire(dir_.string()).ok());
}

TEST_F(WorkDirTest, ResumesFromTheNewestStepEveryRankHas) {
  EXPECT_FALSE(ResumableCheckpointStep((dir_ / "checkpoints").string()).has_value());
  Touch("checkpoints/rank-0/step-40.ckpt");
  Touch("checkpoints/rank-0/step-49.ckpt");
  Touch("checkpoints/rank-1/step-40.ckpt");
  Touch("checkpoints/rank-1/step-49.ckpt.tmp");  // torn: not a checkpoint
  EXPECT_EQ(ResumableCheckpointStep((dir_ / "checkpoints").string()), 40);
  Touch("checkpoints/rank-1/step-49.ckpt");
  EXPECT_EQ(ResumableCheckpointStep((dir_ / "checkpoints").string()), 49);
}

// A finished job's checkpoints are set aside: left in place, the next run
// resumed the last periodic one and trained the job's final steps again.
TEST_F(WorkDirTest, AFinishedJobsCheckpointsAreSetAsideSoTheNextRunStartsAtStepZero) {
  std::filesystem::create_directories(dir_);
  StatusOr<std::string> none = SetAsideFinishedCheckpoints(dir_.string());
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(*none, "");                               // nothing to move
  Touch("checkpoints-finished/rank-0/step-10.ckpt");  // an older finished job's
  Touch("checkpoints/rank-0/step-140.ckpt");
  Touch("checkpoints/rank-1/step-140.ckpt");
  StatusOr<std::string> moved = SetAsideFinishedCheckpoints(dir_.string());
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(*moved, (dir_ / "checkpoints-finished").string());
  EXPECT_FALSE(ResumableCheckpointStep((dir_ / "checkpoints").string()).has_value());
  EXPECT_EQ(ResumableCheckpointStep(*moved), 140);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "checkpoints-finished/rank-0/step-10.ckpt"));
}

TEST_F(WorkDirTest, TheFirstStartIsKeptUntilForgotten) {
  std::filesystem::create_directories(dir_);
  bool recorded = false;
  EXPECT_EQ(FirstStartUnixSeconds(dir_.string(), 1000, &recorded), 1000);
  EXPECT_TRUE(recorded);
  EXPECT_EQ(FirstStartUnixSeconds(dir_.string(), 1500, &recorded), 1000);  // a resume
  EXPECT_FALSE(recorded);
  ForgetStart(dir_.string());
  EXPECT_EQ(FirstStartUnixSeconds(dir_.string(), 2000, &recorded), 2000);  // a new job
  EXPECT_TRUE(recorded);
  // Written aside and renamed: nothing is left beside it.
  EXPECT_FALSE(std::filesystem::exists(dir_ / "started-at.tmp"));
}

// A start that cannot be recorded (here a directory in the way of the
// rename) is said to be unrecorded, and what was written aside is removed,
// not left in the work directory.
TEST_F(WorkDirTest, AStartThatCannotBeRecordedLeavesNothingAside) {
  std::filesystem::create_directories(dir_ / "started-at" / "in-the-way");
  bool recorded = true;
  EXPECT_EQ(FirstStartUnixSeconds(dir_.string(), 1000, &recorded), 1000);
  EXPECT_FALSE(recorded);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "started-at.tmp"));
}

// A lock file that cannot be opened (root's after a `sudo pacer run`; here
// a directory in its place) says why and what to do, not only "cannot open".
TEST_F(WorkDirTest, ALockThatCannotBeOpenedSaysWhyAndWhatToDo) {
  std::filesystem::create_directories(dir_ / "lock");
  StatusOr<WorkDirLock> lock = WorkDirLock::Acquire(dir_.string());
  ASSERT_FALSE(lock.ok());
  // The argument's fault, as a work directory that cannot be made: exit 2.
  EXPECT_EQ(lock.status().code(), StatusCode::kInvalidArgument) << lock.status().ToString();
  EXPECT_NE(lock.status().message().find(std::strerror(EISDIR)), std::string::npos)
      << lock.status().message();
  EXPECT_NE(lock.status().message().find("--work-dir"), std::string::npos)
      << lock.status().message();
}

// A file where the work directory (or a directory above it) must be is
// named as not a directory, a bad argument: it read "cannot open
// <file>/lock: Not a directory; make <file> writable by this user (chown)".
TEST_F(WorkDirTest, AFileInPlaceOfTheDirectoryIsNamedAsNotADirectory) {
  std::filesystem::create_directories(dir_.parent_path());
  std::ofstream(dir_) << "a file, not a directory";
  for (const std::filesystem::path& work : {dir_, dir_ / "sub" / "deeper"}) {
    SCOPED_TRACE(work.string());
    StatusOr<WorkDirLock> lock = WorkDirLock::Acquire(work.string());
    ASSERT_FALSE(lock.ok());
    EXPECT_EQ(lock.status().code(), StatusCode::kInvalidArgument) << lock.status().ToString();
    EXPECT_NE(lock.status().message().find(dir_.string() + " is a file, not a directory"),
              std::string::npos)
        << lock.status().message();
    EXPECT_NE(lock.status().message().find("--work-dir"), std::string::npos)
        << lock.status().message();
    EXPECT_EQ(lock.status().message().find("chown"), std::string::npos) << lock.status().message();
  }
  std::filesystem::remove(dir_);
}

}  // namespace
}  // namespace pacer::controller
