// Helpers for the deployment tests: run a command, find helm (installing it
// with scripts/helm.sh on first use), render the chart, split multi-document
// YAML and read it as JSON, and drive kubectl against a TestApiServer.
//
// Thread-safety: the tests call these from one thread; Helm() installs once
// per process.
#ifndef PACER_TESTS_DEPLOY_DEPLOY_UTIL_H_
#define PACER_TESTS_DEPLOY_DEPLOY_UTIL_H_

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "test_api_server.h"

namespace pacer::deploy {

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs `command` with /bin/sh; stdout and stderr apart.
CommandResult RunCommand(const std::string& command);

// The repository root (PACER_SOURCE_DIR) and a path inside it.
std::string SourcePath(const std::string& relative);
std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& text);

// The helm binary scripts/helm.sh installs; nullopt (with the reason in
// *why) when it cannot be installed here.
std::optional<std::string> Helm(std::string* why);

// `helm template pacer charts/pacer -n pacer-system <args>`: the release the
// kustomize manifests correspond to.
CommandResult HelmTemplate(const std::string& helm, const std::string& args = "");

// The documents of a multi-document YAML stream as JSON; empty documents are
// skipped. Fails the calling test on a document that does not parse.
std::vector<nlohmann::json> YamlDocuments(const std::string& yaml);
// The first object of `kind` (and `name`, when given), or null.
nlohmann::json FindObject(const std::vector<nlohmann::json>& objects, const std::string& kind,
                          const std::string& name = "");

// A TestApiServer and a kubeconfig for kubectl in a private directory.
class KubectlEnv {
 public:
  // Skips when kubectl was not found at configure time (check skipped()).
  KubectlEnv();
  ~KubectlEnv();
  bool skipped() const { return server_ == nullptr; }
  testing::TestApiServer& server() { return *server_; }
  const std::filesystem::path& dir() const { return dir_; }
  // kubectl with this server's kubeconfig; stdout in out, stderr in err.
  CommandResult Kubectl(const std::string& args) const;

 private:
  std::filesystem::path dir_;
  std::unique_ptr<testing::TestApiServer> server_;
};

}  // namespace pacer::deploy

#endif  // PACER_TESTS_DEPLOY_DEPLOY_UTIL_H_
