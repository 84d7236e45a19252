#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <thread>

#include "apiserver_test_fixture.h"

namespace pacer::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

std::string Name(const json& object) { return object["metadata"]["name"].get<std::string>(); }
TEST_F(ApiServerTest, RequiresTheBearerToken) {
  HttpsTestClient anonymous(server_->url(), server_->ca_pem(), "");
  auto r = anonymous.Get(kTrainJobs);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(r->Json()["kind"], "Status");
  EXPECT_EQ(r->Json()["reason"], "Unauthorized");
  HttpsTestClient wrong(server_->url(), server_->ca_pem(), server_->token() + "x");
  EXPECT_EQ(wrong.Get("/api/v1")->status, 401);
  EXPECT_EQ(Call("GET", "/api/v1").status, 200);
}

TEST_F(ApiServerTest, ClientWithAnotherCaFailsTheHandshake) {
  auto other = TestApiServer::Start();
  ASSERT_TRUE(other.ok());
  ASSERT_NE((*other)->ca_pem(), server_->ca_pem());
  HttpsTestClient mistrusting(server_->url(), (*other)->ca_pem(), server_->token());
  auto r = mistrusting.Get("/version");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("handshake"));
}

TEST_F(ApiServerTest, ServesDiscovery) {
  EXPECT_EQ(Call("GET", "/version").Json()["gitVersion"], "v1.32.0-pacer-test");
  json core = Call("GET", "/api/v1").Json();
  EXPECT_EQ(core["kind"], "APIResourceList");
  std::set<std::string> names;
  for (const auto& r : core["resources"]) names.insert(r["name"].get<std::string>());
  EXPECT_TRUE(names.count("pods") && names.count("pods/status") && names.count("events") &&
              names.count("nodes") && names.count("namespaces"));
  json groups = Call("GET", "/apis").Json();
  EXPECT_EQ(groups["kind"], "APIGroupList");
  EXPECT_THAT(groups.dump(), HasSubstr("\"pacer.dev/v1alpha1\""));
  json pacer = Call("GET", "/apis/pacer.dev/v1alpha1").Json();
  ASSERT_FALSE(pacer["resources"].empty());
  EXPECT_EQ(pacer["resources"][0]["name"], "trainjobs");
  EXPECT_EQ(pacer["resources"][0]["shortNames"], json({"tj"}));
  EXPECT_EQ(pacer["resources"][1]["name"], "trainjobs/status");
  EXPECT_EQ(Call("GET", "/apis/nope.dev/v1").status, 404);
}

TEST_F(ApiServerTest, CreateGetUpdateDelete) {
  json created = MustCreate(kTrainJobs, TrainJob("j"));
  EXPECT_EQ(created["metadata"]["namespace"], "research");
  EXPECT_EQ(created["metadata"]["generation"], 1);
  EXPECT_FALSE(created["metadata"]["uid"].get<std::string>().empty());
  EXPECT_THAT(created["metadata"]["creationTimestamp"].get<std::string>(), HasSubstr("T"));

  HttpResponse again = Call("POST", kTrainJobs, TrainJob("j"));
  EXPECT_EQ(again.status, 409);
  EXPECT_EQ(again.Json()["reason"], "AlreadyExists");

  const std::string path = std::string(kTrainJobs) + "/j";
  json got = Call("GET", path).Json();
  EXPECT_EQ(got, created);

  json stale = got;
  stale["metadata"]["resourceVersion"] = "1" + VersionOf(got);
  stale["spec"]["deadline"] = "2031-01-01T00:00:00Z";
  HttpResponse conflict = Call("PUT", path, stale);
  EXPECT_EQ(conflict.status, 409);
  EXPECT_EQ(conflict.Json()["reason"], "Conflict");

  json fresh = got;
  fresh["spec"]["deadline"] = "2031-01-01T00:00:00Z";
  HttpResponse updated = Call("PUT", path, fresh);
  ASSERT_EQ(updated.status, 200) << updated.body;
  EXPECT_EQ(updated.Json()["metadata"]["generation"], 2);
  EXPECT_GT(std::stoll(VersionOf(updated.Json())), std::stoll(VersionOf(got)));
  EXPECT_EQ(updated.Json()["metadata"]["uid"], created["metadata"]["uid"]);

  HttpResponse deleted = Call("DELETE", path);
  EXPECT_EQ(deleted.status, 200);
  HttpResponse missing = Call("GET", path);
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.Json()["reason"], "NotFound");
  EXPECT_EQ(missing.Json()["message"], "trainjobs.pacer.dev \"j\" not found");
  EXPECT_EQ(missing.Json()["details"]["name"], "j");
  EXPECT_EQ(Call("DELETE", path).status, 404);
}

TEST_F(ApiServerTest, GenerateNameMakesUniqueNames) {
  json pod = Pod("");
  pod["metadata"].erase("name");
  pod["metadata"]["generateName"] = "worker-";
  json a = MustCreate(kPods, pod);
  json b = MustCreate(kPods, pod);
  EXPECT_THAT(Name(a), ::testing::StartsWith("worker-"));
  EXPECT_EQ(Name(a).size(), std::string("worker-").size() + 5);
  EXPECT_NE(Name(a), Name(b));
  json nameless = Pod("");
  nameless["metadata"].erase("name");
  EXPECT_EQ(Call("POST", kPods, nameless).status, 422);
}

TEST_F(ApiServerTest, PatchTypes) {
  MustCreate(kPods, Pod("p", {{"app", "train"}}));
  const std::string path = std::string(kPods) + "/p";

  HttpResponse merged =
      Call("PATCH", path, {{"metadata", {{"labels", {{"app", nullptr}, {"tier", "w"}}}}}},
           "application/merge-patch+json");
  ASSERT_EQ(merged.status, 200) << merged.body;
  EXPECT_EQ(merged.Json()["metadata"]["labels"], json({{"tier", "w"}}));

  json strategic = {{"spec", {{"containers", {{{"name", "sidecar"}, {"image", "s:1"}}}}}}};
  HttpResponse sm = Call("PATCH", path, strategic, "application/strategic-merge-patch+json");
  ASSERT_EQ(sm.status, 200) << sm.body;
  ASSERT_EQ(sm.Json()["spec"]["containers"].size(), 2u);  // merged by name, not replaced
  EXPECT_EQ(sm.Json()["spec"]["containers"][0]["name"], "worker");

  json ops = json::parse(R"([{"op":"test","path":"/spec/containers/1/name","value":"sidecar"},
                             {"op":"replace","path":"/spec/containers/1/image","value":"s:2"},
                             {"op":"add","path":"/metadata/labels/extra","value":"yes"}])");
  HttpResponse jp = Call("PATCH", path, ops, "application/json-patch+json");
  ASSERT_EQ(jp.status, 200) << jp.body;
  EXPECT_EQ(jp.Json()["spec"]["containers"][1]["image"], "s:2");
  EXPECT_EQ(jp.Json()["metadata"]["labels"]["extra"], "yes");

  json failing = json::parse(R"([{"op":"test","path":"/spec/containers/1/image","value":"s:9"}])");
  EXPECT_EQ(Call("PATCH", path, failing, "application/json-patch+json").status, 422);
  EXPECT_EQ(Call("PATCH", path, {{"a", 1}}, "application/apply-patch+yaml").status, 415);
  // A resourceVersion in a merge patch is a precondition.
  json stale = {{"metadata", {{"resourceVersion", "1"}, {"labels", {{"x", "y"}}}}}};
  EXPECT_EQ(Call("PATCH", path, stale, "application/merge-patch+json").status, 409);
  EXPECT_EQ(Call("PATCH", std::string(kPods) + "/nope", {{"a", 1}}, "application/merge-patch+json")
                .status,
            404);
}

TEST_F(ApiServerTest, StatusSubresourceIsolatesStatus) {
  MustCreate(kTrainJobs, TrainJob("j"));
  const std::string path = std::string(kTrainJobs) + "/j";

  json with_status = Call("GET", path).Json();
  with_status["status"] = {{"phase", "Running"}};
  HttpResponse status_put = Call("PUT", path + "/status", with_status);
  ASSERT_EQ(status_put.status, 200) << status_put.body;
  EXPECT_EQ(status_put.Json()["status"]["phase"], "Running");
  EXPECT_EQ(status_put.Json()["metadata"]["generation"], 1);  // status is not spec

  // The main resource ignores status...
  json main = status_put.Json();
  main["status"]["phase"] = "Failed";
  main["spec"]["deadline"] = "2031-01-01T00:00:00Z";
  HttpResponse main_put = Call("PUT", path, main);
  ASSERT_EQ(main_put.status, 200) << main_put.body;
  EXPECT_EQ(main_put.Json()["status"]["phase"], "Running");
  EXPECT_EQ(main_put.Json()["spec"]["deadline"], "2031-01-01T00:00:00Z");
  EXPECT_EQ(main_put.Json()["metadata"]["generation"], 2);

  // ...and /status ignores everything else.
  json status_only = main_put.Json();
  status_only["spec"]["deadline"] = "2040-01-01T00:00:00Z";
  status_only["status"]["phase"] = "Succeeded";
  HttpResponse status_again = Call("PUT", path + "/status", status_only);
  ASSERT_EQ(status_again.status, 200);
  EXPECT_EQ(status_again.Json()["spec"]["deadline"], "2031-01-01T00:00:00Z");
  EXPECT_EQ(status_again.Json()["status"]["phase"], "Succeeded");
  EXPECT_EQ(status_again.Json()["metadata"]["generation"], 2);

  HttpResponse status_patch = Call("PATCH", path + "/status", {{"status", {{"replans", 3}}}},
                                   "application/merge-patch+json");
  EXPECT_EQ(status_patch.Json()["status"]["replans"], 3);
  EXPECT_EQ(status_patch.Json()["status"]["phase"], "Succeeded");

  // Labels are metadata: no generation bump.
  HttpResponse relabel = Call("PATCH", path, {{"metadata", {{"labels", {{"a", "b"}}}}}},
                              "application/merge-patch+json");
  EXPECT_EQ(relabel.Json()["metadata"]["generation"], 2);
  // Creating over HTTP drops a status-subresource resource's status.
  json born_with_status = TrainJob("k");
  born_with_status["status"] = {{"phase", "Running"}};
  EXPECT_FALSE(MustCreate(kTrainJobs, born_with_status).contains("status"));
}

TEST_F(ApiServerTest, NoOpUpdateKeepsTheResourceVersion) {
  json created = MustCreate(kTrainJobs, TrainJob("j"));
  HttpResponse same = Call("PUT", std::string(kTrainJobs) + "/j", created);
  ASSERT_EQ(same.status, 200);
  EXPECT_EQ(VersionOf(same.Json()), VersionOf(created));
}

TEST_F(ApiServerTest, FinalizersDelayRemoval) {
  json job = TrainJob("j");
  job["metadata"]["finalizers"] = {"pacer.dev/cleanup"};
  MustCreate(kTrainJobs, job);
  const std::string path = std::string(kTrainJobs) + "/j";
  HttpResponse deleting = Call("DELETE", path);
  ASSERT_EQ(deleting.status, 200);
  EXPECT_TRUE(deleting.Json()["metadata"].contains("deletionTimestamp"));
  json still = Call("GET", path).Json();
  EXPECT_TRUE(still["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(still["metadata"]["deletionGracePeriodSeconds"], 0);

  still["metadata"]["finalizers"] = json::array();
  HttpResponse released = Call("PUT", path, still);
  EXPECT_EQ(released.status, 200) << released.body;
  EXPECT_EQ(Call("GET", path).status, 404);
}

TEST_F(ApiServerTest, RemovingAnOwnerRemovesItsDependents) {
  json job = MustCreate(kTrainJobs, TrainJob("j"));
  json owner = {{"apiVersion", "pacer.dev/v1alpha1"},
                {"kind", "TrainJob"},
                {"name", "j"},
                {"uid", job["metadata"]["uid"]}};
  for (const char* name : {"j-0", "j-1"}) {
    json pod = Pod(name);
    pod["metadata"]["ownerReferences"] = {owner};
    MustCreate(kPods, pod);
  }
  json kept = Pod("j-finalized");
  kept["metadata"]["ownerReferences"] = {owner};
  kept["metadata"]["finalizers"] = {"example.com/hold"};
  MustCreate(kPods, kept);
  MustCreate(kPods, Pod("unrelated"));
  json svc = {{"metadata", {{"name", "j"}, {"ownerReferences", {owner}}}},
              {"spec", json::object()}};
  MustCreate("/api/v1/namespaces/research/services", svc);

  EXPECT_EQ(Call("DELETE", std::string(kTrainJobs) + "/j").status, 200);
  EXPECT_EQ(Call("GET", std::string(kPods) + "/j-0").status, 404);
  EXPECT_EQ(Call("GET", std::string(kPods) + "/j-1").status, 404);
  EXPECT_EQ(Call("GET", "/api/v1/namespaces/research/services/j").status, 404);
  EXPECT_EQ(Call("GET", std::string(kPods) + "/unrelated").status, 200);
  json finalized = Call("GET", std::string(kPods) + "/j-finalized").Json();
  EXPECT_TRUE(finalized["metadata"].contains("deletionTimestamp"));

  // An orphaning delete leaves dependents.
  json job2 = MustCreate(kTrainJobs, TrainJob("k"));
  json pod = Pod("k-0");
  pod["metadata"]["ownerReferences"] = {{{"apiVersion", "pacer.dev/v1alpha1"},
                                         {"kind", "TrainJob"},
                                         {"name", "k"},
                                         {"uid", job2["metadata"]["uid"]}}};
  MustCreate(kPods, pod);
  EXPECT_EQ(Call("DELETE", std::string(kTrainJobs) + "/k?propagationPolicy=Orphan").status, 200);
  EXPECT_EQ(Call("GET", std::string(kPods) + "/k-0").status, 200);
}

TEST_F(ApiServerTest, PagingReturnsEveryObjectOnce) {
  std::set<std::string> expected;
  for (int i = 0; i < 23; ++i) {
    const std::string ns = i % 2 == 0 ? "research" : "prod";
    const std::string name = "p" + std::to_string(i);
    MustCreate("/api/v1/namespaces/" + ns + "/pods", Pod(name));
    expected.insert(ns + "/" + name);
  }
  std::vector<std::string> seen;
  std::string token;
  int pages = 0;
  do {
    std::string target = "/api/v1/pods?limit=5";
    if (!token.empty()) target += "&continue=" + token;
    json page = Call("GET", target).Json();
    ASSERT_EQ(page["kind"], "PodList");
    EXPECT_LE(page["items"].size(), 5u);
    for (const auto& item : page["items"]) {
      seen.push_back(item["metadata"]["namespace"].get<std::string>() + "/" + Name(item));
    }
    token = page["metadata"].value("continue", "");
    ASSERT_LT(++pages, 10);
  } while (!token.empty());
  EXPECT_EQ(pages, 5);
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()), expected);
  EXPECT_EQ(seen.size(), expected.size());
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));

  json research = Call("GET", std::string(kPods) + "?limit=100").Json();
  EXPECT_EQ(research["items"].size(), 12u);
  EXPECT_FALSE(research["metadata"].contains("continue"));
  EXPECT_EQ(Call("GET", "/api/v1/pods?limit=5&continue=zz").status, 400);
}

TEST_F(ApiServerTest, LabelAndFieldSelectors) {
  MustCreate(kPods, Pod("a", {{"app", "train"}, {"role", "worker"}}));
  MustCreate(kPods, Pod("b", {{"app", "train"}, {"role", "ps"}}));
  MustCreate(kPods, Pod("c", {{"app", "serve"}}));
  auto names = [&](const std::string& query) {
    std::vector<std::string> out;
    HttpResponse r = Call("GET", std::string(kPods) + "?" + query);
    EXPECT_EQ(r.status, 200) << r.body;
    const json list = r.Json();
    for (const auto& item : list["items"]) out.push_back(Name(item));
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(names("labelSelector=app%3Dtrain"), (V{"a", "b"}));
  EXPECT_EQ(names("labelSelector=app%3Dtrain,role!%3Dps"), (V{"a"}));
  EXPECT_EQ(names("labelSelector=role%20in%20(ps,worker)"), (V{"a", "b"}));
  EXPECT_EQ(names("labelSelector=!role"), (V{"c"}));
  EXPECT_EQ(names("fieldSelector=metadata.name%3Db"), (V{"b"}));
  EXPECT_EQ(names("fieldSelector=metadata.name!%3Db,status.phase%3DPending"), (V{"a", "c"}));
  EXPECT_EQ(Call("GET", std::string(kPods) + "?labelSelector=app%20in%20train").status, 400);
}

TEST_F(ApiServerTest, TableOutputUsesPrinterColumns) {
  MustCreate(kTrainJobs, TrainJob("j"));
  json job = server_->GetObject(std::string(kTrainJobs) + "/j").value();
  job["status"] = {{"phase", "Running"},
                   {"plan", {{"gpus", 16}}},
                   {"progress", {{"percent", 42.5}}},
                   {"deadline", "2030-01-01T00:00:00Z"},  // the DEADLINE column's source
                   {"deadlineSlackSeconds", 3600},
                   {"deadlineSlack", "+1h0m"}};  // the SLACK column's source
  ASSERT_TRUE(server_->UpdateObject(std::string(kTrainJobs) + "/j", job).ok());
  auto r = client_->Request(
      "GET", kTrainJobs, "", "",
      {{"Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}});
  ASSERT_TRUE(r.ok());
  json table = r->Json();
  ASSERT_EQ(table["kind"], "Table");
  std::vector<std::string> columns;
  for (const auto& c : table["columnDefinitions"]) columns.push_back(c["name"]);
  EXPECT_EQ(columns, (std::vector<std::string>{"Name", "Phase", "GPUs", "Progress", "ETA",
                                               "Deadline", "Slack", "Age"}));
  ASSERT_EQ(table["rows"].size(), 1u);
  const json& cells = table["rows"][0]["cells"];
  EXPECT_EQ(cells[0], "j");
  EXPECT_EQ(cells[1], "Running");
  EXPECT_EQ(cells[2], 16);
  EXPECT_EQ(cells[3], 42.5);
  EXPECT_TRUE(cells[4].is_null());
  EXPECT_EQ(cells[5], "2030-01-01T00:00:00Z");
  EXPECT_EQ(cells[6], "+1h0m");
  EXPECT_EQ(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
}

TEST_F(ApiServerTest, CustomResourceDefinitionRegistersAResource) {
  json crd = {
      {"apiVersion", "apiextensions.k8s.io/v1"},
      {"kind", "CustomResourceDefinition"},
      {"metadata", {{"name", "widgets.example.com"}}},
      {"spec",
       {{"group", "example.com"},
        {"scope", "Namespaced"},
        {"names",
         {{"plural", "widgets"},
          {"singular", "widget"},
          {"kind", "Widget"},
          {"shortNames", {"wd"}},
          {"categories", {"gadgetry"}}}},
        {"versions",
         {{{"name", "v1"},
           {"served", true},
           {"storage", true},
           {"subresources", {{"status", json::object()}}},
           {"schema",
            {{"openAPIV3Schema",
              {{"type", "object"},
               {"properties",
                {{"spec", {{"type", "object"}, {"properties", {{"size", {{"type", "integer"}}}}}}},
                 {"status",
                  {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}}}}}}}},
           {"additionalPrinterColumns",
            {{{"name", "Size"}, {"type", "integer"}, {"jsonPath", ".spec.size"}}}}}}}}}};
  const std::string widgets = "/apis/example.com/v1/namespaces/research/widgets";
  EXPECT_EQ(Call("GET", widgets).status, 404);
  json created = MustCreate("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd);
  EXPECT_THAT(created["status"].dump(), HasSubstr("Established"));

  json widget = {{"apiVersion", "example.com/v1"},
                 {"kind", "Widget"},
                 {"metadata", {{"name", "w1"}}},
                 {"spec", {{"size", 3}}},
                 {"status", {{"ok", true}}}};
  json w1 = MustCreate(widgets, widget);
  EXPECT_FALSE(w1.contains("status"));  // a status subresource, like the CRD says
  widget["metadata"]["name"] = "w2";
  MustCreate(widgets, widget);
  json list = Call("GET", widgets).Json();
  EXPECT_EQ(list["kind"], "WidgetList");
  EXPECT_EQ(list["items"].size(), 2u);
  json discovery = Call("GET", "/apis/example.com/v1").Json();
  EXPECT_EQ(discovery["resources"][0]["shortNames"], json({"wd"}));
  EXPECT_EQ(discovery["resources"][0]["categories"], json({"gadgetry"}));
  auto table = client_->Request("GET", widgets, "", "",
                                {{"Accept", "application/json;as=Table;v=v1;g=meta.k8s.io"}});
  ASSERT_TRUE(table.ok());
  EXPECT_EQ(table->Json()["columnDefinitions"][1]["name"], "Size");
  EXPECT_EQ(table->Json()["rows"][0]["cells"][1], 3);

  EXPECT_EQ(
      Call("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com")
          .status,
      200);
  EXPECT_EQ(Call("GET", widgets).status, 404);
}

TEST_F(ApiServerTest, InjectedFailuresAndCounts) {
  server_->FailNextRequests("PUT", "/status", 409, 1);
  server_->FailNextRequests("GET", "/trainjobs", 429, 1);
  server_->FailNextRequests("", "/pods", 503, 2);
  MustCreate(kTrainJobs, TrainJob("j"));
  json job = server_->GetObject(std::string(kTrainJobs) + "/j").value();
  EXPECT_EQ(Call("PUT", std::string(kTrainJobs) + "/j/status", job).status, 409);
  EXPECT_EQ(Call("PUT", std::string(kTrainJobs) + "/j/status", job).status, 200);

  auto throttled = client_->Get(kTrainJobs);
  ASSERT_TRUE(throttled.ok());
  EXPECT_EQ(throttled->status, 429);
  EXPECT_EQ(throttled->headers["Retry-After"], "1");
  EXPECT_EQ(throttled->Json()["reason"], "TooManyRequests");
  EXPECT_EQ(Call("GET", kTrainJobs).status, 200);

  EXPECT_EQ(Call("GET", kPods).status, 503);
  EXPECT_EQ(Call("POST", kPods, Pod("p")).Json()["reason"], "ServiceUnavailable");
  EXPECT_EQ(Call("GET", kPods).status, 200);

  EXPECT_EQ(server_->RequestCount("PUT", "/status"), 2);
  EXPECT_EQ(server_->RequestCount("GET", "/trainjobs"), 2);
  EXPECT_EQ(server_->RequestCount("", "/pods"), 3);
}

TEST_F(ApiServerTest, LatencyDelaysResponses) {
  server_->SetLatency(std::chrono::milliseconds(200));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(Call("GET", "/version").status, 200);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(200));
}

TEST_F(ApiServerTest, RejectsBodiesOver3MiB) {
  json big = Pod("big");
  big["metadata"]["annotations"] = {{"blob", std::string(4 * 1024 * 1024, 'x')}};
  HttpResponse r = Call("POST", kPods, big);
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(Call("GET", std::string(kPods) + "/big").status, 404);
}

TEST_F(ApiServerTest, DirectAccessKeepsStatusAndMapsErrors) {
  json pod = Pod("p");
  pod["status"] = {{"phase", "Running"}};
  auto created = server_->CreateObject(kPods, pod);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ((*created)["status"]["phase"], "Running");
  json failed = *created;
  failed["status"]["phase"] = "Failed";
  auto updated = server_->UpdateObject(std::string(kPods) + "/p", failed);
  ASSERT_TRUE(updated.ok());
  EXPECT_EQ(Call("GET", std::string(kPods) + "/p").Json()["status"]["phase"], "Failed");
  // The first version is stale now.
  EXPECT_EQ(server_->UpdateObject(std::string(kPods) + "/p", *created).status().code(),
            StatusCode::kAborted);
  EXPECT_EQ(server_->CreateObject(kPods, pod).status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(server_->GetObject(std::string(kPods) + "/nope").status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(server_->GetObject("/api/v1/frobs/x").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(server_->ListObjects("/api/v1/pods").size(), 1u);
  EXPECT_TRUE(server_->DeleteObject(std::string(kPods) + "/p").ok());
  EXPECT_TRUE(server_->ListObjects(kPods).empty());
}

// WaitFor returns when a request makes pred true, not at its deadline: the
// job is created only after WaitFor has found it missing, and the wait must
// end long before its deliberately long timeout (an implementation that only
// looks again at the deadline takes the whole 300 s and fails here).
TEST_F(ApiServerTest, WaitForWakesOnRequests) {
  std::atomic<bool> checked{false};
  std::promise<void> checked_once;
  std::future<void> first_check = checked_once.get_future();
  auto created = [&] {
    const bool found = server_->ListObjects(kTrainJobs).size() == 1;
    if (!checked.exchange(true)) checked_once.set_value();
    return found;
  };
  std::thread creator([&] {
    // Bounded, so that a WaitFor that never asks fails instead of hanging.
    if (first_check.wait_for(kWaitTimeout) != std::future_status::ready) {
      ADD_FAILURE() << "WaitFor never evaluated its predicate";
    }
    MustCreate(kTrainJobs, TrainJob("j"));
  });
  constexpr std::chrono::seconds kTimeout{300};
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(server_->WaitFor(created, kTimeout));
  const auto waited = std::chrono::steady_clock::now() - start;
  creator.join();
  // Half the timeout: a margin no loaded machine needs for one local request.
  EXPECT_LT(waited, kTimeout / 2) << "WaitFor returned at its deadline, not on the request";
  EXPECT_FALSE(server_->WaitFor([&] { return server_->ListObjects(kTrainJobs).size() == 2; },
                                std::chrono::milliseconds(50)));
}

TEST_F(ApiServerTest, ManyConcurrentClients) {
  constexpr int kThreads = 16;
  constexpr int kPerThread = 20;
  std::vector<std::thread> threads;
  std::atomic<int> created{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        auto r = client_->Request("POST", kPods,
                                  Pod("p-" + std::to_string(t) + "-" + std::to_string(i)).dump());
        if (r.ok() && r->status == 201) ++created;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(created.load(), kThreads * kPerThread);
  EXPECT_EQ(server_->ListObjects(kPods).size(), static_cast<size_t>(kThreads * kPerThread));
}

}  // namespace
}  // namespace pacer::testing
