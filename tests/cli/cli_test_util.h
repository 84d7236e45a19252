// Helpers for the CLI tests: run `pacer` in-process through RunCli, or run
// the built executable (PACER_BINARY) as a child process, capturing exit
// code, stdout and stderr either way; paths of test inputs.
// Every run passes --now explicitly: no test depends on the clock.
#ifndef PACER_TESTS_CLI_CLI_TEST_UTIL_H_
#define PACER_TESTS_CLI_CLI_TEST_UTIL_H_

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"

extern char** environ;

namespace pacer::cli::testing {

// The instant every test plans at.
inline constexpr const char* kNow = "2026-06-01T00:00:00Z";

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string SourcePath(const std::string& relative) {
  return std::string(PACER_SOURCE_DIR) + "/" + relative;
}

inline std::string CliTestData(const std::string& name) {
  return SourcePath("tests/cli/testdata/" + name);
}

inline std::string ReadFile(const std::string& path) {
  // A plain read loop: istreambuf_iterator trips GCC 12's -Wnull-dereference.
  std::ifstream in(path, std::ios::binary);
  std::string text;
  char buffer[4096];
  while (in.read(buffer, sizeof(buffer)) || in.gcount() > 0) {
    text.append(buffer, static_cast<std::size_t>(in.gcount()));
  }
  return text;
}

// A fresh directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "pacer-cli-test-XXXXXX");
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// `pacer ARGS...` through RunCli, in this process.
inline CliRun RunPacer(const std::vector<std::string>& args) {
  std::vector<std::string> storage = {"pacer"};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : storage) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::ostringstream out;
  std::ostringstream err;
  CliRun run;
  run.exit_code = RunCli(static_cast<int>(storage.size()), argv.data(), out, err);
  run.out = out.str();
  run.err = err.str();
  return run;
}

// `PROGRAM ARGS...` as a child process (default: the built pacer binary),
// stdout and stderr captured through files so that neither can block.
inline CliRun RunBinary(const std::vector<std::string>& args,
                        const std::string& program = PACER_BINARY) {
  TempDir dir;
  const std::string out_path = dir.File("stdout");
  const std::string err_path = dir.File("stderr");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<std::string> storage = {program};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : storage) argv.push_back(arg.data());
  argv.push_back(nullptr);
  CliRun run;
  pid_t pid = 0;
  if (posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), environ) == 0) {
    int status = 0;
    if (waitpid(pid, &status, 0) == pid && WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  }
  posix_spawn_file_actions_destroy(&actions);
  run.out = ReadFile(out_path);
  run.err = ReadFile(err_path);
  return run;
}

}  // namespace pacer::cli::testing

#endif  // PACER_TESTS_CLI_CLI_TEST_UTIL_H_
