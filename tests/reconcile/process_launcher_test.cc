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
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pacer::controller
