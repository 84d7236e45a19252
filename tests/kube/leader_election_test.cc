// LeaderElector against the test API server's Leases: one leader of two,
// hand-over on Stop, taking over an expired Lease, respecting a live one.
#include "kube/leader_election.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "kube/kube_time.h"
#include "kube_test_env.h"

namespace pacer::controller {
namespace {

using nlohmann::json;

constexpr char kLeasesPath[] = "/apis/coordination.k8s.io/v1/namespaces/default/leases";

class LeaderElectionTest : public KubeTest {
 protected:
  LeaderElectionOptions Options(const std::string& identity) {
    LeaderElectionOptions options;
    options.namespace_name = "default";
    options.lease_name = "pacer-controller";
    options.identity = identity;
    options.lease_duration = std::chrono::milliseconds(2000);
    options.renew_deadline = std::chrono::milliseconds(1500);
    options.retry_period = std::chrono::milliseconds(200);
    return options;
  }

  // Deadlines no slow renewal reaches (a TLS handshake under a sanitizer on
  // two busy cores can take most of 1.5 s): for tests where a term may end
  // only for what the test does.
  LeaderElectionOptions RoomyOptions(const std::string& identity) {
    LeaderElectionOptions options = Options(identity);
    options.lease_duration = std::chrono::milliseconds(20000);
    options.renew_deadline = std::chrono::milliseconds(15000);
    return options;
  }

  std::string Holder() {
    auto lease = server_->GetObject(std::string(kLeasesPath) + "/pacer-controller");
    if (!lease.ok()) return "<none>";
    return (*lease)["spec"].value("holderIdentity", "");
  }
};

struct Counts {
  std::atomic<int> started{0};
  std::atomic<int> stopped{0};
};

// A leader counts its renew deadline from the start of the attempt that won
// the Lease, so an acquisition that takes most of a 1.5 s deadline (a TLS
// handshake under ThreadSanitizer on two busy cores does) leaves it no time
// to renew, and it rightly steps down and wins again: two terms. This test
// is about one leader and the hand-over, not about a slow API server
// (LeaderStepsDownWhenItCannotRenew is), so it gives renewals room. The
// hand-over is no slower for it: Stop releases the Lease.
TEST_F(LeaderElectionTest, TwoCandidatesOneLeaderThenHandOverOnStop) {
  LeaderElector a(client_.get(), RoomyOptions("replica-a"));
  LeaderElector b(client_.get(), RoomyOptions("replica-b"));
  ASSERT_TRUE(a.Validate().ok());
  Counts ca;
  Counts cb;
  a.Run([&] { ++ca.started; }, [&] { ++ca.stopped; });
  b.Run([&] { ++cb.started; }, [&] { ++cb.stopped; });
  ASSERT_TRUE(Eventually([&] { return a.IsLeader() || b.IsLeader(); }));
  // Several renewals later there is still exactly one leader, and it holds the Lease.
  const int64_t gets = server_->RequestCount("GET", "leases");
  ASSERT_TRUE(Eventually([&] {
    EXPECT_FALSE(a.IsLeader() && b.IsLeader());
    return server_->RequestCount("GET", "leases") >= gets + 10;
  }));
  ASSERT_NE(a.IsLeader(), b.IsLeader());
  LeaderElector& leader = a.IsLeader() ? a : b;
  LeaderElector& standby = a.IsLeader() ? b : a;
  Counts& leader_counts = a.IsLeader() ? ca : cb;
  Counts& standby_counts = a.IsLeader() ? cb : ca;
  const std::string leader_name = a.IsLeader() ? "replica-a" : "replica-b";
  const std::string standby_name = a.IsLeader() ? "replica-b" : "replica-a";
  EXPECT_EQ(Holder(), leader_name);
  EXPECT_TRUE(Eventually([&] { return leader_counts.started.load() == 1; }));
  EXPECT_EQ(standby_counts.started.load(), 0);

  leader.Stop();  // releases the Lease
  EXPECT_FALSE(leader.IsLeader());
  EXPECT_EQ(leader_counts.stopped.load(), 1);
  EXPECT_NE(Holder(), leader_name);  // released: empty, or the standby's already
  ASSERT_TRUE(Eventually([&] { return standby.IsLeader(); }));
  EXPECT_EQ(Holder(), standby_name);
  // IsLeader turns true just before the elector's thread calls the
  // callback: wait for the call, not for the flag.
  EXPECT_TRUE(Eventually([&] { return standby_counts.started.load() == 1; }));
  auto lease = server_->GetObject(std::string(kLeasesPath) + "/pacer-controller");
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ((*lease)["spec"]["leaseTransitions"], 1);
}

TEST_F(LeaderElectionTest, TakesOverAnExpiredLeaseButNotALiveOne) {
  const auto now = std::chrono::system_clock::now();
  json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                {"kind", "Lease"},
                {"metadata", {{"name", "pacer-controller"}, {"namespace", "default"}}},
                {"spec",
                 {{"holderIdentity", "ghost"},
                  {"leaseDurationSeconds", 3600},
                  {"renewTime", FormatKubeMicroTime(now)},
                  {"leaseTransitions", 4}}}};
  ASSERT_TRUE(server_->CreateObject(kLeasesPath, lease).ok());
  LeaderElector elector(client_.get(), Options("replica-a"));
  elector.Run(nullptr, nullptr);
  // Several tries against a Lease live for an hour: never leader.
  const int64_t gets = server_->RequestCount("GET", "leases");
  ASSERT_TRUE(
      server_->WaitFor([&] { return server_->RequestCount("GET", "leases") >= gets + 3; }, kWait));
  EXPECT_FALSE(elector.IsLeader());
  EXPECT_EQ(Holder(), "ghost");

  // The ghost stops renewing: its last renewal is now long past.
  auto stored = server_->GetObject(std::string(kLeasesPath) + "/pacer-controller");
  ASSERT_TRUE(stored.ok());
  (*stored)["spec"]["leaseDurationSeconds"] = 1;
  (*stored)["spec"]["renewTime"] = FormatKubeMicroTime(now - std::chrono::seconds(10));
  ASSERT_TRUE(server_->UpdateObject(std::string(kLeasesPath) + "/pacer-controller", *stored).ok());
  ASSERT_TRUE(Eventually([&] { return elector.IsLeader(); }));
  auto taken = server_->GetObject(std::string(kLeasesPath) + "/pacer-controller");
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ((*taken)["spec"]["holderIdentity"], "replica-a");
  EXPECT_EQ((*taken)["spec"]["leaseTransitions"], 5);
  EXPECT_EQ((*taken)["spec"]["leaseDurationSeconds"], 2);
}

// Before the fault the leader may already have stepped down and won the
// Lease back, rightly: a renewal that outlasts the 1.5 s deadline on a loaded
// machine (see above) is one it could not make. So this test does not count
// terms; it checks where the fault leaves the elector: no longer leading,
// with every term it began ended by the stop callback. Once every Lease
// request fails it cannot win a term again, and a leader that kept leading
// (or stepped down without the callback) never gets there.
TEST_F(LeaderElectionTest, LeaderStepsDownWhenItCannotRenew) {
  LeaderElector elector(client_.get(), Options("replica-a"));
  Counts counts;
  elector.Run([&] { ++counts.started; }, [&] { ++counts.stopped; });
  ASSERT_TRUE(Eventually([&] { return elector.IsLeader(); }));
  server_->FailNextRequests("", "leases", 503, 1000000);  // the API server is gone
  ASSERT_TRUE(Eventually([&] { return !elector.IsLeader(); }));
  // The flag turns false just before the elector's thread calls the callback.
  EXPECT_TRUE(Eventually([&] { return counts.stopped.load() == counts.started.load(); }))
      << counts.started.load() << " terms began, " << counts.stopped.load() << " ended";
  EXPECT_GE(counts.stopped.load(), 1);
}

// A 409 on a renewal is no proof that another replica holds the Lease (the
// leader's own earlier write landing late, someone editing the Lease): as in
// client-go, the leader reads the Lease again at its next try and steps down
// only if another holder is recorded or its renew deadline passes. It
// stepped down at once, ending its term (and pacer-controller's process)
// while it still held the Lease.
TEST_F(LeaderElectionTest, OneConflictOnARenewalDoesNotEndTheTerm) {
  LeaderElector elector(client_.get(), RoomyOptions("replica-a"));
  Counts counts;
  elector.Run([&] { ++counts.started; }, [&] { ++counts.stopped; });
  ASSERT_TRUE(Eventually([&] { return elector.IsLeader(); }));
  server_->FailNextRequests("PUT", "leases", 409, 1);
  // The 409, then a renewal after it.
  const auto renewed_after_the_conflict = [&] {
    bool conflict = false;
    for (const testing::AuditRecord& r : server_->AuditLog()) {
      if (r.resource != "leases" || r.verb != "update") continue;
      if (r.code == 409) conflict = true;
      if (conflict && r.code == 200) return true;
    }
    return false;
  };
  ASSERT_TRUE(Eventually(renewed_after_the_conflict));
  EXPECT_TRUE(elector.IsLeader());
  EXPECT_EQ(counts.started.load(), 1);
  EXPECT_EQ(counts.stopped.load(), 0);
  EXPECT_EQ(Holder(), "replica-a");
  elector.Stop();
}

// The API server hangs for the leader (its requests are read, never
// answered) while the standby still reaches it: the leader must stop leading
// (its renew attempts end by the renew deadline, not the client's 30 s
// request timeout) before the standby takes over (after a full lease
// duration without a change to the Lease, on its own clock).
//
// The deadlines are roomy for the same reason as above (a slow TLS
// handshake), and the 2 s between them is what keeps the two terms apart on
// a loaded machine; both stay far below the 30 s the test tells apart. A
// slow renewal before the hang may still make the leader step down and win
// the Lease back at its next try (it is still the holder, so the standby
// keeps waiting), so the callbacks are replayed rather than matched exactly:
// never two leaders at once, and the standby's first term begins after the
// old leader's last one ended.
TEST_F(LeaderElectionTest, AHangingServerNeverGivesTwoLeaders) {
  KubeClientOptions a_options;
  a_options.user_agent = "pacer-controller/replica-a";  // the default 30 s timeout
  auto a_client = NewClient(Config(), a_options);
  KubeClientOptions b_options;
  b_options.user_agent = "pacer-controller/replica-b";
  auto b_client = NewClient(Config(), b_options);
  ASSERT_TRUE(a_client && b_client);
  // Declared before the electors: their callbacks run until they are destroyed.
  std::mutex mu;
  std::vector<std::string> transitions;  // "a+", "a-", "b+", "b-" in the order they happened
  const auto note = [&](const char* what) {
    std::lock_guard<std::mutex> lock(mu);
    transitions.emplace_back(what);
  };
  LeaderElectionOptions options = Options("replica-a");
  options.lease_duration = std::chrono::milliseconds(6000);
  options.renew_deadline = std::chrono::milliseconds(4000);
  options.retry_period = std::chrono::milliseconds(200);
  LeaderElector a(a_client.get(), options);
  options.identity = "replica-b";
  LeaderElector b(b_client.get(), options);

  a.Run([&] { note("a+"); }, [&] { note("a-"); });
  ASSERT_TRUE(Eventually([&] { return a.IsLeader(); }));
  b.Run([&] { note("b+"); }, [&] { note("b-"); });
  // The standby has read the live Lease a few times.
  const int64_t gets = server_->RequestCount("GET", "leases");
  ASSERT_TRUE(
      server_->WaitFor([&] { return server_->RequestCount("GET", "leases") >= gets + 4; }, kWait));
  ASSERT_FALSE(b.IsLeader());

  server_->HangRequests("", "leases", "replica-a");
  // Released however the test ends, so that the electors stop promptly.
  const std::unique_ptr<void, std::function<void(void*)>> release(
      this, [this](void*) { server_->StopHanging(); });
  ASSERT_TRUE(Eventually([&] { return b.IsLeader(); }));
  EXPECT_GE(server_->HungRequestCount(), 1);  // it hung, it did not refuse
  // IsLeader() turns true just before the elector's thread runs the
  // callback: wait for the callback too (slow under ThreadSanitizer).
  const auto seen = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return transitions;
  };
  const auto order = [&] {
    std::string text;
    for (const std::string& t : seen()) text += t + " ";
    return text;
  };
  ASSERT_TRUE(Eventually([&] { return order().find("b+") != std::string::npos; })) << order();
  bool a_leads = false;
  bool b_leads = false;
  int a_terms = 0;
  for (const std::string& t : seen()) {
    if (t == "a+") {
      EXPECT_FALSE(b_leads) << "two leaders: " << order();
      a_leads = true;
      ++a_terms;
    } else if (t == "b+") {
      // The old leader stopped before the new one started.
      EXPECT_FALSE(a_leads) << "two leaders: " << order();
      b_leads = true;
    } else {
      (t == "a-" ? a_leads : b_leads) = false;
    }
  }
  EXPECT_GE(a_terms, 1) << order();
  EXPECT_FALSE(a_leads) << "the hung leader still leads: " << order();
}

TEST_F(LeaderElectionTest, OptionsOutOfOrderAreRefused) {
  LeaderElectionOptions options = Options("a");
  options.renew_deadline = options.lease_duration;
  EXPECT_EQ(LeaderElector(client_.get(), options).Validate().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pacer::controller
