// `pacer run` end to end with real pacer-worker processes: the quickstart is
// interrupted with Ctrl-C (workers stop at a checkpoint, exit 130), then run
// again: it resumes from the checkpoint, finishes, and reports its first ETA
// against the actual finish.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/checkpoint.h"
#include "local/run_command.h"

namespace {

#if defined(PACER_BINARY)
struct Child {
  pid_t pid = -1;
  int out = -1;  // stdout and stderr
};

// `ignore_hangup`: as nohup starts it.
Child Spawn(const std::vector<std::string>& args, bool ignore_hangup = false) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  Child c;
  c.pid = ::fork();
  if (c.pid == 0) {
    if (ignore_hangup) ::signal(SIGHUP, SIG_IGN);
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  c.out = fds[0];
  return c;
}

// Reads the child's output until `until` matches the text so far (returns
// true) or EOF / the timeout (returns false).
bool ReadUntil(const Child& c, std::string* text, const std::regex& until,
               std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buffer[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::regex_search(*text, until)) return true;
    pollfd p{c.out, POLLIN, 0};
    const int ready = ::poll(&p, 1, 1000);  // wakes on output; the timeout bounds the test
    if (ready <= 0) continue;
    const ssize_t n = ::read(c.out, buffer, sizeof(buffer));
    if (n <= 0) return std::regex_search(*text, until);
    text->append(buffer, static_cast<size_t>(n));
  }
  return false;
}

// Reads all the child's output (EOF: it exited), then reaps it. The bound
// is generous: under ASan on 2 cores the resumed quickstart alone takes
// about 4 minutes, and output read after the bound would be lost.
int Wait(Child& c, std::string* text) {
  ReadUntil(c, text, std::regex("$^never"), std::chrono::seconds(900));
  int status = 0;
  ::waitpid(c.pid, &status, 0);
  ::close(c.out);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(LocalRunTest, QuickstartStopsAtACheckpointOnCtrlCThenResumesAndFinishes) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pacer-local-run-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const std::vector<std::string> args = {
      PACER_BINARY,
      "run",
      std::string(PACER_SOURCE_DIR) + "/manifests/examples/quickstart.yaml",
      "--work-dir",
      dir.string(),
      "--progress",
      "plain",
      "--cpu-devices",
      "2"};

  // 1. Run until some steps are done, then Ctrl-C.
  Child first = Spawn(args);
  std::string out1;
  ASSERT_TRUE(ReadUntil(first, &out1, std::regex(R"(step ([2-9][0-9]|1[0-4][0-9])/150)"),
                        std::chrono::seconds(240)))
      << out1;
  // A second `pacer run` of the same job is refused while this one runs:
  // they would share checkpoints and logs.
  Child second_concurrent = Spawn(args);
  std::string concurrent_out;
  EXPECT_EQ(Wait(second_concurrent, &concurrent_out), 1) << concurrent_out;
  EXPECT_NE(concurrent_out.find("another `pacer run` (pid " + std::to_string(first.pid) + ")"),
            std::string::npos)
      << concurrent_out;
  ::kill(first.pid, SIGINT);
  EXPECT_EQ(Wait(first, &out1), 130) << out1;
  std::smatch stopped;
  ASSERT_TRUE(std::regex_search(out1, stopped, std::regex(R"(stopped at step (\d+))"))) << out1;
  const int stopped_step = std::stoi(stopped[1]);
  EXPECT_GT(stopped_step, 0);
  // maxDuration keeps counting from the first start across the resume.
  EXPECT_TRUE(std::filesystem::exists(dir / "started-at"));

  // 2. Run again: resumes from the checkpoint and finishes.
  Child second = Spawn(args);
  std::string out2;
  EXPECT_EQ(Wait(second, &out2), 0) << out2;
  EXPECT_NE(out2.find("Succeeded"), std::string::npos) << out2;
  EXPECT_NE(out2.find("150 of 150"), std::string::npos) << out2;
  EXPECT_TRUE(std::regex_search(out2, std::regex(R"(first ETA +\d{4}-\d\d-\d\dT)"))) << out2;
  EXPECT_TRUE(std::regex_search(out2, std::regex(R"(against the first ETA)"))) << out2;
  EXPECT_TRUE(std::regex_search(out2, std::regex(R"(measured/predicted \d+\.\d\d)"))) << out2;
  // A successful run ends without a metrics outage: the workers closing their
  // endpoints as they exit is the end of the run.
  EXPECT_EQ(out2.find("MetricsUnavailable"), std::string::npos) << out2;

  // The step reported at the stop is the step resumed from, and says so.
  EXPECT_NE(out2.find("resuming from step " + std::to_string(stopped_step) + " "),
            std::string::npos)
      << out2;
  EXPECT_FALSE(std::filesystem::exists(dir / "started-at"));  // ended: the next run is new
  // ... and trains from step 0: the finished job's checkpoints are set aside.
  EXPECT_FALSE(std::filesystem::exists(dir / "checkpoints")) << out2;
  EXPECT_TRUE(std::filesystem::exists(dir / "checkpoints-finished")) << out2;
  EXPECT_NE(out2.find("the next run trains from step 0"), std::string::npos) << out2;

  std::ifstream log(dir / "logs" / "attempt-1-node-0.log");
  std::stringstream log_text;
  log_text << log.rdbuf();
  const std::string log_string = log_text.str();
  // Both runs' logs are kept: the interrupted one is not overwritten.
  std::size_t headers = 0;
  for (std::size_t at = log_string.find("==== pacer run: attempt 1"); at != std::string::npos;
       at = log_string.find("==== pacer run: attempt 1", at + 1)) {
    ++headers;
  }
  EXPECT_EQ(headers, 2u) << log_string;
  // The second run's workers resumed exactly at the reported step.
  const std::string second_run = log_string.substr(log_string.rfind("==== pacer run"));
  std::smatch resumed;
  ASSERT_TRUE(std::regex_search(second_run, resumed, std::regex(R"(resume_step=(\d+))")))
      << second_run;
  EXPECT_EQ(std::stoi(resumed[1]), stopped_step);
  std::filesystem::remove_all(dir);
}

// Starts `pacer run` on the quickstart in a fresh `dir` (plain progress, two
// CPU devices); true once it shows a step.
bool StartQuickstart(const std::filesystem::path& dir, Child* c, std::string* out,
                     bool ignore_hangup = false) {
  std::filesystem::remove_all(dir);
  *c = Spawn(
      {PACER_BINARY, "run", std::string(PACER_SOURCE_DIR) + "/manifests/examples/quickstart.yaml",
       "--work-dir", dir.string(), "--progress", "plain", "--cpu-devices", "2"},
      ignore_hangup);
  return ReadUntil(*c, out, std::regex(R"(step [1-9][0-9]*/150)"), std::chrono::seconds(240));
}

// The terminal or ssh session gone while `| tee` has ended: a hang-up with
// nobody reading the output stops the workers at a checkpoint as Ctrl-C
// does. pacer run died of SIGHUP (or of SIGPIPE writing its message), and
// its workers trained on, unseen, into the checkpoints of the next run.
TEST(LocalRunTest, AHangUpWithTheOutputGoneStopsTheWorkersAtACheckpoint) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pacer-hang-up-" + std::to_string(::getpid()));
  Child c;
  std::string out;
  ASSERT_TRUE(StartQuickstart(dir, &c, &out)) << out;
  ::close(c.out);  // the reader is gone: every later write is EPIPE
  ::kill(c.pid, SIGHUP);
  int status = 0;
  ::waitpid(c.pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 130);
  // The workers stopped at a step and checkpointed it (every rank).
  bool checkpointed = false;
  for (const auto& rank : std::filesystem::directory_iterator(dir / "checkpoints")) {
    for (const auto& file : std::filesystem::directory_iterator(rank.path())) {
      checkpointed = checkpointed || file.path().extension() == ".ckpt";
    }
  }
  EXPECT_TRUE(checkpointed);
  std::filesystem::remove_all(dir);
}

// Under nohup a hang-up is meant not to stop the run: the hang-up is no
// interrupt, so a Ctrl-C after it is the first (a clean stop), not the
// second (a force-quit).
TEST(LocalRunTest, UnderNohupAHangUpDoesNotStopTheRun) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pacer-nohup-" + std::to_string(::getpid()));
  Child c;
  std::string out;
  ASSERT_TRUE(StartQuickstart(dir, &c, &out, /*ignore_hangup=*/true)) << out;
  ::kill(c.pid, SIGHUP);
  ::kill(c.pid, SIGINT);
  EXPECT_EQ(Wait(c, &out), 130) << out;
  EXPECT_NE(out.find("stopped at step"), std::string::npos) << out;
  EXPECT_EQ(out.find("force-quit: workers killed"), std::string::npos) << out;
  std::filesystem::remove_all(dir);
}

TEST(LocalRunTest, InvalidJobFileExitsTwoNamingTheField) {
  const std::filesystem::path file = std::filesystem::temp_directory_path() /
                                     ("pacer-bad-job-" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(file) << "apiVersion: pacer.dev/v1alpha1\nkind: TrainJob\nmetadata: {name: bad}\n"
                         "spec:\n  model: {parameters: 350M}\n  data: {tokens: 1e9}\n"
                         "  training: {globalBatchSize: 0}\n";
  Child c = Spawn({PACER_BINARY, "run", file.string()});
  std::string out;
  EXPECT_EQ(Wait(c, &out), 2) << out;
  EXPECT_NE(out.find("globalBatchSize"), std::string::npos) << out;
  std::filesystem::remove(file);
}

// A file that is not UTF-8 (a Latin-1 label) is refused by name, exit 2:
// it passed the parser and then threw "invalid UTF-8 byte" mid-run as an
// internal error.
TEST(LocalRunTest, AFileThatIsNotUtf8ExitsTwo) {
  const std::filesystem::path file = std::filesystem::temp_directory_path() /
                                     ("pacer-latin1-job-" + std::to_string(::getpid()) + ".yaml");
  std::ifstream in(std::string(PACER_SOURCE_DIR) + "/manifests/examples/quickstart.yaml");
  std::stringstream text;
  text << in.rdbuf();
  std::ofstream(file) << std::regex_replace(text.str(), std::regex("\nmetadata:\n"),
                                            "\nmetadata:\n  labels: {team: caf\xe9}\n");
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pacer-latin1-run-" + std::to_string(::getpid()));
  Child c = Spawn({PACER_BINARY, "run", file.string(), "--work-dir", dir.string()});
  std::string out;
  EXPECT_EQ(Wait(c, &out), 2) << out;
  EXPECT_NE(out.find("is not valid UTF-8"), std::string::npos) << out;
  EXPECT_EQ(out.find("internal"), std::string::npos) << out;
  std::filesystem::remove(file);
  std::filesystem::remove_all(dir);
}

// A worker program that cannot be started is a bad argument, said before
// anything is planned or launched: it surfaced at the first launch as six
// "warning: UNAVAILABLE: cannot start ..." lines, then exit 1.
TEST(LocalRunTest, AWorkerBinaryThatCannotStartExitsTwoBeforePlanning) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pacer-bad-worker-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "bin");
  const std::filesystem::path not_executable = dir / "bin" / "pacer-worker";
  std::ofstream(not_executable) << "#!/bin/sh\nexit 0\n";
  std::filesystem::permissions(
      not_executable, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  const std::string quickstart =
      std::string(PACER_SOURCE_DIR) + "/manifests/examples/quickstart.yaml";
  const std::string work = (dir / "work").string();
  for (const auto& [worker, why] : std::vector<std::pair<std::string, std::string>>{
           {(dir / "missing").string(), std::strerror(ENOENT)},
           {not_executable.string(), "not executable by this user"},
           {(dir / "bin").string(), "is a directory"}}) {
    SCOPED_TRACE(worker);
    Child c = Spawn({PACER_BINARY, "run", quickstart, "--progress", "plain", "--worker-binary",
                     worker, "--work-dir", work});
    std::string out;
    EXPECT_EQ(Wait(c, &out), 2) << out;
    EXPECT_NE(out.find("error: --worker-binary " + worker + ": " + why), std::string::npos) << out;
    EXPECT_NE(out.find("pacer-worker program"), std::string::npos) << out;  // what to give
    EXPECT_EQ(out.find("UNAVAILABLE"), std::string::npos) << out;
    EXPECT_EQ(out.find("pacer run: "), std::string::npos) << out;  // nothing was planned
    EXPECT_FALSE(std::filesystem::exists(work)) << out;
  }
  // The same from $PACER_WORKER_BINARY, named as such.
  Child c = Spawn({"/usr/bin/env", "PACER_WORKER_BINARY=" + (dir / "missing").string(),
                   PACER_BINARY, "run", quickstart, "--progress", "plain", "--work-dir", work});
  std::string out;
  EXPECT_EQ(Wait(c, &out), 2) << out;
  EXPECT_NE(out.find("error: $PACER_WORKER_BINARY " + (dir / "missing").string()),
            std::string::npos)
      << out;
  std::filesystem::remove_all(dir);
}

// A --work-dir that is a file (or runs through one) is a bad argument, and
// the message says it is not a directory: it said "cannot open
// /etc/passwd/lock: Not a directory; make /etc/passwd writable by this user
// (chown)" and exited 1.
TEST(LocalRunTest, AWorkDirThatIsAFileExitsTwoSayingSo) {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("pacer-work-file-" + std::to_string(::getpid()));
  std::filesystem::remove_all(file);
  std::ofstream(file) << "a file, not a directory\n";
  for (const std::filesystem::path& work : {file, file / "sub"}) {
    SCOPED_TRACE(work.string());
    Child c = Spawn({PACER_BINARY, "run",
                     std::string(PACER_SOURCE_DIR) + "/manifests/examples/quickstart.yaml",
                     "--progress", "none", "--work-dir", work.string()});
    std::string out;
    EXPECT_EQ(Wait(c, &out), 2) << out;
    EXPECT_NE(out.find(file.string() + " is a file, not a directory"), std::string::npos) << out;
    EXPECT_NE(out.find("--work-dir"), std::string::npos) << out;
    EXPECT_EQ(out.find("chown"), std::string::npos) << out;
  }
  std::filesystem::remove(file);
}

// `pacer run` on the quickstart with a 5 s deadline (which this machine
// cannot meet), named `name` when that is not empty; returns the exit code.
// `extra_yaml` is appended to the file (e.g. an exported object's status).
int RunQuickstartDueIn5s(const std::string& tag, const std::string& name, std::string* out,
                         const std::string& extra_yaml = "") {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() /
      ("pacer-" + tag + "-job-" + std::to_string(::getpid()) + ".yaml");
  std::ifstream in(std::string(PACER_SOURCE_DIR) + "/manifests/examples/quickstart.yaml");
  std::stringstream text;
  text << in.rdbuf();
  std::string yaml =
      std::regex_replace(text.str(), std::regex("maxDuration: 10m"), "maxDuration: 5s");
  if (!name.empty()) {
    yaml = std::regex_replace(yaml, std::regex("\n  name: [a-z-]+\n"), "\n  name: " + name + "\n");
    EXPECT_NE(yaml.find("name: " + name), std::string::npos) << yaml;
  }
  std::ofstream(file) << yaml << extra_yaml;
  // Its own work dir: the default one (.pacer/<namespace>/<name> in the
  // working directory) is locked by any other quickstart run ctest runs beside it.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("pacer-" + tag + "-run-" + std::to_string(::getpid()));
  Child c =
      Spawn({PACER_BINARY, "run", file.string(), "--progress", "none", "--work-dir", dir.string()});
  const int code = Wait(c, out);
  std::filesystem::remove(file);
  std::filesystem::remove_all(dir);
  return code;
}

// Local start-up is seconds, not a cluster's 300 s: the quickstart (about
// two minutes of planned work) within 3 minutes was refused as infeasible.
TEST(LocalRunTest, AJobDueInThreeMinutesIsPlannedWithLocalStartup) {
  const std::filesystem::path file = std::filesystem::temp_directory_path() /
                                     ("pacer-startup-job-" + std::to_string(::getpid()) + ".yaml");
  std::ifstream in(std::string(PACER_SOURCE_DIR) + "/manifests/examples/quickstart.yaml");
  std::stringstream text;
  text << in.rdbuf();
  std::ofstream(file) << std::regex_replace(text.str(), std::regex("maxDuration: 10m"),
                                            "maxDuration: 3m");
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pacer-startup-run-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  Child c = Spawn({PACER_BINARY, "run", file.string(), "--progress", "plain", "--cpu-devices", "2",
                   "--work-dir", dir.string()});
  std::string out;
  const bool launched = ReadUntil(c, &out, std::regex("Launched"), std::chrono::seconds(120));
  ::kill(c.pid, SIGINT);
  const int code = Wait(c, &out);
  EXPECT_TRUE(launched) << out;
  EXPECT_NE(code, 3) << out;
  EXPECT_EQ(out.find("Infeasible"), std::string::npos) << out;
  std::filesystem::remove(file);
  std::filesystem::remove_all(dir);
}

// A run stopped before any checkpoint says the next run starts from step 0;
// the next run of the unchanged file, an hour later, used to count the
// 10-minute maxDuration from the first start and exit 2 ("in the past").
TEST(LocalRunTest, ARunAfterOneThatKeptNoCheckpointCountsItsDeadlineFromNow) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pacer-restart-run-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto hour_ago = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count() -
                        3600;
  std::ofstream(dir / "started-at") << hour_ago << "\n";
  Child c = Spawn({PACER_BINARY, "run",
                   std::string(PACER_SOURCE_DIR) + "/manifests/examples/quickstart.yaml",
                   "--progress", "plain", "--cpu-devices", "2", "--work-dir", dir.string()});
  std::string out;
  const bool launched = ReadUntil(c, &out, std::regex("Launched"), std::chrono::seconds(120));
  ::kill(c.pid, SIGINT);
  const int code = Wait(c, &out);
  EXPECT_TRUE(launched) << out;
  EXPECT_NE(code, 2) << out;
  EXPECT_EQ(out.find("in the past"), std::string::npos) << out;
  std::filesystem::remove_all(dir);
}

TEST(LocalRunTest, ImpossibleDeadlineExitsThreeWithTheReason) {
  std::string out;
  EXPECT_EQ(RunQuickstartDueIn5s("late", "", &out), 3) << out;
  EXPECT_NE(out.find("Infeasible"), std::string::npos) << out;
}

// A byte that is not UTF-8 in a comment is refused as `pacer plan` refuses
// it (cli::ReadTrainJob), with its line: run took the file and trained.
TEST(LocalRunTest, ANonUtf8CommentExitsTwoWithItsLine) {
  std::string out;
  EXPECT_EQ(RunQuickstartDueIn5s("latin1-comment", "", &out, "# caf\xe9\n"), 2) << out;
  EXPECT_NE(out.find("the file is not valid UTF-8: byte 0xE9 at line "), std::string::npos) << out;
  EXPECT_EQ(out.find("Infeasible"), std::string::npos) << out;  // refused before planning
}

// An exported object (`kubectl get -o yaml`) is run as a new job: its
// status is the old job's. With `phase: Succeeded` kept, the run exited 0
// at once without training anything; here the job is planned (exit 3: the
// 5 s deadline cannot be met).
TEST(LocalRunTest, AnExportedStatusIsIgnored) {
  std::string out;
  EXPECT_EQ(RunQuickstartDueIn5s("exported", "", &out,
                                 "status:\n  phase: Succeeded\n  observedGeneration: 1\n"
                                 "  stepsCompleted: 150\n"),
            3)
      << out;
  EXPECT_NE(out.find("Infeasible"), std::string::npos) << out;
}

// A name that reads as a number in YAML is still a name: the planner's
// parser takes it as one, and the run used to stop with "internal:
// type must be string, but is number" (exit 1), or with --work-dir ran it
// as default/local.
TEST(LocalRunTest, ANumericNameRunsUnderThatName) {
  std::string out;
  // Exit 3 (the deadline) comes after the job was read and planned.
  EXPECT_EQ(RunQuickstartDueIn5s("numeric", "123", &out), 3) << out;
  EXPECT_NE(out.find("/123"), std::string::npos) << out;
}

// Two jobs never share a default work directory: with
// ".pacer/<namespace>-<name>", team-a/llama and team/a-llama did, and the
// second resumed the first one's checkpoint and deadline.
TEST(LocalRunTest, EveryJobHasItsOwnDefaultWorkDir) {
  using pacer::controller::DefaultWorkDir;
  EXPECT_NE(DefaultWorkDir("team-a", "llama"), DefaultWorkDir("team", "a-llama"));
  EXPECT_EQ(DefaultWorkDir("default", "quickstart"), ".pacer/default/quickstart");
}

// A machine with an NVIDIA driver but a build without nvcc has GPUs and no
// GPU backend: the workers were told to use the GPU, refused (exit 2) and the
// job ended Failed. Auto trains on the CPU and says why; gpu says what is
// missing.
TEST(LocalRunTest, WithoutTheGpuBackendAutoTrainsOnTheCpuAndGpuSaysWhatIsMissing) {
  using pacer::controller::ChooseLocalBackend;
  const std::string plugin = "/opt/pacer/libpacer_worker_gpu.so";
  std::string note;
  EXPECT_EQ(*ChooseLocalBackend("auto", true, "", true, plugin, &note), "gpu");
  EXPECT_EQ(*ChooseLocalBackend("auto", false, "", false, plugin, &note), "cpu");
  EXPECT_EQ(*ChooseLocalBackend("cpu", true, "", true, plugin, &note), "cpu");
  EXPECT_TRUE(note.empty()) << note;
  EXPECT_EQ(*ChooseLocalBackend("auto", true, "", false, plugin, &note), "cpu");
  EXPECT_NE(note.find(plugin + " is missing (built without nvcc?): training on the CPU"),
            std::string::npos)
      << note;
  const auto gpu = ChooseLocalBackend("gpu", true, "", false, plugin, &note);
  ASSERT_FALSE(gpu.ok());
  EXPECT_NE(gpu.status().message().find("--backend gpu: pacer-worker's GPU backend " + plugin +
                                        " is missing"),
            std::string::npos)
      << gpu.status().message();
  EXPECT_FALSE(ChooseLocalBackend("gpu", false, "", true, plugin, &note).ok());
}

// An L4 has no catalog row: `--backend gpu` said "no NVIDIA GPU found on this
// machine", which is false, and auto trained on the CPU without saying why.
TEST(LocalRunTest, AGpuTheCatalogDoesNotKnowIsNamedWhenTrainingOnTheCpu) {
  using pacer::controller::ChooseLocalBackend;
  const std::string plugin = "/opt/pacer/libpacer_worker_gpu.so";
  const std::string l4 = "1 x NVIDIA-L4";
  std::string note;
  const auto gpu = ChooseLocalBackend("gpu", false, l4, true, plugin, &note);
  ASSERT_FALSE(gpu.ok());
  EXPECT_NE(gpu.status().message().find("GPUs (1 x NVIDIA-L4) are not in Pacer's GPU catalog"),
            std::string::npos)
      << gpu.status().message();
  EXPECT_NE(gpu.status().message().find("--backend cpu"), std::string::npos);
  EXPECT_EQ(*ChooseLocalBackend("cpu", false, l4, true, plugin, &note), "cpu");
  EXPECT_TRUE(note.empty()) << note;
  EXPECT_EQ(*ChooseLocalBackend("auto", false, l4, true, plugin, &note), "cpu");
  EXPECT_NE(note.find("(1 x NVIDIA-L4) are not in Pacer's GPU catalog"), std::string::npos) << note;
  EXPECT_NE(note.find("training on the CPU"), std::string::npos) << note;
}

// `--work-dir "$UNSET"` ran in the default directory without a word.
TEST(LocalRunTest, AnEmptyPathFlagExitsTwo) {
  const std::string quickstart =
      std::string(PACER_SOURCE_DIR) + "/manifests/examples/quickstart.yaml";
  for (const char* flag : {"--work-dir", "--worker-binary"}) {
    std::string out;
    Child c = Spawn({PACER_BINARY, "run", quickstart, "--progress", "none", flag, ""});
    EXPECT_EQ(Wait(c, &out), 2) << flag << ": " << out;
    EXPECT_NE(out.find(std::string(flag) + ": is empty"), std::string::npos) << out;
  }
}

TEST(LocalRunTest, JobNeedingGpusThisMachineLacksExitsFourInsteadOfWaiting) {
  // A 7B job pinned to H100s, planned for this machine's CPU: in a cluster it
  // would wait for H100 nodes; here it never gets them.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pacer-h100-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  Child c = Spawn({PACER_BINARY, "run",
                   std::string(PACER_SOURCE_DIR) + "/manifests/examples/llama-7b-h100.yaml",
                   "--backend", "cpu", "--progress", "none", "--work-dir", dir.string()});
  std::string out;
  // Bounded: the old behaviour (Pending forever) fails here instead of hanging.
  if (!ReadUntil(c, &out, std::regex("cannot run"), std::chrono::seconds(60))) {
    ::kill(c.pid, SIGKILL);
  }
  EXPECT_EQ(Wait(c, &out), 4) << out;
  EXPECT_NE(out.find("cannot run research/llama-7b-h100"), std::string::npos) << out;
  EXPECT_NE(out.find("H100-SXM"), std::string::npos) << out;
  EXPECT_NE(out.find("kubectl apply -f"), std::string::npos) << out;
  // No worker ran: no start is left to shorten a later run's maxDuration.
  EXPECT_FALSE(std::filesystem::exists(dir / "started-at")) << out;
  std::filesystem::remove_all(dir);
}

// Exit 3 says the deadline cannot be met; a model no split of this machine
// holds is no deadline matter (the job has no deadline here), and said 3.
TEST(LocalRunTest, AModelNoLayoutHoldsExitsFourNotThree) {
  std::ifstream in(std::string(PACER_SOURCE_DIR) + "/manifests/examples/quickstart.yaml");
  std::stringstream text;
  text << in.rdbuf();
  std::string yaml = text.str();
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"layers: 2\n", "layers: 400\n"},
           {"hiddenSize: 128\n", "hiddenSize: 16384\n"},
           {"ffnHiddenSize: 512\n", "ffnHiddenSize: 65536\n"},
           {"attentionHeads: 4\n", "attentionHeads: 128\n"},
           {"  maxDuration: 10m", "  # no deadline"}}) {
    const size_t at = yaml.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    yaml.replace(at, from.size(), to);
  }
  const std::string tag = std::to_string(::getpid());
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("pacer-huge-job-" + tag + ".yaml");
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pacer-huge-run-" + tag);
  std::ofstream(file) << yaml;
  Child c = Spawn({PACER_BINARY, "run", file.string(), "--backend", "cpu", "--progress", "none",
                   "--work-dir", dir.string()});
  std::string out;
  EXPECT_EQ(Wait(c, &out), 4) << out;
  EXPECT_NE(out.find("NoLayoutFits"), std::string::npos) << out;
  std::filesystem::remove(file);
  std::filesystem::remove_all(dir);
}

// Without $PACER_WORKER_BINARY or a pacer-worker beside pacer, the worker
// is the one on PATH, as for any installed program. The bare name used to
// be spawned as a path relative to the working directory.
// A stop requested twice by SIGTERM is one clean stop: `timeout` signals its
// child and then its own process group, so `pacer run` got the stop twice,
// and the second was taken for a second Ctrl-C (workers killed before their
// checkpoint in 4 runs of 10). Only a second Ctrl-C force-quits.
TEST(LocalRunTest, ASecondSigtermIsTheSameCleanStop) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pacer-term-twice-" + std::to_string(::getpid()));
  Child c;
  std::string out;
  ASSERT_TRUE(StartQuickstart(dir, &c, &out)) << out;
  ::kill(c.pid, SIGTERM);
  ASSERT_TRUE(ReadUntil(c, &out, std::regex("stopping the workers"), std::chrono::seconds(30)))
      << out;
  ::kill(c.pid, SIGTERM);
  EXPECT_EQ(Wait(c, &out), 130) << out;
  EXPECT_EQ(out.find("force-quit: workers killed"), std::string::npos) << out;
  EXPECT_NE(out.find("with a checkpoint in"), std::string::npos) << out;
  std::filesystem::remove_all(dir);
}

// A worker standing in for pacer-worker: it says it started (`ready`, its
// pid), then
// waits for SIGTERM and exits with `exit_on_term` (ignores it when negative).
// Each SIGTERM it gets adds its pid as a line to `terms`. With a
// `checkpoint_step` it first leaves that step's checkpoint in the run's work
// dir (dir/work, RunWithWorker's), as a worker that checkpointed would;
// otherwise it writes nothing.
std::filesystem::path StopExitingWorker(const std::filesystem::path& dir, int exit_on_term,
                                        int checkpoint_step = -1) {
  std::filesystem::create_directories(dir);
  const std::filesystem::path script = dir / "worker.sh";
  const std::string record = "echo $$ >> \"" + (dir / "terms").string() + "\"";
  const std::string trap =
      exit_on_term < 0 ? "trap '" + record + "' TERM"
                       : "trap '" + record + "; exit " + std::to_string(exit_on_term) + "' TERM";
  std::ofstream out(script);
  out << "#!/bin/sh\n" << trap << "\n";
  if (checkpoint_step >= 0) {
    // A real one, as the quickstart's one worker writes it: `pacer run`
    // reads checkpoints by the workers' rule, CRCs included.
    const std::filesystem::path staged = dir / "staged";
    pacer::worker::CheckpointState state;
    state.step = checkpoint_step;
    state.job_name = "quickstart";
    state.run_id = "stand-in";
    const pacer::worker::CheckpointStore store(staged.string(), 0);
    EXPECT_TRUE(store.Save(state).ok());
    const std::filesystem::path rank = dir / "work" / "checkpoints" / "rank-0";
    out << "mkdir -p '" << rank.string() << "' && cp '" << store.PathForStep(checkpoint_step)
        << "' '" << rank.string() << "/'\n";
  }
  out << "echo $$ > '" << (dir / "ready").string()
      << "'\nwhile :; do /bin/sleep 1 & wait $!; done\n";
  out.close();
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  return script;
}

// The pids in `dir`/terms, a line per SIGTERM a stand-in worker got.
std::vector<std::string> TermsReceived(const std::filesystem::path& dir) {
  std::vector<std::string> pids;
  std::ifstream in(dir / "terms");
  for (std::string line; std::getline(in, line);) pids.push_back(line);
  return pids;
}

// Presses Ctrl-C again, once a second, until `pacer run` force-quits: a
// press within a second of the first stop is the same stop delivered twice
// and is ignored. False when it never force-quits.
bool PressCtrlCUntilForceQuit(const Child& c, std::string* out) {
  for (int press = 0; press < 60; ++press) {
    ::kill(c.pid, SIGINT);
    if (ReadUntil(c, out, std::regex("force-quit: workers killed"), std::chrono::seconds(1))) {
      return true;
    }
  }
  return false;
}

// Whether `signal` is pending (sent, its handler not run yet) for `pid`.
bool SignalPending(pid_t pid, int signal) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("ShdPnd:", 0) != 0 && line.rfind("SigPnd:", 0) != 0) continue;
    const unsigned long long mask = std::stoull(line.substr(7), nullptr, 16);
    if ((mask >> (signal - 1)) & 1ULL) return true;
  }
  return false;
}

// `pacer run` of the quickstart with `worker` as pacer-worker, in dir/work.
Child SpawnRunWithWorker(const std::filesystem::path& dir, const std::filesystem::path& worker) {
  return Spawn({PACER_BINARY, "run",
                std::string(PACER_SOURCE_DIR) + "/manifests/examples/quickstart.yaml", "--backend",
                "cpu", "--progress", "plain", "--max-restarts", "0", "--worker-binary",
                worker.string(), "--work-dir", (dir / "work").string()});
}

// The same, once it launched and the worker said it runs.
Child RunWithWorker(const std::filesystem::path& dir, const std::filesystem::path& worker,
                    std::string* out) {
  Child c = SpawnRunWithWorker(dir, worker);
  EXPECT_TRUE(ReadUntil(c, out, std::regex("Launched"), std::chrono::seconds(120))) << *out;
  // The worker's own sign that it runs, so the stop finds its trap set.
  for (int i = 0; i < 1200 && !std::filesystem::exists(dir / "ready"); ++i) ::poll(nullptr, 0, 50);
  return c;
}

// `pacer run` with a stand-in worker that ignores SIGTERM, once the first
// Ctrl-C started its clean stop. False when the worker never ran or the stop
// never started (`out` says why).
bool RunUntilStopping(const std::filesystem::path& dir, int checkpoint_step, Child* c,
                      std::string* out) {
  *c = RunWithWorker(dir, StopExitingWorker(dir, -1, checkpoint_step), out);
  if (!std::filesystem::exists(dir / "ready")) return false;
  ::kill(c->pid, SIGINT);
  return ReadUntil(*c, out, std::regex("stopping the workers"), std::chrono::seconds(30));
}

// Stopped before any checkpoint was written: the next run starts from step
// 0, and the message says so (it claimed a checkpoint that did not exist).
TEST(LocalRunTest, AStopBeforeAnyCheckpointDoesNotClaimOne) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pacer-no-ckpt-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::string out;
  Child c = RunWithWorker(dir, StopExitingWorker(dir, 6), &out);
  ASSERT_TRUE(std::filesystem::exists(dir / "ready")) << out;
  ::kill(c.pid, SIGINT);
  EXPECT_EQ(Wait(c, &out), 130) << out;
  EXPECT_EQ(out.find("with a checkpoint"), std::string::npos) << out;
  EXPECT_NE(out.find("before any checkpoint was written; the next run starts from step 0"),
            std::string::npos)
      << out;
  std::filesystem::remove_all(dir);
}

// A force-quit before any checkpoint: the next run starts from step 0, and
// the message says so (it promised the last checkpoint written).
TEST(LocalRunTest, AForceQuitBeforeAnyCheckpointDoesNotClaimOne) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pacer-force-none-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::string out;
  Child c;
  ASSERT_TRUE(RunUntilStopping(dir, /*checkpoint_step=*/-1, &c, &out)) << out;
  EXPECT_TRUE(PressCtrlCUntilForceQuit(c, &out)) << out;
  EXPECT_EQ(Wait(c, &out), 130) << out;
  EXPECT_EQ(out.find("resumes from the last checkpoint"), std::string::npos) << out;
  EXPECT_NE(out.find("force-quit: workers killed before any checkpoint was written"),
            std::string::npos)
      << out;
  std::filesystem::remove_all(dir);
}

// Ctrl-C pressed on and on, as an impatient user does: the force-quit's
// line is out before `pacer run` gives SIGINT back to its default (on its
// way to exit). It was written to a buffered stdout, and the press after
// the force-quit killed the process with the line unseen (CI, 1 run in 6
// under ASan, whose exit takes longest).
TEST(LocalRunTest, CtrlCPressedOnAndOnStillShowsTheForceQuitsMessage) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pacer-force-on-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::string out;
  Child c;
  ASSERT_TRUE(RunUntilStopping(dir, /*checkpoint_step=*/-1, &c, &out)) << out;
  int status = 0;
  pid_t ended = 0;
  // A press every 2 ms for up to a minute: presses within a second of the
  // first stop are that stop; the first one after it force-quits.
  for (int press = 0; press < 30000 && ended == 0; ++press) {
    ::kill(c.pid, SIGINT);
    ::poll(nullptr, 0, 2);
    ended = ::waitpid(c.pid, &status, WNOHANG);
  }
  ASSERT_EQ(ended, c.pid) << "pacer run did not exit: " << out;
  ReadUntil(c, &out, std::regex("$^never"), std::chrono::seconds(10));  // to EOF
  ::close(c.out);
  // Either way out: its own exit 130, or a press after it gave SIGINT back.
  EXPECT_TRUE((WIFEXITED(status) && WEXITSTATUS(status) == 130) ||
              (WIFSIGNALED(status) && WTERMSIG(status) == SIGINT))
      << status << "\n"
      << out;
  EXPECT_NE(out.find("force-quit: workers killed before any checkpoint was written"),
            std::string::npos)
      << out;
  std::filesystem::remove_all(dir);
}

// The first Ctrl-C starts a clean stop; the second, while the workers are
// still stopping, must not wait for them: it kills them, and says which
// checkpoint the next run resumes from. The stand-in worker ignores SIGTERM,
// so no clean stop can end first: the real worker's takes milliseconds, and
// on a loaded machine it could end before the test's second press came
// ("stopped at step", exit 130, no force-quit).
TEST(LocalRunTest, SecondCtrlCForceQuits) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pacer-force-quit-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::string out;
  Child c;
  ASSERT_TRUE(RunUntilStopping(dir, /*checkpoint_step=*/40, &c, &out)) << out;
  // Two signals sent at once would merge into one: the second press comes
  // once the first stop reached a worker.
  for (int i = 0; i < 1200 && TermsReceived(dir).empty(); ++i) ::poll(nullptr, 0, 50);
  ASSERT_FALSE(TermsReceived(dir).empty()) << out;
  EXPECT_TRUE(PressCtrlCUntilForceQuit(c, &out)) << out;
  EXPECT_EQ(Wait(c, &out), 130) << out;
  EXPECT_NE(out.find("force-quit: workers killed; the next run resumes from the last "
                     "checkpoint written (step 40)"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("stopped at step"), std::string::npos) << out;
  // Killed, not signalled again: a second SIGTERM within a second of the
  // first is the same stop to pacer-worker, which then finished its
  // checkpoint while pacer run waited up to 20 s to SIGKILL it.
  std::vector<std::string> terms = TermsReceived(dir);
  std::sort(terms.begin(), terms.end());
  EXPECT_EQ(std::adjacent_find(terms.begin(), terms.end()), terms.end())
      << "a worker got SIGTERM twice";
  std::filesystem::remove_all(dir);
}

// A stop whose checkpoint the workers could not write (exit 7: the volume
// full at that moment) lost the steps since the last checkpoint, and was
// reported as a clean stop at that older one (exit 130). It is an error
// that says what was lost and what to fix.
TEST(LocalRunTest, AStopWhoseCheckpointFailedSaysWhatWasLost) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pacer-stop-ckpt-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::string out;
  Child c = RunWithWorker(dir, StopExitingWorker(dir, 7, /*checkpoint_step=*/40), &out);
  ASSERT_TRUE(std::filesystem::exists(dir / "ready")) << out;
  ::kill(c.pid, SIGINT);
  EXPECT_EQ(Wait(c, &out), 1) << out;
  EXPECT_NE(out.find("error: the stop's checkpoint was not written: worker 0 exited with code 7 "
                     "(checkpoint failure"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("the next run resumes from step 40 (the last checkpoint every rank wrote); "
                     "the steps trained since are lost"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("stopped at step"), std::string::npos) << out;
  std::filesystem::remove_all(dir);
}

// Checkpoints count steps of the batch they were trained at: a run of the
// same job with another globalBatchSize resumed step 40 of 16 sequences as
// step 40 of 32, and sequences were never trained, reported Succeeded. It
// is refused (exit 2) as the cluster refuses the edit; set back, it runs.
TEST(LocalRunTest, ResumingAtAnotherGlobalBatchIsRefused) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pacer-step-unit-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::string out;
  const std::filesystem::path worker = StopExitingWorker(dir, 6, /*checkpoint_step=*/40);
  Child c = RunWithWorker(dir, worker, &out);
  ASSERT_TRUE(std::filesystem::exists(dir / "ready")) << out;
  ::kill(c.pid, SIGINT);
  ASSERT_EQ(Wait(c, &out), 130) << out;
  ASSERT_NE(out.find("stopped at step 40 with a checkpoint"), std::string::npos) << out;

  std::ifstream in(std::string(PACER_SOURCE_DIR) + "/manifests/examples/quickstart.yaml");
  std::stringstream text;
  text << in.rdbuf();
  std::string job = text.str();
  job.replace(job.find("globalBatchSize: 16"), std::string("globalBatchSize: 16").size(),
              "globalBatchSize: 32");
  const std::filesystem::path edited = dir / "quickstart-gbs32.yaml";
  std::ofstream(edited) << job;
  std::string refused;
  Child again =
      Spawn({PACER_BINARY, "run", edited.string(), "--backend", "cpu", "--progress", "plain",
             "--worker-binary", worker.string(), "--work-dir", (dir / "work").string()});
  // Bounded when it launches after all (the stand-in worker never ends).
  if (ReadUntil(again, &refused, std::regex("Launched"), std::chrono::seconds(60))) {
    ::kill(again.pid, SIGINT);
  }
  EXPECT_EQ(Wait(again, &refused), 2) << refused;
  EXPECT_NE(refused.find("spec.training.globalBatchSize changed from 16 to 32 after 40 steps were "
                         "trained at the old value"),
            std::string::npos)
      << refused;
  EXPECT_EQ(refused.find("Launched"), std::string::npos) << refused;
  std::filesystem::remove_all(dir);
}

// One Ctrl-C delivered twice (`timeout -s INT` signals its child and then
// its process group; a wrapper forwards the terminal's Ctrl-C the terminal
// also sent to the group) is one clean stop: taken for a second press, it
// force-quit 2 runs in 8 with the workers killed before their checkpoint.
TEST(LocalRunTest, ACtrlCDeliveredTwiceIsOneCleanStop) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pacer-int-twice-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::string out;
  Child c = RunWithWorker(dir, StopExitingWorker(dir, 6, /*checkpoint_step=*/40), &out);
  ASSERT_TRUE(std::filesystem::exists(dir / "ready")) << out;
  ::kill(c.pid, SIGINT);
  // The second once the first was handled (two pending ones would merge).
  for (int i = 0; i < 1000 && SignalPending(c.pid, SIGINT); ++i) ::poll(nullptr, 0, 1);
  ::kill(c.pid, SIGINT);
  EXPECT_EQ(Wait(c, &out), 130) << out;
  EXPECT_EQ(out.find("force-quit: workers killed"), std::string::npos) << out;
  EXPECT_NE(out.find("stopped at step 40 with a checkpoint in"), std::string::npos) << out;
  std::filesystem::remove_all(dir);
}

// `pacer run` killed with SIGKILL (the OOM killer, `kill -9`) leaves its
// workers stopping at a checkpoint. The work-directory lock died with it,
// and the next run started at once beside them, on the same rank
// directories. The workers hold the lock now: the next run says it waits
// for them, and starts once they have exited.
TEST(LocalRunTest, TheRunAfterAKilledOneWaitsForItsWorkers) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pacer-killed-run-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const std::filesystem::path worker = StopExitingWorker(dir, 6);
  std::string first_out;
  Child first = RunWithWorker(dir, worker, &first_out);
  ASSERT_TRUE(std::filesystem::exists(dir / "ready")) << first_out;
  int orphan = 0;
  std::ifstream(dir / "ready") >> orphan;
  ASSERT_GT(orphan, 0);
  // However the test ends, the stand-in (which loops until a SIGTERM and
  // has no parent to watch) does not outlive it.
  struct KillAtExit {
    int pid;
    ~KillAtExit() {
      if (pid > 0) ::kill(pid, SIGKILL);
    }
  } cleanup{orphan};
  std::filesystem::remove(dir / "ready");
  ::kill(first.pid, SIGKILL);
  Wait(first, &first_out);

  std::string out;
  Child second = SpawnRunWithWorker(dir, worker);
  ASSERT_TRUE(ReadUntil(second, &out, std::regex("waiting up to 60 s for them to exit"),
                        std::chrono::seconds(30)))
      << out;
  EXPECT_NE(out.find("the workers of an earlier `pacer run` (pid " + std::to_string(first.pid) +
                     ", which has ended)"),
            std::string::npos)
      << out;
  EXPECT_FALSE(std::filesystem::exists(dir / "ready")) << "a worker started beside the orphan";
  ::kill(orphan, SIGTERM);  // it saves and exits
  ASSERT_TRUE(ReadUntil(second, &out, std::regex("Launched"), std::chrono::seconds(60))) << out;
  cleanup.pid = 0;  // gone: the lock it held is free (its pid may be reused)
  for (int i = 0; i < 1200 && !std::filesystem::exists(dir / "ready"); ++i) ::poll(nullptr, 0, 50);
  ::kill(second.pid, SIGINT);
  EXPECT_EQ(Wait(second, &out), 130) << out;
  std::filesystem::remove_all(dir);
}

// A Ctrl-C as the workers finish: they exit 0, done. The job is finished,
// not stopped (it said "stopped at step N with a checkpoint", exited 130,
// and the next run trained the job again).
TEST(LocalRunTest, ACtrlCAsTheWorkersFinishIsNotAStop) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pacer-ctrlc-done-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::string out;
  Child c = RunWithWorker(dir, StopExitingWorker(dir, 0), &out);
  ASSERT_TRUE(std::filesystem::exists(dir / "ready")) << out;
  ::kill(c.pid, SIGINT);
  const int code = Wait(c, &out);
  EXPECT_EQ(out.find("stopped at step"), std::string::npos) << out;
  EXPECT_NE(out.find("the workers had finished every step before the stop"), std::string::npos)
      << out;
  EXPECT_NE(code, 130) << out;
  std::filesystem::remove_all(dir);
}

TEST(LocalRunTest, TheWorkerIsFoundOnPath) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pacer-path-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "bin");
  std::filesystem::create_directories(dir / "path");
  std::filesystem::copy_file(PACER_BINARY, dir / "bin" / "pacer");
  const std::filesystem::path marker = dir / "worker-ran";
  {
    std::ofstream script(dir / "path" / "pacer-worker");
    script << "#!/bin/sh\n: > '" << marker.string() << "'\nexit 2\n";  // no PATH for touch
  }
  std::filesystem::permissions(dir / "path" / "pacer-worker", std::filesystem::perms::owner_all);
  Child c = Spawn({"/usr/bin/env", "-u", "PACER_WORKER_BINARY",
                   "PATH=" + (dir / "empty").string() + ":" + (dir / "path").string(),
                   (dir / "bin" / "pacer").string(), "run",
                   std::string(PACER_SOURCE_DIR) + "/manifests/examples/quickstart.yaml",
                   "--backend", "cpu", "--progress", "none", "--max-restarts", "0", "--work-dir",
                   (dir / "work").string()});
  std::string out;
  EXPECT_EQ(Wait(c, &out), 1) << out;
  EXPECT_TRUE(std::filesystem::exists(marker)) << out;
  std::filesystem::remove_all(dir);
}

TEST(LocalRunTest, GpuBackendWithoutAGpuExitsTwo) {
  std::error_code ec;
  if (std::filesystem::exists("/proc/driver/nvidia/gpus", ec) &&
      !std::filesystem::is_empty("/proc/driver/nvidia/gpus", ec)) {
    GTEST_SKIP() << "this machine has an NVIDIA GPU";
  }
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pacer-gpu-run-" + std::to_string(::getpid()));
  Child c = Spawn({PACER_BINARY, "run",
                   std::string(PACER_SOURCE_DIR) + "/manifests/examples/quickstart.yaml",
                   "--backend", "gpu", "--progress", "none", "--work-dir", dir.string()});
  std::string out;
  EXPECT_EQ(Wait(c, &out), 2) << out;
  EXPECT_NE(out.find("--backend gpu: no NVIDIA GPU"), std::string::npos) << out;
  EXPECT_NE(out.find("--backend cpu"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir / "started-at")) << out;
  std::filesystem::remove_all(dir);
}
#endif

}  // namespace
