// Local mode's launcher (controller/local/process_launcher.h) with a stand-in
// worker program that prints its environment: what a worker process of
// `pacer run` is started with.
#include "local/process_launcher.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
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
  launch.job = JobRef{"research", "envjob", "uid-1", std::nullopt, std::nullopt};
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

// Observes `job` until `done` holds for its group or 30 s pass; `last` is
// the group last seen.
bool ObserveUntil(ProcessLauncher& launcher, const JobRef& job,
                  const std::function<bool(const WorkerGroup&)>& done,
                  std::optional<WorkerGroup>& last) {
  return Eventually([&] {
    StatusOr<std::optional<WorkerGroup>> group = launcher.Observe(job);
    if (!group.ok() || !group->has_value()) return false;
    last = **group;
    return done(*last);
  });
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
  ASSERT_TRUE(ObserveUntil(
      launcher, launch.job,
      [](const WorkerGroup& g) { return g.Count(WorkerPhase::kRunning) == 0; }, last));
  ASSERT_EQ(last->workers.size(), 1u);
  EXPECT_TRUE(last->stopping);
  EXPECT_EQ(last->workers[0].exit_code, 6);
  std::filesystem::remove_all(dir);
}

// Whether process `pid` runs (a zombie does not).
bool Alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size()) return false;
  const char state = text[paren + 2];
  return state != 'Z' && state != 'X';
}

// The pid a script wrote to `file`, once it is whole (ends in a newline).
pid_t PidIn(const std::filesystem::path& file) {
  pid_t pid = -1;
  EXPECT_TRUE(Eventually([&] {
    std::ifstream in(file);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.empty() || text.back() != '\n') return false;
    pid = static_cast<pid_t>(std::stol(text));
    return true;
  }));
  return pid;
}

// A failed worker's message is the failing rank's `event=failed` line of
// this run's log, not the supervisor's closing summary (`event=done
// exit_code=1 ...`, which names no cause), nor an earlier run's; a worker
// killed by a signal says so (exit code 137 read as the worker's own).
TEST(ProcessLauncherTest, AFailedWorkersMessageNamesTheCauseOrTheSignal) {
  const std::filesystem::path dir = TestDir("failure-line");
  const std::filesystem::path worker = dir / "fail.sh";
  const std::string d = dir.string();
  // A worker that fails as pacer-worker does: the rank's line, a stopped
  // rank's, the supervisor's summary; or, with `hang`, waits to be killed.
  std::ofstream(worker)
      << "#!/bin/sh\n"
      << "if [ -e \"" << d << "/hang\" ]; then echo \"$$\" > \"" << d
      << "/pid\"; echo 'pacer-worker rank=0 event=step step=3'; "
      << "while :; do sleep 1; done; fi\n"
      << "echo 'pacer-worker job=research/envjob rank=0 event=failed during=metrics "
         "exit=internal-error error=\"cannot serve metrics on 0.0.0.0:45555\"'\n"
      << "echo 'pacer-worker job=research/envjob rank=1 event=failed during=rendezvous "
         "exit=stopped'\n"
      << "echo 'level=error component=supervisor event=done exit_code=1 reason=internal-error'\n"
      << "exit 1\n";
  ASSERT_EQ(::chmod(worker.c_str(), 0755), 0);
  ProcessLauncherOptions options;
  options.worker_binary = worker.string();
  options.work_dir = (dir / "work").string();
  // An earlier run of the same attempt left its own failure in the log.
  std::filesystem::create_directories(dir / "work" / "logs");
  std::ofstream(dir / "work" / "logs" / "attempt-1-node-0.log")
      << "==== pacer run: attempt 1, node 0, started earlier ====\n"
      << "pacer-worker rank=0 event=failed during=resume exit=data-loss\n";
  ProcessLauncher launcher(options);
  // The group once no worker runs (nullopt when that never came).
  const auto ended = [&](const JobRef& job) {
    std::optional<WorkerGroup> group;
    EXPECT_TRUE(ObserveUntil(
        launcher, job, [](const WorkerGroup& g) { return g.Count(WorkerPhase::kRunning) == 0; },
        group));
    return group;
  };
  const LaunchSpec first = OneNodeLaunch();
  ASSERT_TRUE(launcher.Launch(first).ok());
  const std::optional<WorkerGroup> failed = ended(first.job);
  ASSERT_TRUE(failed.has_value() && failed->workers.size() == 1u);
  EXPECT_EQ(failed->workers[0].exit_code, 1);
  EXPECT_EQ(failed->workers[0].message.rfind("pacer-worker job=research/envjob rank=0 "
                                             "event=failed during=metrics",
                                             0),
            0u)
      << failed->workers[0].message;
  ASSERT_TRUE(launcher.Stop(first.job, StopMode::kRemove).ok());

  std::ofstream(dir / "hang") << "";
  LaunchSpec second = OneNodeLaunch();
  second.attempt = 2;
  ASSERT_TRUE(launcher.Launch(second).ok());
  const pid_t pid = PidIn(dir / "pid");
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  const std::optional<WorkerGroup> killed = ended(second.job);
  ASSERT_TRUE(killed.has_value() && killed->workers.size() == 1u);
  EXPECT_EQ(killed->workers[0].exit_code, 137);
  EXPECT_EQ(killed->workers[0].message.rfind("killed by SIGKILL; its log last said: pacer-worker "
                                             "rank=0 event=step step=3",
                                             0),
            0u)
      << killed->workers[0].message;
  std::filesystem::remove_all(dir);
}

// A --worker-binary that is a wrapper script running pacer-worker without
// exec: the stop's SIGTERM reaches the worker too (it went to the wrapper
// alone, which died of it and left the worker training unstopped), and the
// worker counts as running until it has written its checkpoint and exited,
// after the wrapper is gone (else a next attempt started beside it).
TEST(ProcessLauncherTest, AWorkerBehindAWrapperIsStoppedAndWaitedFor) {
  const std::filesystem::path dir = TestDir("wrapper-stop");
  const std::string d = dir.string();
  std::ofstream(dir / "worker.sh") << "#!/bin/sh\ntrap ': > \"" << d << "/term\"' TERM\n"
                                   << "echo $$ > \"" << d << "/worker-pid\"\n"
                                   << "while [ ! -e \"" << d << "/go\" ]; do sleep 0.02; done\n"
                                   << "exit 6\n";
  // `exit $?` after it: a shell may exec a script's last command.
  std::ofstream(dir / "wrapper.sh")
      << "#!/bin/sh\necho $$ > \"" << d << "/wrapper-pid\"\n\"" << d << "/worker.sh\"\nexit $?\n";
  ASSERT_EQ(::chmod((dir / "worker.sh").c_str(), 0755), 0);
  ASSERT_EQ(::chmod((dir / "wrapper.sh").c_str(), 0755), 0);
  ProcessLauncherOptions options;
  options.worker_binary = (dir / "wrapper.sh").string();
  options.work_dir = (dir / "work").string();
  ProcessLauncher launcher(options);
  const LaunchSpec launch = OneNodeLaunch();
  ASSERT_TRUE(launcher.Launch(launch).ok());
  const pid_t wrapper = PidIn(dir / "wrapper-pid");
  const pid_t worker = PidIn(dir / "worker-pid");
  ASSERT_TRUE(launcher.Stop(launch.job, StopMode::kGraceful).ok());
  EXPECT_TRUE(Eventually([&] { return std::filesystem::exists(dir / "term"); }));
  // The wrapper died of the SIGTERM and Observe reaped it (its /proc entry
  // is gone only then: the launcher is its parent).
  const std::filesystem::path wrapper_proc = "/proc/" + std::to_string(wrapper);
  std::optional<WorkerGroup> last;
  ASSERT_TRUE(ObserveUntil(
      launcher, launch.job,
      [&](const WorkerGroup&) { return !std::filesystem::exists(wrapper_proc); }, last));
  ASSERT_TRUE(Alive(worker));
  EXPECT_EQ(last->Count(WorkerPhase::kRunning), 1);
  std::ofstream(dir / "go") << "";
  ASSERT_TRUE(ObserveUntil(
      launcher, launch.job,
      [](const WorkerGroup& g) { return g.Count(WorkerPhase::kRunning) == 0; }, last));
  EXPECT_FALSE(Alive(worker));
  ::kill(worker, SIGKILL);  // the old launcher left it
  std::filesystem::remove_all(dir);
}

// Options that launch `dir`/wrapper.sh (#!/bin/sh, then `wrapper_body`)
// around `dir`/worker.sh, which ignores SIGTERM, writes its pid to
// `dir`/worker-pid and runs until killed; a 200 ms kill grace.
ProcessLauncherOptions WrapperAroundAWorkerThatIgnoresStops(const std::filesystem::path& dir,
                                                            const std::string& wrapper_body) {
  std::ofstream(dir / "worker.sh") << "#!/bin/sh\ntrap '' TERM\necho $$ > \"" << dir.string()
                                   << "/worker-pid\"\nwhile :; do sleep 0.02; done\n";
  std::ofstream(dir / "wrapper.sh") << "#!/bin/sh\n" << wrapper_body;
  EXPECT_EQ(::chmod((dir / "worker.sh").c_str(), 0755), 0);
  EXPECT_EQ(::chmod((dir / "wrapper.sh").c_str(), 0755), 0);
  ProcessLauncherOptions options;
  options.worker_binary = (dir / "wrapper.sh").string();
  options.work_dir = (dir / "work").string();
  options.kill_grace = std::chrono::milliseconds(200);
  return options;
}

// A stop that a worker behind a wrapper ignores (or a member that cannot go)
// ends after the grace: the group is killed and the worker counts as
// exited. Before, Observe said running for as long as the group had a
// member, and a re-plan waited for it forever.
TEST(ProcessLauncherTest, AStopTheWorkerBehindAWrapperIgnoresEndsAfterTheGrace) {
  const std::filesystem::path dir = TestDir("wrapper-ignores");
  const std::string d = dir.string();
  ProcessLauncher launcher(
      WrapperAroundAWorkerThatIgnoresStops(dir, "\"" + d + "/worker.sh\"\nexit $?\n"));
  const LaunchSpec launch = OneNodeLaunch();
  ASSERT_TRUE(launcher.Launch(launch).ok());
  const pid_t worker = PidIn(dir / "worker-pid");
  ASSERT_TRUE(launcher.Stop(launch.job, StopMode::kGraceful).ok());
  std::optional<WorkerGroup> last;
  EXPECT_TRUE(ObserveUntil(
      launcher, launch.job,
      [](const WorkerGroup& g) { return g.Count(WorkerPhase::kRunning) == 0; }, last));
  EXPECT_TRUE(Eventually([&] { return !Alive(worker); }));
  ::kill(worker, SIGKILL);  // the old launcher left it
  std::filesystem::remove_all(dir);
}

// A wrapper that ends and leaves the worker (or a helper) running: the
// wrapper's exit is the worker's, a leftover does not hold the job, and the
// removal that follows kills what was left, a worker that ignores SIGTERM
// included, after the grace (the old launcher skipped an exited leader).
TEST(ProcessLauncherTest, ARemovalKillsWhatAWrapperLeftBehind) {
  const std::filesystem::path dir = TestDir("wrapper-left");
  const std::string d = dir.string();
  ProcessLauncher launcher(WrapperAroundAWorkerThatIgnoresStops(
      dir, "\"" + d + "/worker.sh\" &\nwhile [ ! -s \"" + d +
               "/worker-pid\" ]; do sleep 0.02; done\nexit 3\n"));
  const LaunchSpec launch = OneNodeLaunch();
  ASSERT_TRUE(launcher.Launch(launch).ok());
  const pid_t worker = PidIn(dir / "worker-pid");
  std::optional<WorkerGroup> last;
  ASSERT_TRUE(ObserveUntil(
      launcher, launch.job, [](const WorkerGroup& g) { return g.Count(WorkerPhase::kFailed) == 1; },
      last));
  EXPECT_EQ(last->workers[0].exit_code, 3);
  ASSERT_TRUE(Alive(worker));
  ASSERT_TRUE(launcher.Stop(launch.job, StopMode::kRemove).ok());
  EXPECT_TRUE(Eventually([&] { return !Alive(worker); }));
  ::kill(worker, SIGKILL);  // the old launcher left it
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

// What CheckWorkerBinary says of a program that cannot be started, before
// `pacer run` plans anything (LocalRunTest covers the exit code).
TEST(ProcessLauncherTest, CheckWorkerBinarySaysWhyAProgramCannotStart) {
  const std::filesystem::path dir = TestDir("check-worker");
  std::filesystem::create_directories(dir);
  EXPECT_TRUE(CheckWorkerBinary("/bin/true").ok());
  const Status missing = CheckWorkerBinary((dir / "missing").string());
  EXPECT_EQ(missing.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(missing.message(), (dir / "missing").string() + ": " + std::strerror(ENOENT));
  const Status directory = CheckWorkerBinary(dir.string());
  EXPECT_EQ(directory.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(directory.message().find("is a directory"), std::string::npos) << directory.message();
  // Without any execute bit: even root may not run it.
  std::ofstream(dir / "worker") << "#!/bin/sh\nexit 0\n";
  std::filesystem::permissions(
      dir / "worker", std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  const Status not_executable = CheckWorkerBinary((dir / "worker").string());
  EXPECT_EQ(not_executable.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(not_executable.message().find("not executable"), std::string::npos)
      << not_executable.message();
  EXPECT_NE(not_executable.message().find("chmod +x"), std::string::npos)
      << not_executable.message();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pacer::controller
