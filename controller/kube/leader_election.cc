#include "kube/leader_election.h"

#include <algorithm>
#include <iostream>

#include "core/json_fields.h"
#include "kube/kube_time.h"
#include "observe/log.h"

namespace pacer::controller {
namespace {

using nlohmann::json;

int64_t CeilSeconds(std::chrono::milliseconds d) {
  return std::max<int64_t>(1, (d.count() + 999) / 1000);
}

int64_t IntAt(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

}  // namespace

LeaderElector::LeaderElector(KubeClient* client, LeaderElectionOptions options)
    : client_(client),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : SystemClock::Default()) {}

LeaderElector::~LeaderElector() { Stop(); }

Status LeaderElector::Validate() const {
  if (options_.namespace_name.empty() || options_.lease_name.empty()) {
    return InvalidArgumentError("leader election needs the Lease's namespace and name");
  }
  if (options_.identity.empty()) {
    return InvalidArgumentError("leader election needs an identity unique to this replica");
  }
  if (options_.retry_period.count() <= 0 || options_.renew_deadline <= options_.retry_period ||
      options_.lease_duration <= options_.renew_deadline) {
    return InvalidArgumentError(
        "leader election needs 0 < retry_period < renew_deadline < lease_duration");
  }
  return Status::Ok();
}

void LeaderElector::Run(std::function<void()> on_started_leading,
                        std::function<void()> on_stopped_leading) {
  if (thread_.joinable()) return;
  KubeClientOptions bounded = client_->options();
  bounded.request_timeout = std::min(bounded.request_timeout, options_.renew_deadline);
  StatusOr<std::unique_ptr<KubeClient>> own = KubeClient::Create(client_->config(), bounded);
  if (own.ok()) {
    own_client_ = std::move(own).value();
  } else {
    // Cannot happen with a configuration the shared client accepted.
    Log(LogLevel::kWarning, "leader election: using the shared client, unbounded",
        {{"error", own.status()}});
  }
  on_started_ = on_started_leading ? std::move(on_started_leading) : [] {};
  on_stopped_ = on_stopped_leading ? std::move(on_stopped_leading) : [] {};
  thread_ = std::thread(&LeaderElector::Loop, this);
}

void LeaderElector::Start(std::function<void()> on_started_leading,
                          std::function<void()> on_stopped_leading) {
  Run(std::move(on_started_leading), std::move(on_stopped_leading));
}

void LeaderElector::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool LeaderElector::WaitStop(std::chrono::milliseconds delay) {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, delay, [&] { return stopping_; });
}

LeaderElector::Attempt LeaderElector::TryAcquireOrRenew() {
  const std::string now = FormatKubeMicroTime(clock_.WallNow());
  const std::string& ns = options_.namespace_name;
  StatusOr<json> got = Api()->Get(kLeases, ns, options_.lease_name);
  if (!got.ok() && got.status().code() == StatusCode::kNotFound) {
    json lease = {{"apiVersion", kLeases.ApiVersion()},
                  {"kind", kLeases.kind},
                  {"metadata", {{"name", options_.lease_name}, {"namespace", ns}}},
                  {"spec",
                   {{"holderIdentity", options_.identity},
                    {"leaseDurationSeconds", CeilSeconds(options_.lease_duration)},
                    {"acquireTime", now},
                    {"renewTime", now},
                    {"leaseTransitions", 0}}}};
    StatusOr<json> created = Api()->Create(kLeases, ns, lease);
    if (created.ok()) return Attempt::kAcquired;
    if (created.status().code() == StatusCode::kAlreadyExists) return Attempt::kHeldByOther;
    Log(LogLevel::kWarning, "leader election: cannot create the Lease",
        {{"kind", "Lease"},
         {"object", ns + "/" + options_.lease_name},
         {"error", created.status()}});
    return Attempt::kFailed;
  }
  if (!got.ok()) {
    Log(LogLevel::kWarning, "leader election: cannot read the Lease",
        {{"kind", "Lease"}, {"object", ns + "/" + options_.lease_name}, {"error", got.status()}});
    return Attempt::kFailed;
  }
  json lease = std::move(got).value();
  json spec = lease.contains("spec") && lease["spec"].is_object() ? lease["spec"] : json::object();
  const std::string holder = StringAt(spec, "holderIdentity");
  if (HeldByOtherLocally(spec)) return Attempt::kHeldByOther;
  if (holder != options_.identity) {
    spec["acquireTime"] = now;
    spec["leaseTransitions"] = IntAt(spec, "leaseTransitions") + 1;
  }
  spec["holderIdentity"] = options_.identity;
  spec["leaseDurationSeconds"] = CeilSeconds(options_.lease_duration);
  spec["renewTime"] = now;
  lease["spec"] = std::move(spec);
  // Conditional on the resourceVersion we read: a 409 means the Lease changed
  // since, not who holds it (another candidate wrote first, or the leader's
  // own earlier renewal landed late, or someone edited it). As client-go
  // does, it is a failed try: the next one reads the Lease again, and a
  // leader steps down when that shows another holder or its renew deadline
  // passes. (Taken for another holder, one conflict ended a leader's term.)
  StatusOr<json> updated = Api()->Update(kLeases, ns, lease);
  if (updated.ok()) return Attempt::kAcquired;
  if (updated.status().code() == StatusCode::kAborted) {
    Log(LogLevel::kInfo, "leader election: the Lease changed since it was read; reading it again",
        {{"kind", "Lease"}, {"object", ns + "/" + options_.lease_name}});
    return Attempt::kFailed;
  }
  Log(LogLevel::kWarning, "leader election: cannot write the Lease",
      {{"kind", "Lease"}, {"object", ns + "/" + options_.lease_name}, {"error", updated.status()}});
  return Attempt::kFailed;
}

bool LeaderElector::HeldByOtherLocally(const json& spec) {
  const std::string holder = StringAt(spec, "holderIdentity");
  const int64_t duration_seconds = IntAt(spec, "leaseDurationSeconds");
  const std::string record = holder + "|" + StringAt(spec, "renewTime") + "|" +
                             std::to_string(duration_seconds) + "|" + StringAt(spec, "acquireTime");
  const auto now = std::chrono::steady_clock::now();
  if (record != observed_record_) {
    observed_record_ = record;
    observed_at_ = now;
  }
  if (holder.empty() || holder == options_.identity) return false;
  return now < observed_at_ + std::chrono::seconds(duration_seconds);
}

void LeaderElector::Release() {
  const std::string& ns = options_.namespace_name;
  StatusOr<json> got = Api()->Get(kLeases, ns, options_.lease_name);
  if (!got.ok()) return;
  json lease = std::move(got).value();
  if (!lease.contains("spec") || !lease["spec"].is_object() ||
      StringAt(lease["spec"], "holderIdentity") != options_.identity) {
    return;
  }
  const std::string now = FormatKubeMicroTime(clock_.WallNow());
  lease["spec"]["holderIdentity"] = "";
  lease["spec"]["leaseDurationSeconds"] = 1;
  lease["spec"]["renewTime"] = now;
  StatusOr<json> updated = Api()->Update(kLeases, ns, lease);
  if (!updated.ok()) {
    Log(LogLevel::kWarning, "leader election: cannot release the Lease",
        {{"kind", "Lease"},
         {"object", ns + "/" + options_.lease_name},
         {"error", updated.status()}});
  }
}

void LeaderElector::Loop() {
  // Renewal is timed in real (steady) time: the waits between tries are real.
  auto last_renew = std::chrono::steady_clock::now();
  while (true) {
    // A leader's attempt ends by its renew deadline; a candidate's is bounded
    // the same way from its start.
    const auto started = std::chrono::steady_clock::now();
    if (own_client_) {
      own_client_->SetRequestDeadline(leader_.load() ? last_renew + options_.renew_deadline
                                                     : started + options_.renew_deadline);
    }
    const Attempt attempt = TryAcquireOrRenew();
    const auto now = std::chrono::steady_clock::now();
    if (attempt == Attempt::kAcquired) {
      // The renewTime written is no earlier than the attempt's start: other
      // replicas count the lease duration from a later point than this.
      last_renew = started;
      if (!leader_.exchange(true)) {
        Log(LogLevel::kInfo, "leader election: acquired the Lease",
            {{"kind", "Lease"},
             {"object", options_.namespace_name + "/" + options_.lease_name},
             {"identity", options_.identity}});
        on_started_();
      }
    } else if (leader_.load() &&
               (attempt == Attempt::kHeldByOther || now - last_renew >= options_.renew_deadline)) {
      leader_ = false;
      Log(LogLevel::kWarning, "leader election: lost the Lease",
          {{"kind", "Lease"},
           {"object", options_.namespace_name + "/" + options_.lease_name},
           {"identity", options_.identity}});
      on_stopped_();
    }
    // A leader that has not renewed tries again at the latest at its
    // deadline, where the next failure makes it step down on time.
    auto wait = options_.retry_period;
    if (leader_.load()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          last_renew + options_.renew_deadline - std::chrono::steady_clock::now());
      wait = std::clamp(left, std::chrono::milliseconds(0), options_.retry_period);
    }
    if (!WaitStop(wait)) break;
  }
  if (leader_.load()) {
    if (own_client_) {
      own_client_->SetRequestDeadline(std::chrono::steady_clock::now() + options_.renew_deadline);
    }
    Release();
    leader_ = false;
    on_stopped_();
  }
}

}  // namespace pacer::controller
