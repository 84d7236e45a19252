// The `pacer` program: the CLI commands of cli/commands.h, plus `pacer run`
// (local mode, controller/local) when it is built.
#include <iostream>

#include "cli/commands.h"
#ifdef PACER_WITH_LOCAL_MODE
#include "local/run_command.h"
#endif

int main(int argc, char** argv) {
  std::vector<pacer::cli::CommandExtension*> extensions;
#ifdef PACER_WITH_LOCAL_MODE
  pacer::controller::RunCommand run;
  extensions.push_back(&run);
#endif
  return pacer::cli::RunCli(argc, argv, std::cout, std::cerr, extensions);
}
