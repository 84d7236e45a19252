// The `pacer` program: the CLI commands of cli/commands.h, plus `pacer run`
// (local mode, controller/local) and `pacer inventory` (controller/kubecli)
// when they are built.
#include <iostream>

#include "cli/commands.h"
#ifdef PACER_WITH_LOCAL_MODE
#include "local/run_command.h"
#endif
#ifdef PACER_WITH_INVENTORY_COMMAND
#include "kubecli/inventory_command.h"
#endif

int main(int argc, char** argv) {
  std::vector<pacer::cli::CommandExtension*> extensions;
#ifdef PACER_WITH_LOCAL_MODE
  pacer::controller::RunCommand run;
  extensions.push_back(&run);
#endif
#ifdef PACER_WITH_INVENTORY_COMMAND
  pacer::controller::InventoryCommand inventory;
  extensions.push_back(&inventory);
#endif
  return pacer::cli::RunCli(argc, argv, std::cout, std::cerr, extensions);
}
