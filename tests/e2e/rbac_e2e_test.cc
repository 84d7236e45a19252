// The controller's RBAC (manifests/rbac/) against what the real
// pacer-controller does: the CRD and the RBAC manifests are applied with
// kubectl, a job runs to completion and is deleted, the controller hands its
// Lease back, and then every request the test API server's audit log records
// from the controller must be allowed by the rules (evaluated here as the
// RBAC authorizer does), and every verb the rules grant must have been used
// or have a reason below. Twice: watching every namespace (both ClusterRoles
// bound cluster-wide), and watching one (--namespace, the job rules bound
// there only, as the chart's controller.watchNamespace binds them). With the CRD applied, the
// controller's status writes also go through the CRD's schema, which must keep every field.
#include <csignal>
#include <map>
#include <set>

#include "e2e_fixture.h"

namespace pacer::e2e {
namespace {

using nlohmann::json;
using std::chrono::seconds;

// Granted verbs a run need not exercise, and why they are granted anyway.
const std::map<std::string, std::string>& UnexercisedReasons() {
  static const auto* reasons = new std::map<std::string, std::string>{
      {"update pacer.dev/trainjobs/finalizers",
       "never requested: worker pods and their Service carry an owner reference with "
       "blockOwnerDeletion: true, and the OwnerReferencesPermissionEnforcement admission plugin "
       "requires update on the owner's finalizers to set it"},
      {"get /services",
       "only when a launch finds the workers' Service name taken: a relaunch after a failure "
       "(this job's Service), or another object in the way"},
      {"patch /events",
       "only when the same event repeats within 10 minutes (client-go's aggregation); a run "
       "whose events are all different never patches"},
  };
  return *reasons;
}

struct Rule {
  std::set<std::string> groups, resources, verbs, names;
};

std::set<std::string> Strings(const json& list) {
  std::set<std::string> out;
  if (list.is_array()) {
    for (const json& s : list) out.insert(s.get<std::string>());
  }
  return out;
}

std::vector<Rule> Rules(const json& role) {
  std::vector<Rule> rules;
  for (const json& r : role["rules"]) {
    rules.push_back({Strings(r["apiGroups"]), Strings(r["resources"]), Strings(r["verbs"]),
                     Strings(r.value("resourceNames", json::array()))});
  }
  return rules;
}

// Every "verb group/resource" the rules grant.
std::set<std::string> Grants(const std::vector<Rule>& rules) {
  std::set<std::string> grants;
  for (const Rule& rule : rules) {
    for (const std::string& group : rule.groups) {
      for (const std::string& resource : rule.resources) {
        for (const std::string& verb : rule.verbs)
          grants.insert(verb + " " + group + "/" + resource);
      }
    }
  }
  return grants;
}

bool Has(const std::set<std::string>& set, const std::string& value) {
  return set.count(value) > 0 || set.count("*") > 0;
}

// The RBAC authorizer's rule match (k8s.io/kubernetes plugin/pkg/auth/
// authorizer/rbac, RuleAllows): group, resource[/subresource], verb, and
// resourceNames when the rule lists any (a create has no name to match).
bool Allows(const Rule& rule, const testing::AuditRecord& r) {
  const std::string resource =
      r.subresource.empty() ? r.resource : r.resource + "/" + r.subresource;
  if (!Has(rule.groups, r.group) || !Has(rule.resources, resource) || !Has(rule.verbs, r.verb)) {
    return false;
  }
  return rule.names.empty() || (!r.name.empty() && rule.names.count(r.name) > 0);
}

std::string Describe(const testing::AuditRecord& r) {
  return r.verb + " " + r.group + "/" + r.resource + (r.subresource.empty() ? "" : "/") +
         r.subresource + " ns=" + r.namespace_ + " name=" + r.name + " (" + std::to_string(r.code) +
         ")";
}

// The parameter is the namespace the controller watches; "" is all.
class RbacE2eTest : public E2eTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(RbacE2eTest, EveryControllerRequestIsGrantedByTheManifestsRbacAndEveryGrantIsUsed) {
  const std::string watched = GetParam();
  std::string out;
  ASSERT_EQ(Kubectl({"apply", "-f", std::string(PACER_SOURCE_DIR) + "/manifests/crd/"}, &out), 0)
      << out;
  ASSERT_EQ(Kubectl({"apply", "-f", std::string(PACER_SOURCE_DIR) + "/manifests/rbac/"}, &out), 0)
      << out;
  auto cluster_role =
      server_->GetObject("/apis/rbac.authorization.k8s.io/v1/clusterroles/pacer-controller");
  auto job_role =
      server_->GetObject("/apis/rbac.authorization.k8s.io/v1/clusterroles/pacer-controller-jobs");
  auto lease_role = server_->GetObject(
      "/apis/rbac.authorization.k8s.io/v1/namespaces/pacer-system/roles/pacer-leader-election");
  ASSERT_TRUE(cluster_role.ok() && job_role.ok() && lease_role.ok());
  const std::vector<Rule> cluster_rules = Rules(*cluster_role);
  const std::vector<Rule> job_rules = Rules(*job_role);
  const std::vector<Rule> lease_rules = Rules(*lease_role);
  const std::string lease_namespace = (*lease_role)["metadata"]["namespace"];

  // The controller as the Deployment runs it: leader election in
  // pacer-system, all namespaces or the watched one.
  std::vector<std::string> flags = {"--leader-election-namespace", lease_namespace};
  if (!watched.empty()) flags.insert(flags.end(), {"--namespace", watched});
  ControllerProcess& controller = StartController("rbac", flags);
  Apply(TinyJobYaml("rbac", 600, "1h"));

  // While it runs, the status as the CRD's schema stored it keeps every
  // field the controller writes (a field the schema lacks would be pruned).
  ASSERT_TRUE(WaitFor(
      [&] {
        const json j = Job("research", "rbac");
        return Phase(j) == "Running" && j["status"].contains("plan");
      },
      seconds(120)))
      << Job("research", "rbac").dump(2);
  const json running = Job("research", "rbac")["status"];
  for (const char* key : {"phase", "observedGeneration", "conditions", "plan", "progress",
                          "replans", "restarts", "attempt", "launchTime", "deadline"}) {
    EXPECT_TRUE(running.contains(key)) << key << " pruned: " << running.dump(2);
  }
  for (const char* key : {"gpuType",
                          "pool",
                          "nodes",
                          "gpusPerNode",
                          "gpus",
                          "tensorParallel",
                          "pipelineParallel",
                          "dataParallel",
                          "virtualStages",
                          "sequenceParallel",
                          "zeroStage",
                          "microBatchSize",
                          "gradientAccumulationSteps",
                          "activationCheckpointing",
                          "predictedStepSeconds",
                          "predictedTotalSeconds",
                          "predictedMemoryGiB",
                          "predictedCompletionTime",
                          "gpuHours",
                          "mfu"}) {  // cost is written only when the inventory has a price
    EXPECT_TRUE(running["plan"].contains(key)) << "plan." << key << " pruned: " << running.dump(2);
  }
  for (const json& c : running["conditions"]) {
    for (const char* key : {"type", "status", "lastTransitionTime", "reason", "message"}) {
      EXPECT_TRUE(c.contains(key)) << key << " pruned: " << c.dump();
    }
  }

  ASSERT_TRUE(WaitFor([&] { return Phase(Job("research", "rbac")) == "Succeeded"; }, seconds(300)))
      << Job("research", "rbac").dump(2);
  // Deleting the job: the controller removes its workers, then its finalizer.
  ASSERT_EQ(Kubectl({"delete", "trainjob", "rbac", "-n", "research", "--timeout=60s"}, &out), 0)
      << out;
  ASSERT_TRUE(WaitFor([&] { return Pods("research").empty(); }, seconds(60)));
  // SIGTERM: the leader hands its Lease back (an update).
  KillController(controller, SIGTERM);

  std::set<std::string> used;  // "verb group/resource[/subresource]"
  int requests = 0;
  for (const testing::AuditRecord& r : server_->AuditLog()) {
    if (r.user_agent.rfind("pacer-controller", 0) != 0) continue;
    ++requests;
    const std::string resource =
        r.subresource.empty() ? r.resource : r.resource + "/" + r.subresource;
    used.insert(r.verb + " " + r.group + "/" + resource);
    bool allowed = false;
    for (const Rule& rule : cluster_rules) allowed = allowed || Allows(rule, r);
    // A RoleBinding grants only requests within its namespace; a
    // cluster-wide list or watch (no namespace) is not one of them.
    if (watched.empty() || r.namespace_ == watched) {
      for (const Rule& rule : job_rules) allowed = allowed || Allows(rule, r);
    }
    if (r.namespace_ == lease_namespace) {
      for (const Rule& rule : lease_rules) allowed = allowed || Allows(rule, r);
    }
    EXPECT_FALSE(r.resource.empty()) << "a non-resource request: " << Describe(r);
    EXPECT_TRUE(allowed) << "not granted by manifests/rbac"
                         << (watched.empty() ? "" : " bound in " + watched) << ": " << Describe(r);
  }
  EXPECT_GT(requests, 20) << "the controller's requests are in the audit log";

  // Every granted verb was used, or is listed with its reason; and every
  // reason is for a verb still granted.
  std::set<std::string> granted = Grants(cluster_rules);
  granted.merge(Grants(job_rules));
  granted.merge(Grants(lease_rules));
  for (const std::string& grant : granted) {
    EXPECT_TRUE(used.count(grant) > 0 || UnexercisedReasons().count(grant) > 0)
        << "granted but never used, and no reason given: " << grant;
  }
  for (const auto& [grant, reason] : UnexercisedReasons()) {
    EXPECT_TRUE(granted.count(grant) > 0) << "a reason for a verb no longer granted: " << grant;
  }
}

INSTANTIATE_TEST_SUITE_P(Namespaces, RbacE2eTest, ::testing::Values("", "research"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           return param.param.empty() ? std::string("AllNamespaces")
                                                      : "Only_" + param.param;
                         });

}  // namespace
}  // namespace pacer::e2e
