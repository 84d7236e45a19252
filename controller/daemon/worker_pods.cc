#include "daemon/worker_pods.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "cli/plan_output.h"
#include "core/node_inventory.h"
#include "pacer/planner/units.h"
#include "reconcile/worker_env.h"

namespace pacer::controller {
namespace {

constexpr size_t kMaxDnsLabel = 63;

// `label`'s first characters and a hash of `name` (6 hex digits), at most
// max_length characters together.
std::string WithHashOf(const std::string& name, const std::string& label, size_t max_length) {
  char hash[16];
  std::snprintf(hash, sizeof(hash), "%06zx", std::hash<std::string>{}(name)&0xffffff);
  std::string prefix = label.substr(0, max_length - 7);
  while (!prefix.empty() && prefix.back() == '-') prefix.pop_back();
  return prefix + "-" + hash;
}

// A TrainJob's name (a DNS-1123 subdomain: dots allowed, a digit first
// allowed) as a DNS label of at most max_length characters: the name itself
// when it is one (the names of existing jobs' pods do not change), else
// with '.' made '-' and, for a DNS-1035 label (`letter_first`: a Service's
// name), a digit first preceded by 'j'; shortened, or changed, it ends in a
// hash of the whole name, so "llama-3.1" and "llama-3-1" get different
// labels.
std::string DnsLabelOf(const std::string& name, size_t max_length, bool letter_first) {
  std::string label = name;
  std::replace(label.begin(), label.end(), '.', '-');
  if (letter_first && !label.empty() && !(label[0] >= 'a' && label[0] <= 'z')) label = "j" + label;
  if (label == name && name.size() <= max_length) return name;
  return WithHashOf(name, label, max_length);
}

nlohmann::json OwnerReference(const LaunchSpec& launch) {
  return {{"apiVersion", "pacer.dev/v1alpha1"},
          {"kind", "TrainJob"},
          {"name", launch.job.name},
          {"uid", launch.job.uid},
          {"controller", true},
          {"blockOwnerDeletion", true}};
}

nlohmann::json Labels(const LaunchSpec& launch) {
  return {{kJobLabel, launch.job.name}, {kManagedByLabel, "pacer"}};
}

// Local rank r serves /metrics on metrics_port + r: every port is declared,
// named "metrics" (rank 0) and "metrics-<r>", so a PodMonitor keeping ports
// that match metrics(-[0-9]+)? scrapes every rank, not only the first.
nlohmann::json ContainerPorts(int local_ranks, const PodTemplateOptions& options) {
  nlohmann::json ports = nlohmann::json::array(
      {{{"name", "rendezvous"}, {"containerPort", options.rendezvous_port}}});
  for (int r = 0; r < std::max(1, local_ranks); ++r) {
    ports.push_back({{"name", r == 0 ? std::string("metrics") : "metrics-" + std::to_string(r)},
                     {"containerPort", options.metrics_port + r}});
  }
  return ports;
}

}  // namespace

std::string WorkerServiceName(const std::string& job_name) {
  return DnsLabelOf(job_name, kMaxDnsLabel - 8, /*letter_first=*/true) + "-workers";
}

std::string WorkerPodName(const std::string& job_name, int attempt, int node_rank) {
  const std::string suffix = "-a" + std::to_string(attempt) + "-n" + std::to_string(node_rank);
  return DnsLabelOf(job_name, kMaxDnsLabel - suffix.size(), /*letter_first=*/false) + suffix;
}

nlohmann::json WorkerServiceObject(const LaunchSpec& launch, const PodTemplateOptions& options) {
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata",
           {{"name", WorkerServiceName(launch.job.name)},
            {"namespace", launch.job.namespace_name},
            {"labels", Labels(launch)},
            {"ownerReferences", nlohmann::json::array({OwnerReference(launch)})}}},
          {"spec",
           {{"clusterIP", "None"},
            // Rendezvous must work before the pods are Ready.
            {"publishNotReadyAddresses", true},
            {"selector", {{kJobLabel, launch.job.name}}},
            {"ports",
             nlohmann::json::array({{{"name", "rendezvous"}, {"port", options.rendezvous_port}},
                                    {{"name", "metrics"}, {"port", options.metrics_port}}})}}}};
}

nlohmann::json WorkerPodObject(const LaunchSpec& launch, int node_rank,
                               const PodTemplateOptions& options) {
  const planner::Layout& l = launch.plan.layout;
  const std::string name = WorkerPodName(launch.job.name, launch.attempt, node_rank);
  const std::string service = WorkerServiceName(launch.job.name);
  WorkerEnvOptions env_options;
  env_options.master_addr = WorkerPodName(launch.job.name, launch.attempt, 0) + "." + service +
                            "." + launch.job.namespace_name + ".svc";
  env_options.master_port = options.rendezvous_port;
  env_options.checkpoint_dir = options.checkpoint_mount;
  env_options.metrics_port = options.metrics_port;
  env_options.stop_grace_seconds = WorkerStopGraceSeconds(options.termination_grace_seconds);
  // Every cluster plan is a GPU plan. With "auto", a worker whose image lacks
  // the GPU backend or whose node shows no driver fell back to the CPU
  // without a word, trained the full model there and reported CPU step times
  // (or ran out of memory) that the controller re-planned from; "gpu" makes
  // it exit 2 and say which is missing.
  env_options.backend = "gpu";
  const std::map<std::string, std::string> contract =
      WorkerEnvironment(launch, node_rank, env_options);
  nlohmann::json env = nlohmann::json::array();
  for (const auto& [k, v] : contract) env.push_back({{"name", k}, {"value", v}});
  // The user's variables, except where they would break the contract.
  for (const planner::EnvVar& var : launch.spec.worker.env) {
    if (contract.count(var.name) == 0) env.push_back({{"name", var.name}, {"value", var.value}});
  }

  nlohmann::json labels = Labels(launch);
  labels[kAttemptLabel] = std::to_string(launch.attempt);
  labels[kNodeRankLabel] = std::to_string(node_rank);

  nlohmann::json container = {
      {"name", "worker"},
      {"image", launch.spec.worker.image.empty() ? options.default_worker_image
                                                 : launch.spec.worker.image},
      {"env", env},
      {"ports", ContainerPorts(l.gpus_per_node, options)},
      // A crash's last log lines become the termination message, which the
      // controller puts in the WorkerFailed event.
      {"terminationMessagePolicy", "FallbackToLogsOnError"},
      {"resources",
       {{"limits", {{kGpuResource, std::to_string(l.gpus_per_node)}}},
        {"requests", {{kGpuResource, std::to_string(l.gpus_per_node)}}}}},
      {"volumeMounts",
       nlohmann::json::array({{{"name", "checkpoints"}, {"mountPath", options.checkpoint_mount}},
                              {{"name", "dshm"}, {"mountPath", "/dev/shm"}},
                              {{"name", "tmp"}, {"mountPath", "/tmp"}}})},
      {"securityContext",
       {{"allowPrivilegeEscalation", false},
        {"readOnlyRootFilesystem", true},
        {"capabilities", {{"drop", nlohmann::json::array({"ALL"})}}}}}};
  const int64_t memory_gib = options.memory_per_gpu_gib * l.gpus_per_node;
  if (options.cpu_per_gpu > 0) {
    // Millicores: a quantity Kubernetes prints back unchanged.
    container["resources"]["requests"]["cpu"] =
        std::to_string(std::llround(options.cpu_per_gpu * l.gpus_per_node * 1000)) + "m";
  }
  if (memory_gib > 0) {
    container["resources"]["requests"]["memory"] = std::to_string(memory_gib) + "Gi";
  }
  if (!launch.spec.worker.command.empty()) {
    container["command"] = launch.spec.worker.command;
  } else {
    container["command"] = nlohmann::json::array({"pacer-worker", "run"});
  }

  // Memory-backed: bounded by the memory the pod requests, when it does.
  nlohmann::json dshm = {{"medium", "Memory"}};
  if (memory_gib > 0) dshm["sizeLimit"] = std::to_string(memory_gib) + "Gi";

  nlohmann::json checkpoint_volume = {{"name", "checkpoints"}};
  if (!launch.spec.checkpoint.volume_claim_name.empty()) {
    checkpoint_volume["persistentVolumeClaim"] = {
        {"claimName", launch.spec.checkpoint.volume_claim_name}};
  } else {
    checkpoint_volume["emptyDir"] = nlohmann::json::object();
  }

  nlohmann::json products = nlohmann::json::array();
  for (const std::string& p : ProductsForCatalogName(l.gpu_type)) products.push_back(p);
  if (products.empty()) products.push_back(l.gpu_type);

  nlohmann::json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name},
        {"namespace", launch.job.namespace_name},
        {"labels", labels},
        {"annotations",
         {{kLayoutAnnotation, cli::PlanJson(launch.plan, launch.plan_unix_seconds).dump()},
          // No prometheus.io/scrape annotations: they name one port (local
          // rank 0 only), and beside the PodMonitor or the documented
          // pacer-workers job an annotation scrape job scraped that rank
          // twice (docs/metrics.md, "Scraping").
          {kNodesAnnotation, std::to_string(l.nodes)},
          {kSpecHashAnnotation, launch.spec_hash},
          {kTotalStepsAnnotation, std::to_string(launch.total_steps)},
          {kLaunchTimeAnnotation, planner::FormatRfc3339(launch.plan_unix_seconds)}}},
        {"ownerReferences", nlohmann::json::array({OwnerReference(launch)})}}},
      {"spec",
       {{"hostname", name},
        {"subdomain", service},
        {"restartPolicy", "Never"},
        // Workers never call the Kubernetes API: no token in the pod.
        {"automountServiceAccountToken", false},
        {"terminationGracePeriodSeconds", options.termination_grace_seconds},
        {"affinity",
         {{"nodeAffinity",
           {{"requiredDuringSchedulingIgnoredDuringExecution",
             {{"nodeSelectorTerms",
               nlohmann::json::array({{{"matchExpressions",
                                        nlohmann::json::array({{{"key", kGpuProductLabel},
                                                                {"operator", "In"},
                                                                {"values", products}}})}}})}}}}}}},
        {"tolerations",
         nlohmann::json::array(
             {{{"key", kGpuResource}, {"operator", "Exists"}, {"effect", "NoSchedule"}}})},
        {"securityContext",
         {{"runAsNonRoot", true},
          {"runAsUser", 65532},
          {"runAsGroup", 65532},
          {"fsGroup", 65532},
          // Only when the volume's root is not the group's already: every
          // relaunch re-chowned a whole checkpoint volume, inside the
          // relaunch's start-up budget.
          {"fsGroupChangePolicy", "OnRootMismatch"},
          {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
        {"containers", nlohmann::json::array({container})},
        {"volumes",
         nlohmann::json::array({checkpoint_volume,
                                {{"name", "dshm"}, {"emptyDir", dshm}},
                                // Scratch only (the root filesystem is read-only).
                                {{"name", "tmp"}, {"emptyDir", {{"sizeLimit", "10Gi"}}}}})}}}};
  if (!options.service_account.empty()) pod["spec"]["serviceAccountName"] = options.service_account;
  if (!launch.excluded_nodes.empty()) {
    // Nodes where this job's collectives kept failing (status.excludedNodes).
    // matchFields on metadata.name: the node's name, whatever its labels say.
    pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
       ["nodeSelectorTerms"][0]["matchFields"] = nlohmann::json::array(
           {{{"key", "metadata.name"}, {"operator", "NotIn"}, {"values", launch.excluded_nodes}}});
  }
  return pod;
}

}  // namespace pacer::controller
