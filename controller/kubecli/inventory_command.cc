#include "kubecli/inventory_command.h"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>

#include "cli/inputs.h"
#include "cli/non_empty.h"
#include "cli/yaml_output.h"
#include "core/inventory_document.h"
#include "core/node_inventory.h"
#include "kube/kube_client.h"
#include "kube/resources.h"

namespace pacer::controller {
namespace {

std::string Where(const KubeConfig& config) {
  return config.server + " (context " + config.context + ")";
}

int Fail(int code, const std::string& message, std::ostream& err) {
  err << "error: " << message << '\n';
  return code;
}

}  // namespace

std::string ExplainApiError(const Status& status, const std::string& what,
                            const KubeConfig& config) {
  switch (status.code()) {
    case StatusCode::kUnauthenticated:
      return "the API server at " + Where(config) +
             " rejected the credentials (401 Unauthorized) when asked to " + what +
             ": the token or client certificate is wrong or expired; log in to the cluster "
             "again (refresh the kubeconfig, e.g. your provider's get-credentials command) or "
             "choose another with --kubeconfig/--context. Server said: " +
             status.message();
    case StatusCode::kPermissionDenied:
      return "the API server at " + Where(config) + " does not allow this user to " + what +
             " (403 Forbidden): `pacer inventory` needs list on nodes and pods in all "
             "namespaces (a ClusterRole with apiGroups [\"\"], resources [nodes, pods], verbs "
             "[list], bound to the user); ask a cluster admin, or check with `kubectl auth can-i "
             "list nodes` and `kubectl auth can-i list pods -A`. Server said: " +
             status.message();
    case StatusCode::kDeadlineExceeded:
      return "the API server at " + Where(config) + " did not finish answering when asked to " +
             what +
             " in time: it answers, but too slowly (an overloaded API server, a slow proxy or "
             "link); try again later. " +
             status.message();
    case StatusCode::kUnavailable:
      // An answer with 429 or 5xx (api_errors.cc writes "<path>: <code>
      // <reason>") reached the server: not a network problem.
      if (std::regex_search(status.message(), std::regex(R"(: (429|5[0-9][0-9]) )"))) {
        return "the API server at " + Where(config) + " answered with an error when asked to " +
               what +
               ": it is overloaded or unwell; try again later, and if it persists check its "
               "health (kubectl get --raw /readyz). Server said: " +
               status.message();
      }
      return "cannot reach the API server at " + Where(config) + " to " + what +
             ": check that the cluster is up and that the kubeconfig's server address is "
             "reachable from here (VPN, proxy, firewall). " +
             status.message();
    default:
      return "the API server at " + Where(config) + " failed to " + what + ": " +
             status.message();
  }
}

int RunInventory(const InventoryOptions& options, std::ostream& out, std::ostream& err,
                 const GetEnvFn& getenv, const ReadFileFn& read_file) {
  if (options.output != "yaml" && options.output != "json") {
    return Fail(cli::kExitInvalidInput,
                "-o: unknown output format \"" + options.output + "\" (expected yaml or json)",
                err);
  }
  StatusOr<KubeConfig> config =
      ResolveKubeConfig(options.kubeconfig, options.context, getenv, read_file);
  if (!config.ok()) return Fail(cli::kExitInvalidInput, config.status().message(), err);
  KubeClientOptions client_options;
  client_options.user_agent = "pacer-inventory";
  client_options.request_timeout = options.request_timeout;
  StatusOr<std::unique_ptr<KubeClient>> client = KubeClient::Create(*config, client_options);
  if (!client.ok()) {
    return Fail(cli::kExitInvalidInput,
                "the kubeconfig's cluster cannot be used: " + client.status().message(), err);
  }
  (*client)->SetRequestDeadline(std::chrono::steady_clock::now() + options.total_timeout);

  // Cluster-wide lists, as the controller's informers read them.
  StatusOr<ListPage> nodes = (*client)->ListAll(kNodes, "", ListOptions{});
  if (!nodes.ok()) {
    return Fail(kExitClusterUnreachable, ExplainApiError(nodes.status(), "list nodes", *config),
                err);
  }
  StatusOr<ListPage> pods = (*client)->ListAll(kPods, "", ListOptions{});
  if (!pods.ok()) {
    return Fail(kExitClusterUnreachable,
                ExplainApiError(pods.status(), "list pods in all namespaces", *config), err);
  }
  StatusOr<ClusterInventory> cluster = BuildInventory({{"items", nodes->items}},
                                                      {{"items", pods->items}});
  if (!cluster.ok()) return Fail(cli::kExitInternalError, cluster.status().message(), err);
  for (const std::string& warning : cluster->warnings) err << "warning: " << warning << '\n';
  if (cluster->inventory.node_pools.empty()) {
    return Fail(kExitNoGpuNodes,
                "no usable GPU node among the cluster's " + std::to_string(nodes->items.size()) +
                    " nodes at " + Where(*config) +
                    ": a GPU node needs the nvidia.com/gpu.product label (GPU feature "
                    "discovery), allocatable nvidia.com/gpu (the device plugin), and must be "
                    "Ready and not cordoned",
                err);
  }

  const nlohmann::json document = InventoryDocument(*cluster);
  std::string text;
  if (options.output == "json") {
    text = document.dump(2) + "\n";
  } else {
    text = "# Inventory of " + config->server +
           " read by `pacer inventory`: GPU nodes grouped into pools, free GPUs as of now.\n" +
           "# Use it with `pacer plan JOB --cluster FILE` (docs/inventory.md).\n" +
           cli::JsonToYaml(document);
  }
  if (options.output_file.empty()) {
    out << text;
    return cli::kExitOk;
  }
  if (Status written = cli::WriteOutputFile(options.output_file, text, "--output-file");
      !written.ok()) {
    return Fail(cli::kExitInvalidInput, written.message(), err);
  }
  int gpus = 0, free_gpus = 0;
  for (const planner::NodePool& p : cluster->inventory.node_pools) {
    gpus += p.nodes * p.gpus_per_node;
    free_gpus += p.free_gpus;
  }
  out << "wrote " << options.output_file << ": " << cluster->inventory.node_pools.size()
      << " pools, " << gpus << " GPUs (" << free_gpus << " free)\n";
  return cli::kExitOk;
}

const char* InventoryCommand::description() const {
  return "Read the cluster's GPU nodes from the Kubernetes API server and write the inventory "
         "document that plan, explain and sweep take with --cluster";
}

void InventoryCommand::AddOptions(CLI::App* command) {
  command
      ->add_option("--kubeconfig", options_.kubeconfig,
                   "Kubeconfig file (default, as kubectl: $KUBECONFIG, ~/.kube/config, then the "
                   "in-cluster service account)")
      ->type_name("FILE");
  command
      ->add_option("--context", options_.context,
                   "Kubeconfig context (default: its current-context)")
      ->type_name("NAME");
  command->add_option("-o,--output", options_.output, "Output format: yaml or json")
      ->type_name("FORMAT")
      ->capture_default_str();
  command
      ->add_option("--output-file", options_.output_file,
                   "Write the document to FILE instead of stdout")
      ->type_name("FILE")
      ->check(cli::NonEmpty());
  command
      ->add_option("--timeout-seconds", timeout_seconds_,
                   "Give up when the API server has not finished answering after this long")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  command->footer(
      "Exit codes:\n"
      "  0  the inventory was written\n"
      "  1  internal error\n"
      "  2  invalid arguments or kubeconfig, or --output-file cannot be written\n"
      "  3  the API server cannot be reached or refused the request (401, 403)\n"
      "  4  the cluster has no usable GPU node");
}

int InventoryCommand::Run(std::ostream& out, std::ostream& err) {
  options_.total_timeout = std::chrono::seconds(timeout_seconds_);
  return RunInventory(options_, out, err, std::getenv, ReadWholeFile);
}

}  // namespace pacer::controller
