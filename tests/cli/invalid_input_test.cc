// Invalid input of every kind exits with 2 and says on stderr what is wrong
// and where: the shared corpora of invalid TrainJobs and inventories, files
// that cannot be read, bad flags, and deadlines already past.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "cli/inputs.h"
#include "cli_test_util.h"
#include "pacer/planner/job_parser.h"

namespace pacer::cli {
namespace {

using testing::CliRun;
using testing::CliTestData;
using testing::kNow;
using testing::RunPacer;

// The YAML files of a corpus folder, sorted (stable test output).
std::vector<std::string> CorpusFiles(const std::string& folder) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(testing::SourcePath(folder), ec)) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// "# expect: <substring>" on the first line.
std::string ExpectedSubstring(const std::string& path) {
  std::ifstream in(path);
  std::string first_line;
  std::getline(in, first_line);
  const std::string marker = "# expect: ";
  if (first_line.rfind(marker, 0) != 0) return "";
  std::string expected = first_line.substr(marker.size());
  while (!expected.empty() && (expected.back() == '\r' || expected.back() == ' ')) {
    expected.pop_back();
  }
  return expected;
}

TEST(InvalidInputTest, EveryInvalidJobExitsWithTwoAndSaysWhy) {
  const std::vector<std::string> files = CorpusFiles("tests/testdata/invalid_jobs");
  ASSERT_FALSE(files.empty()) << "tests/testdata/invalid_jobs/*.yaml is missing";
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    const std::string expected = ExpectedSubstring(path);
    ASSERT_FALSE(expected.empty()) << "first line must be '# expect: <substring>'";
    const CliRun run = RunPacer({"plan", path, "--now", kNow});
    EXPECT_EQ(run.exit_code, kExitInvalidInput) << run.out << run.err;
    EXPECT_NE(run.err.find(expected), std::string::npos) << run.err;
    EXPECT_EQ(run.err.rfind("error: ", 0), 0u) << run.err;
    EXPECT_NE(run.err.find(path), std::string::npos) << "the message names the file: " << run.err;
  }
}

TEST(InvalidInputTest, EveryInvalidInventoryExitsWithTwoAndSaysWhy) {
  const std::vector<std::string> files = CorpusFiles("tests/testdata/invalid_inventories");
  ASSERT_FALSE(files.empty()) << "tests/testdata/invalid_inventories/*.yaml is missing";
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    const std::string expected = ExpectedSubstring(path);
    ASSERT_FALSE(expected.empty()) << "first line must be '# expect: <substring>'";
    const CliRun run =
        RunPacer({"plan", CliTestData("llama-7b.yaml"), "--cluster", path, "--now", kNow});
    EXPECT_EQ(run.exit_code, kExitInvalidInput) << run.out << run.err;
    EXPECT_NE(run.err.find(expected), std::string::npos) << run.err;
    EXPECT_NE(run.err.find(path), std::string::npos) << run.err;
  }
}

TEST(InvalidInputTest, MissingFileExitsWithTwo) {
  for (const char* command : {"plan", "explain"}) {
    const CliRun run = RunPacer({command, "/nonexistent/job.yaml", "--now", kNow});
    EXPECT_EQ(run.exit_code, kExitInvalidInput);
    EXPECT_NE(run.err.find("error: /nonexistent/job.yaml: cannot read"), std::string::npos)
        << run.err;
    EXPECT_TRUE(run.out.empty());
  }
  const CliRun sweep =
      RunPacer({"sweep", "/nonexistent/job.yaml", "--gpus", "8..64", "--now", kNow});
  EXPECT_EQ(sweep.exit_code, kExitInvalidInput);
}

TEST(InvalidInputTest, MissingClusterAndCalibrationFilesExitWithTwo) {
  const std::string job = CliTestData("llama-7b.yaml");
  CliRun run = RunPacer({"plan", job, "--cluster", "/nonexistent/cluster.yaml", "--now", kNow});
  EXPECT_EQ(run.exit_code, kExitInvalidInput);
  EXPECT_NE(run.err.find("/nonexistent/cluster.yaml"), std::string::npos) << run.err;
  run = RunPacer({"plan", job, "--calibration", "/nonexistent/cal.json", "--now", kNow});
  EXPECT_EQ(run.exit_code, kExitInvalidInput);
  EXPECT_NE(run.err.find("/nonexistent/cal.json"), std::string::npos) << run.err;
}

// A misspelt GPU type in a calibration file was ignored: the plan ran on
// default efficiencies without a word.
TEST(InvalidInputTest, ACalibrationForAnUnknownGpuTypeExitsWithTwo) {
  testing::TempDir dir;
  const std::string path = dir.File("cal.json");
  {
    std::ofstream out(path);
    out << R"({"gpuTypes": {"H100-SMX": {"gemmEfficiency": 0.7}}})";
  }
  const CliRun run =
      RunPacer({"plan", CliTestData("llama-7b.yaml"), "--calibration", path, "--now", kNow});
  EXPECT_EQ(run.exit_code, kExitInvalidInput);
  EXPECT_NE(run.err.find(path + ": calibration: gpuTypes.H100-SMX: unknown GPU type"),
            std::string::npos)
      << run.err;
  EXPECT_TRUE(run.out.empty());
}

TEST(InvalidInputTest, DirectoryExitsWithTwo) {
  const CliRun run = RunPacer({"plan", testing::SourcePath("tests/cli"), "--now", kNow});
  EXPECT_EQ(run.exit_code, kExitInvalidInput);
  EXPECT_NE(run.err.find("is a directory"), std::string::npos) << run.err;
}

TEST(InvalidInputTest, OversizedFileIsRefusedBeforeParsing) {
  testing::TempDir dir;
  const std::string path = dir.File("huge.yaml");
  {
    std::ofstream out(path);
    out << "# " << std::string(planner::kMaxDocumentBytes, 'x') << "\n";
  }
  const CliRun run = RunPacer({"plan", path, "--now", kNow});
  EXPECT_EQ(run.exit_code, kExitInvalidInput);
  EXPECT_NE(run.err.find("limit"), std::string::npos) << run.err;
}

TEST(InvalidInputTest, UnknownOutputFormatExitsWithTwo) {
  const std::string job = CliTestData("llama-7b.yaml");
  for (const char* command : {"plan", "explain"}) {
    const CliRun run = RunPacer({command, job, "-o", "xml", "--now", kNow});
    EXPECT_EQ(run.exit_code, kExitInvalidInput);
    EXPECT_NE(run.err.find("unknown output format \"xml\""), std::string::npos) << run.err;
    EXPECT_TRUE(run.out.empty());
  }
  const CliRun sweep = RunPacer({"sweep", job, "--gpus", "8..64", "-o", "xml", "--now", kNow});
  EXPECT_EQ(sweep.exit_code, kExitInvalidInput);
}

TEST(InvalidInputTest, MalformedNowExitsWithTwo) {
  const CliRun run = RunPacer({"plan", CliTestData("llama-7b.yaml"), "--now", "June 1st, 2026"});
  EXPECT_EQ(run.exit_code, kExitInvalidInput);
  EXPECT_NE(run.err.find("--now"), std::string::npos) << run.err;
}

TEST(InvalidInputTest, DeadlineInThePastNamesSpecDeadline) {
  // llama-7b.yaml is due 2026-07-01; plan as of a day later.
  for (const char* command : {"plan", "explain"}) {
    const CliRun run =
        RunPacer({command, CliTestData("llama-7b.yaml"), "--now", "2026-07-02T00:00:00Z"});
    EXPECT_EQ(run.exit_code, kExitInvalidInput);
    EXPECT_NE(run.err.find("spec.deadline: 2026-07-01T00:00:00Z is in the past (now is "
                           "2026-07-02T00:00:00Z); set a later deadline"),
              std::string::npos)
        << run.err;
    EXPECT_TRUE(run.out.empty());
  }
  const CliRun sweep = RunPacer(
      {"sweep", CliTestData("llama-7b.yaml"), "--gpus", "8..64", "--now", "2026-07-02T00:00:00Z"});
  EXPECT_EQ(sweep.exit_code, kExitInvalidInput);
  EXPECT_NE(sweep.err.find("spec.deadline"), std::string::npos) << sweep.err;
}

TEST(InvalidInputTest, UnknownGpuTypeExitsWithTwo) {
  for (const char* command : {"plan", "explain"}) {
    const CliRun run = RunPacer({command, CliTestData("unknown-gpu.yaml"), "--now", kNow});
    EXPECT_EQ(run.exit_code, kExitInvalidInput) << run.out << run.err;
    EXPECT_NE(run.err.find("TPU-v5p"), std::string::npos) << run.err;
  }
  const CliRun sweep =
      RunPacer({"sweep", CliTestData("unknown-gpu.yaml"), "--gpus", "8..64", "--now", kNow});
  EXPECT_EQ(sweep.exit_code, kExitInvalidInput);
  EXPECT_NE(sweep.err.find("spec.resources.gpuTypes[0]"), std::string::npos) << sweep.err;
}

TEST(InvalidInputTest, UsageErrorsExitWithTwo) {
  EXPECT_EQ(RunPacer({}).exit_code, kExitInvalidInput);
  EXPECT_EQ(RunPacer({"frobnicate"}).exit_code, kExitInvalidInput);
  EXPECT_EQ(RunPacer({"run", CliTestData("llama-7b.yaml")}).exit_code, kExitInvalidInput);
  EXPECT_EQ(RunPacer({"plan"}).exit_code, kExitInvalidInput);
  EXPECT_EQ(RunPacer({"plan", CliTestData("llama-7b.yaml"), "--bogus"}).exit_code,
            kExitInvalidInput);
  EXPECT_EQ(RunPacer({"plan", CliTestData("llama-7b.yaml"), "--alternatives", "-1", "--now", kNow})
                .exit_code,
            kExitInvalidInput);
  // sweep needs --gpus.
  EXPECT_EQ(RunPacer({"sweep", CliTestData("llama-7b.yaml"), "--now", kNow}).exit_code,
            kExitInvalidInput);
  const CliRun bad_gpus =
      RunPacer({"sweep", CliTestData("llama-7b.yaml"), "--gpus", "64..8", "--now", kNow});
  EXPECT_EQ(bad_gpus.exit_code, kExitInvalidInput);
  EXPECT_NE(bad_gpus.err.find("--gpus"), std::string::npos) << bad_gpus.err;
}

// `pacer plan` and `pacer run` read a TrainJob file the same way
// (ReadTrainJob): a byte that is not UTF-8 is refused wherever it is, with
// its line and column. plan planned a Latin-1 label (run refused it) and
// both took a Latin-1 comment.
TEST(InvalidInputTest, AFileThatIsNotUtf8ExitsWithTwoNamingWhereTheByteIs) {
  testing::TempDir dir;
  const std::string job = testing::ReadFile(CliTestData("llama-7b.yaml"));
  const std::size_t metadata = job.find("\nmetadata:\n");
  ASSERT_NE(metadata, std::string::npos);
  const std::string label = dir.File("latin1-label.yaml");
  std::ofstream(label) << job.substr(0, metadata) << "\nmetadata:\n  labels: {team: caf\xe9}"
                       << job.substr(metadata + std::string("\nmetadata:").size());
  const std::string comment = dir.File("latin1-comment.yaml");
  std::ofstream(comment) << "# caf\xe9\n" << job;
  for (const auto& [path, where] :
       {std::pair{label, std::string("byte 0xE9 at line 6, column 21")},
        std::pair{comment, std::string("byte 0xE9 at line 1, column 6 (byte offset 5)")}}) {
    SCOPED_TRACE(path);
    for (const char* command : {"plan", "explain"}) {
      const CliRun run = RunPacer({command, path, "--now", kNow});
      EXPECT_EQ(run.exit_code, kExitInvalidInput) << run.out << run.err;
      EXPECT_NE(run.err.find(path + ": the file is not valid UTF-8: " + where), std::string::npos)
          << run.err;
      EXPECT_NE(run.err.find("save it as UTF-8"), std::string::npos) << run.err;
      EXPECT_TRUE(run.out.empty()) << run.out;
    }
  }
}

// A NUL was taken in a comment and misread elsewhere ("unknown escape
// character: g" a line later); an escape sequence in a name reached the
// terminal. Control characters are refused with where they are.
TEST(InvalidInputTest, AControlCharacterExitsWithTwoNamingWhereItIs) {
  testing::TempDir dir;
  const std::string job = testing::ReadFile(CliTestData("llama-7b.yaml"));
  for (const auto& [bytes, name] : {std::pair{std::string(1, '\0'), std::string("0x00")},
                                    std::pair{std::string("\x1b[31m"), std::string("0x1B")},
                                    std::pair{std::string("\x7f"), std::string("0x7F")}}) {
    const std::string path = dir.File("control-" + name + ".yaml");
    std::ofstream(path) << "# a comment " << bytes << "\n" << job;
    const CliRun run = RunPacer({"plan", path, "--now", kNow});
    EXPECT_EQ(run.exit_code, kExitInvalidInput) << run.out << run.err;
    EXPECT_NE(run.err.find(path + ": the file holds the control character " + name +
                           " at line 1, column 13 (byte offset 12)"),
              std::string::npos)
        << run.err;
    EXPECT_TRUE(run.out.empty()) << run.out;
  }
}

// UTF-8 as RFC 3629 has it: what nlohmann::json refuses to write (overlong
// forms, surrogates, code points past U+10FFFF, cut-off sequences) is
// refused before it gets that far.
TEST(InvalidInputTest, FirstInvalidUtf8ByteFollowsRfc3629) {
  const auto first_invalid = [](std::string_view text) {
    return FirstInvalidUtf8Byte(text).value_or(std::string_view::npos);
  };
  constexpr std::size_t kNone = std::string_view::npos;
  EXPECT_EQ(first_invalid(""), kNone);
  EXPECT_EQ(first_invalid("plain \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf"), kNone);
  EXPECT_EQ(first_invalid("\xef\xbb\xbf"
                          "a: 1"),
            kNone);                                   // a BOM is UTF-8
  EXPECT_EQ(first_invalid("caf\xe9"), 3u);            // Latin-1
  EXPECT_EQ(first_invalid("ab\x80"), 2u);             // a lone continuation byte
  EXPECT_EQ(first_invalid("a\xc0\xaf"), 1u);          // overlong '/'
  EXPECT_EQ(first_invalid("a\xe0\x80\xaf"), 1u);      // overlong, 3 bytes
  EXPECT_EQ(first_invalid("a\xed\xa0\x80"), 1u);      // a surrogate
  EXPECT_EQ(first_invalid("a\xf4\x90\x80\x80"), 1u);  // past U+10FFFF
  EXPECT_EQ(first_invalid("a\xf5\x80\x80\x80"), 1u);  // no such lead byte
  EXPECT_EQ(first_invalid("a\xe2\x82"), 1u);          // cut off at the end
  EXPECT_EQ(first_invalid("a\xe2\x82"
                          "z"),
            1u);  // cut off before a character
}

// What `pacer run` refuses beyond the planner's fields, plan refuses too:
// aliases under metadata.labels (never read by the planner's parser) that
// expand to 10^4 values from a few hundred bytes were planned, exit 0.
TEST(InvalidInputTest, AliasesExpandingPastTheFileUnderLabelsExitWithTwo) {
  testing::TempDir dir;
  const std::string job = testing::ReadFile(CliTestData("llama-7b.yaml"));
  const std::size_t metadata = job.find("\nmetadata:\n");
  ASSERT_NE(metadata, std::string::npos);
  const std::string path = dir.File("alias-bomb.yaml");
  std::ofstream(path) << job.substr(0, metadata)
                      << "\nmetadata:\n  labels:\n"
                         "    a: &a [x, x, x, x, x, x, x, x, x, x]\n"
                         "    b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                         "    c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
                         "    d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]"
                      << job.substr(metadata + std::string("\nmetadata:").size());
  for (const char* command : {"plan", "explain"}) {
    const CliRun run = RunPacer({command, path, "--now", kNow});
    EXPECT_EQ(run.exit_code, kExitInvalidInput) << run.out << run.err;
    EXPECT_NE(run.err.find(path + ": the document expands to more values than it has bytes"),
              std::string::npos)
        << run.err;
    EXPECT_TRUE(run.out.empty()) << run.out;
  }
  const CliRun sweep = RunPacer({"sweep", path, "--gpus", "8..64", "--now", kNow});
  EXPECT_EQ(sweep.exit_code, kExitInvalidInput) << sweep.out << sweep.err;
}

// `--now "$UNSET"` planned at the system clock without a word.
TEST(InvalidInputTest, AnEmptyNowExitsWithTwo) {
  for (const char* command : {"plan", "explain"}) {
    const CliRun run = RunPacer({command, CliTestData("llama-7b.yaml"), "--now", ""});
    EXPECT_EQ(run.exit_code, kExitInvalidInput) << run.out << run.err;
    EXPECT_NE(run.err.find("--now is empty; give an RFC 3339 time such as 2026-01-01T00:00:00Z, "
                           "or leave the flag out"),
              std::string::npos)
        << run.err;
    EXPECT_TRUE(run.out.empty()) << run.out;
  }
  const CliRun sweep =
      RunPacer({"sweep", CliTestData("llama-7b.yaml"), "--gpus", "8..64", "--now", ""});
  EXPECT_EQ(sweep.exit_code, kExitInvalidInput) << sweep.out << sweep.err;
  EXPECT_NE(sweep.err.find("--now is empty"), std::string::npos) << sweep.err;
}

// `--cluster "$UNSET"` planned against the built-in example inventory and
// exited 0; `--svg ""` wrote nothing. A path flag given empty is refused.
TEST(InvalidInputTest, AnEmptyPathFlagExitsWithTwo) {
  const std::string job = CliTestData("llama-7b.yaml");
  const std::string trace = testing::SourcePath("tests/testdata/elasticflow/cluster10.csv");
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"plan", job, "--cluster", "", "--now", kNow},
           {"explain", job, "--calibration", "", "--now", kNow},
           {"sweep", job, "--gpus", "8..64", "--now", kNow, "--svg", ""},
           {"simulate", trace, "--gpus", "32", "--throughput", ""},
           {"simulate", trace, "--gpus", "32", "--svg", ""}}) {
    const CliRun run = RunPacer(args);
    std::string flag;
    for (std::size_t i = 0; i + 1 < args.size(); ++i) {
      if (args[i + 1].empty()) flag = args[i];
    }
    EXPECT_EQ(run.exit_code, kExitInvalidInput) << flag << ": " << run.out << run.err;
    EXPECT_NE(run.err.find(flag), std::string::npos) << run.err;
    EXPECT_NE(run.err.find("is empty"), std::string::npos) << run.err;
    EXPECT_TRUE(run.out.empty()) << flag << ": " << run.out;
  }
}

// `--svg` naming an input (by any name) replaced it with the chart: the
// TrainJob was lost and the next plan of it failed as malformed YAML.
TEST(InvalidInputTest, AnSvgPathThatIsAnInputIsRefusedAndTheInputKept) {
  testing::TempDir dir;
  const std::string job = dir.File("job.yaml");
  std::filesystem::copy_file(CliTestData("llama-7b.yaml"), job);
  const std::string original = testing::ReadFile(job);
  const std::string trace = dir.File("trace.csv");
  std::filesystem::copy_file(testing::SourcePath("tests/testdata/elasticflow/cluster10.csv"),
                             trace);
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"sweep", job, "--gpus", "8..64", "--now", kNow, "--svg", dir.File("./job.yaml")},
           {"simulate", trace, "--gpus", "32", "--svg", trace}}) {
    const CliRun run = RunPacer(args);
    EXPECT_EQ(run.exit_code, kExitInvalidInput) << args[0] << ": " << run.out << run.err;
    EXPECT_NE(run.err.find("is the input file"), std::string::npos) << run.err;
  }
  EXPECT_EQ(testing::ReadFile(job), original);
  EXPECT_EQ(testing::ReadFile(trace).rfind("<svg", 0), std::string::npos)
      << "the trace was replaced";
}

// Three messages that said less than they should: a count past int's range
// named 2147483647 as the limit (it is 1,000,000); `--now garbage` said
// "expected RFC 3339" twice; a non-string key at the top level had an empty
// path (": field names must be strings").
TEST(InvalidInputTest, MessagesNameTheRealLimitOnceAndWhere) {
  const CliRun huge =
      RunPacer({"sweep", CliTestData("llama-7b.yaml"), "--gpus", "2147483648", "--now", kNow});
  EXPECT_EQ(huge.exit_code, kExitInvalidInput);
  EXPECT_NE(huge.err.find("GPU counts go up to 1000000"), std::string::npos) << huge.err;

  // Near year 9999 every deadline was written as 9999-12-31T23:59:59Z.
  const CliRun far =
      RunPacer({"plan", CliTestData("llama-7b.yaml"), "--now", "9999-12-30T00:00:00Z"});
  EXPECT_EQ(far.exit_code, kExitInvalidInput);
  EXPECT_NE(far.err.find("--now: must be at most 9900-01-"), std::string::npos) << far.err;

  const CliRun garbage = RunPacer({"plan", CliTestData("llama-7b.yaml"), "--now", "garbage"});
  EXPECT_EQ(garbage.exit_code, kExitInvalidInput);
  const std::size_t first = garbage.err.find("RFC 3339");
  ASSERT_NE(first, std::string::npos) << garbage.err;
  EXPECT_EQ(garbage.err.find("RFC 3339", first + 1), std::string::npos) << garbage.err;

  testing::TempDir dir;
  const std::string path = dir.File("key.yaml");
  std::ofstream(path) << "apiVersion: pacer.dev/v1alpha1\nkind: TrainJob\n? [a, b]\n: c\n";
  const CliRun key = RunPacer({"plan", path, "--now", kNow});
  EXPECT_EQ(key.exit_code, kExitInvalidInput);
  EXPECT_NE(key.err.find(path + ": the document: field names must be strings, got a list"),
            std::string::npos)
      << key.err;
}

// A misspelt subcommand and an option before any subcommand both said "A
// subcommand is required": the message names the word and the choices.
TEST(InvalidInputTest, AnUnknownSubcommandOrOptionIsNamedWithTheSubcommands) {
  CliRun run = RunPacer({"plna", CliTestData("llama-7b.yaml")});
  EXPECT_EQ(run.exit_code, kExitInvalidInput);
  EXPECT_NE(run.err.find("error: unknown subcommand \"plna\" (did you mean plan?); give one of: "
                         "plan, explain, sweep, simulate, version"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(run.err.find("A subcommand is required"), std::string::npos) << run.err;

  run = RunPacer({"frobnicate"});
  EXPECT_EQ(run.exit_code, kExitInvalidInput);
  EXPECT_NE(run.err.find("error: unknown subcommand \"frobnicate\"; give one of: plan,"),
            std::string::npos)
      << run.err;

  run = RunPacer({"--bogus"});
  EXPECT_EQ(run.exit_code, kExitInvalidInput);
  EXPECT_NE(run.err.find("error: unknown option --bogus before a subcommand"), std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("plan, explain, sweep"), std::string::npos) << run.err;

  // Before a subcommand that parses, the option is still what is wrong (it
  // said "job is required").
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--bogus", "plan"},
        std::vector<std::string>{"--bogus=1", "plan", CliTestData("llama-7b.yaml")},
        std::vector<std::string>{"-o", "json", "plan", CliTestData("llama-7b.yaml")}}) {
    run = RunPacer(args);
    EXPECT_EQ(run.exit_code, kExitInvalidInput) << args[0];
    EXPECT_NE(run.err.find("error: unknown option " + args[0] +
                           " before a subcommand; give one of the subcommands first"),
              std::string::npos)
        << run.err;
    EXPECT_EQ(run.err.find("is required"), std::string::npos) << run.err;
  }

  run = RunPacer({});
  EXPECT_EQ(run.exit_code, kExitInvalidInput);
  EXPECT_NE(run.err.find("error: no subcommand given; give one of: plan,"), std::string::npos)
      << run.err;

  // After a subcommand, CLI11 names what is wrong with its arguments.
  run = RunPacer({"plan", CliTestData("llama-7b.yaml"), "--bogus"});
  EXPECT_EQ(run.exit_code, kExitInvalidInput);
  EXPECT_NE(run.err.find("--bogus"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("before a subcommand"), std::string::npos) << run.err;
}

TEST(GpuCountsTest, RangeDoubles) {
  StatusOr<std::vector<int>> counts = ParseGpuCounts("8..1024");
  ASSERT_TRUE(counts.ok()) << counts.status().ToString();
  EXPECT_EQ(*counts, (std::vector<int>{8, 16, 32, 64, 128, 256, 512, 1024}));
  counts = ParseGpuCounts("8..1000");
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->back(), 512);
  counts = ParseGpuCounts("1..1");
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(*counts, std::vector<int>{1});
}

TEST(GpuCountsTest, RangeWithStepIsLinear) {
  StatusOr<std::vector<int>> counts = ParseGpuCounts("8..40:8");
  ASSERT_TRUE(counts.ok()) << counts.status().ToString();
  EXPECT_EQ(*counts, (std::vector<int>{8, 16, 24, 32, 40}));
}

TEST(GpuCountsTest, ListIsSortedAndDeduplicated) {
  StatusOr<std::vector<int>> counts = ParseGpuCounts("64,8,24,8");
  ASSERT_TRUE(counts.ok()) << counts.status().ToString();
  EXPECT_EQ(*counts, (std::vector<int>{8, 24, 64}));
}

TEST(GpuCountsTest, RejectsMalformedCounts) {
  for (const char* text : {"", "0..8", "8..", "..8", "8..4", "8..64:0", "a,b", "8,,16", "-8",
                           "8..64:x", "1..100000:1", "99999999999"}) {
    SCOPED_TRACE(text);
    StatusOr<std::vector<int>> counts = ParseGpuCounts(text);
    EXPECT_FALSE(counts.ok());
    if (!counts.ok()) {
      EXPECT_EQ(counts.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(counts.status().message().find("--gpus"), std::string::npos);
    }
  }
}

// The doubling is computed in 64 bits (it overflowed near INT_MAX); such
// counts are then refused: past the largest layout the planner searches.
TEST(GpuCountsTest, DoublingNearIntMaxDoesNotOverflowAndIsRefused) {
  StatusOr<std::vector<int>> counts = ParseGpuCounts("1073741824..2147483647");
  ASSERT_FALSE(counts.ok());
  EXPECT_NE(counts.status().message().find("1073741824 is above the 1000000 GPUs"),
            std::string::npos)
      << counts.status().message();
}

// A count past the largest layout got a false reason ("layout-indivisible").
TEST(GpuCountsTest, CountsAboveTheLargestLayoutAreRefused) {
  StatusOr<std::vector<int>> counts = ParseGpuCounts("1000000");
  ASSERT_TRUE(counts.ok()) << counts.status().ToString();
  for (const char* text : {"1000000,2000000", "500000..2000000", "999999..1000001:2"}) {
    counts = ParseGpuCounts(text);
    ASSERT_FALSE(counts.ok()) << text;
    EXPECT_EQ(counts.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(counts.status().message().find("--gpus: "), std::string::npos);
    EXPECT_NE(counts.status().message().find("is above the 1000000 GPUs one layout may use"),
              std::string::npos)
        << counts.status().message();
  }
}

}  // namespace
}  // namespace pacer::cli
