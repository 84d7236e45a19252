// Runs every document in the broken-input corpora and the example manifests.
// Each corpus file's first line is "# expect: <substring>", a piece of the
// error message it must produce; the CLI tests run the same files through the
// `pacer` binary.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "pacer/planner/inventory.h"
#include "pacer/planner/job_parser.h"

namespace pacer::planner {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::vector<fs::path> YamlFiles(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".yaml") {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string ExpectedSubstring(const std::string& doc) {
  const std::string prefix = "# expect: ";
  if (doc.compare(0, prefix.size(), prefix) != 0) return "";
  const std::size_t end = doc.find('\n');
  std::string expected = doc.substr(prefix.size(), end - prefix.size());
  while (!expected.empty() && (expected.back() == '\r' || expected.back() == ' ')) {
    expected.pop_back();
  }
  return expected;
}

template <typename Parse>
void CheckCorpus(const std::string& folder, std::size_t min_files, Parse parse) {
  const fs::path dir = fs::path(PACER_SOURCE_DIR) / "tests" / "testdata" / folder;
  const std::vector<fs::path> files = YamlFiles(dir);
  EXPECT_GE(files.size(), min_files) << dir;
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.filename().string());
    const std::string doc = ReadFile(file);
    const std::string expected = ExpectedSubstring(doc);
    ASSERT_FALSE(expected.empty()) << "first line must be '# expect: <substring>'";
    const Status status = parse(doc);
    ASSERT_FALSE(status.ok()) << "parsed, but should fail with: " << expected;
    EXPECT_TRUE(status.code() == StatusCode::kInvalidArgument ||
                status.code() == StatusCode::kResourceExhausted)
        << status.ToString();
    EXPECT_NE(status.message().find(expected), std::string::npos)
        << "message: " << status.message() << "\nexpected to contain: " << expected;
  }
}

TEST(CorpusTest, InvalidJobsFailWithTheExpectedMessage) {
  CheckCorpus("invalid_jobs", 25,
              [](const std::string& doc) { return ParseTrainJob(doc).status(); });
}

TEST(CorpusTest, InvalidInventoriesFailWithTheExpectedMessage) {
  CheckCorpus("invalid_inventories", 10,
              [](const std::string& doc) { return ParseInventory(doc).status(); });
}

TEST(CorpusTest, ExampleManifestsParse) {
  const fs::path dir = fs::path(PACER_SOURCE_DIR) / "manifests" / "examples";
  const std::vector<fs::path> files = YamlFiles(dir);
  EXPECT_GE(files.size(), 4u);
  for (const fs::path& file : files) {
    StatusOr<JobSpec> job = ParseTrainJob(ReadFile(file));
    EXPECT_TRUE(job.ok()) << file.filename() << ": " << job.status().ToString();
  }
}

}  // namespace
}  // namespace pacer::planner
