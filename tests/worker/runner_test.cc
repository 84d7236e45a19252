// How often the ranks read the stop claim (runner.h, point 4), the plan
// fingerprint that decides whether a checkpoint's buffers are restored, and
// how RunRank ends on a stop: during start-up (a clean stop, not a SIGKILL
// after waiting for peers), without a checkpoint directory (no claim of
// a checkpoint), and with one that is not a directory (invalid config).
#include "core/runner.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/exit_codes.h"
#include "core/tcp_store.h"
#include "cpu/cpu_backend.h"

namespace pacer::worker {
namespace {

TEST(StopCheckIntervalTest, AboutTwoSecondsOfStepsBetweenChecks) {
  EXPECT_EQ(StopCheckIntervalSteps(0.5), 4);
  EXPECT_EQ(StopCheckIntervalSteps(0.1), 20);
  EXPECT_EQ(StopCheckIntervalSteps(0.03), 66);
}

TEST(StopCheckIntervalTest, SlowOrUnmeasuredStepsAreCheckedEveryStep) {
  EXPECT_EQ(StopCheckIntervalSteps(5.0), 1);
  EXPECT_EQ(StopCheckIntervalSteps(0.0), 1);
  EXPECT_EQ(StopCheckIntervalSteps(-1.0), 1);
}

// A stop waits up to one interval. Short steps are the noisiest under CPU
// contention: a 2.9 ms sample meant a check every 689 steps, and a worker
// whose steps later ran 13 times slower outlasted its 25 s grace period and
// was killed without a checkpoint. Capped, the same slowdown stops in ~4 s.
TEST(StopCheckIntervalTest, ShortStepsAreCappedSoAStopStaysPrompt) {
  EXPECT_EQ(StopCheckIntervalSteps(0.0029), kMaxStopCheckSteps);
  EXPECT_EQ(StopCheckIntervalSteps(1e-6), kMaxStopCheckSteps);
  const double slowed_step_seconds = 13 * 0.0029;
  EXPECT_LT(static_cast<double>(StopCheckIntervalSteps(0.0029)) * slowed_step_seconds, 25.0 / 4);
}

WorkerConfig SmallPlan() {
  WorkerConfig c;
  c.world_size = 2;
  c.data_parallel = 2;
  c.micro_batch_size = 2;
  c.gradient_accumulation_steps = 4;
  c.precision = planner::Precision::kBf16;
  c.recompute = planner::Recompute::kNone;
  c.model.layers = 4;
  c.model.hidden_size = 256;
  c.model.attention_heads = 8;
  c.model.kv_heads = 8;
  c.model.ffn_hidden_size = 1024;
  c.model.ffn_kind = planner::FfnKind::kGelu;
  c.model.sequence_length = 128;
  c.model.vocab_size = 1000;
  return c;
}

// Each of these changes the buffers' shapes or meaning (heads regrouped
// over the same matrices) without changing the layout, the hidden size or
// the layer count: a checkpoint of one is never restored into the other.
TEST(PlanFingerprintTest, TheAttentionAndMlpShapeArePartOfIt) {
  const std::string base = PlanFingerprint(SmallPlan());
  const std::vector<std::pair<const char*, std::function<void(planner::ModelSpec&)>>> changes = {
      {"attention heads", [](planner::ModelSpec& m) { m.attention_heads = 4; }},
      {"kv heads", [](planner::ModelSpec& m) { m.kv_heads = 2; }},
      {"ffn size", [](planner::ModelSpec& m) { m.ffn_hidden_size = 768; }},
      {"ffn kind", [](planner::ModelSpec& m) { m.ffn_kind = planner::FfnKind::kSwiglu; }},
      {"tied embeddings", [](planner::ModelSpec& m) { m.tied_embeddings = !m.tied_embeddings; }},
      {"causal mask", [](planner::ModelSpec& m) { m.causal_attention = !m.causal_attention; }},
  };
  for (const auto& [what, change] : changes) {
    WorkerConfig c = SmallPlan();
    change(c.model);
    EXPECT_NE(PlanFingerprint(c), base) << what;
    EXPECT_EQ(AcceptedPlanFingerprints(c).front(), PlanFingerprint(c)) << what;
  }
}

// Checkpoints written before the attention and MLP shape were recorded stay
// usable after an upgrade: the string earlier workers wrote for this plan
// (their format, field for field) is accepted beside the current one.
TEST(PlanFingerprintTest, AnEarlierWorkersFingerprintOfThisPlanIsAccepted) {
  const std::vector<std::string> accepted = AcceptedPlanFingerprints(SmallPlan());
  ASSERT_EQ(accepted.size(), 2u);
  EXPECT_EQ(accepted[1], "t1 p1 v1 d2 z0 b2 k4 bf16 none L4 h256 s128 V1000");
  EXPECT_EQ(accepted[0].rfind(accepted[1] + " ", 0), 0u) << accepted[0];
}

// ---- RunRank and a stop ------------------------------------------------------
//
// RunRank runs in the test's process: its StopSignal installs the handlers
// here, and the tests raise SIGTERM at the point they mean (before the rank
// starts, from the backend's Initialize or its first step), so the stop's
// timing is the test's, not a sleep's.

using std::chrono::seconds;

// A store port for a rank 0 that hosts it: below Linux's ephemeral range
// (see worker_process_test.cc), distinct per process and test.
int RankZeroPort() {
  static int counter = 0;
  return 20000 + (static_cast<int>(getpid()) * 13 + 211 * counter++ + 6007) % 12000;
}

// A world of `world_size` one-rank nodes; this process runs node `node`.
WorkerConfig TinyWorld(int world_size, int node, int port, double timeout_seconds) {
  WorkerConfig c;
  c.world_size = world_size;
  c.nnodes = world_size;
  c.local_world_size = 1;
  c.node_rank = node;
  c.rank = node;
  c.data_parallel = world_size;
  c.global_batch_size = world_size;
  c.master_addr = "127.0.0.1";
  c.master_port = port;
  c.metrics_port = 0;
  c.timeout_seconds = timeout_seconds;
  c.total_steps = 100;
  c.job_name = "runner-test";
  c.model.layers = 2;
  c.model.hidden_size = 64;
  c.model.attention_heads = 4;
  c.model.kv_heads = 4;
  c.model.ffn_hidden_size = 128;
  c.model.vocab_size = 128;
  c.model.sequence_length = 16;
  return c;
}

// A backend whose calls do what the test says.
class ScriptedBackend : public StepBackend {
 public:
  std::function<Status()> initialize = [] { return Status::Ok(); };
  std::function<StatusOr<StepTiming>(int64_t)> step = [](int64_t) -> StatusOr<StepTiming> {
    StepTiming t;
    t.step_seconds = 1e-3;
    return t;
  };

  const char* name() const override { return "scripted"; }
  Status Initialize(const BackendContext&, uint64_t) override { return initialize(); }
  StatusOr<StepTiming> RunStep(int64_t s) override { return step(s); }
  double PeakMemoryBytes() const override { return 0; }
  StatusOr<NamedBuffers> SaveBuffers() override { return NamedBuffers{}; }
  Status LoadBuffers(const NamedBuffers&) override { return Status::Ok(); }
  uint64_t CheckpointBufferBytes() const override { return 0; }
};

BackendFactory Scripted(std::function<void(ScriptedBackend&)> script) {
  return [script]() -> std::unique_ptr<StepBackend> {
    auto backend = std::make_unique<ScriptedBackend>();
    script(*backend);
    return backend;
  };
}

// The CPU backend, with a SIGTERM arriving just as its Initialize starts:
// what a drain does to a rank that is about to wait for its peers.
class StoppedAsItInitializes : public StepBackend {
 public:
  const char* name() const override { return cpu_->name(); }
  Status Initialize(const BackendContext& context, uint64_t seed) override {
    std::raise(SIGTERM);  // RunRank's StopSignal takes it
    return cpu_->Initialize(context, seed);
  }
  StatusOr<StepTiming> RunStep(int64_t s) override { return cpu_->RunStep(s); }
  double PeakMemoryBytes() const override { return cpu_->PeakMemoryBytes(); }
  StatusOr<NamedBuffers> SaveBuffers() override { return cpu_->SaveBuffers(); }
  Status LoadBuffers(const NamedBuffers& b) override { return cpu_->LoadBuffers(b); }
  uint64_t CheckpointBufferBytes() const override { return cpu_->CheckpointBufferBytes(); }

 private:
  std::unique_ptr<StepBackend> cpu_ = MakeCpuBackend();
};

struct RankRun {
  int code = -1;
  std::string log;
  std::chrono::steady_clock::duration took{};
};

RankRun RunOneRank(const WorkerConfig& c, const BackendFactory& factory,
                   const RunOptions& options = {}) {
  RankRun run;
  const auto start = std::chrono::steady_clock::now();
  ::testing::internal::CaptureStderr();
  run.code = RunRank(c, 0, factory, options);
  run.log = ::testing::internal::GetCapturedStderr();
  run.took = std::chrono::steady_clock::now() - start;
  return run;
}

// Rank 0 of two whose peer never comes: its Gloo rendezvous waits in the
// store for the peer's address. A SIGTERM then used to go unread until the
// step loop, so the rank waited out PACER_TIMEOUT_SECONDS (under a
// supervisor: SIGKILL after 25 s, exit 1, a restart counted against the
// job). Now the wait gives up and the rank stops cleanly (docs/worker.md,
// "Process model").
TEST(RunnerStopTest, AStopWhileRankZeroWaitsForAPeerThatNeverComesIsACleanStop) {
  const WorkerConfig c = TinyWorld(2, 0, RankZeroPort(), /*timeout_seconds=*/120);
  const RankRun run = RunOneRank(c, [] { return std::make_unique<StoppedAsItInitializes>(); });
  EXPECT_EQ(run.code, kExitStoppedAfterCheckpoint) << ExitCodeName(run.code) << "\n" << run.log;
  EXPECT_NE(run.log.find("rank=0 event=stopped during=initialize checkpoint=not-needed"),
            std::string::npos)
      << run.log;
  EXPECT_NE(run.log.find("the rank is stopping"), std::string::npos) << run.log;
  EXPECT_LT(run.took, seconds(60)) << "the stop waited for the rendezvous' timeout";
}

// Rank 1 of two, started, waiting for rank 0 to choose the resume point
// (rank 0 is slow: reading every rank's checkpoints, or not started).
TEST(RunnerStopTest, AStopWhileWaitingForTheResumePointIsACleanStop) {
  auto store = TcpStoreServer::Start("127.0.0.1", 0);  // rank 0's, whose rank 0 never answers
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  // Ten seconds: the wait is retried 12 times, so without the interrupt it
  // ended two minutes later as a collective failure.
  const WorkerConfig c = TinyWorld(2, 1, (*store)->port(), /*timeout_seconds=*/10);
  // Rank 0 started, with the same plan, and published it; then it is slow.
  auto rank0 = TcpStoreClient::Connect("127.0.0.1", (*store)->port(), 0, seconds(10));
  ASSERT_TRUE(rank0.ok()) << rank0.status().ToString();
  ASSERT_TRUE((*rank0)->Set(kWorldPlanKey, WorldFingerprint(c)).ok());
  const RankRun run = RunOneRank(c, Scripted([](ScriptedBackend& b) {
                                   b.initialize = [] {
                                     std::raise(SIGTERM);
                                     return Status::Ok();
                                   };
                                 }));
  EXPECT_EQ(run.code, kExitStoppedAfterCheckpoint) << ExitCodeName(run.code) << "\n" << run.log;
  EXPECT_NE(run.log.find("rank=1 event=stopped during=resume"), std::string::npos) << run.log;
  EXPECT_NE(run.log.find("gave up waiting for key \"runner/resume-step\""), std::string::npos)
      << run.log;
}

// Nodes started with different settings never compared them: another
// hidden size aborted inside Gloo (SIGABRT), another accumulation trained on
// silently wrong (both exited 0), another NNODES failed as a peer's death.
// Every rank checks its plan against rank 0's before the backend starts:
// exit 2 naming what differs.
TEST(RunnerRendezvousTest, ARankWhosePlanIsNotRankZerosExitsTwoNamingTheDifference) {
  auto store = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  WorkerConfig rank0_config = TinyWorld(2, 0, (*store)->port(), /*timeout_seconds=*/10);
  auto rank0 = TcpStoreClient::Connect("127.0.0.1", (*store)->port(), 0, seconds(10));
  ASSERT_TRUE(rank0.ok()) << rank0.status().ToString();
  ASSERT_TRUE((*rank0)->Set(kWorldPlanKey, WorldFingerprint(rank0_config)).ok());

  WorkerConfig c = TinyWorld(2, 1, (*store)->port(), /*timeout_seconds=*/10);
  c.gradient_accumulation_steps = 2;
  c.global_batch_size = 4;
  bool initialized = false;
  const RankRun run = RunOneRank(c, Scripted([&initialized](ScriptedBackend& b) {
                                   b.initialize = [&initialized] {
                                     initialized = true;
                                     return Status::Ok();
                                   };
                                 }));
  EXPECT_EQ(run.code, kExitInvalidConfig) << ExitCodeName(run.code) << "\n" << run.log;
  EXPECT_NE(run.log.find("this node was started with another plan than rank 0's: k2 (rank 0: k1), "
                         "B4 (rank 0: B2)"),
            std::string::npos)
      << run.log;
  EXPECT_FALSE(initialized) << "the backend started before the plans were compared";

  // The same plan passes (a rank differs from rank 0 only in its rank).
  EXPECT_TRUE(
      CompareWithRankZero(WorldFingerprint(TinyWorld(2, 1, 1, 10)), WorldFingerprint(rank0_config))
          .ok());
}

// Rank 1 of two, whose SIGTERM came before it started (it stayed pending
// until RunRank's StopSignal unblocked it), while rank 0's store is not up.
TEST(RunnerStopTest, AStopWhileConnectingToTheStoreIsACleanStop) {
  int port = 0;
  {
    auto gone = TcpStoreServer::Start("127.0.0.1", 0);  // nothing listens once it is gone
    ASSERT_TRUE(gone.ok()) << gone.status().ToString();
    port = (*gone)->port();
  }
  const WorkerConfig c = TinyWorld(2, 1, port, /*timeout_seconds=*/60);
  sigset_t term, before;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &term, &before), 0);
  std::raise(SIGTERM);  // pending on this thread, as a supervisor's rank starts
  const RankRun run = RunOneRank(c, Scripted([](ScriptedBackend&) {}));
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, &before, nullptr), 0);
  EXPECT_EQ(run.code, kExitStoppedAfterCheckpoint) << ExitCodeName(run.code) << "\n" << run.log;
  EXPECT_NE(run.log.find("rank=1 event=stopped during=rendezvous"), std::string::npos) << run.log;
  EXPECT_LT(run.took, seconds(30)) << "the stop waited for the store's timeout";
}

// A peer that stopped while starting leaves this rank's first step
// unanswered; with this rank stopping too, nothing was trained: a clean
// stop. Without a stop, the same failure is what it is.
TEST(RunnerStopTest, AFirstStepThatFailsBecauseThePeersStopIsACleanStop) {
  const auto failing_first_step = [](bool stop) {
    return Scripted([stop](ScriptedBackend& b) {
      b.step = [stop](int64_t) -> StatusOr<StepTiming> {
        if (stop) std::raise(SIGTERM);
        return UnavailableError("data-parallel all-reduce failed: peer closed the connection");
      };
    });
  };
  const RankRun stopped = RunOneRank(TinyWorld(1, 0, RankZeroPort(), 60), failing_first_step(true));
  EXPECT_EQ(stopped.code, kExitStoppedAfterCheckpoint) << stopped.log;
  EXPECT_NE(stopped.log.find("event=stopped during=first-step"), std::string::npos) << stopped.log;
  const RankRun failed = RunOneRank(TinyWorld(1, 0, RankZeroPort(), 60), failing_first_step(false));
  EXPECT_EQ(failed.code, kExitCollectiveFailure) << failed.log;
}

// Without a checkpoint directory a stop saves nothing: the log must not say
// it stopped after a checkpoint (it did, and an operator looked for the
// file), and it says what was not kept. The exit code is still the clean
// stop's (docs/worker.md, "Exit codes").
TEST(RunnerStopTest, AStopWithoutACheckpointDirectoryClaimsNoCheckpoint) {
  WorkerConfig c = TinyWorld(1, 0, RankZeroPort(), 60);
  ASSERT_TRUE(c.checkpoint_dir.empty());
  const RankRun run = RunOneRank(c, Scripted([](ScriptedBackend& b) {
                                   b.step = [](int64_t step) -> StatusOr<StepTiming> {
                                     if (step == 0) std::raise(SIGTERM);
                                     StepTiming t;
                                     t.step_seconds = 1e-3;
                                     return t;
                                   };
                                 }));
  EXPECT_EQ(run.code, kExitStoppedAfterCheckpoint) << ExitCodeName(run.code) << "\n" << run.log;
  EXPECT_NE(run.log.find("rank=0 event=stopped step="), std::string::npos) << run.log;
  EXPECT_NE(run.log.find("checkpoint=none"), std::string::npos) << run.log;
  EXPECT_NE(run.log.find("no checkpoint directory"), std::string::npos) << run.log;
  EXPECT_EQ(run.log.find("stopped-after-checkpoint"), std::string::npos) << run.log;
  EXPECT_EQ(run.log.find("event=checkpoint "), std::string::npos) << run.log;
}

// ---- RunRank and a checkpoint directory that cannot be one --------------------

// A fresh temporary directory, removed with the test's object.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "pacer-runner-XXXXXX").string();
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    if (!path_.empty()) std::filesystem::remove_all(path_);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// One rank of `total_steps` that checkpoints into `dir` every
// `interval_steps` steps.
WorkerConfig CheckpointingRank(const std::string& dir, int64_t total_steps,
                               int64_t interval_steps) {
  WorkerConfig c = TinyWorld(1, 0, RankZeroPort(), 60);
  c.total_steps = total_steps;
  c.checkpoint_dir = dir;
  c.checkpoint_interval_steps = interval_steps;
  return c;
}

// `pacer-worker run --checkpoint-dir /etc/passwd` (or /dev/null, or a file
// the volume mount left) exited 4, a collective failure, which the
// controller counts against the node: a misconfigured volume got healthy
// nodes excluded. It is an invalid configuration (exit 2, the TrainJob
// fails with the message), found before any step, and the message says
// which flag or variable to fix.
TEST(RunnerCheckpointDirectoryTest, ADirectoryThatIsAFileIsAnInvalidConfig) {
  const TempDir temp;
  ASSERT_FALSE(temp.path().empty());
  const std::string file = temp.path() + "/ckpt";
  std::ofstream(file) << "not a directory";
  for (const std::string& dir : {file, std::string("/dev/null")}) {
    const WorkerConfig c = CheckpointingRank(dir, 3, 1);
    const RankRun run = RunOneRank(c, Scripted([](ScriptedBackend&) {}));
    EXPECT_EQ(run.code, kExitInvalidConfig) << ExitCodeName(run.code) << "\n" << run.log;
    EXPECT_NE(run.log.find("rank=0 event=failed during=resume exit=invalid-config"),
              std::string::npos)
        << run.log;
    EXPECT_NE(run.log.find(dir + ": Not a directory"), std::string::npos) << run.log;
    EXPECT_NE(run.log.find("point --checkpoint-dir / PACER_CHECKPOINT_DIR at a directory"),
              std::string::npos)
        << run.log;
    EXPECT_EQ(run.log.find("event=start "), std::string::npos) << "no step was trained";
  }
}

// A backend whose step `at_step` replaces the checkpoint directory `dir`
// with a file (the tests run as root, whom permission bits would not stop):
// every save after that step fails.
BackendFactory DirectoryBecomesAFileAtStep(const std::string& dir, int64_t at_step) {
  return Scripted([dir, at_step](ScriptedBackend& b) {
    b.step = [dir, at_step](int64_t step) -> StatusOr<StepTiming> {
      if (step == at_step) {
        std::filesystem::remove_all(dir);
        std::ofstream(dir) << "not a directory";
      }
      StepTiming t;
      t.step_seconds = 1e-3;
      return t;
    };
  });
}

// The same misconfiguration met only by a save (here the directory is
// replaced by a file after the start; the tests run as root, whom the
// permission bits of a foreign-owned rank directory would not stop) exited
// 7, which relaunches the job into the same failure; it is exit 2 too.
TEST(RunnerCheckpointDirectoryTest, ASaveIntoADirectoryThatIsAFileIsAnInvalidConfig) {
  const TempDir temp;
  ASSERT_FALSE(temp.path().empty());
  const std::string dir = temp.path() + "/ckpt";
  const WorkerConfig c = CheckpointingRank(dir, 3, 1);
  const RankRun run = RunOneRank(c, DirectoryBecomesAFileAtStep(dir, 0));
  EXPECT_EQ(run.code, kExitInvalidConfig) << ExitCodeName(run.code) << "\n" << run.log;
  EXPECT_NE(run.log.find("rank=0 event=failed during=checkpoint exit=invalid-config"),
            std::string::npos)
      << run.log;
  EXPECT_NE(run.log.find("PACER_CHECKPOINT_DIR"), std::string::npos) << run.log;
}

// After a save has worked, the same error is the node's, not the job's (a
// volume the kernel remounted read-only after I/O errors): exit 7, which
// the controller relaunches from the last checkpoint, not exit 2, which
// fails the job.
TEST(RunnerCheckpointDirectoryTest, ASaveThatFailsAfterOneWorkedIsACheckpointFailure) {
  const TempDir temp;
  ASSERT_FALSE(temp.path().empty());
  const std::string dir = temp.path() + "/ckpt";
  const WorkerConfig c = CheckpointingRank(dir, 4, 1);
  const RankRun run =
      RunOneRank(c, DirectoryBecomesAFileAtStep(dir, 1));  // after the save at step 1
  EXPECT_EQ(run.code, kExitCheckpointFailure) << ExitCodeName(run.code) << "\n" << run.log;
  EXPECT_NE(run.log.find("event=checkpoint step=1"), std::string::npos) << run.log;
  EXPECT_NE(run.log.find("rank=0 event=failed during=checkpoint exit=checkpoint-failure"),
            std::string::npos)
      << run.log;
}

// The last step's checkpoint fails (the volume filled up at the very end):
// without --checkpoint-buffers every step is trained and the file only
// spares a later, longer run some steps, so the run succeeds and says so.
// It exited 7, and each relaunch from the last periodic checkpoint failed
// again at its end. With --checkpoint-buffers the final weights are the
// product: exit 7.
TEST(RunnerCheckpointDirectoryTest, AFailedFinalCheckpointFailsOnlyARunThatKeepsWeights) {
  for (const bool buffers : {false, true}) {
    SCOPED_TRACE(buffers ? "with --checkpoint-buffers" : "identity only");
    const TempDir temp;
    ASSERT_FALSE(temp.path().empty());
    const std::string dir = temp.path() + "/ckpt";
    const WorkerConfig c = CheckpointingRank(dir, 4, 2);
    RunOptions options;
    options.checkpoint_buffers = buffers;
    // The last step, after the save at step 2.
    const RankRun run = RunOneRank(c, DirectoryBecomesAFileAtStep(dir, 3), options);
    EXPECT_NE(run.log.find("event=checkpoint step=2"), std::string::npos) << run.log;
    if (buffers) {
      EXPECT_EQ(run.code, kExitCheckpointFailure) << ExitCodeName(run.code) << "\n" << run.log;
    } else {
      EXPECT_EQ(run.code, kExitSuccess) << ExitCodeName(run.code) << "\n" << run.log;
      EXPECT_NE(run.log.find("rank=0 event=final-checkpoint-failed step=4"), std::string::npos)
          << run.log;
      EXPECT_NE(run.log.find("event=done steps=4"), std::string::npos) << run.log;
    }
  }
}

// Weights restored with --checkpoint-buffers go on with data that is a
// function of (seed, step, rank): resumed with another --seed they trained
// on one seed's data and then another's, silently. Refused (exit 2, naming
// the seed to resume with); the same seed resumes.
TEST(RunnerCheckpointDirectoryTest, ResumingWeightsWithAnotherSeedIsRefusedNamingTheSeed) {
  const TempDir temp;
  ASSERT_FALSE(temp.path().empty());
  const std::string dir = temp.path() + "/ckpt";
  const BackendFactory cpu_weights = [] { return MakeCpuBackend(); };  // real buffers
  RunOptions options;
  options.checkpoint_buffers = true;
  options.seed = 7;
  const RankRun first = RunOneRank(CheckpointingRank(dir, 2, 1), cpu_weights, options);
  ASSERT_EQ(first.code, kExitSuccess) << first.log;

  options.seed = 8;
  const RankRun other = RunOneRank(CheckpointingRank(dir, 4, 1), cpu_weights, options);
  EXPECT_EQ(other.code, kExitInvalidConfig) << ExitCodeName(other.code) << "\n" << other.log;
  EXPECT_NE(other.log.find("rank=0 event=failed during=restore exit=invalid-config"),
            std::string::npos)
      << other.log;
  EXPECT_NE(other.log.find("--seed is 8, but the checkpoint at step 2"), std::string::npos)
      << other.log;
  EXPECT_NE(other.log.find("resume with --seed 7"), std::string::npos) << other.log;

  options.seed = 7;
  const RankRun same = RunOneRank(CheckpointingRank(dir, 4, 1), cpu_weights, options);
  EXPECT_EQ(same.code, kExitSuccess) << ExitCodeName(same.code) << "\n" << same.log;
  EXPECT_NE(same.log.find("resume_step=2"), std::string::npos) << same.log;
}

}  // namespace
}  // namespace pacer::worker
