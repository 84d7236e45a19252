// `pacer inventory`: reads the cluster's Nodes and Pods from the API server
// (kube/kube_client.h, found as kubectl finds it: kube/kube_config.h
// ResolveKubeConfig) and writes the inventory document
// (core/inventory_document.h) that `pacer plan/explain/sweep --cluster FILE`
// read: the same node-to-pool mapping and free-GPU count the controller
// plans with (core/node_inventory.h).
//
// Errors say what to fix: an API server that cannot be reached, that rejects
// the credentials (401) or that forbids listing nodes or pods (403) each get
// their own message. Exit codes (docs/cli.md): 0 written; 1 internal error;
// 2 invalid arguments, kubeconfig or unwritable --output-file; 3 the API
// server cannot be reached or refused the request; 4 the cluster has no
// usable GPU node.
//
// Thread-safety: RunInventory keeps no global state; it reads the
// environment and files only through its arguments.
#ifndef PACER_CONTROLLER_KUBECLI_INVENTORY_COMMAND_H_
#define PACER_CONTROLLER_KUBECLI_INVENTORY_COMMAND_H_

#include <chrono>
#include <ostream>
#include <string>

#include "cli/commands.h"
#include "kube/kube_config.h"
#include "pacer/status.h"

namespace pacer::controller {

struct InventoryOptions {
  std::string kubeconfig;   // "" = $KUBECONFIG, ~/.kube/config, in-cluster
  std::string context;      // "" = the kubeconfig's current-context
  std::string output = "yaml";  // yaml or json
  std::string output_file;  // "" = stdout
  std::chrono::milliseconds request_timeout{15000};
  // Every request must have its whole answer by this long after the start:
  // request_timeout ends a silent server, this one that sends its answer a
  // byte at a time (it kept `pacer inventory` waiting without end).
  std::chrono::milliseconds total_timeout{120000};
};

// Exit codes of `pacer inventory` beyond cli::ExitCode's 0-2.
inline constexpr int kExitClusterUnreachable = 3;
inline constexpr int kExitNoGpuNodes = 4;

int RunInventory(const InventoryOptions& options, std::ostream& out, std::ostream& err,
                 const GetEnvFn& getenv, const ReadFileFn& read_file);

// An error of the API server (KubeClient's Status) as a message that says
// what to fix; `what` is the request ("list nodes"), `config` where it went.
std::string ExplainApiError(const Status& status, const std::string& what,
                            const KubeConfig& config);

// `pacer inventory` for the CLI (cli::RunCli's extension point).
class InventoryCommand final : public cli::CommandExtension {
 public:
  const char* name() const override { return "inventory"; }
  const char* description() const override;
  void AddOptions(CLI::App* command) override;
  int Run(std::ostream& out, std::ostream& err) override;

 private:
  InventoryOptions options_;
  int timeout_seconds_ = 120;  // options_.total_timeout
};

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_KUBECLI_INVENTORY_COMMAND_H_
