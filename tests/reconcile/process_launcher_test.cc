// Local mode's launcher (controller/local/process_launcher.h) with a stand-in
// worker program that prints its environment: what a worker process of
// `pacer run` is started with.
#include "local/process_launcher.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

namespace pacer::controller {
namespace {

LaunchSpec OneNodeLaunch() {
  LaunchSpec launch;
  launch.job = JobRef{"research", "envjob", "uid-1"};
  launch.spec.name = "envjob";
  launch.spec.namespace_name = "research";
  planner::Layout& l = launch.plan.layout;
  l.gpu_type = "CPU";
  l.pool = "local";
  l.nodes = 1;
  l.gpus_per_node = 1;
  l.data_parallel = 1;
  l.micro_batch_size = 1;
  l.gradient_accumulation_steps = 1;
  launch.total_steps = 10;
  launch.checkpoint_interval_steps = 5;
  launch.attempt = 1;
  return launch;
}

// spec.worker.env reaches the worker processes, as it reaches a cluster's
// pods; before, `pacer run` dropped it (docs/worker.md tells users to opt
// in to bf16 activations through it). The contract's variables still win.
TEST(ProcessLauncherTest, TheJobsWorkerEnvReachesTheWorkerUnderTheContract) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pacer-launcher-env-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path worker = dir / "print-env.sh";
  std::ofstream(worker) << "#!/bin/sh\nenv\n";
  ASSERT_EQ(::chmod(worker.c_str(), 0755), 0);

  ProcessLauncherOptions options;
  options.worker_binary = worker.string();
  options.work_dir = (dir / "work").string();
  ProcessLauncher launcher(options);
  LaunchSpec launch = OneNodeLaunch();
  launch.spec.worker.env = {{"PACER_TEST_SETTING", "3.10"}, {"WORLD_SIZE", "99"}};
  ASSERT_TRUE(launcher.Launch(launch).ok());

  // Bounded: the script exits at once.
  bool exited = false;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       !exited && std::chrono::steady_clock::now() < until;) {
    StatusOr<std::optional<WorkerGroup>> group = launcher.Observe(launch.job);
    ASSERT_TRUE(group.ok()) << group.status().ToString();
    exited = group->has_value() && (*group)->Count(WorkerPhase::kSucceeded) == 1;
    if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(20));  // poll interval
  }
  ASSERT_TRUE(exited);
  std::stringstream log;
  log << std::ifstream(launcher.LogPath(launch.job, 0)).rdbuf();
  EXPECT_NE(log.str().find("\nPACER_TEST_SETTING=3.10\n"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("\nWORLD_SIZE=1\n"), std::string::npos) << log.str();
  EXPECT_EQ(log.str().find("WORLD_SIZE=99"), std::string::npos) << log.str();
  // The worker stops when this process is gone (docs/worker.md).
  EXPECT_NE(log.str().find("\nPACER_PARENT_PID=" + std::to_string(::getpid()) + "\n"),
            std::string::npos)
      << log.str();
  std::filesystem::remove_all(dir);
}

std::filesystem::path TestDir(const std::string& tag) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("pacer-launcher-" + tag + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Polls `done` until it holds or 30 s pass.
bool Eventually(const std::function<bool()>& done) {
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       std::chrono::steady_clock::now() < until;) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // poll interval
  }
  return done();
}

// A graceful stop asked for twice (a re-plan's stop, then Ctrl-C) sends one
// SIGTERM: a second is the worker's "kill the ranks now", and the steps
// since the last checkpoint were lost.
TEST(ProcessLauncherTest, AGracefulStopAskedTwiceSignalsTheWorkerOnce) {
  const std::filesystem::path dir = TestDir("stop-twice");
  const std::filesystem::path worker = dir / "count-terms.sh";
  // Exits 6 (stopped after a checkpoint) on one SIGTERM, 9 on two or more;
  // leaves term-<n> as it takes the n-th. A trap runs before the next
  // command, so every SIGTERM sent before `go` exists is counted by the
  // time the loop sees it.
  const std::string d = dir.string();
  std::ofstream(worker) << "#!/bin/sh\nn=0\ntrap 'n=$((n+1)); : > \"" << d << "/term-$n\"' TERM\n"
                        << ": > \"" << d << "/ready\"\nwhile [ ! -e \"" << d
                        << "/go\" ]; do sleep 0.02; done\n[ $n -ge 2 ] && exit 9\nexit 6\n";
  ASSERT_EQ(::chmod(worker.c_str(), 0755), 0);
  ProcessLauncherOptions options;
  options.worker_binary = worker.string();
  options.work_dir = (dir / "work").string();
  ProcessLauncher launcher(options);
  const LaunchSpec launch = OneNodeLaunch();
  ASSERT_TRUE(launcher.Launch(launch).ok());
  ASSERT_TRUE(Eventually([&] { return std::filesystem::exists(dir / "ready"); }));
  ASSERT_TRUE(launcher.Stop(launch.job, StopMode::kGraceful).ok());
  // Taken before the second stop (two pending SIGTERMs would merge into one).
  ASSERT_TRUE(Eventually([&] { return std::filesystem::exists(dir / "term-1"); }));
  ASSERT_TRUE(launcher.Stop(launch.job, StopMode::kGraceful).ok());
  std::ofstream(dir / "go") << "";
  std::optional<WorkerGroup> last;
  ASSERT_TRUE(Eventually([&] {
    StatusOr<std::optional<WorkerGroup>> group = launcher.Observe(launch.job);
    if (!group.ok() || !group->has_value()) return false;
    last = **group;
    return last->Count(WorkerPhase::kRunning) == 0;
  }));
  ASSERT_EQ(last->workers.size(), 1u);
  EXPECT_TRUE(last->stopping);
  EXPECT_EQ(last->workers[0].exit_code, 6);
  std::filesystem::remove_all(dir);
}

// A logs path that is no directory is named as the problem: the spawn's
// error read as a missing worker binary ("set --worker-binary").
TEST(ProcessLauncherTest, ALogsDirectoryThatCannotBeMadeIsNamed) {
  const std::filesystem::path dir = TestDir("logs-file");
  std::filesystem::create_directories(dir / "work");
  std::ofstream(dir / "work" / "logs") << "a file, not a directory";
  ProcessLauncherOptions options;
  options.worker_binary = "/bin/true";
  options.work_dir = (dir / "work").string();
  ProcessLauncher launcher(options);
  const Status launched = launcher.Launch(OneNodeLaunch());
  ASSERT_FALSE(launched.ok());
  EXPECT_NE(launched.message().find((dir / "work" / "logs").string()), std::string::npos)
      << launched.message();
  EXPECT_NE(launched.message().find("--work-dir"), std::string::npos) << launched.message();
  EXPECT_EQ(launched.message().find("--worker-binary"), std::string::npos) << launched.message();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pacer::controller
