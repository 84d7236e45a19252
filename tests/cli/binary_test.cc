// End-to-end: the built `pacer` executable (and its kubectl-pacer name) run
// as child processes, checking exit codes and which stream gets what.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli/commands.h"
#include "cli_test_util.h"

namespace pacer::cli {
namespace {

using testing::CliRun;
using testing::CliTestData;
using testing::kNow;
using testing::RunBinary;

TEST(BinaryTest, VersionPrintsTheVersion) {
  const CliRun run = RunBinary({"version"});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.out, std::string("pacer ") + PacerVersion() + "\n");
  EXPECT_EQ(RunBinary({"--version"}).out, run.out);
}

TEST(BinaryTest, HelpIsInformative) {
  CliRun run = RunBinary({"--help"});
  EXPECT_EQ(run.exit_code, 0);
  for (const char* text : {"plan", "explain", "sweep", "run", "version", "Exit codes"}) {
    EXPECT_NE(run.out.find(text), std::string::npos) << text << "\n" << run.out;
  }
  run = RunBinary({"run", "--help"});
  EXPECT_EQ(run.exit_code, 0);
  for (const char* text : {"--worker-binary", "--work-dir", "--progress", "Ctrl-C", "130"}) {
    EXPECT_NE(run.out.find(text), std::string::npos) << text << "\n" << run.out;
  }
  run = RunBinary({"plan", "--help"});
  EXPECT_EQ(run.exit_code, 0);
  for (const char* text :
       {"--cluster", "--calibration", "--now", "--output", "--alternatives", "nothing fits"}) {
    EXPECT_NE(run.out.find(text), std::string::npos) << text << "\n" << run.out;
  }
  run = RunBinary({"sweep", "--help"});
  EXPECT_EQ(run.exit_code, 0);
  for (const char* text : {"--gpus", "--svg", "8..1024"}) {
    EXPECT_NE(run.out.find(text), std::string::npos) << text << "\n" << run.out;
  }
  // version's help is its own, not the app's footer (plan's exit codes).
  run = RunBinary({"version", "--help"});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_NE(run.out.find("the version was printed"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("infeasible"), std::string::npos) << run.out;
}

// The built `pacer` has `pacer inventory` (controller/kubecli) wired in.
TEST(BinaryTest, InventoryCommandIsBuiltIn) {
  const CliRun run = RunBinary({"inventory", "--help"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  for (const char* text : {"--kubeconfig", "--context", "--output-file", "yaml or json", "401"}) {
    EXPECT_NE(run.out.find(text), std::string::npos) << text << "\n" << run.out;
  }
}

TEST(BinaryTest, ExitCodes) {
  CliRun run = RunBinary({"plan", CliTestData("llama-7b.yaml"), "--now", kNow});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_FALSE(run.out.empty());
  EXPECT_TRUE(run.err.empty()) << run.err;

  run = RunBinary({"plan", CliTestData("impossible.yaml"), "-o", "json", "--now", kNow});
  EXPECT_EQ(run.exit_code, kExitInfeasible) << run.err;
  EXPECT_NE(run.out.find("\"feasible\": false"), std::string::npos);

  run = RunBinary({"plan", CliTestData("too-big.yaml"), "--now", kNow});
  EXPECT_EQ(run.exit_code, kExitNothingFits) << run.out << run.err;

  run = RunBinary({"plan", "/nonexistent.yaml", "--now", kNow});
  EXPECT_EQ(run.exit_code, kExitInvalidInput);
  EXPECT_TRUE(run.out.empty());
  EXPECT_EQ(run.err.rfind("error: /nonexistent.yaml", 0), 0u) << run.err;

  run = RunBinary({"plan", CliTestData("llama-7b.yaml"), "-o", "csv", "--now", kNow});
  EXPECT_EQ(run.exit_code, kExitInvalidInput);

  run = RunBinary({"plan", CliTestData("llama-7b.yaml"), "--now", "2027-01-01T00:00:00Z"});
  EXPECT_EQ(run.exit_code, kExitInvalidInput);
  EXPECT_NE(run.err.find("spec.deadline"), std::string::npos) << run.err;
}

TEST(BinaryTest, SameNowSameOutput) {
  const CliRun first =
      RunBinary({"plan", CliTestData("llama-7b.yaml"), "-o", "yaml", "--now", kNow});
  const CliRun second =
      RunBinary({"plan", CliTestData("llama-7b.yaml"), "-o", "yaml", "--now", kNow});
  EXPECT_EQ(first.exit_code, kExitOk);
  EXPECT_EQ(first.out, second.out);
}

TEST(BinaryTest, KubectlPluginNameWorks) {
  const std::string plugin =
      (std::filesystem::path(PACER_BINARY).parent_path() / "kubectl-pacer").string();
  ASSERT_TRUE(std::filesystem::exists(plugin)) << plugin;
  const CliRun run = RunBinary({"version"}, plugin);
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.out.rfind("pacer ", 0), 0u);
}

}  // namespace
}  // namespace pacer::cli
