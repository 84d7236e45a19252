#include "daemon/controller_manager.h"

#include <unistd.h>

#include <chrono>
#include <set>
#include <unordered_map>

#include "core/cache_transforms.h"
#include "core/json_fields.h"
#include "core/work_queue.h"
#include "daemon/kube_sources.h"
#include "daemon/pod_launcher.h"
#include "kube/api_errors.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "kube/kube_client.h"
#include "kube/leader_election.h"
#include "kube/resources.h"
#include "observe/controller_metrics.h"
#include "observe/health_server.h"
#include "observe/heartbeat.h"
#include "observe/log.h"
#include "observe/scheduler_metrics.h"
#include "reconcile/guarded_reconcile.h"

namespace pacer::controller {
namespace {

// No status yet, or phase Pending: not planned, or waiting for GPUs.
bool IsPending(const nlohmann::json& job) {
  const std::string phase = StringMember(Member(job, "status"), "phase");
  return phase.empty() || phase == "Pending";
}

std::string JobLabelOf(const nlohmann::json& pod) {
  const nlohmann::json* metadata = Member(pod, "metadata");
  return StringMember(metadata != nullptr ? Member(*metadata, "labels") : nullptr, kJobLabel);
}

std::string NamespaceOf(const nlohmann::json& pod) {
  const std::string ns = StringMember(Member(pod, "metadata"), "namespace");
  return ns.empty() ? "default" : ns;
}

}  // namespace

struct ControllerManager::Impl {
  explicit Impl(ManagerOptions o) : options(std::move(o)) {}

  ManagerOptions options;
  std::unique_ptr<KubeClient> client;
  std::unique_ptr<Informer> trainjobs, pods, nodes, quotas;
  std::unique_ptr<EventRecorder> events;
  std::unique_ptr<KubeJobStore> store;
  std::unique_ptr<PodLauncher> launcher;
  std::unique_ptr<KubeInventory> inventory;
  std::unique_ptr<PrometheusMetricsSource> metrics_source;
  std::unique_ptr<Reconciler> reconciler;
  std::unique_ptr<AllocationBoard> board;  // null without cluster scheduling
  std::unique_ptr<ClusterScheduler> scheduler;
  std::unique_ptr<SchedulerMetrics> scheduler_metrics;
  std::thread scheduler_thread;
  std::mutex scheduler_mu;
  std::condition_variable scheduler_cv;
  bool scheduler_due = false;   // guarded by scheduler_mu
  bool scheduler_stop = false;  // guarded by scheduler_mu
  bool first_pass_done = false;  // guarded by scheduler_mu
  std::unique_ptr<WorkQueue> queue;
  std::unique_ptr<ControllerMetrics> metrics;
  std::unique_ptr<HealthServer> health;
  std::unique_ptr<Heartbeat> heartbeat;
  std::unique_ptr<LeaderElector> elector;
  std::thread timer_thread;
  std::vector<std::thread> workers;

  std::mutex mu;
  std::condition_variable cv;
  bool stopped = false;
  bool releasing = false;  // Stop() has joined the workers and hands the lease back
  bool lost_leadership = false;
  std::atomic<bool> leading{false};
  std::atomic<bool> workers_started{false};
  // StartWorkers runs on the leader elector's thread, StopWorkers on the
  // one that calls Stop(): without this lock a stop during a start found no
  // threads to join, and the start then created threads nobody joined:
  // std::terminate at exit.
  std::mutex workers_mu;
  bool workers_stopped = false;  // guarded by workers_mu

  void Enqueue(const std::string& key) {
    queue->Add(key);
    metrics->CountQueueAdd();
    metrics->SetQueueDepth(queue->Len());
  }

  void StartWorkers() {
    std::lock_guard<std::mutex> workers_lock(workers_mu);
    if (workers_stopped || workers_started.exchange(true)) return;
    Log(LogLevel::kInfo, "became the leader; starting reconcile workers",
        {{"workers", options.workers}});
    // A standby's last beat is from its construction: the silence of a new
    // leader counts from now.
    heartbeat->Beat();
    leading.store(true);
    metrics->SetLeader(true);
    // Every known job is reconciled once on start (level-triggered).
    for (const nlohmann::json& job : trainjobs->List()) Enqueue(ObjectKey(job));
    if (scheduler) {
      // The first pass on the scheduler's thread, not here on the leader
      // elector's: a new leader's first pass plans every job's curve afresh
      // (seconds with hundreds of jobs), and the Lease was not renewed
      // meanwhile; past the renew deadline the leader stepped down and
      // exited, and restarted into the same pass.
      scheduler_thread = std::thread([this] {
        RunSchedulerPass();
        {
          std::lock_guard<std::mutex> lock(scheduler_mu);
          first_pass_done = true;
        }
        scheduler_cv.notify_all();
        SchedulerLoop();
      });
    }
    for (int i = 0; i < options.workers; ++i) {
      workers.emplace_back([this] {
        // Jobs see their allocation on their first reconcile, instead of a
        // 'waiting' detour: the workers start after the first pass.
        if (scheduler) {
          std::unique_lock<std::mutex> lock(scheduler_mu);
          scheduler_cv.wait(lock, [this] { return first_pass_done || scheduler_stop; });
        }
        WorkerLoop();
      });
    }
  }

  void WorkerLoop() {
    RunReconcileWorker(
        *queue, [this] { return leading.load(); }, [this](const std::string& k) { Process(k); });
  }

  // One key: reconciled, its outcome counted and logged, and requeued as
  // controller-runtime does (a later pass, backoff, or nothing when terminal).
  void Process(const std::string& key) {
    const auto start = std::chrono::steady_clock::now();
    // An exception escaping the reconcile is caught here: the key is
    // retried with backoff instead of the process terminating.
    const GuardedReconcileResult guarded =
        GuardedReconcile([this](const std::string& k) { return reconciler->Reconcile(k); }, key);
    const ReconcileResult& result = guarded.result;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    metrics->RecordReconcile(seconds, result.status, result.requeue_after.has_value());
    ObjectLogger log("TrainJob", key);
    if (guarded.threw) metrics->CountReconcilePanic();
    if (result.status.ok()) {
      queue->Forget(key);
      if (result.requeue_after) queue->AddAfter(key, *result.requeue_after);
    } else if (result.status.code() == StatusCode::kInvalidArgument) {
      // Terminal: the spec (or our request) must change first.
      log.Error("reconcile failed; not retrying", {{"error", result.status}});
      queue->Forget(key);
    } else if (guarded.threw) {
      log.Error("reconcile threw an exception (a controller bug); retrying with backoff",
                {{"error", result.status}, {"requeues", queue->NumRequeues(key)}});
      queue->AddRateLimited(key);
    } else {
      log.Warning("reconcile failed; retrying with backoff",
                  {{"error", result.status}, {"requeues", queue->NumRequeues(key)}});
      // An API server that throttled us (429) or is shutting down (503) says
      // when to come back; the backoff alone would be back in milliseconds.
      queue->AddRateLimited(key, RetryAfter(result.status).value_or(std::chrono::seconds(0)));
    }
    PublishJob(key);
    metrics->SetQueueDepth(queue->Len());
    heartbeat->Beat();
  }

  void PublishJob(const std::string& key) {
    const size_t slash = key.find('/');
    const std::string ns = key.substr(0, slash), name = key.substr(slash + 1);
    std::optional<JobView> view = reconciler->View(key);
    if (!view) {
      metrics->RemoveJob(ns, name);
      std::lock_guard<std::mutex> lock(counts_mu);
      counts.erase(key);  // a job re-created under this name counts from zero
      return;
    }
    JobMetrics m;
    m.namespace_name = ns;
    m.name = name;
    if (view->plan) {
      m.predicted_step_seconds = view->plan->step.step_seconds;
      m.gpus = view->plan->layout.gpus();
    }
    m.measured_step_seconds = view->measured_step_seconds;
    if (view->projected_completion_unix_seconds) {
      m.projected_completion_timestamp_seconds =
          static_cast<double>(*view->projected_completion_unix_seconds);
    }
    if (view->deadline_unix_seconds) {
      m.deadline_timestamp_seconds = static_cast<double>(*view->deadline_unix_seconds);
    }
    m.deadline_slack_seconds = view->slack_seconds;
    if (view->total_steps > 0) {
      m.progress_ratio = std::clamp(
          static_cast<double>(view->steps_completed) / static_cast<double>(view->total_steps), 0.0,
          1.0);
    }
    m.phase = PhaseName(view->phase);
    metrics->SetJob(m);
    // Counters follow the status's totals.
    std::lock_guard<std::mutex> lock(counts_mu);
    auto& seen = counts[key];
    for (; seen.first < view->replans; ++seen.first) metrics->AddReplan(ns, name);
    for (; seen.second < view->restarts; ++seen.second) metrics->AddRestart(ns, name);
  }
  std::mutex counts_mu;
  std::map<std::string, std::pair<int, int>> counts;

  // Keys of jobs in phase Pending (waiting for GPUs or not yet planned),
  // kept from the TrainJob informer so that freed GPUs wake only them.
  void NotePhase(const std::string& key, const nlohmann::json* job) {
    const bool pending = job != nullptr && IsPending(*job);
    std::lock_guard<std::mutex> lock(pending_mu);
    if (pending) {
      pending_jobs.insert(key);
    } else {
      pending_jobs.erase(key);
    }
  }
  std::vector<std::string> PendingJobs() {
    std::lock_guard<std::mutex> lock(pending_mu);
    return {pending_jobs.begin(), pending_jobs.end()};
  }
  std::mutex pending_mu;
  std::set<std::string> pending_jobs;

  // Whether a TrainJob event needs a pass (controller-runtime's
  // GenerationChangedPredicate, plus deletion and resync): the controller's
  // own status writes change the resourceVersion but not the generation,
  // and a pass for each of them would reconcile every running job again
  // right after every pass instead of at its requeue time.
  bool WorthAPass(const std::string& key, const nlohmann::json* job) {
    std::lock_guard<std::mutex> lock(seen_mu);
    if (job == nullptr) {
      seen_versions.erase(key);
      return true;
    }
    const nlohmann::json* metadata = Member(*job, "metadata");
    const nlohmann::json* generation =
        metadata != nullptr ? Member(*metadata, "generation") : nullptr;
    const std::string version = StringMember(metadata, "resourceVersion");
    const int64_t gen =
        generation != nullptr && generation->is_number_integer() ? generation->get<int64_t>() : -1;
    const bool deleting = metadata != nullptr && Member(*metadata, "deletionTimestamp") != nullptr;
    auto [it, first] = seen_versions.try_emplace(key, gen, version);
    const bool resync = !first && it->second.second == version;  // the same object again
    const bool spec_changed = !first && it->second.first != gen;
    it->second = {gen, version};
    return first || resync || spec_changed || deleting || gen < 0;
  }
  std::mutex seen_mu;
  std::unordered_map<std::string, std::pair<int64_t, std::string>> seen_versions;

  // The job key ("namespace/name") of a worker pod, remembered while the pod
  // exists; "" for pods of no TrainJob. Returns the job to wake.
  std::string NotePodJob(const std::string& pod_key, const nlohmann::json* pod) {
    std::lock_guard<std::mutex> lock(pod_jobs_mu);
    if (pod == nullptr) {
      auto it = pod_jobs.find(pod_key);
      if (it == pod_jobs.end()) return "";
      std::string job = std::move(it->second);
      pod_jobs.erase(it);
      return job;
    }
    const std::string label = JobLabelOf(*pod);
    if (label.empty()) return "";
    std::string job = NamespaceOf(*pod) + "/" + label;
    pod_jobs[pod_key] = job;
    return job;
  }
  std::mutex pod_jobs_mu;
  std::unordered_map<std::string, std::string> pod_jobs;

  // Asks for a scheduler pass soon (passes are at least a second apart, so a
  // burst of events costs one).
  void ScheduleSoon() {
    if (!scheduler) return;
    std::lock_guard<std::mutex> lock(scheduler_mu);
    scheduler_due = true;
    scheduler_cv.notify_all();
  }

  void SchedulerLoop() {
    const auto interval = std::chrono::milliseconds(
        static_cast<int64_t>(options.scheduler.decision_interval_seconds * 1000));
    std::unique_lock<std::mutex> lock(scheduler_mu);
    while (!scheduler_stop) {
      auto wait = interval;
      if (std::optional<int64_t> at = scheduler->next_wakeup_unix_seconds()) {
        const int64_t now = SystemClock::Default().WallUnixSeconds();
        wait = std::min(wait, std::chrono::milliseconds(std::max<int64_t>(0, *at - now) * 1000));
      }
      scheduler_cv.wait_for(lock, wait, [this] { return scheduler_stop || scheduler_due; });
      if (scheduler_stop) break;
      scheduler_due = false;
      lock.unlock();
      if (leading.load()) RunSchedulerPass();
      lock.lock();
      // Debounce: events during the next second join one pass.
      scheduler_cv.wait_for(lock, std::chrono::seconds(1), [this] { return scheduler_stop; });
    }
  }

  void RunSchedulerPass() {
    if (options.scheduler_pass_hook) options.scheduler_pass_hook();
    const auto start = std::chrono::steady_clock::now();
    const int64_t now = SystemClock::Default().WallUnixSeconds();
    std::vector<ScheduledJob> jobs;
    int met = 0, missed = 0;
    for (const nlohmann::json& object : trainjobs->List()) {
      if (std::optional<ScheduledJob> job = ClusterScheduler::JobFromObject(object, now)) {
        jobs.push_back(std::move(*job));
      } else if (std::optional<bool> outcome = DeadlineMet(object)) {
        ++(*outcome ? met : missed);
      }
    }
    scheduler_metrics->SetDeadlineOutcomes(met, missed);
    StatusOr<ClusterInventory> cluster = inventory->Current();
    if (!cluster.ok()) {
      Log(LogLevel::kWarning, "scheduler pass skipped: no inventory",
          {{"error", cluster.status()}});
      return;
    }
    StatusOr<std::map<std::string, Allocation>> allocations = scheduler->Pass(jobs, *cluster, now);
    if (!allocations.ok()) {
      Log(LogLevel::kError, "scheduler pass failed; allocations unchanged",
          {{"error", allocations.status()}});
      return;
    }
    SchedulerCounts tally;
    const std::map<std::string, Allocation> before = board->All();
    for (const auto& [key, a] : *allocations) {
      if (!a.admitted) {
        ++tally.rejected;
      } else if (a.gpus == 0) {
        ++tally.waiting;
      } else {
        ++tally.running;
      }
      tally.allocated_gpus += a.gpus;
      auto old = before.find(key);
      if (old != before.end() && old->second.admitted && old->second.gpus > 0 && a.admitted &&
          a.gpus != old->second.gpus) {
        scheduler_metrics->AddResize(a.gpus > old->second.gpus);
      }
    }
    const std::vector<std::string> changed = board->Publish(std::move(*allocations));
    scheduler_metrics->RecordPass(
        tally, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    for (const std::string& key : changed) Enqueue(key);
  }

  void StopWorkers() {
    std::lock_guard<std::mutex> workers_lock(workers_mu);
    workers_stopped = true;
    {
      std::lock_guard<std::mutex> lock(scheduler_mu);
      scheduler_stop = true;
      scheduler_cv.notify_all();
    }
    if (scheduler_thread.joinable()) scheduler_thread.join();
    if (queue) queue->ShutDown();
    for (std::thread& t : workers) t.join();
    workers.clear();
    if (timer_thread.joinable()) timer_thread.join();
  }
};

ControllerManager::ControllerManager(ManagerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

ControllerManager::~ControllerManager() { Stop(); }

Status ControllerManager::Start() {
  Impl& m = *impl_;
  Log(LogLevel::kInfo, "starting pacer-controller", {{"cluster", m.options.kube.ToString()}});
  if (m.options.identity.empty()) {
    char host[256] = {0};
    ::gethostname(host, sizeof(host) - 1);
    m.options.identity = std::string(host) + "_" + std::to_string(::getpid());
  }
  // The replica in every request's User-Agent: the API server's audit log
  // (and a test's fault injection) tell the replicas apart, as the Lease
  // tells their holders apart.
  KubeClientOptions client_options;
  client_options.user_agent = "pacer-controller/" + m.options.identity;
  ASSIGN_OR_RETURN(m.client, KubeClient::Create(m.options.kube, client_options));
  m.metrics = std::make_unique<ControllerMetrics>();
  m.queue = std::make_unique<WorkQueue>(SystemClock::Default());

  InformerOptions job_options;
  job_options.resync_period = std::chrono::minutes(10);
  m.trainjobs = std::make_unique<Informer>(m.client.get(), kTrainJobs, m.options.watch_namespace,
                                           job_options);
  InformerOptions pod_options;
  pod_options.index_label = kJobLabel;
  pod_options.transform = TrimPodForCache;
  // All pods: GPUs held by anyone's pods are not free.
  m.pods = std::make_unique<Informer>(m.client.get(), kPods, "", pod_options);
  InformerOptions node_options;
  node_options.transform = TrimNodeForCache;
  m.nodes = std::make_unique<Informer>(m.client.get(), kNodes, "", node_options);

  // ResourceQuotas only wake jobs whose launch a quota refused (in the
  // watched namespaces, where TrainJobs are).
  m.quotas = std::make_unique<Informer>(m.client.get(), kResourceQuotas, m.options.watch_namespace,
                                        InformerOptions{});

  m.events = std::make_unique<EventRecorder>(m.client.get());
  m.store = std::make_unique<KubeJobStore>(m.client.get(), m.events.get());
  m.launcher = std::make_unique<PodLauncher>(m.client.get(), m.pods.get(), m.options.pods);
  Impl* impl = impl_.get();
  // Jobs waiting for GPUs get another look when GPUs may have become free.
  m.inventory = std::make_unique<KubeInventory>(m.nodes.get(), m.pods.get(), [impl] {
    if (!impl->leading.load()) return;
    impl->ScheduleSoon();
    for (const std::string& key : impl->PendingJobs()) impl->Enqueue(key);
  });
  m.metrics_source = std::make_unique<PrometheusMetricsSource>(m.options.prometheus_url,
                                                               m.options.measurement_window);
  if (m.options.cluster_scheduling) {
    m.board = std::make_unique<AllocationBoard>();
    ClusterSchedulerOptions scheduler_options = m.options.scheduler;
    scheduler_options.constants = m.options.reconciler.replan.constants;
    m.scheduler = std::make_unique<ClusterScheduler>(scheduler_options);
    m.scheduler_metrics = std::make_unique<SchedulerMetrics>(*m.metrics->registry());
  }
  m.reconciler = std::make_unique<Reconciler>(
      ReconcilerDeps{m.store.get(), m.launcher.get(), m.metrics_source.get(), m.inventory.get(),
                     &SystemClock::Default(), m.board.get()},
      m.options.reconciler);

  m.trainjobs->OnChange([impl](const std::string& key, const nlohmann::json* job) {
    impl->NotePhase(key, job);
    // Arrivals, spec edits, deletions and phase changes (a job finishing
    // frees GPUs, one starting measures its speed) change the shared plan.
    impl->ScheduleSoon();
    if (impl->leading.load() && impl->WorthAPass(key, job)) impl->Enqueue(key);
  });
  m.pods->OnChange([impl](const std::string& key, const nlohmann::json* pod) {
    // A deleted pod no longer carries its labels here: its job is
    // remembered from the pod's earlier events.
    const std::string job = impl->NotePodJob(key, pod);
    if (impl->leading.load() && !job.empty()) impl->Enqueue(job);
  });
  m.quotas->OnChange([impl](const std::string&, const nlohmann::json*) {
    // A quota raised or removed may admit a refused launch: retry those now
    // instead of at the end of their backoff.
    if (!impl->leading.load()) return;
    for (const std::string& key : impl->reconciler->WakeRefusedLaunches()) impl->Enqueue(key);
  });
  m.heartbeat = std::make_unique<Heartbeat>("reconcile-workers", m.options.reconcile_max_silence);
  HealthServerOptions health_options;
  health_options.bind_address = m.options.bind_address;
  health_options.metrics_port = m.options.metrics_port;
  health_options.probe_port = m.options.probe_port;
  m.health = std::make_unique<HealthServer>(health_options, m.metrics->registry());
  RETURN_IF_ERROR(m.health->AddLivenessCheck("reconcile-workers", [impl]() {
    if (!impl->leading.load()) return Status::Ok();
    // Workers only beat when they finish a reconcile, and a leader with no
    // jobs (or only finished ones) has none to finish: an idle queue is
    // live, and counts as a beat, so a busy spell after it is measured from
    // here rather than from the last reconcile, minutes or hours ago.
    if (impl->queue->Len() == 0 && impl->queue->NumProcessing() == 0) {
      impl->heartbeat->Beat();
      return Status::Ok();
    }
    return impl->heartbeat->Check();
  }));
  RETURN_IF_ERROR(m.health->AddReadinessCheck("informers-synced", [impl]() {
    if (impl->trainjobs->HasSynced() && impl->pods->HasSynced() && impl->nodes->HasSynced()) {
      return Status::Ok();
    }
    return UnavailableError("waiting for the TrainJob, Pod and Node caches to sync");
  }));
  RETURN_IF_ERROR(m.health->Start());

  m.trainjobs->Start();
  m.pods->Start();
  m.nodes->Start();
  m.quotas->Start();
  m.timer_thread = std::thread([impl] { impl->queue->RunTimerLoop(); });
  const auto sync_timeout = std::chrono::seconds(60);
  if (!m.trainjobs->WaitForSync(sync_timeout) || !m.pods->WaitForSync(sync_timeout) ||
      !m.nodes->WaitForSync(sync_timeout)) {
    return UnavailableError(
        "the TrainJob, Pod and Node caches did not sync within 60 s; check "
        "the API server address and the controller's RBAC");
  }
  Log(LogLevel::kInfo, "caches synced",
      {{"trainjobs", static_cast<int64_t>(m.trainjobs->List().size())},
       {"nodes", static_cast<int64_t>(m.nodes->List().size())}});

  if (!m.options.leader_elect) {
    m.StartWorkers();
    return Status::Ok();
  }
  LeaderElectionOptions le;
  le.namespace_name = LeaseNamespace(m.options.lease_namespace, m.options.kube);
  le.lease_name = m.options.lease_name;
  le.identity = m.options.identity;
  le.lease_duration = m.options.lease_duration;
  le.renew_deadline = m.options.renew_deadline;
  le.retry_period = m.options.retry_period;
  m.elector = std::make_unique<LeaderElector>(m.client.get(), le);
  RETURN_IF_ERROR(m.elector->Validate());
  Log(LogLevel::kInfo, "waiting to become the leader",
      {{"lease", le.namespace_name + "/" + le.lease_name}, {"identity", le.identity}});
  m.elector->Start([impl] { impl->StartWorkers(); },
                   [impl] {
                     if (!impl->workers_started.load()) return;
                     {
                       // Stop() releases the lease on purpose, once its
                       // workers are joined: not a loss. A loss while Stop()
                       // still joins them (a pass in flight) is one: it was
                       // taken for the release, so that pass went on writing
                       // after the standby took over.
                       std::lock_guard<std::mutex> lock(impl->mu);
                       if (impl->releasing) return;
                     }
                     Log(LogLevel::kError, "lost the leader lease; stopping");
                     // Before anything else: a pass in flight must not change
                     // what the new leader manages.
                     impl->client->FenceWrites(
                         "this controller lost the leader lease; the new leader acts");
                     impl->leading.store(false);
                     impl->metrics->SetLeader(false);
                     std::lock_guard<std::mutex> lock(impl->mu);
                     impl->lost_leadership = true;
                     impl->cv.notify_all();
                   });
  return Status::Ok();
}

void ControllerManager::Stop() {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    if (m.stopped) return;
    m.stopped = true;
    m.cv.notify_all();
  }
  m.leading.store(false);
  m.StopWorkers();
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.releasing = true;
  }
  if (m.elector) m.elector->Stop();  // releases the lease: a standby takes over at once
  if (m.trainjobs) m.trainjobs->Stop();
  if (m.pods) m.pods->Stop();
  if (m.nodes) m.nodes->Stop();
  if (m.quotas) m.quotas->Stop();
  if (m.events) m.events->Flush(std::chrono::seconds(5));
  if (m.health) m.health->Stop();
}

ControllerManager::Exit ControllerManager::Wait() {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lock(m.mu);
  m.cv.wait(lock, [&m] { return m.stopped || m.lost_leadership; });
  return m.lost_leadership ? Exit::kLostLeadership : Exit::kStopped;
}

bool ControllerManager::IsLeader() const { return impl_->leading.load(); }
std::string LeaseNamespace(const std::string& flag, const KubeConfig& kube) {
  if (!flag.empty()) return flag;
  return kube.context == "in-cluster" && !kube.namespace_name.empty() ? kube.namespace_name
                                                                      : "pacer-system";
}

int ControllerManager::metrics_port() const {
  return impl_->health ? impl_->health->metrics_port() : 0;
}
int ControllerManager::probe_port() const {
  return impl_->health ? impl_->health->probe_port() : 0;
}

}  // namespace pacer::controller
