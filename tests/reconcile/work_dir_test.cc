// Local mode's work directory: one `pacer run` at a time, the step the
// checkpoints resume from, and the first start kept across resumes.
#include "local/work_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "core/checkpoint.h"
#include "local/child_process.h"

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
  // A checkpoint as a worker of job `job` writes it: rank `rank` of
  // `world_size`, under <dir>/<checkpoints>.
  void Save(int rank, int world_size, int64_t step, const std::string& run_id = "run-1",
            const std::string& checkpoints = "checkpoints", const std::string& job = "llama") {
    worker::CheckpointState state;
    state.step = step;
    state.rank = rank;
    state.world_size = world_size;
    state.job_name = job;
    state.run_id = run_id;
    const Status saved = worker::CheckpointStore((dir_ / checkpoints).string(), rank).Save(state);
    ASSERT_TRUE(saved.ok()) << saved.ToString();
  }
  std::optional<int64_t> Resumable(const std::string& checkpoints = "checkpoints") {
    return ResumableCheckpointStep((dir_ / checkpoints).string(), "llama");
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

// `pacer run` killed with SIGKILL leaves its workers saving a checkpoint
// (they stop once their parent is gone). The lock was close-on-exec and died
// with `pacer run`: the next run started beside them, on the same rank
// directories. Now the workers hold it until they exit, and the next run
// waits for them.
TEST_F(WorkDirTest, WorkersOfAKilledRunHoldTheDirectoryUntilTheyExit) {
  StatusOr<WorkDirLock> run = WorkDirLock::Acquire(dir_.string());
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  // A "worker" that lives until the FIFO is opened for writing and closed.
  const std::string fifo = (dir_ / "release").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  StatusOr<pid_t> worker =
      SpawnProcess("/bin/sh", {"-c", "read line < " + fifo}, {}, (dir_ / "worker.log").string(),
                   LogMode::kTruncate, {run->fd()});
  ASSERT_TRUE(worker.ok()) << worker.status().ToString();
  // However the test ends, the "worker" does not wait on its FIFO forever.
  struct KillAtExit {
    pid_t pid;
    ~KillAtExit() {
      if (pid > 0 && ::kill(pid, SIGKILL) == 0) ::waitpid(pid, nullptr, 0);
    }
  } cleanup{*worker};
  // The killed `pacer run`: a pid that has ended, in the lock file.
  StatusOr<pid_t> ended = SpawnProcess("/bin/true", {}, {}, (dir_ / "true.log").string());
  ASSERT_TRUE(ended.ok());
  ASSERT_EQ(::waitpid(*ended, nullptr, 0), *ended);
  std::ofstream(dir_ / "lock", std::ios::trunc) << *ended;
  { WorkDirLock killed = std::move(*run); }

  StatusOr<WorkDirLock> at_once = WorkDirLock::Acquire(dir_.string());
  ASSERT_FALSE(at_once.ok()) << "the next run got the directory beside the workers";
  EXPECT_EQ(at_once.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(at_once.status().message().find("the workers of an earlier `pacer run` (pid " +
                                            std::to_string(*ended) + ", which has ended)"),
            std::string::npos)
      << at_once.status().message();

  OrphanedWorkersWait wait;
  wait.timeout = std::chrono::seconds(60);
  int waits = 0;
  wait.on_wait = [&](const std::string& message) {
    ++waits;
    EXPECT_NE(message.find("waiting up to 60 s"), std::string::npos) << message;
    std::ofstream(fifo) << "exit\n";  // the worker saves and exits
  };
  StatusOr<WorkDirLock> after = WorkDirLock::Acquire(dir_.string(), wait);
  EXPECT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(waits, 1);
  int wstatus = -1;
  ASSERT_EQ(::waitpid(*worker, &wstatus, 0), *worker);
  cleanup.pid = 0;  // reaped
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << wstatus;
}

// A run that reads the lock file in the instant between another run's
// lock and that run's pid (the file still names the last, ended holder)
// took the live run for orphaned workers: it waited its whole timeout,
// then named workers that do not exist. It reads the pid again as it
// waits, and a live run's is the other run's.
TEST_F(WorkDirTest, AnEndedPidReplacedByALiveRunsIsAnotherRun) {
  StatusOr<WorkDirLock> live_run = WorkDirLock::Acquire(dir_.string());
  ASSERT_TRUE(live_run.ok()) << live_run.status().ToString();
  StatusOr<pid_t> ended = SpawnProcess("/bin/true", {}, {}, (dir_ / "true.log").string());
  ASSERT_TRUE(ended.ok());
  ASSERT_EQ(::waitpid(*ended, nullptr, 0), *ended);
  std::ofstream(dir_ / "lock", std::ios::trunc) << *ended;  // not yet its own pid

  OrphanedWorkersWait wait;
  wait.timeout = std::chrono::seconds(20);
  wait.on_wait = [&](const std::string&) {
    std::ofstream(dir_ / "lock", std::ios::trunc) << ::getpid();  // the live run writes its pid
  };
  StatusOr<WorkDirLock> second = WorkDirLock::Acquire(dir_.string(), wait);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("another `pacer run` (pid " +
                                           std::to_string(::getpid()) + ") is using"),
            std::string::npos)
      << second.status().message();
}

TEST_F(WorkDirTest, ResumesFromTheNewestStepEveryRankHas) {
  EXPECT_FALSE(Resumable().has_value());
  Save(0, 2, 40);
  Save(0, 2, 49);
  Save(1, 2, 40);
  Touch("checkpoints/rank-1/step-000000000049.ckpt.tmp");  // torn: not a checkpoint
  EXPECT_EQ(Resumable(), 40);
  Save(1, 2, 49);
  EXPECT_EQ(Resumable(), 49);
  // Another job's checkpoints are not this job's to resume.
  EXPECT_FALSE(ResumableCheckpointStep((dir_ / "checkpoints").string(), "gpt").has_value());
}

// A run of 4 ranks left rank-2 and rank-3 behind; the next run, with
// --cpu-devices 2, checkpointed steps 50 and 60 on ranks 0 and 1 and
// resumed from 60. Every rank-* directory was intersected: "no
// checkpoint", and `pacer run` restarted maxDuration and said step 0.
TEST_F(WorkDirTest, RankDirectoriesOfAnEarlierLargerRunDoNotHideTheCheckpoint) {
  for (int rank = 0; rank < 4; ++rank) {
    Save(rank, 4, 20, "run-1");
    Save(rank, 4, 30, "run-1");
  }
  for (int rank = 0; rank < 2; ++rank) {
    Save(rank, 2, 50, "run-2");
    Save(rank, 2, 60, "run-2");
  }
  ASSERT_TRUE(std::filesystem::exists(dir_ / "checkpoints/rank-3"));
  EXPECT_EQ(Resumable(), 60);
}

// A finished job's checkpoints are set aside: left in place, the next run
// resumed the last periodic one and trained the job's final steps again.
TEST_F(WorkDirTest, AFinishedJobsCheckpointsAreSetAsideSoTheNextRunStartsAtStepZero) {
  std::filesystem::create_directories(dir_);
  StatusOr<std::string> none = SetAsideFinishedCheckpoints(dir_.string());
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(*none, "");                               // nothing to move
  Save(0, 1, 10, "run-0", "checkpoints-finished");    // an older finished job's
  Save(0, 2, 140);
  Save(1, 2, 140);
  StatusOr<std::string> moved = SetAsideFinishedCheckpoints(dir_.string());
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(*moved, (dir_ / "checkpoints-finished").string());
  EXPECT_FALSE(Resumable().has_value());
  EXPECT_EQ(Resumable("checkpoints-finished"), 140);
  EXPECT_FALSE(
      std::filesystem::exists(dir_ / "checkpoints-finished/rank-0/step-000000000010.ckpt"));
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
