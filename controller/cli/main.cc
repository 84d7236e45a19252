// The `pacer` executable (also installed as `kubectl-pacer`): see docs/cli.md.
#include <iostream>

#include "cli/commands.h"

int main(int argc, char** argv) { return pacer::cli::RunCli(argc, argv, std::cout, std::cerr); }
