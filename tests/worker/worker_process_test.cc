// The real pacer-worker binary on the CPU backend, as the controller runs
// it: a SIGTERM stops it after a checkpoint and a restart continues at the
// right step; a torn checkpoint is ignored; a node whose peer dies exits with
// the collective-failure code instead of hanging.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "core/exit_codes.h"
#include "core/tcp_store.h"

extern char** environ;

namespace pacer::worker {
namespace {

namespace fs = std::filesystem;

// A free TCP port for the store: distinct per test so parallel ctest runs
// never collide (ports from the test's pid and a counter), and below Linux's
// ephemeral range (32768-60999), where the kernel hands out ports to other
// tests' connections and port-0 listeners at any moment.
int NextPort() {
  static int counter = 0;
  return 20000 + (static_cast<int>(getpid()) * 7 + counter++ * 101) % 12000;
}

// A socket listening on a free port (*port) that never accepts: the kernel
// completes connections to it, nobody answers. -1 on failure.
int ListenOnAFreePort(int* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 16) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
    ::close(fd);
    return -1;
  }
  *port = ntohs(addr.sin_port);
  return fd;
}

// A running pacer-worker whose stdout and stderr come through a pipe. The
// pipe reaches EOF only when the worker and all its rank processes are gone,
// so reading it is how the test waits: no sleeps.
struct Worker {
  pid_t pid = -1;
  int fd = -1;
  std::string log;
};

std::map<std::string, std::string> BaseEnv(const std::string& checkpoint_dir, int port) {
  return {{"WORLD_SIZE", "2"},
          {"LOCAL_WORLD_SIZE", "2"},
          {"NNODES", "1"},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)},
          {"PACER_DATA_PARALLEL", "2"},
          {"PACER_GRAD_ACCUM_STEPS", "2"},
          {"PACER_GLOBAL_BATCH_SIZE", "4"},
          {"PACER_MODEL_LAYERS", "2"},
          {"PACER_MODEL_HIDDEN_SIZE", "128"},
          {"PACER_MODEL_ATTENTION_HEADS", "4"},
          {"PACER_SEQUENCE_LENGTH", "64"},
          {"PACER_MODEL_VOCAB_SIZE", "512"},
          {"PACER_CHECKPOINT_DIR", checkpoint_dir},
          {"PACER_CHECKPOINT_INTERVAL_STEPS", "3"},
          {"PACER_METRICS_PORT", "0"},
          {"PACER_BACKEND", "cpu"},
          {"PACER_TIMEOUT_SECONDS", "20"},
          {"PACER_JOB_NAME", "process-test"}};
}

// Starts pacer-worker with exactly `env` (plus PATH) and the flags `args`.
Worker Start(const std::map<std::string, std::string>& env,
             const std::vector<std::string>& args = {}) {
  std::vector<std::string> entries;
  for (const auto& [k, v] : env) entries.push_back(k + "=" + v);
  if (const char* path = std::getenv("PATH")) entries.push_back(std::string("PATH=") + path);
  std::vector<char*> envp;
  for (std::string& e : entries) envp.push_back(e.data());
  envp.push_back(nullptr);
  int fds[2];
  EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  std::string binary = PACER_WORKER_BINARY;
  std::vector<std::string> words = args;
  std::vector<char*> argv = {binary.data()};
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  Worker w;
  EXPECT_EQ(posix_spawn(&w.pid, binary.c_str(), &actions, nullptr, argv.data(), envp.data()), 0);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  w.fd = fds[0];
  return w;
}

// Reads the worker's output until `text` appears (true) or EOF / `limit`.
bool ReadUntil(Worker& w, const std::string& text, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (text.empty() || w.log.find(text) == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{w.fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char buffer[4096];
    const ssize_t n = read(w.fd, buffer, sizeof(buffer));
    if (n <= 0) return false;  // EOF: every process of the worker is gone
    w.log.append(buffer, static_cast<size_t>(n));
  }
  return true;
}

// The worker's exit code, once all its output is read; kills it and fails
// the test after `limit`.
int WaitExit(Worker& w, std::chrono::seconds limit) {
  const auto start = std::chrono::steady_clock::now();
  ReadUntil(w, "", limit);  // returns at EOF or the deadline
  int status = 0;
  if (std::chrono::steady_clock::now() - start >= limit) {
    kill(w.pid, SIGKILL);
    waitpid(w.pid, &status, 0);
    ADD_FAILURE() << "pacer-worker did not exit within " << limit.count() << " s:\n" << w.log;
    return -1;
  }
  waitpid(w.pid, &status, 0);
  close(w.fd);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int64_t NumberAfter(const std::string& log, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(log, m, std::regex(key + "=([0-9]+)"))) return -1;
  return std::stoll(m[1]);
}

class WorkerProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("pacer-worker-test-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

// SIGTERM to a running worker: every rank stops at the same step, one of the
// stop checks (every step up to step 2, then every N steps, N agreed from
// rank 0's measured step time), with a checkpoint there, and a restart
// resumes exactly at it.
void ExpectSigtermStopsAndResumes(std::map<std::string, std::string> env) {
  env["PACER_TOTAL_STEPS"] = "100000";  // far more than the test lets it run
  Worker first = Start(env);
  ASSERT_TRUE(ReadUntil(first, "event=checkpoint step=3", std::chrono::seconds(60))) << first.log;
  kill(first.pid, SIGTERM);
  ASSERT_EQ(WaitExit(first, std::chrono::seconds(60)), kExitStoppedAfterCheckpoint);
  const std::string& first_log = first.log;
  const int64_t stopped_at = NumberAfter(first_log, "event=stopped step");
  ASSERT_GE(stopped_at, 3) << first_log;
  // Both ranks stopped at the same step, and each wrote that checkpoint.
  EXPECT_NE(first_log.find("rank=0 event=stopped step=" + std::to_string(stopped_at)),
            std::string::npos);
  EXPECT_NE(first_log.find("rank=1 event=stopped step=" + std::to_string(stopped_at)),
            std::string::npos);

  // Restart with a total a few steps beyond: it resumes exactly there.
  env["PACER_TOTAL_STEPS"] = std::to_string(stopped_at + 4);
  env["MASTER_PORT"] = std::to_string(NextPort());
  Worker second = Start(env);
  ASSERT_EQ(WaitExit(second, std::chrono::seconds(60)), kExitSuccess) << second.log;
  const std::string& second_log = second.log;
  EXPECT_EQ(NumberAfter(second_log, "resume_step"), stopped_at);
  EXPECT_EQ(NumberAfter(second_log, "event=done steps"), stopped_at + 4);
  // The ranks agreed how often to read the stop claim, and stopped at a check.
  const int64_t every = NumberAfter(first_log, "event=stop-checks every_steps");
  ASSERT_GE(every, 1) << first_log;
  std::fprintf(stderr, "stop checks every %lld steps; stopped at step %lld\n",
               static_cast<long long>(every), static_cast<long long>(stopped_at));
  EXPECT_TRUE(stopped_at <= 2 || (stopped_at - 2) % every == 0)
      << "stopped at " << stopped_at << ", checks every " << every << " steps from step 2";
}

TEST_F(WorkerProcessTest, SigtermCheckpointsAndARestartContinuesAtTheRightStep) {
  ExpectSigtermStopsAndResumes(BaseEnv(Path("ckpt"), NextPort()));
}

TEST_F(WorkerProcessTest, ATornCheckpointIsIgnored) {
  auto env = BaseEnv(Path("ckpt"), NextPort());
  env["PACER_TOTAL_STEPS"] = "6";  // checkpoints at 3 and 6 (the final one)
  Worker first = Start(env);
  ASSERT_EQ(WaitExit(first, std::chrono::seconds(60)), kExitSuccess) << first.log;
  // Tear rank 1's newest checkpoint, as a crash in the middle of a write would.
  const fs::path newest = fs::path(Path("ckpt")) / "rank-1" / "step-000000000006.ckpt";
  ASSERT_TRUE(fs::exists(newest));
  fs::resize_file(newest, fs::file_size(newest) / 2);

  env["PACER_TOTAL_STEPS"] = "9";
  env["MASTER_PORT"] = std::to_string(NextPort());
  Worker second = Start(env);
  ASSERT_EQ(WaitExit(second, std::chrono::seconds(60)), kExitSuccess) << second.log;
  // Step 6 is not complete on every rank any more: resume from 3, and say
  // what that cost.
  EXPECT_EQ(NumberAfter(second.log, "resume_step"), 3);
  EXPECT_NE(second.log.find("checkpoint at step 6 unreadable ("), std::string::npos) << second.log;
  EXPECT_NE(second.log.find("resuming from step 3, 3 steps lost"), std::string::npos) << second.log;
}

// The last step is checkpointed: a job given more steps after it finished
// (an edit that adds data) resumed from the last periodic checkpoint (6 of
// 7) and trained step 7 again; with --checkpoint-buffers the final weights
// were never saved.
TEST_F(WorkerProcessTest, TheLastStepIsCheckpointedAndMoreStepsResumeThere) {
  auto env = BaseEnv(Path("ckpt"), NextPort());
  env["PACER_TOTAL_STEPS"] = "7";  // periodic checkpoints at 3 and 6, the final at 7
  Worker first = Start(env, {"run", "--checkpoint-buffers"});
  ASSERT_EQ(WaitExit(first, std::chrono::seconds(60)), kExitSuccess) << first.log;
  for (const char* rank : {"rank-0", "rank-1"}) {
    EXPECT_TRUE(fs::exists(fs::path(Path("ckpt")) / rank / "step-000000000007.ckpt")) << rank;
  }
  env["PACER_TOTAL_STEPS"] = "9";
  env["MASTER_PORT"] = std::to_string(NextPort());
  Worker second = Start(env, {"run", "--checkpoint-buffers"});
  ASSERT_EQ(WaitExit(second, std::chrono::seconds(60)), kExitSuccess) << second.log;
  EXPECT_EQ(NumberAfter(second.log, "resume_step"), 7) << second.log;
  // A run that trains nothing (resumed at its total) writes nothing.
  const auto written =
      fs::last_write_time(fs::path(Path("ckpt")) / "rank-0" / "step-000000000009.ckpt");
  env["MASTER_PORT"] = std::to_string(NextPort());
  Worker third = Start(env, {"run", "--checkpoint-buffers"});
  ASSERT_EQ(WaitExit(third, std::chrono::seconds(60)), kExitSuccess) << third.log;
  EXPECT_EQ(NumberAfter(third.log, "resume_step"), 9) << third.log;
  EXPECT_EQ(third.log.find("event=checkpoint "), std::string::npos) << third.log;
  EXPECT_EQ(fs::last_write_time(fs::path(Path("ckpt")) / "rank-0" / "step-000000000009.ckpt"),
            written);
}

// Run A's step 6 is torn on rank 1, so run B resumes from 3 and saves step 6
// again; had rank 0 died before its rename, rank 0's step 6 would still be
// run A's (put back here) beside run B's on rank 1. The next run must not
// restore that mix as one checkpoint: it resumes from 3.
TEST_F(WorkerProcessTest, AStepWhoseFilesTwoRunsWroteIsNotResumedFrom) {
  auto env = BaseEnv(Path("ckpt"), NextPort());
  env["PACER_TOTAL_STEPS"] = "6";  // checkpoints at 3 and 6 (the final one)
  Worker a = Start(env);
  ASSERT_EQ(WaitExit(a, std::chrono::seconds(60)), kExitSuccess) << a.log;
  const fs::path rank0_step6 = fs::path(Path("ckpt")) / "rank-0" / "step-000000000006.ckpt";
  const fs::path rank1_step6 = fs::path(Path("ckpt")) / "rank-1" / "step-000000000006.ckpt";
  fs::copy_file(rank0_step6, Path("run-a-rank0-step6"));
  fs::resize_file(rank1_step6, fs::file_size(rank1_step6) / 2);

  env["MASTER_PORT"] = std::to_string(NextPort());
  Worker b = Start(env);
  ASSERT_EQ(WaitExit(b, std::chrono::seconds(60)), kExitSuccess) << b.log;
  ASSERT_EQ(NumberAfter(b.log, "resume_step"), 3) << b.log;
  fs::copy_file(Path("run-a-rank0-step6"), rank0_step6, fs::copy_options::overwrite_existing);

  env["PACER_TOTAL_STEPS"] = "9";
  env["MASTER_PORT"] = std::to_string(NextPort());
  Worker c = Start(env);
  ASSERT_EQ(WaitExit(c, std::chrono::seconds(60)), kExitSuccess) << c.log;
  EXPECT_EQ(NumberAfter(c.log, "resume_step"), 3) << c.log;
  EXPECT_NE(c.log.find("(a mix of two runs' checkpoints)"), std::string::npos) << c.log;
  EXPECT_NE(c.log.find("resuming from step 3, 3 steps lost"), std::string::npos) << c.log;
}

// Checkpoints exist but none can be resumed from: training from step 0 would
// silently discard the job's progress, so every rank exits with data loss.
TEST_F(WorkerProcessTest, CheckpointsNoneOfWhichIsUsableAreDataLoss) {
  auto env = BaseEnv(Path("ckpt"), NextPort());
  env["PACER_TOTAL_STEPS"] = "6";  // checkpoints at 3 and 6 (the final one)
  Worker first = Start(env);
  ASSERT_EQ(WaitExit(first, std::chrono::seconds(60)), kExitSuccess) << first.log;
  for (const char* name : {"step-000000000003.ckpt", "step-000000000006.ckpt"}) {
    const fs::path file = fs::path(Path("ckpt")) / "rank-0" / name;
    ASSERT_TRUE(fs::exists(file));
    fs::resize_file(file, fs::file_size(file) / 2);
  }

  env["PACER_TOTAL_STEPS"] = "9";
  env["MASTER_PORT"] = std::to_string(NextPort());
  Worker second = Start(env);
  EXPECT_EQ(WaitExit(second, std::chrono::seconds(60)), kExitDataLoss) << second.log;
  EXPECT_NE(second.log.find("event=data-loss"), std::string::npos) << second.log;
  EXPECT_EQ(second.log.find("event=start "), std::string::npos) << "no rank trained";
}

// Rank 0 cannot list the checkpoints (here rank-0 is a file, since the
// tests run as root and permissions do not stop root: a misconfiguration,
// exit 2; an I/O error on the volume travels the same way): the other
// ranks waited for its answer until their store timeout and reported a
// rendezvous failure. Rank 0 now tells them, and they fail with its error.
TEST_F(WorkerProcessTest, RankZerosCheckpointErrorReachesTheOtherRanks) {
  auto env = BaseEnv(Path("ckpt"), NextPort());
  env["PACER_TOTAL_STEPS"] = "4";
  fs::create_directories(Path("ckpt"));
  std::ofstream(Path("ckpt") + "/rank-0") << "not a directory";
  Worker w = Start(env);
  EXPECT_NE(WaitExit(w, std::chrono::seconds(60)), kExitSuccess) << w.log;
  EXPECT_NE(w.log.find("cannot list checkpoint directory"), std::string::npos) << w.log;
  std::smatch m;
  EXPECT_TRUE(std::regex_search(w.log, m,
                                std::regex("rank=1 event=failed during=resume exit=[a-z-]+ "
                                           "error=\"[A-Z_]+: rank 0 could not choose where to "
                                           "resume: cannot list checkpoint directory")))
      << w.log;
  EXPECT_EQ(w.log.find("event=start "), std::string::npos) << "no rank trained";
}

// `--checkpoint-dir /etc/passwd` (a regular file): every rank exited 4, a
// collective failure, which the controller counts against the node, so a
// misconfigured volume got healthy nodes excluded. Every rank exits 2, an
// invalid configuration, with a message that says what to fix.
TEST_F(WorkerProcessTest, ACheckpointDirectoryThatIsAFileFailsEveryRankWithInvalidConfig) {
  auto env = BaseEnv(Path("ckpt"), NextPort());
  env["PACER_TOTAL_STEPS"] = "3";
  std::ofstream(Path("not-a-directory")) << "x";
  Worker w = Start(env, {"run", "--checkpoint-dir", Path("not-a-directory")});
  EXPECT_EQ(WaitExit(w, std::chrono::seconds(60)), kExitInvalidConfig) << w.log;
  for (const char* rank : {"rank=0", "rank=1"}) {
    EXPECT_NE(w.log.find(std::string(rank) + " event=failed during=resume exit=invalid-config"),
              std::string::npos)
        << w.log;
  }
  EXPECT_NE(w.log.find("point --checkpoint-dir / PACER_CHECKPOINT_DIR at a directory"),
            std::string::npos)
      << w.log;
  EXPECT_EQ(w.log.find("event=start "), std::string::npos) << "no rank trained";
}

// --seed is a decimal integer in [0, 2^64 - 1]: "-1" ran as 2^64 - 1 and
// 2^64 as some other seed, silently; hex and spaces were taken too.
TEST_F(WorkerProcessTest, ASeedOutsideItsRangeOrNotInDecimalIsInvalidConfig) {
  for (const char* seed : {"-1", "18446744073709551616", "0x10", " 5"}) {
    Worker w = Start(BaseEnv(Path("ckpt"), NextPort()), {"run", "--seed", seed});
    EXPECT_EQ(WaitExit(w, std::chrono::seconds(30)), kExitInvalidConfig) << seed << "\n" << w.log;
    EXPECT_NE(w.log.find("--seed: must be a decimal integer in [0, 18446744073709551615]"),
              std::string::npos)
        << w.log;
    EXPECT_NE(w.log.find(std::string("got \"") + seed + "\""), std::string::npos) << w.log;
    EXPECT_EQ(w.log.find("event=start "), std::string::npos) << seed << ": no rank trained";
  }
  auto env = BaseEnv(Path("ckpt"), NextPort());
  env["PACER_TOTAL_STEPS"] = "1";
  Worker largest = Start(env, {"run", "--seed", "18446744073709551615"});
  EXPECT_EQ(WaitExit(largest, std::chrono::seconds(60)), kExitSuccess) << largest.log;
}

// SIGTERM while the ranks are still starting (the kubelet deleting a pod that
// has just started) ends the worker cleanly: no rank dies of the signal.
TEST_F(WorkerProcessTest, ASigtermWhileTheRanksStartStopsCleanly) {
  auto env = BaseEnv(Path("ckpt"), NextPort());
  env["PACER_TOTAL_STEPS"] = "100000";
  Worker w = Start(env);
  // The supervisor logs this right after forking the rank, before the rank
  // has done anything.
  ASSERT_TRUE(ReadUntil(w, "event=rank-started local_rank=1", std::chrono::seconds(60))) << w.log;
  kill(w.pid, SIGTERM);
  const int code = WaitExit(w, std::chrono::seconds(60));
  EXPECT_TRUE(code == kExitStoppedAfterCheckpoint || code == kExitSuccess)
      << ExitCodeName(code) << "\n"
      << w.log;
  EXPECT_EQ(w.log.find("event=rank-killed"), std::string::npos) << w.log;
}

// SIGTERM to rank 0 of a two-node job whose other node never comes (a drain
// while the pods gather): the rank is in its Gloo rendezvous, waiting in the
// store for the peer's address. It used to wait there, its stop unread,
// until the supervisor killed it 25 s later (exit 1, which the controller
// counts as a restart); now the wait gives up and the rank stops cleanly
// (docs/worker.md, "Process model").
TEST_F(WorkerProcessTest, ASigtermWhileRankZeroWaitsForAPeerThatNeverComesIsACleanStop) {
  const int port = NextPort();
  auto env = BaseEnv(Path("ckpt"), port);
  env["NNODES"] = "2";
  env["LOCAL_WORLD_SIZE"] = "1";
  env["NODE_RANK"] = "0";
  env["PACER_TIMEOUT_SECONDS"] = "120";  // far beyond the supervisor's 25 s grace period
  Worker w = Start(env);
  // Rank 0's rendezvous has published its address (Gloo's key "0" under the
  // data-parallel group's prefix), so it is waiting for rank 1's.
  auto client = TcpStoreClient::Connect("127.0.0.1", port, 99, std::chrono::seconds(60));
  const bool waiting = client.ok() && (*client)->Get("cpu/data/0/0", std::chrono::seconds(60)).ok();
  if (!waiting) kill(w.pid, SIGKILL);
  kill(w.pid, SIGTERM);
  const int code = WaitExit(w, std::chrono::seconds(60));
  ASSERT_TRUE(waiting) << "rank 0 never reached its rendezvous\n" << w.log;
  EXPECT_EQ(code, kExitStoppedAfterCheckpoint) << ExitCodeName(code) << "\n" << w.log;
  EXPECT_NE(w.log.find("rank=0 event=stopped during=initialize"), std::string::npos) << w.log;
  EXPECT_EQ(w.log.find("event=rank-killed"), std::string::npos) << w.log;
}

// A metrics port another process holds fails the rank before the
// rendezvous. Bound after it, the rank failed only once its peers had
// joined (here: never, so it waited out its timeout), and they then waited
// on it until their collectives timed out.
TEST_F(WorkerProcessTest, ATakenMetricsPortFailsBeforeTheRendezvous) {
  int taken_port = 0;
  const int taken = ListenOnAFreePort(&taken_port);
  ASSERT_GE(taken, 0);
  auto env = BaseEnv(Path("ckpt"), NextPort());
  env["NNODES"] = "2";  // rank 1 never comes
  env["LOCAL_WORLD_SIZE"] = "1";
  env["NODE_RANK"] = "0";
  env["PACER_METRICS_PORT"] = std::to_string(taken_port);
  Worker w = Start(env);
  const int code = WaitExit(w, std::chrono::seconds(60));
  ::close(taken);
  EXPECT_EQ(code, kExitInternalError) << ExitCodeName(code) << "\n" << w.log;
  EXPECT_NE(w.log.find("rank=0 event=failed during=metrics"), std::string::npos) << w.log;
  EXPECT_NE(w.log.find("PACER_METRICS_PORT"), std::string::npos) << w.log;
}

TEST_F(WorkerProcessTest, APeerKilledMidStepEndsTheOthersWithCollectiveFailure) {
  // Two nodes of one rank each, as two pods would run.
  const int port = NextPort();
  auto env = BaseEnv(Path("ckpt"), port);
  env["NNODES"] = "2";
  env["LOCAL_WORLD_SIZE"] = "1";
  env["PACER_TOTAL_STEPS"] = "100000";
  env["PACER_TIMEOUT_SECONDS"] = "10";
  env["NODE_RANK"] = "0";
  Worker node0 = Start(env);
  env["NODE_RANK"] = "1";
  Worker node1 = Start(env);
  ASSERT_TRUE(ReadUntil(node0, "event=checkpoint step=3", std::chrono::seconds(60))) << node0.log;
  // The whole node 1 dies mid-run: its supervisor, and with it (the kernel
  // kills a rank whose supervisor died) its rank.
  kill(node1.pid, SIGKILL);
  WaitExit(node1, std::chrono::seconds(30));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(WaitExit(node0, std::chrono::seconds(60)), kExitCollectiveFailure) << node0.log;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_NE(node0.log.find("exit=collective-failure"), std::string::npos) << node0.log;
}

TEST_F(WorkerProcessTest, InterleavedPipelineWithTensorParallelismRunsToTheEnd) {
  // The layouts the planner picks for big models: t = 2, p = 2, v = 2 with
  // full recomputation, on four local ranks.
  auto env = BaseEnv(Path("ckpt"), NextPort());
  env["WORLD_SIZE"] = "4";
  env["LOCAL_WORLD_SIZE"] = "4";
  env["PACER_TENSOR_PARALLEL"] = "2";
  env["PACER_PIPELINE_PARALLEL"] = "2";
  env["PACER_VIRTUAL_STAGES"] = "2";
  env["PACER_DATA_PARALLEL"] = "1";
  env["PACER_GRAD_ACCUM_STEPS"] = "4";
  env["PACER_GLOBAL_BATCH_SIZE"] = "4";
  env["PACER_MODEL_LAYERS"] = "4";
  env["PACER_ACTIVATION_CHECKPOINTING"] = "full";
  env["PACER_TOTAL_STEPS"] = "2";
  Worker w = Start(env);
  ASSERT_EQ(WaitExit(w, std::chrono::seconds(60)), kExitSuccess) << w.log;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_NE(w.log.find("rank=" + std::to_string(rank) + " event=done steps=2"), std::string::npos)
        << w.log;
  }
  // The plan is bf16 (the default); the CPU ran fp32 and says so.
  EXPECT_NE(w.log.find(" precision=fp32 "), std::string::npos) << w.log;
}

TEST_F(WorkerProcessTest, TheDoneLineReportsTheRunsMeasurementBesideThePrediction) {
  // What a user compares with the plan after a run (docs/benchmarks.md,
  // "GPU measurements"): the mean of the timed steps, the peak memory, and
  // the prediction the controller passed in, on the last line of each rank.
  auto env = BaseEnv(Path("ckpt"), NextPort());
  env["PACER_TOTAL_STEPS"] = "4";
  env["PACER_PREDICTED_STEP_SECONDS"] = "0.5";
  env["PACER_PREDICTED_MEMORY_BYTES"] = "123456789";
  Worker w = Start(env);
  ASSERT_EQ(WaitExit(w, std::chrono::seconds(60)), kExitSuccess) << w.log;
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(w.log, m,
                        std::regex("rank=0 event=done steps=4 mean_step_seconds=([0-9.e-]+) "
                                   "predicted_step_seconds=0.5 peak_memory_bytes=([0-9]+) "
                                   "predicted_memory_bytes=123456789")))
      << w.log;
  EXPECT_GT(std::stod(m[1]), 0.0);
  EXPECT_GT(std::stod(m[2]), 0.0);
  // No GPU type, so no catalog peak: no MFU rather than a made-up one.
  EXPECT_EQ(w.log.find("mfu="), std::string::npos) << w.log;
}

TEST_F(WorkerProcessTest, AnFp8PlanOnTheCpuExitsWithInvalidConfig) {
  // The CPU has no fp8 GEMM: running fp32 under an fp8 plan would misreport
  // what ran, so the worker refuses the plan.
  auto env = BaseEnv(Path("ckpt"), NextPort());
  env["PACER_PRECISION"] = "fp8";
  env["PACER_TOTAL_STEPS"] = "2";
  Worker w = Start(env);
  EXPECT_EQ(WaitExit(w, std::chrono::seconds(30)), kExitInvalidConfig) << w.log;
  EXPECT_NE(w.log.find("cannot run fp8 GEMMs"), std::string::npos) << w.log;
}

TEST_F(WorkerProcessTest, AnFp8PlanIsRefusedBeforeTheRendezvous) {
  // The refusal needs no peer: a node whose rank 0 (and store) never
  // starts still exits 2 naming the fix, not 3 after waiting for the store.
  // Refused after the store started, rank 0 took it down under its
  // sibling, whose "lost the store" (exit 4) could come first.
  auto env = BaseEnv(Path("ckpt"), NextPort());
  env["NNODES"] = "2";
  env["LOCAL_WORLD_SIZE"] = "1";
  env["NODE_RANK"] = "1";
  env["PACER_PRECISION"] = "fp8";
  env["PACER_TOTAL_STEPS"] = "2";
  Worker w = Start(env);
  EXPECT_EQ(WaitExit(w, std::chrono::seconds(60)), kExitInvalidConfig) << w.log;
  EXPECT_NE(w.log.find("rank=1 event=failed during=plan exit=invalid-config"), std::string::npos)
      << w.log;
  EXPECT_EQ(w.log.find("store"), std::string::npos) << w.log;
}

TEST_F(WorkerProcessTest, InvalidEnvironmentExitsWithInvalidConfig) {
  auto env = BaseEnv(Path("ckpt"), NextPort());
  env["PACER_GLOBAL_BATCH_SIZE"] = "5";
  Worker w = Start(env);
  EXPECT_EQ(WaitExit(w, std::chrono::seconds(30)), kExitInvalidConfig);
  EXPECT_NE(w.log.find("PACER_GLOBAL_BATCH_SIZE"), std::string::npos) << w.log;
}

TEST_F(WorkerProcessTest, AStoreAddressWhereSomethingElseListensIsARendezvousTimeout) {
  // MASTER_PORT names a port where something listens but no store answers
  // (another service, a stale address). The rank took it for the store and
  // its first request failed as a lost connection: exit 4 after 2 x 2 + 5 s,
  // which the controller counts against the node.
  int port = 0;
  const int silent = ListenOnAFreePort(&port);
  ASSERT_GE(silent, 0);
  auto env = BaseEnv(Path("ckpt"), port);
  env["NNODES"] = "2";
  env["LOCAL_WORLD_SIZE"] = "1";
  env["NODE_RANK"] = "1";
  env["PACER_TIMEOUT_SECONDS"] = "2";
  Worker w = Start(env);
  const int code = WaitExit(w, std::chrono::seconds(60));
  ::close(silent);
  EXPECT_EQ(code, kExitRendezvousTimeout) << w.log;
  EXPECT_NE(w.log.find("no answer to the store's handshake"), std::string::npos) << w.log;
}

TEST_F(WorkerProcessTest, AMissingPeerIsARendezvousTimeout) {
  auto env = BaseEnv(Path("ckpt"), NextPort());
  env["NNODES"] = "2";
  env["LOCAL_WORLD_SIZE"] = "1";
  env["NODE_RANK"] = "1";  // rank 0, which hosts the store, never starts
  env["PACER_TIMEOUT_SECONDS"] = "2";
  env["PACER_TOTAL_STEPS"] = "3";
  Worker w = Start(env);
  EXPECT_EQ(WaitExit(w, std::chrono::seconds(30)), kExitRendezvousTimeout);
  EXPECT_NE(w.log.find("127.0.0.1:" + env["MASTER_PORT"]), std::string::npos) << w.log;
}

}  // namespace
}  // namespace pacer::worker
