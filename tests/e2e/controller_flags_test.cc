// pacer-controller's exit code for bad flags is the 2 its --help promises
// (CLI11's own codes, 105 and 109, said nothing a supervisor could read).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace {

// Runs the controller with `args`; returns its exit code, output in *out.
int RunController(const std::string& args, std::string* out) {
  const std::string command = std::string(PACER_CONTROLLER_BINARY) + " " + args + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) out->append(buffer, n);
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(ControllerFlagsTest, BadFlagsExitTwoAndSayWhich) {
  for (const auto& [args, words] : {std::pair<std::string, std::string>{"--bogus", "--bogus"},
                                    {"--workers 0", "--workers"},
                                    {"--scheduling sometimes", "--scheduling"},
                                    {"--relaunch-seconds nan", "not a finite number"},
                                    {"--prometheus-url prometheus:9090", "http://"}}) {
    std::string out;
    EXPECT_EQ(RunController(args, &out), 2) << args << ": " << out;
    EXPECT_NE(out.find(words), std::string::npos) << args << ": " << out;
    EXPECT_NE(out.find("pacer-controller --help"), std::string::npos) << out;
  }
  std::string help;
  EXPECT_EQ(RunController("--help", &help), 0) << help;
  EXPECT_NE(help.find("2 invalid flags"), std::string::npos) << help;
}

// A password in the Prometheus URL would be written into every TrainJob's
// conditions and Events when Prometheus fails: it is refused, and the
// refusal does not print it.
TEST(ControllerFlagsTest, APrometheusUrlWithAPasswordIsRefusedWithoutPrintingIt) {
  std::string out;
  EXPECT_EQ(RunController("--prometheus-url http://alice:s3cret@prometheus:9090", &out), 2) << out;
  EXPECT_NE(out.find("--prometheus-url"), std::string::npos) << out;
  EXPECT_NE(out.find("user information"), std::string::npos) << out;
  EXPECT_EQ(out.find("s3cret"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(RunController("--prometheus-url http://prometheus:9090 --help", &out), 0) << out;
}

// A flag given twice (the chart's controller.extraArgs after the flags it
// renders) is no parse error: the last value wins, and every value is still
// checked. (--help stops it after the parse; CLI11 reports a repeated
// option before it looks at --help.)
TEST(ControllerFlagsTest, ARepeatedFlagTakesItsLastValue) {
  std::string out;
  EXPECT_EQ(RunController("--log-level=info --log-level=debug --workers=4 --workers=2 "
                          "--leader-election-id=a --leader-election-id=b --help",
                          &out),
            0)
      << out;
  for (const char* args : {"--workers=4 --workers=0", "--workers=0 --workers=4"}) {
    out.clear();
    EXPECT_EQ(RunController(args, &out), 2) << args << ": " << out;
    EXPECT_NE(out.find("--workers"), std::string::npos) << args << ": " << out;
  }
}

}  // namespace
