// The `pacer` command line: argument parsing and dispatch of the plan,
// explain, sweep and version commands, and the exit codes they return.
//
// RunCli is the whole program behind main(): it writes results to `out` and
// diagnostics to `err`, never to the process's streams, and never calls
// exit(), so tests can run it in-process. It reads the wall clock only when
// the user gives no --now (the planner itself never reads a clock).
// Thread-safety: RunCli keeps no global state; concurrent calls with distinct
// streams are safe.
#ifndef PACER_CLI_COMMANDS_H_
#define PACER_CLI_COMMANDS_H_

#include <ostream>
#include <vector>

namespace CLI {
class App;
}  // namespace CLI

namespace pacer::cli {

// Process exit codes, documented in docs/cli.md. Scripts rely on them.
enum ExitCode : int {
  kExitOk = 0,             // a plan meets the deadline (or the job has none)
  kExitInternalError = 1,  // a bug or an I/O failure writing output
  kExitInvalidInput = 2,   // bad arguments, unreadable or invalid documents
  kExitInfeasible = 3,     // no plan meets the deadline; the fastest is printed
  kExitNothingFits = 4,    // no layout fits at all (memory, divisibility, GPUs)
};

// "0.1.0": the project version `pacer version` prints.
const char* PacerVersion();

// A subcommand defined by a library that depends on this one (`pacer run`,
// local mode, lives in controller/local/): it declares its options on its
// CLI11 subcommand, and runs when the user chose it.
class CommandExtension {
 public:
  virtual ~CommandExtension() = default;
  virtual const char* name() const = 0;
  virtual const char* description() const = 0;
  virtual void AddOptions(CLI::App* command) = 0;
  virtual int Run(std::ostream& out, std::ostream& err) = 0;
};

// Runs `pacer` with the given arguments (argv[0] is the program name) and
// returns the process exit code.
int RunCli(int argc, char** argv, std::ostream& out, std::ostream& err,
           const std::vector<CommandExtension*>& extensions = {});

}  // namespace pacer::cli

#endif  // PACER_CLI_COMMANDS_H_
