// TestApiServer: an in-process Kubernetes API server for tests, speaking
// the real REST protocol over HTTPS well enough for our cpprestsdk client
// and for the real kubectl (apply, get, describe, delete). See
// docs/testing.md for what it implements and what it does not.
//
// It serves every resource of the table in resource_table.h plus those
// CustomResourceDefinitions add; objects live in memory (ObjectStore). TLS
// material (a CA and a serving certificate for localhost and 127.0.0.1) is
// generated at start; every request needs "Authorization: Bearer <token>".
//
// Units: durations are std::chrono types; sizes in bytes.
// Thread-safety: every method is thread-safe. One thread accepts
// connections, one thread serves each connection (HTTP/1.1 keep-alive);
// the destructor stops and joins them all.
#ifndef PACER_TESTS_SUPPORT_TEST_API_SERVER_H_
#define PACER_TESTS_SUPPORT_TEST_API_SERVER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "pacer/status.h"

namespace pacer::testing {

struct TestApiServerOptions {
  std::string bind_address = "127.0.0.1";
  int port = 0;       // 0 = pick a free port
  std::string token;  // bearer token; empty = generate a random one
  size_t history_limit =
      10000;  // watch events kept for resuming; older resourceVersions get 410 Gone
  std::chrono::milliseconds bookmark_interval{1000};
  // Graceful deletion of pods, as a real API server with a kubelet does it:
  // a DELETE with a grace period (DeleteOptions.gracePeriodSeconds, else the
  // pod's spec.terminationGracePeriodSeconds, else 30) leaves the pod
  // Terminating (deletionTimestamp, deletionGracePeriodSeconds) for that
  // long, then removes it; a DELETE with 0 removes it at once. Off: every
  // DELETE removes at once (the fake kubelet and most tests rely on that).
  bool graceful_pod_deletion = false;
};

// One request as Kubernetes' audit log and RBAC see it. The verb follows
// kube-apiserver's RequestInfo: GET on an object is "get", on a collection
// "list" ("watch" with watch=true), POST "create", PUT "update", PATCH
// "patch", DELETE "delete" ("deletecollection" on a collection). Requests
// for no resource (discovery, /version, /openapi) have an empty resource and
// the method in lower case as the verb.
struct AuditRecord {
  std::string verb;
  std::string group;        // "" for the core group
  std::string resource;     // "trainjobs"
  std::string subresource;  // "status" or ""
  std::string namespace_;   // "" for cluster-scoped or all-namespaces requests
  std::string name;         // "" for a collection (or a list's metadata.name field selector)
  std::string user_agent;
  int code;  // the HTTP status of the response (200 for a watch that started)
  std::chrono::steady_clock::time_point time;  // when the answer was decided
};

class TestApiServer {
 public:
  static StatusOr<std::unique_ptr<TestApiServer>> Start(TestApiServerOptions options = {});
  ~TestApiServer();  // stops and joins every thread

  TestApiServer(const TestApiServer&) = delete;
  TestApiServer& operator=(const TestApiServer&) = delete;

  std::string url() const;            // "https://127.0.0.1:PORT"
  const std::string& ca_pem() const;  // the generated CA (PEM) that signed the serving cert
  // The token accepted now (see RotateToken).
  std::string token() const;
  // Bound-token rotation: from now on only `new_token` is accepted; a
  // request with the old one gets 401 Unauthorized, as a real API server
  // answers an expired service-account token.
  void RotateToken(const std::string& new_token);
  // A kubeconfig (certificate-authority-data, token, one context "pacer-test"
  // with that namespace) kubectl and our client accept. Written mode 0600.
  Status WriteKubeconfig(const std::string& path,
                         const std::string& namespace_name = "default") const;

  // Direct access to the store, as the kubelet/scheduler would act (tests set
  // pod phases this way). Paths are API paths, e.g.
  // "/api/v1/namespaces/ns/pods/p",
  // "/apis/pacer.dev/v1alpha1/namespaces/ns/trainjobs/j".
  StatusOr<nlohmann::json> GetObject(const std::string& path) const;
  // Objects of a resource whose CRD has a schema are pruned, defaulted and
  // validated as over HTTP with fieldValidation=Strict: an unknown field is
  // an error, so that a test's typo shows.
  //
  // Fills metadata (uid, resourceVersion, creationTimestamp, generation);
  // keeps .status as given.
  StatusOr<nlohmann::json> CreateObject(const std::string& collection_path, nlohmann::json object);
  // Replaces the object incl. status, bumps resourceVersion, emits MODIFIED.
  StatusOr<nlohmann::json> UpdateObject(const std::string& path, nlohmann::json object);
  Status DeleteObject(const std::string& path);
  // e.g. "/api/v1/pods" (all namespaces) or "/api/v1/namespaces/ns/pods".
  std::vector<nlohmann::json> ListObjects(const std::string& collection_path) const;

  // Fault injection. The next `count` requests whose method matches
  // (`method` "" = any; or a verb in lower case, "watch" or "list", to tell
  // the GETs apart) and whose path contains `path_substring` get
  // `http_code` with a metav1 Status (429 with Retry-After:
  // `retry_after_seconds`).
  void FailNextRequests(const std::string& method, const std::string& path_substring, int http_code,
                        int count, int retry_after_seconds = 1);
  // A pager that never ends: list answers of the resource `plural` (e.g.
  // "pods"; "" turns it off) ignore the request's continue token and always
  // carry the same one, so a client that follows it alone lists forever.
  void RepeatListContinueToken(const std::string& plural);
  void DropWatches();  // close every open watch stream now
  void
  CompactHistory();  // forget watch history: resuming from any older resourceVersion gets 410 Gone
  void SetLatency(std::chrono::milliseconds latency);  // added to every request
  // A hanging (not refusing) API server: requests whose method matches
  // (`method` "" = any), whose path contains `path_substring` and whose
  // User-Agent contains `user_agent` ("" = any client) are read and
  // then never answered, their connection held open, until StopHanging() or
  // the server stops (the connection is then closed without an answer). The
  // failure a refused connection or a 5xx does not show: a client's request
  // timeout is all that ends the wait.
  // At kAfterHeaders the answer's headers (200, a Content-Length) and the
  // first bytes of its body are sent before the hold: a server that stalls
  // mid-answer. At kAfterHeadersOnSignal they are sent only when
  // SendHeldHeaders() is called (the request counts as hung from its
  // arrival; the call releases the requests held then, not later ones): a
  // test can act between the request and the headers. `path_substring` is
  // matched against the path without the query: a rule that holds a watch
  // holds a list of the same resource too.
  enum class HangPoint { kBeforeAnswer, kAfterHeaders, kAfterHeadersOnSignal };
  void HangRequests(const std::string& method, const std::string& path_substring,
                    const std::string& user_agent = "", HangPoint at = HangPoint::kBeforeAnswer);
  void SendHeldHeaders();  // for requests held at kAfterHeadersOnSignal
  void StopHanging();
  // Requests held by HangRequests right now.
  int HungRequestCount() const;

  // A validating admission webhook for pod creation: `deny(pod)` returns a
  // message to refuse the pod with 403 `admission webhook "<name>" denied
  // the request: <message>`, or "" to admit it. Called on the connection's
  // thread; an empty function removes the hook. ResourceQuota admission of
  // pods needs no setup: create a ResourceQuota (pod_admission.h).
  void SetPodAdmissionHook(const std::string& name,
                           std::function<std::string(const nlohmann::json& pod)> deny);

  // Observability for tests (no sleeps in tests!).
  int64_t RequestCount(const std::string& method, const std::string& path_substring) const;
  int OpenWatchCount() const;
  // Every request so far, in the order their responses were started
  // (recorded before the response is written, so a client that has its
  // answer finds its record).
  std::vector<AuditRecord> AuditLog() const;
  // Blocks until pred() holds (re-evaluated after every store mutation and
  // every request) or timeout; returns pred()'s final value.
  bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout) const;

  class Impl;

 private:
  explicit TestApiServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pacer::testing

#endif  // PACER_TESTS_SUPPORT_TEST_API_SERVER_H_
