#include "deploy_util.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>

#include "cli/yaml_json.h"

namespace pacer::deploy {
namespace fs = std::filesystem;

CommandResult RunCommand(const std::string& command) {
  char pattern[] = "/tmp/pacer-deploy-stderr-XXXXXX";
  const int fd = ::mkstemp(pattern);
  CommandResult result;
  if (fd < 0) return result;
  ::close(fd);
  FILE* pipe = ::popen((command + " 2>" + pattern).c_str(), "r");
  if (pipe != nullptr) {
    char buffer[8192];
    size_t n = 0;
    while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.out.append(buffer, n);
    const int status = ::pclose(pipe);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  result.err = ReadFile(pattern);
  ::unlink(pattern);
  return result;
}

std::string SourcePath(const std::string& relative) {
  return std::string(PACER_SOURCE_DIR) + "/" + relative;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::optional<std::string> Helm(std::string* why) {
  static std::once_flag once;
  static CommandResult installed;
  std::call_once(once, [] { installed = RunCommand(SourcePath("scripts/helm.sh")); });
  if (installed.exit_code != 0) {
    *why = "helm cannot be installed here (scripts/helm.sh: " + installed.err + ")";
    return std::nullopt;
  }
  std::string path = installed.out;
  while (!path.empty() && (path.back() == '\n' || path.back() == '\r')) path.pop_back();
  return path;
}

CommandResult HelmTemplate(const std::string& helm, const std::string& args) {
  return RunCommand(helm + " template pacer " + SourcePath("charts/pacer") + " --namespace pacer-system " +
             args);
}

std::vector<nlohmann::json> YamlDocuments(const std::string& yaml) {
  std::vector<std::string> documents(1);
  std::istringstream lines(yaml);
  std::string line;
  while (std::getline(lines, line)) {
    // helm and kustomize start every document with a line "---" of its own.
    if (line == "---" || line.rfind("--- ", 0) == 0) {
      documents.emplace_back();
      continue;
    }
    documents.back() += line + "\n";
  }
  std::vector<nlohmann::json> objects;
  for (const std::string& document : documents) {
    StatusOr<nlohmann::json> json = cli::YamlToJson(document);
    EXPECT_TRUE(json.ok()) << json.status().ToString() << "\n" << document;
    if (json.ok() && json->is_object() && !json->empty()) objects.push_back(std::move(*json));
  }
  return objects;
}

nlohmann::json FindObject(const std::vector<nlohmann::json>& objects, const std::string& kind,
                          const std::string& name) {
  for (const nlohmann::json& o : objects) {
    if (o.value("kind", "") != kind) continue;
    if (!name.empty() && o["metadata"].value("name", "") != name) continue;
    return o;
  }
  return nullptr;
}

KubectlEnv::KubectlEnv() {
  if (std::string(KUBECTL_BINARY).empty() || ::access(KUBECTL_BINARY, X_OK) != 0) return;
  char pattern[] = "/tmp/pacer-deploy-test-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) return;
  dir_ = pattern;
  auto started = testing::TestApiServer::Start();
  if (!started.ok()) {
    ADD_FAILURE() << started.status().ToString();
    return;
  }
  server_ = std::move(*started);
  if (Status written = server_->WriteKubeconfig((dir_ / "kubeconfig").string(), "default");
      !written.ok()) {
    ADD_FAILURE() << written.ToString();
    server_.reset();
  }
}

KubectlEnv::~KubectlEnv() {
  server_.reset();
  std::error_code ignored;
  if (!dir_.empty()) fs::remove_all(dir_, ignored);
}

CommandResult KubectlEnv::Kubectl(const std::string& args) const {
  return RunCommand(std::string(KUBECTL_BINARY) + " --kubeconfig " + (dir_ / "kubeconfig").string() +
             " --cache-dir " + (dir_ / "cache").string() + " --request-timeout 60s " + args);
}

}  // namespace pacer::deploy
