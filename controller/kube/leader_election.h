// LeaderElector: one leader among several controller replicas, through a
// coordination.k8s.io/v1 Lease (client-go's leaderelection).
//
// A candidate takes the Lease when it is absent, expired (renewTime +
// leaseDurationSeconds < now) or already its own; the leader renews it every
// retry_period and steps down when it could not renew for renew_deadline.
// Writes are conditional on the Lease's resourceVersion, so of two
// candidates racing for it one gets a 409 and stays a follower. Stop()
// releases a held Lease (empties holderIdentity) so a standby takes over at
// its next retry instead of waiting for the Lease to expire.
//
// renew_deadline must be shorter than lease_duration: a leader that cannot
// renew stops acting as leader before anyone else may take over. That holds
// against an API server that hangs (accepts the request and never answers)
// as well as one that refuses: the elector talks through a client of its own
// whose requests end by a deadline (KubeClient::SetRequestDeadline): a
// leader's by its last renewal + renew_deadline, a candidate's by
// renew_deadline after the attempt began. So a leader whose API server hangs
// steps down at its renew deadline, as client-go's renew context does; the
// shared client's 30 s request timeout would keep it "leading" for 30 s.
//
// Another holder's Lease is judged, as client-go does, by when this replica
// last saw the Lease record change, on its own monotonic clock, plus the
// record's leaseDurationSeconds: never by comparing the holder's renewTime
// with this machine's wall clock, which would hand over early under clock
// skew. So a candidate waits a full lease duration after the last change it
// observed before taking over.
//
// Units: durations are std::chrono::milliseconds; Lease timestamps written
// are the clock's wall time (Clock::WallNow); expiry is steady time.
// Thread-safety: IsLeader() from any thread; Run/Start and Stop from one
// thread. Callbacks run on the elector's thread and must return promptly.
#ifndef PACER_CONTROLLER_KUBE_LEADER_ELECTION_H_
#define PACER_CONTROLLER_KUBE_LEADER_ELECTION_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/clock.h"
#include "kube/kube_client.h"

namespace pacer::controller {

struct LeaderElectionOptions {
  std::string namespace_name;
  std::string lease_name;
  std::string identity;  // unique per replica: the pod name
  std::chrono::milliseconds lease_duration{15000};
  std::chrono::milliseconds renew_deadline{10000};
  std::chrono::milliseconds retry_period{2000};
  // Wall time for the Lease's timestamps; nullptr = the system clock.
  const Clock* clock = nullptr;
};

class LeaderElector {
 public:
  // `client` must outlive the elector; its configuration is copied into the
  // elector's own client at Run().
  LeaderElector(KubeClient* client, LeaderElectionOptions options);
  ~LeaderElector();  // Stop()s
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  // Checks the options: InvalidArgument naming the bad one.
  Status Validate() const;

  // Starts the elector's thread and returns at once. on_started_leading runs
  // when this replica becomes leader, on_stopped_leading when it stops being
  // leader (lost the Lease, or Stop()).
  void Run(std::function<void()> on_started_leading, std::function<void()> on_stopped_leading);
  // The same as Run.
  void Start(std::function<void()> on_started_leading, std::function<void()> on_stopped_leading);
  // Ends the thread; a leader releases the Lease first. Prompt (one request).
  void Stop();

  bool IsLeader() const { return leader_.load(); }

 private:
  enum class Attempt { kAcquired, kHeldByOther, kFailed };

  void Loop();
  Attempt TryAcquireOrRenew();
  // Whether the Lease `spec` names another holder still within its lease
  // duration, judged by when this replica saw the record change.
  bool HeldByOtherLocally(const nlohmann::json& spec);
  KubeClient* Api() const { return own_client_ ? own_client_.get() : client_; }
  void Release();
  bool WaitStop(std::chrono::milliseconds delay);

  KubeClient* const client_;
  std::unique_ptr<KubeClient> own_client_;  // its requests end by the attempt's deadline
  // The Lease record last read (holder, renewTime, duration) and when it was
  // first seen in that state, on the steady clock. Elector thread only.
  std::string observed_record_;
  std::chrono::steady_clock::time_point observed_at_;
  const LeaderElectionOptions options_;
  const Clock& clock_;
  std::function<void()> on_started_;
  std::function<void()> on_stopped_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::atomic<bool> leader_{false};
  std::thread thread_;
};

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_KUBE_LEADER_ELECTION_H_
