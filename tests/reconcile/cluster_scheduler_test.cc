// The controller's scheduler pass (reconcile/cluster_scheduler.h): jobs read
// from TrainJob objects, curves from the planner, admission and sizes from
// the shared deadline policy, and the board the reconcilers read.
#include "reconcile/cluster_scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "pacer/planner/units.h"
#include "reconcile/worker_env.h"

namespace pacer::controller {
namespace {

constexpr int64_t kNow = 1795305600;  // 2026-11-22T00:00:00Z

// A 350M-parameter GPT (architecture inferred) on `tokens`; a deadline
// `deadline_unix` when given, else best effort.
nlohmann::json SmallJob(const std::string& name, double tokens,
                        std::optional<int64_t> deadline_unix,
                        const std::string& objective = "cost") {
  nlohmann::json job = {{"apiVersion", "pacer.dev/v1alpha1"},
                        {"kind", "TrainJob"},
                        {"metadata",
                         {{"name", name},
                          {"namespace", "team"},
                          {"uid", "uid-" + name},
                          {"generation", 1},
                          {"creationTimestamp", planner::FormatRfc3339(kNow)}}},
                        {"spec",
                         {{"model", {{"parameters", "350M"}, {"sequenceLength", 2048}}},
                          {"data", {{"tokens", tokens}}},
                          {"training", {{"globalBatchSize", 256}, {"precision", "bf16"}}},
                          {"objective", objective},
                          {"resources", {{"gpuTypes", {"H100-SXM"}}}}}}};
  if (deadline_unix) job["spec"]["deadline"] = planner::FormatRfc3339(*deadline_unix);
  return job;
}

// `nodes` x 8 H100s (nodes h100-0, h100-1 ..) with `free_gpus` free.
ClusterInventory H100Pool(int nodes, int free_gpus) {
  ClusterInventory cluster;
  planner::Inventory& inventory = cluster.inventory;
  planner::NodePool pool;
  pool.name = "h100";
  pool.gpu_type = "H100-SXM";
  pool.nodes = nodes;
  pool.gpus_per_node = 8;
  pool.free_gpus = free_gpus;
  pool.network_gbps_per_node = 3200;
  pool.nvlink_gbps = 900;
  inventory.node_pools.push_back(pool);
  for (int i = 0; i < nodes; ++i) {
    const int free_here = std::clamp(free_gpus - 8 * i, 0, 8);
    cluster.nodes_by_pool[pool.name].push_back({"h100-" + std::to_string(i), 8, free_here});
  }
  return cluster;
}

// The pods of job `key` hold `gpus` of the pool's H100s; the rest of the
// pool's GPUs not held by a job's pods are free.
void Hold(ClusterInventory& cluster, const std::string& key, int gpus) {
  cluster.trainjob_gpus[key]["H100-SXM"] = gpus;
  int held = 0;
  for (const auto& [job, by_type] : cluster.trainjob_gpus) held += by_type.at("H100-SXM");
  planner::NodePool& pool = cluster.inventory.node_pools.at(0);
  pool.free_gpus = pool.nodes * pool.gpus_per_node - held;
}

// Adds a pool `name` of `nodes` x 8 `gpu_type`, every GPU free.
void AddPool(ClusterInventory& cluster, const std::string& name, const std::string& gpu_type,
             int nodes) {
  planner::NodePool pool = cluster.inventory.node_pools.at(0);
  pool.name = name;
  pool.gpu_type = gpu_type;
  pool.nodes = nodes;
  pool.free_gpus = 8 * nodes;
  cluster.inventory.node_pools.push_back(pool);
  for (int i = 0; i < nodes; ++i) {
    cluster.nodes_by_pool[name].push_back({name + "-" + std::to_string(i), 8, 8});
  }
}

ScheduledJob Read(const nlohmann::json& object) {
  std::optional<ScheduledJob> job = ClusterScheduler::JobFromObject(object, kNow);
  EXPECT_TRUE(job.has_value());
  return job.value_or(ScheduledJob{});
}

// Seconds for `steps` at g GPUs on the job's curve.
double SecondsAt(ClusterScheduler& scheduler, const ScheduledJob& job,
                 const ClusterInventory& inventory, int gpus, int64_t steps) {
  StatusOr<sched::ThroughputCurve> curve = scheduler.Curve(job, inventory, "H100-SXM", kNow);
  EXPECT_TRUE(curve.ok()) << curve.status().ToString();
  const double rate = curve.ok() ? curve->IterationsPerSecond(gpus) : 0;
  EXPECT_GT(rate, 0) << gpus << " GPUs";
  return static_cast<double>(steps) / rate;
}

// The job runs, admitted, on `gpus` of the pool's H100s.
void RunsAdmitted(ScheduledJob& job, int gpus) {
  job.current_gpus = gpus;
  job.current_gpu_type = "H100-SXM";
  job.admitted = true;
}

// The scenario on one 16-GPU pool: an early job with a loose deadline
// holds every GPU (first come, first served gave it all of them); a second
// job with a tight deadline arrives. First come, first served would make it
// wait until the first finishes, past its deadline; the shared schedule
// shrinks the first (never below its own deadline's need) and admits both,
// and a best-effort third job gets only what is left.
TEST(ClusterSchedulerTest, ATightDeadlineArrivingOnAFullPoolShrinksTheEarlyJobAndAllMeetTheirs) {
  ClusterInventory inventory = H100Pool(2, 0);
  Hold(inventory, "team/early", 16);
  ClusterScheduler scheduler({});

  ScheduledJob early = Read(SmallJob("early", 40e9, std::nullopt, "time"));
  ScheduledJob tight = Read(SmallJob("tight", 8e9, std::nullopt));
  const double early_at_16 = SecondsAt(scheduler, early, inventory, 16, early.remaining_steps);
  const double early_at_8 = SecondsAt(scheduler, early, inventory, 8, early.remaining_steps);
  const double tight_at_8 = SecondsAt(scheduler, tight, inventory, 8, tight.remaining_steps);
  const double tight_at_4 = SecondsAt(scheduler, tight, inventory, 4, tight.remaining_steps);
  ASSERT_LT(tight_at_8 * 1.25, tight_at_4) << "the tight job needs 8 GPUs to make its deadline";
  early.deadline_unix_seconds = kNow + static_cast<int64_t>(early_at_8 * 1.5);
  early.current_gpus = 16;
  early.current_gpu_type = "H100-SXM";
  early.admitted = true;
  tight.deadline_unix_seconds = kNow + static_cast<int64_t>(tight_at_8 * 1.25 + 600);
  // First come, first served: the tight job starts when the early one ends.
  ASSERT_GT(kNow + early_at_16, static_cast<double>(*tight.deadline_unix_seconds));

  ScheduledJob best_effort = Read(SmallJob("later", 4e9, std::nullopt));
  best_effort.arrival_unix_seconds = kNow + 1;

  StatusOr<std::map<std::string, Allocation>> pass =
      scheduler.Pass({early, tight, best_effort}, inventory, kNow);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  Allocation e = pass->at("team/early");
  Allocation t = pass->at("team/tight");
  EXPECT_TRUE(e.admitted);
  EXPECT_TRUE(t.admitted) << t.message;
  EXPECT_EQ(e.gpu_type, "H100-SXM");
  ASSERT_TRUE(e.planned_finish_unix_seconds && t.planned_finish_unix_seconds);
  EXPECT_LE(*e.planned_finish_unix_seconds, *early.deadline_unix_seconds);
  EXPECT_LE(*t.planned_finish_unix_seconds, *tight.deadline_unix_seconds);
  EXPECT_LE(e.gpus + t.gpus + pass->at("team/later").gpus, 16);

  // Reservations are made as late as possible (early capacity stays in
  // use): the tight job is told when its GPUs start, and each pass may move
  // that later while the plan still holds. The passes the controller would
  // run at those times: the early job (on 16 GPUs meanwhile) gives GPUs up
  // before the tight job's deadline is at risk.
  int64_t now = kNow;
  for (int i = 0; i < 8 && t.gpus == 0; ++i) {
    ASSERT_TRUE(t.admitted);
    ASSERT_TRUE(t.next_start_unix_seconds.has_value());
    ASSERT_LT(*t.next_start_unix_seconds, *tight.deadline_unix_seconds);
    const int64_t next = *t.next_start_unix_seconds;
    const double ran = static_cast<double>(next - now) / early_at_16;
    early.remaining_steps -= static_cast<int64_t>(ran * static_cast<double>(early.remaining_steps));
    now = next;
    early.current_gpus = e.gpus;
    Hold(inventory, "team/early", e.gpus);
    tight.admitted = true;  // the reconciler wrote Admitted=True
    best_effort.admitted = pass->at("team/later").admitted;
    pass = scheduler.Pass({early, tight, best_effort}, inventory, now);
    ASSERT_TRUE(pass.ok()) << pass.status().ToString();
    e = pass->at("team/early");
    t = pass->at("team/tight");
  }
  EXPECT_TRUE(t.admitted);
  ASSERT_GT(t.gpus, 0) << "the tight job got GPUs";
  EXPECT_LE(static_cast<double>(now) +
                SecondsAt(scheduler, tight, inventory, t.gpus, tight.remaining_steps),
            static_cast<double>(*tight.deadline_unix_seconds))
      << "in time for its deadline";
  EXPECT_LT(e.gpus, 16) << "the early job gave up GPUs";
  EXPECT_LE(e.gpus + t.gpus + pass->at("team/later").gpus, 16);
  // Never below its own deadline's need: the shared plan still finishes it in time.
  EXPECT_TRUE(e.admitted);
  ASSERT_TRUE(e.planned_finish_unix_seconds && t.planned_finish_unix_seconds);
  EXPECT_LE(*e.planned_finish_unix_seconds, *early.deadline_unix_seconds);
  EXPECT_LE(*t.planned_finish_unix_seconds, *tight.deadline_unix_seconds);
}

TEST(ClusterSchedulerTest, AJobNoShareCanSaveIsRejectedWithWhatWouldAdmitItAndOthersKeepTheirs) {
  const ClusterInventory inventory = H100Pool(2, 16);
  ClusterScheduler scheduler({});
  ScheduledJob fine = Read(SmallJob("fine", 4e9, std::nullopt));
  fine.deadline_unix_seconds =
      kNow +
      static_cast<int64_t>(SecondsAt(scheduler, fine, inventory, 8, fine.remaining_steps) * 3);
  ScheduledJob greedy = Read(SmallJob("greedy", 400e9, std::nullopt));
  greedy.arrival_unix_seconds = kNow + 1;
  // Half the time the whole pool would need.
  greedy.deadline_unix_seconds =
      kNow +
      static_cast<int64_t>(SecondsAt(scheduler, greedy, inventory, 16, greedy.remaining_steps) / 2);

  StatusOr<std::map<std::string, Allocation>> pass =
      scheduler.Pass({fine, greedy}, inventory, kNow);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_TRUE(pass->at("team/fine").admitted);
  EXPECT_GT(pass->at("team/fine").gpus, 0);
  const Allocation& g = pass->at("team/greedy");
  EXPECT_FALSE(g.admitted);
  EXPECT_EQ(g.gpus, 0);
  EXPECT_NE(g.message.find("would be admitted with"), std::string::npos) << g.message;
  EXPECT_NE(g.message.find("deadline of"), std::string::npos) << g.message;
}

// The advice counts the cluster's GPUs: with 8 of 16 held by another
// workload, a job that needs 16 schedulable GPUs needs 24 in the cluster.
// It said 16, which the cluster already had.
TEST(ClusterSchedulerTest, TheAdviceCountsTheGpusHeldOutsideTheJobs) {
  const ClusterInventory inventory = H100Pool(2, 8);  // 8 of 16 held outside
  ClusterScheduler scheduler({});
  ScheduledJob job = Read(SmallJob("urgent", 40e9, std::nullopt));
  const double at_16 = SecondsAt(scheduler, job, inventory, 16, job.remaining_steps);
  const double at_8 = SecondsAt(scheduler, job, inventory, 8, job.remaining_steps);
  ASSERT_GT(at_8, at_16 * 1.5) << "8 GPUs must miss a deadline 16 make";
  job.deadline_unix_seconds = kNow + static_cast<int64_t>(at_16 * 1.3 + 600);
  StatusOr<std::map<std::string, Allocation>> pass = scheduler.Pass({job}, inventory, kNow);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  const Allocation& a = pass->at("team/urgent");
  ASSERT_FALSE(a.admitted);
  EXPECT_NE(a.message.find(" 24 H100-SXM GPUs in the cluster"), std::string::npos) << a.message;
}

TEST(ClusterSchedulerTest, AnAdmittedJobIsNeverDroppedWhenItFallsBehind) {
  ClusterInventory inventory = H100Pool(1, 0);
  Hold(inventory, "team/behind", 8);
  ClusterScheduler scheduler({});
  ScheduledJob job = Read(SmallJob("behind", 40e9, std::nullopt));
  // Its deadline can no longer be met even on the whole pool.
  job.deadline_unix_seconds =
      kNow + static_cast<int64_t>(SecondsAt(scheduler, job, inventory, 8, job.remaining_steps) / 2);
  RunsAdmitted(job, 8);
  StatusOr<std::map<std::string, Allocation>> pass = scheduler.Pass({job}, inventory, kNow);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_TRUE(pass->at("team/behind").admitted);
  EXPECT_GT(pass->at("team/behind").gpus, 0);
}

// An admitted job that gets no GPUs and has no reservation is not waiting
// for "its reserved GPUs": a late job yields to the jobs that can still
// make their deadlines, a best-effort one to every job with a deadline, and
// the status says which and what would change it. It said "its reserved
// H100-SXM GPUs start when GPUs free up", for a reservation that did not
// exist.
TEST(ClusterSchedulerTest, AnAdmittedJobWithoutAReservationSaysWhyItWaits) {
  ClusterInventory inventory = H100Pool(1, 0);
  Hold(inventory, "team/on-time", 8);
  ClusterScheduler scheduler({});
  ScheduledJob on_time = Read(SmallJob("on-time", 40e9, std::nullopt));
  // It needs the whole pool from now to make its deadline.
  on_time.deadline_unix_seconds =
      kNow + 300 +
      static_cast<int64_t>(1.2 *
                           SecondsAt(scheduler, on_time, inventory, 8, on_time.remaining_steps));
  RunsAdmitted(on_time, 8);
  ScheduledJob late = Read(SmallJob("late", 40e9, std::nullopt));
  late.deadline_unix_seconds = kNow + 600;  // far from enough even on the whole pool
  late.admitted = true;
  ScheduledJob best_effort = Read(SmallJob("best-effort", 40e9, std::nullopt));
  best_effort.admitted = true;
  StatusOr<std::map<std::string, Allocation>> pass =
      scheduler.Pass({on_time, late, best_effort}, inventory, kNow);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_EQ(pass->at("team/on-time").gpus, 8);
  const Allocation& l = pass->at("team/late");
  EXPECT_TRUE(l.admitted);
  EXPECT_EQ(l.gpus, 0);
  EXPECT_FALSE(l.next_start_unix_seconds.has_value());
  EXPECT_EQ(l.message,
            "it can no longer finish by its deadline, so the jobs that still can go first: it runs "
            "on the H100-SXM GPUs they leave free (a later spec.deadline plans it again)");
  const Allocation& b = pass->at("team/best-effort");
  EXPECT_TRUE(b.admitted);
  EXPECT_EQ(b.gpus, 0);
  EXPECT_EQ(b.message,
            "best effort (no spec.deadline): it runs on the H100-SXM GPUs that jobs with deadlines "
            "leave free");
}

// Every H100 held by pods outside the jobs (another workload, a deleted
// TrainJob's pods still stopping): no share of that type to decide, and the
// other types are decided still. The pass failed ("the pool needs at least
// one GPU"), and no job of any type got a decision while it lasted.
TEST(ClusterSchedulerTest, APoolHeldWhollyOutsideTheJobsFailsNoPass) {
  ClusterInventory inventory = H100Pool(1, 0);  // 8 H100s, none free, no job's
  planner::NodePool a100 = inventory.inventory.node_pools.at(0);
  a100.name = "a100";
  a100.gpu_type = "A100-80GB";
  a100.free_gpus = 8;
  a100.nvlink_gbps = 600;
  inventory.inventory.node_pools.push_back(a100);
  inventory.nodes_by_pool["a100"].push_back({"a100-0", 8, 8});
  ClusterScheduler scheduler({});
  ScheduledJob waiting = Read(SmallJob("waiting", 4e9, std::nullopt));
  ScheduledJob admitted = Read(SmallJob("admitted", 4e9, std::nullopt));
  admitted.admitted = true;
  nlohmann::json other_object = SmallJob("other", 4e9, std::nullopt);
  other_object["spec"]["resources"]["gpuTypes"] = {"A100-80GB"};
  const ScheduledJob other = Read(other_object);

  StatusOr<std::map<std::string, Allocation>> pass =
      scheduler.Pass({waiting, admitted, other}, inventory, kNow);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  ASSERT_EQ(pass->count("team/other"), 1U);
  EXPECT_TRUE(pass->at("team/other").admitted) << pass->at("team/other").message;
  EXPECT_GT(pass->at("team/other").gpus, 0);
  EXPECT_EQ(pass->count("team/waiting"), 0U) << "undecided until H100s are free, not rejected";
  ASSERT_EQ(pass->count("team/admitted"), 1U);
  EXPECT_TRUE(pass->at("team/admitted").admitted) << "an admitted job is never dropped";
  EXPECT_EQ(pass->at("team/admitted").gpus, 0);
}

// A running job whose curve fails (here it needs 16 GPUs and one of its two
// nodes is gone) keeps its size and the GPUs its pods hold: they were
// counted as capacity and given to another job, which then waited for GPUs
// still in use, and the running job was marked rejected.
TEST(ClusterSchedulerTest, ARunningJobWithoutACurveKeepsItsGpusFromTheOthers) {
  ClusterInventory inventory = H100Pool(1, 0);
  Hold(inventory, "team/big", 8);
  ClusterScheduler scheduler({});
  nlohmann::json big_object = SmallJob("big", 40e9, std::nullopt);
  big_object["spec"]["resources"]["minGPUs"] = 16;
  ScheduledJob big = Read(big_object);
  ASSERT_FALSE(scheduler.Curve(big, inventory, "H100-SXM", kNow).ok());
  big.current_gpus = 16;
  big.current_gpu_type = "H100-SXM";
  big.admitted = true;
  const ScheduledJob small = Read(SmallJob("small", 4e9, std::nullopt));

  StatusOr<std::map<std::string, Allocation>> pass = scheduler.Pass({big, small}, inventory, kNow);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_TRUE(pass->at("team/big").admitted) << pass->at("team/big").message;
  // The size of its plan: 8, what its pods hold, would read as a resize the
  // reconciler stops it for, and no layout runs 8 under minGPUs 16.
  EXPECT_EQ(pass->at("team/big").gpus, 16);
  EXPECT_EQ(pass->count("team/small") ? pass->at("team/small").gpus : 0, 0) << "no GPU is free";

  // Its pods gone too (a relaunch under way): still admitted, never dropped.
  pass = scheduler.Pass({big, small}, H100Pool(1, 8), kNow);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_TRUE(pass->at("team/big").admitted) << pass->at("team/big").message;
}

// The GPUs a job without a curve is kept at are its own also while its
// pods do not hold them (between two attempts): the pool's free GPUs are
// promised to it first. Before, they counted as capacity for the others as
// well, and the pass gave out more GPUs than the pool has. A plan larger
// than the nodes it may use (nodes gone or excluded) is promised nothing
// until they return, and a promise never takes GPUs running pods hold.
TEST(ClusterSchedulerTest, AJobKeptWithoutACurveIsPromisedItsGpusBetweenAttempts) {
  ClusterScheduler scheduler({});
  ScheduledJob big = Read(SmallJob("big", 40e9, std::nullopt));
  // No layout fits with this memory margin (as after repeated OOMs).
  big.spec.memory_margin_fraction = 0.95;
  const ClusterInventory relaunching = H100Pool(3, 24);  // its pods gone
  ASSERT_FALSE(scheduler.Curve(big, relaunching, "H100-SXM", kNow).ok());
  big.current_gpus = 16;
  big.current_gpu_type = "H100-SXM";
  big.admitted = true;
  const ScheduledJob small = Read(SmallJob("small", 4e9, std::nullopt));

  StatusOr<std::map<std::string, Allocation>> pass =
      scheduler.Pass({big, small}, relaunching, kNow);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_EQ(pass->at("team/big").gpus, 16);
  ASSERT_TRUE(pass->at("team/small").admitted) << pass->at("team/small").message;
  EXPECT_GT(pass->at("team/small").gpus, 0);
  EXPECT_LE(pass->at("team/big").gpus + pass->at("team/small").gpus, 24);

  // A promise comes from the free GPUs only, never from running pods.
  ClusterInventory small_runs = H100Pool(3, 24);
  Hold(small_runs, "team/small", 16);
  pass = scheduler.Pass({big, small}, small_runs, kNow);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_EQ(pass->at("team/small").gpus, 16) << "it runs on 16; 8 are free for big";

  big.current_gpus = 32;  // its plan from before a node went
  pass = scheduler.Pass({big, small}, relaunching, kNow);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_EQ(pass->at("team/big").gpus, 32);
  EXPECT_GT(pass->at("team/small").gpus, 8) << "the 24 free GPUs serve the others";

  big.current_gpus = 24;  // the pool's size, but a node of it excluded for big
  big.excluded_nodes = {"h100-2"};
  pass = scheduler.Pass({big, small}, relaunching, kNow);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  ASSERT_EQ(pass->count("team/small"), 1u) << "undecided: every free GPU promised to big";
  EXPECT_GT(pass->at("team/small").gpus, 0) << "big cannot use 24 of these nodes";
}

// A job's status lags its pods both ways: its plan stays while its workers
// stop at a checkpoint (a shrink, a re-plan), and is written only after the
// pods of a launch start. The pass counts what the pods hold. Counting the
// stopped job's plan beside the GPUs its pods freed gave the same GPUs out
// twice: a newcomer was admitted onto GPUs the cluster did not have.
TEST(ClusterSchedulerTest, WhatAJobHoldsIsWhatItsPodsHoldNotWhatItsStatusSays) {
  ClusterScheduler scheduler({});
  ScheduledJob early = Read(SmallJob("early", 40e9, std::nullopt, "time"));
  early.current_gpus = 8;  // status.plan: 8 GPUs ...
  early.current_gpu_type = "H100-SXM";
  early.admitted = true;
  ScheduledJob next = Read(SmallJob("next", 40e9, std::nullopt, "time"));
  next.arrival_unix_seconds = kNow + 1;

  // ... but its pods stopped at a checkpoint: all 8 GPUs are free.
  const ClusterInventory stopped = H100Pool(1, 8);
  StatusOr<std::map<std::string, Allocation>> pass = scheduler.Pass({early, next}, stopped, kNow);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_LE(pass->at("team/early").gpus + pass->at("team/next").gpus, 8);
  EXPECT_TRUE(pass->at("team/early").admitted) << "an admitted job is never dropped";

  // Its pods run, and its status does not say so yet.
  ClusterInventory launching = H100Pool(1, 0);
  Hold(launching, "team/early", 8);
  early.current_gpus = 0;
  early.current_gpu_type.clear();
  pass = scheduler.Pass({early, next}, launching, kNow);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_EQ(pass->at("team/early").gpus, 8) << "its running pods are its own";
  EXPECT_EQ(pass->at("team/early").gpu_type, "H100-SXM");
  EXPECT_EQ(pass->at("team/next").gpus, 0);
}

// Plans aim a minute before each deadline, but a job is late only at its
// deadline. With the minute subtracted from the deadlines themselves, a job
// on time 50 s from its deadline, with 30 s of work left, counted as late:
// an admitted job that waited for a reservation hours away grew into its
// GPUs, and the reconciler would have stopped it in its last minute. An
// arrival in that minute was refused as "its deadline has passed".
TEST(ClusterSchedulerTest, AJobInItsLastMinuteIsNotLateAndKeepsItsGpus) {
  ClusterInventory inventory = H100Pool(1, 0);
  Hold(inventory, "team/closing", 8);
  ClusterScheduler scheduler({});
  ScheduledJob closing = Read(SmallJob("closing", 4e9, std::nullopt, "time"));
  const double step_at_8 = SecondsAt(scheduler, closing, inventory, 8, 1);
  ASSERT_LT(step_at_8, 10);
  closing.remaining_steps = std::max<int64_t>(1, static_cast<int64_t>(30 / step_at_8));
  closing.deadline_unix_seconds = kNow + 50;
  closing.current_gpus = 8;
  closing.current_gpu_type = "H100-SXM";
  closing.admitted = true;
  ScheduledJob waiting = Read(SmallJob("waiting", 4e9, std::nullopt));
  waiting.deadline_unix_seconds =
      kNow + static_cast<int64_t>(
                 SecondsAt(scheduler, waiting, inventory, 8, waiting.remaining_steps) * 4 + 7200);
  waiting.admitted = true;
  ScheduledJob arrival = Read(SmallJob("arrival", 4e9, std::nullopt));
  arrival.remaining_steps = 1;
  arrival.deadline_unix_seconds = kNow + 30;
  arrival.arrival_unix_seconds = kNow;

  StatusOr<std::map<std::string, Allocation>> pass =
      scheduler.Pass({closing, waiting, arrival}, inventory, kNow);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  const Allocation c = pass->at("team/closing");
  const Allocation w = pass->at("team/waiting");
  EXPECT_TRUE(c.admitted);
  EXPECT_EQ(c.gpus, 8) << "on time, it keeps its GPUs to the end";
  EXPECT_TRUE(w.admitted);
  EXPECT_EQ(w.gpus, 0) << "its reservation starts hours from now";
  const Allocation a = pass->at("team/arrival");
  EXPECT_FALSE(a.admitted);
  EXPECT_EQ(a.message.find("its deadline has passed"), std::string::npos) << a.message;
}

// A job behind its deadline on half the pool, the other half free: the
// schedule grows it. While its metrics are out, its progress is not seen
// (the behind may be the outage's stale step): it is never grown then, a
// relaunch for a slowdown nobody measured. Metrics back, it grows.
TEST(ClusterSchedulerTest, AJobWhoseProgressIsNotSeenIsNotGrown) {
  ClusterInventory inventory = H100Pool(2, 8);
  Hold(inventory, "team/blind", 8);
  ClusterScheduler probe({});
  ScheduledJob job = Read(SmallJob("blind", 40e9, std::nullopt, "time"));
  const double at_8 = SecondsAt(probe, job, inventory, 8, job.remaining_steps);
  const double at_16 = SecondsAt(probe, job, inventory, 16, job.remaining_steps);
  ASSERT_LT(at_16 * 1.3, at_8) << "16 GPUs must be much faster for this test";
  // Met on 16 GPUs, not on 8.
  job.deadline_unix_seconds = kNow + static_cast<int64_t>((at_16 * 1.3 + at_8) / 2);
  job.current_gpus = 8;
  job.current_gpu_type = "H100-SXM";
  job.admitted = true;

  ClusterScheduler seen_scheduler({});
  StatusOr<std::map<std::string, Allocation>> seen = seen_scheduler.Pass({job}, inventory, kNow);
  ASSERT_TRUE(seen.ok()) << seen.status().ToString();
  EXPECT_EQ(seen->at("team/blind").gpus, 16) << "behind, with free GPUs: grown";

  job.progress_unseen = true;
  ClusterScheduler blind_scheduler({});
  StatusOr<std::map<std::string, Allocation>> blind = blind_scheduler.Pass({job}, inventory, kNow);
  ASSERT_TRUE(blind.ok()) << blind.status().ToString();
  EXPECT_TRUE(blind->at("team/blind").admitted);
  EXPECT_EQ(blind->at("team/blind").gpus, 8) << "not grown on progress nobody has seen";
}

// A deadline job whose metrics are out and whose held projection has
// passed, its workers still running, on every GPU of the pool; a job with
// an earlier deadline arrives. Counted as one step left, the blind job
// "ended" within a pass at every pass: the arrival was admitted onto GPUs
// it still held. It is taken to hold them until its deadline, on time:
// the arrival is rejected, and the blind job keeps its GPUs.
TEST(ClusterSchedulerTest, AJobUnseenPastItsProjectionHoldsItsGpusUntilItsDeadline) {
  ClusterInventory inventory = H100Pool(1, 0);
  Hold(inventory, "team/blind", 8);
  ClusterScheduler probe({});
  ScheduledJob blind = Read(SmallJob("blind", 40e9, std::nullopt));
  const double blind_at_8 = SecondsAt(probe, blind, inventory, 8, blind.remaining_steps);
  blind.deadline_unix_seconds = kNow + static_cast<int64_t>(blind_at_8 / 2);  // behind, by status
  blind.current_gpus = 8;
  blind.current_gpu_type = "H100-SXM";
  blind.admitted = true;
  blind.progress_unseen = true;
  blind.past_held_projection = true;
  ScheduledJob arrival = Read(SmallJob("arrival", 4e9, std::nullopt));
  const double arrival_at_8 = SecondsAt(probe, arrival, inventory, 8, arrival.remaining_steps);
  arrival.deadline_unix_seconds = kNow + static_cast<int64_t>(arrival_at_8 * 2 + 600);
  ASSERT_LT(*arrival.deadline_unix_seconds, *blind.deadline_unix_seconds);

  ClusterScheduler scheduler({});
  StatusOr<std::map<std::string, Allocation>> pass =
      scheduler.Pass({blind, arrival}, inventory, kNow);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_TRUE(pass->at("team/blind").admitted);
  EXPECT_EQ(pass->at("team/blind").gpus, 8);
  EXPECT_FALSE(pass->at("team/arrival").admitted)
      << "admitted onto GPUs the blind job may hold until its deadline";

  // The one-step view it had: the arrival was admitted behind it.
  ScheduledJob one_step = blind;
  one_step.past_held_projection = false;
  one_step.remaining_steps = 1;
  ClusterScheduler old_view({});
  StatusOr<std::map<std::string, Allocation>> before =
      old_view.Pass({one_step, arrival}, inventory, kNow);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_TRUE(before->at("team/arrival").admitted);
}

// A curve is kept until what it was planned on changes, the pool's links
// included: a network corrected by a node annotation keeps the pool's name,
// and the cached curve kept the old speed until the controller restarted.
TEST(ClusterSchedulerTest, ACurveFollowsThePoolsNetwork) {
  ClusterInventory inventory = H100Pool(4, 32);
  ClusterScheduler scheduler({});
  const ScheduledJob job = Read(SmallJob("wide", 40e9, std::nullopt, "time"));
  StatusOr<sched::ThroughputCurve> fast = scheduler.Curve(job, inventory, "H100-SXM", kNow);
  ASSERT_TRUE(fast.ok()) << fast.status().ToString();
  inventory.inventory.node_pools.at(0).network_gbps_per_node = 10;
  StatusOr<sched::ThroughputCurve> slow = scheduler.Curve(job, inventory, "H100-SXM", kNow);
  ASSERT_TRUE(slow.ok()) << slow.status().ToString();
  EXPECT_LT(slow->IterationsPerSecond(32), fast->IterationsPerSecond(32) * 0.9)
      << "32 GPUs span four nodes: a 10 Gbit/s network is slower than 3200";
  EXPECT_DOUBLE_EQ(slow->IterationsPerSecond(8), fast->IterationsPerSecond(8))
      << "one node does not use the network";
}

// A resize relaunches a job: its old pods stop at a checkpoint, then its new
// pods are created and wait to be bound to nodes. In between its pods hold
// no GPU. A pass in that gap (another job's arrival triggers one) must not
// take the job's share away: seen in the end-to-end test, where the early
// job, just shrunk from 8 GPUs to 2, was stopped again and its 2 GPUs given
// to the urgent job, which relaunched to grow from 6 to 8.
TEST(ClusterSchedulerTest, AJobBetweenTwoAttemptsKeepsTheShareTheLastPassGaveIt) {
  ClusterInventory inventory = H100Pool(1, 0);
  Hold(inventory, "team/early", 8);
  ClusterSchedulerOptions options;
  options.decision_interval_seconds = 600;
  ClusterScheduler scheduler(options);
  ScheduledJob early = Read(SmallJob("early", 40e9, std::nullopt, "time"));
  ScheduledJob tight = Read(SmallJob("tight", 3e9, std::nullopt));
  tight.arrival_unix_seconds = kNow + 1;
  const double early_at_8 = SecondsAt(scheduler, early, inventory, 8, early.remaining_steps);
  const double tight_at_4 = SecondsAt(scheduler, tight, inventory, 4, tight.remaining_steps);
  early.deadline_unix_seconds = kNow + static_cast<int64_t>(early_at_8 * 4);
  early.current_gpus = 8;
  early.current_gpu_type = "H100-SXM";
  early.admitted = true;
  // Four GPUs from within the next pass interval make it; two do not: a
  // latest start 300 s from now, after the plan's headroom, the deadline
  // guard and a relaunch.
  ASSERT_GT(SecondsAt(scheduler, tight, inventory, 2, tight.remaining_steps), tight_at_4 * 1.5);
  ASSERT_GT(tight_at_4, 1200);
  tight.deadline_unix_seconds =
      kNow + 2 +
      static_cast<int64_t>(options.deadline_guard_seconds + tight_at_4 / 0.95 +
                           options.constants.startup_seconds + 300);

  StatusOr<std::map<std::string, Allocation>> pass =
      scheduler.Pass({early, tight}, inventory, kNow + 2);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  const Allocation e = pass->at("team/early");
  const Allocation t = pass->at("team/tight");
  ASSERT_TRUE(t.admitted) << t.message;
  ASSERT_GE(t.gpus, 4);
  ASSERT_GT(e.gpus, 0) << "the early job keeps what the tight one leaves";
  ASSERT_LT(e.gpus + t.gpus, 16);

  // Both relaunch: the early job's 8-GPU pods have stopped, no new pod is
  // bound yet (every GPU is free), and a third job arrives.
  const ClusterInventory gap = H100Pool(1, 8);
  tight.admitted = true;
  early.current_gpus = 0;  // its status: stopped for the resize
  ScheduledJob third = Read(SmallJob("third", 40e9, std::nullopt));
  third.arrival_unix_seconds = kNow + 3;
  third.deadline_unix_seconds = kNow + 60 * 60;
  pass = scheduler.Pass({early, tight, third}, gap, kNow + 4);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_EQ(pass->at("team/early").gpus, e.gpus) << "no second relaunch of the early job";
  EXPECT_EQ(pass->at("team/tight").gpus, t.gpus) << "no second relaunch of the tight job";
  EXPECT_FALSE(pass->at("team/third").admitted);

  // A new leader in that gap knows the shares from the jobs' status.schedule.
  ClusterScheduler leader(options);
  early.allocated_gpus = e.gpus;
  early.allocated_gpu_type = "H100-SXM";
  tight.allocated_gpus = t.gpus;
  tight.allocated_gpu_type = "H100-SXM";
  StatusOr<std::map<std::string, Allocation>> failover =
      leader.Pass({early, tight, third}, gap, kNow + 4);
  ASSERT_TRUE(failover.ok()) << failover.status().ToString();
  EXPECT_EQ(failover->at("team/early").gpus, e.gpus);
  EXPECT_EQ(failover->at("team/tight").gpus, t.gpus);

  // Their new pods are bound: the same shares again.
  ClusterInventory bound = H100Pool(1, 0);
  Hold(bound, "team/early", e.gpus);
  Hold(bound, "team/tight", t.gpus);
  pass = scheduler.Pass({early, tight, third}, bound, kNow + 6);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_EQ(pass->at("team/early").gpus, e.gpus);
  EXPECT_EQ(pass->at("team/tight").gpus, t.gpus);
}

// The remembered share is a hint for stickiness, never capacity: when the
// pool has lost GPUs (a node gone), the shares of the last pass no longer
// fit and the pass decides from what the pods hold.
TEST(ClusterSchedulerTest, RememberedSharesThatNoLongerFitThePoolAreDropped) {
  ClusterInventory two_nodes = H100Pool(2, 0);
  Hold(two_nodes, "team/a", 8);
  Hold(two_nodes, "team/b", 8);
  ClusterScheduler scheduler({});
  ScheduledJob a = Read(SmallJob("a", 40e9, std::nullopt, "time"));
  ScheduledJob b = Read(SmallJob("b", 40e9, std::nullopt, "time"));
  a.admitted = b.admitted = true;
  b.arrival_unix_seconds = kNow + 1;
  StatusOr<std::map<std::string, Allocation>> pass = scheduler.Pass({a, b}, two_nodes, kNow);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  ASSERT_EQ(pass->at("team/a").gpus + pass->at("team/b").gpus, 16);

  // One node left, both jobs' pods gone with the other or stopped.
  pass = scheduler.Pass({a, b}, H100Pool(1, 8), kNow + 1);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_LE(pass->at("team/a").gpus + pass->at("team/b").gpus, 8);
  EXPECT_GT(pass->at("team/a").gpus + pass->at("team/b").gpus, 0);
}

TEST(ClusterSchedulerTest, TheCurveUsesWholeNodesBeyondOneAndTheMeasuredSpeed) {
  const ClusterInventory inventory = H100Pool(4, 32);
  ClusterScheduler scheduler({});
  ScheduledJob job = Read(SmallJob("curve", 4e9, std::nullopt));
  StatusOr<sched::ThroughputCurve> curve = scheduler.Curve(job, inventory, "H100-SXM", kNow);
  ASSERT_TRUE(curve.ok()) << curve.status().ToString();
  for (const sched::ThroughputPoint& level : curve->levels()) {
    if (level.gpus > 8) {
      EXPECT_EQ(level.gpus % 8, 0) << level.gpus;
    }
  }
  // Measured twice as slow as predicted: the whole curve halves.
  ScheduledJob slow = job;
  slow.step_time_ratio = 2.0;
  StatusOr<sched::ThroughputCurve> halved = scheduler.Curve(slow, inventory, "H100-SXM", kNow);
  ASSERT_TRUE(halved.ok());
  ASSERT_EQ(halved->levels().size(), curve->levels().size());
  for (size_t i = 0; i < curve->levels().size(); ++i) {
    EXPECT_NEAR(halved->levels()[i].iterations_per_second,
                curve->levels()[i].iterations_per_second / 2, 1e-9);
  }
}

// A node with repeated collective failures (status.excludedNodes) is left
// out of the job's later pods: its GPUs are not the job's capacity, so the
// curve ends at the other nodes' GPUs and the job is never given more.
TEST(ClusterSchedulerTest, AJobsExcludedNodesAreNotItsCapacity) {
  const ClusterInventory inventory = H100Pool(2, 16);
  ClusterScheduler scheduler({});
  nlohmann::json object = SmallJob("struck", 400e9, std::nullopt, "time");
  object["status"] = {{"phase", "Pending"}, {"excludedNodes", {"h100-1"}}};
  const ScheduledJob struck = Read(object);
  ASSERT_EQ(struck.excluded_nodes, std::vector<std::string>{"h100-1"});
  ScheduledJob free = Read(SmallJob("free", 400e9, std::nullopt, "time"));
  StatusOr<sched::ThroughputCurve> whole = scheduler.Curve(free, inventory, "H100-SXM", kNow);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  ASSERT_EQ(whole->max_gpus(), 16) << "without exclusions the job scales to both nodes";

  StatusOr<sched::ThroughputCurve> curve = scheduler.Curve(struck, inventory, "H100-SXM", kNow);
  ASSERT_TRUE(curve.ok()) << curve.status().ToString();
  EXPECT_EQ(curve->max_gpus(), 8);
  StatusOr<std::map<std::string, Allocation>> pass = scheduler.Pass({struck}, inventory, kNow);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_TRUE(pass->at("team/struck").admitted) << pass->at("team/struck").message;
  EXPECT_GT(pass->at("team/struck").gpus, 0);
  EXPECT_LE(pass->at("team/struck").gpus, 8) << "only h100-0 is the job's";

  // Every node excluded: rejected, saying why, rather than never decided (a
  // new arrival: a scheduler that admitted it keeps it admitted).
  object["status"]["excludedNodes"] = {"h100-0", "h100-1"};
  pass = ClusterScheduler({}).Pass({Read(object)}, inventory, kNow);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  ASSERT_EQ(pass->count("team/struck"), 1U);
  EXPECT_FALSE(pass->at("team/struck").admitted);
  EXPECT_EQ(pass->at("team/struck").gpus, 0);
  EXPECT_NE(pass->at("team/struck").message.find("excluded"), std::string::npos)
      << pass->at("team/struck").message;

  // An admitted job is never dropped: it waits, admitted, for a node (it was
  // rejected, and with a node back it came in as a new arrival, after jobs
  // admitted later).
  ScheduledJob admitted = Read(object);
  admitted.admitted = true;
  pass = scheduler.Pass({admitted}, inventory, kNow);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_TRUE(pass->at("team/struck").admitted) << pass->at("team/struck").message;
  EXPECT_EQ(pass->at("team/struck").gpus, 0);
  EXPECT_NE(pass->at("team/struck").message.find("excluded"), std::string::npos)
      << pass->at("team/struck").message;
}

// An admitted job waiting for its reservation stays in the pool it was
// admitted to: picked again by the most GPUs at every pass, it moved to an
// A100 pool that grew past the H100 one, without an admission test there.
TEST(ClusterSchedulerTest, AnAdmittedWaitingJobStaysInItsPool) {
  ClusterInventory inventory = H100Pool(1, 8);
  planner::NodePool a100 = inventory.inventory.node_pools.at(0);
  a100.name = "a100";
  a100.gpu_type = "A100-80GB";
  a100.nodes = 2;
  a100.free_gpus = 16;
  inventory.inventory.node_pools.push_back(a100);
  inventory.nodes_by_pool["a100"] = {{"a100-0", 8, 8}, {"a100-1", 8, 8}};
  nlohmann::json object = SmallJob("patient", 40e9, kNow + 30 * 24 * 3600);
  object["spec"]["resources"].erase("gpuTypes");  // any type
  object["status"] = {{"phase", "Pending"},
                      {"conditions", {{{"type", "Admitted"}, {"status", "True"}}}},
                      {"schedule", {{"allocatedGpus", 0}, {"gpuType", "H100-SXM"}}}};
  const ScheduledJob patient = Read(object);
  ASSERT_TRUE(patient.admitted);
  ASSERT_EQ(patient.allocated_gpu_type, "H100-SXM") << "a waiting job's pool is read too";
  ClusterScheduler scheduler({});  // a new leader: the pool from the status
  StatusOr<std::map<std::string, Allocation>> pass = scheduler.Pass({patient}, inventory, kNow);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_TRUE(pass->at("team/patient").admitted);
  EXPECT_EQ(pass->at("team/patient").gpu_type, "H100-SXM");
  pass = scheduler.Pass({patient}, inventory, kNow + 60);  // the same leader: its own share
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_EQ(pass->at("team/patient").gpu_type, "H100-SXM");

  // Unless no layout of its pool runs it any more (here: at least 16 GPUs,
  // and the H100 pool has 8): kept there, it waited forever.
  object["spec"]["resources"]["minGPUs"] = 16;
  object["metadata"]["generation"] = 2;  // a spec edit
  const ScheduledJob wide = Read(object);
  ASSERT_FALSE(scheduler.Curve(wide, inventory, "H100-SXM", kNow).ok());
  ASSERT_TRUE(scheduler.Curve(wide, inventory, "A100-80GB", kNow).ok());
  pass = scheduler.Pass({wide}, inventory, kNow + 120);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_TRUE(pass->at("team/patient").admitted);
  EXPECT_EQ(pass->at("team/patient").gpu_type, "A100-80GB") << pass->at("team/patient").message;
}

// A job goes to the allowed pool with the most GPUs among those some layout
// runs it on: by GPU count alone a bf16 job went to a larger V100 pool (no
// bf16) and was rejected, "no layout of V100-SXM2 runs this job", while an
// A100 pool could run it.
TEST(ClusterSchedulerTest, AJobGoesToTheLargestPoolThatRunsIt) {
  ClusterInventory inventory = H100Pool(1, 8);
  AddPool(inventory, "a100", "A100-80GB", 2);
  AddPool(inventory, "v100", "V100-SXM2", 4);
  nlohmann::json object = SmallJob("anywhere", 40e9, std::nullopt, "time");
  object["spec"]["resources"].erase("gpuTypes");  // any type
  const ScheduledJob job = Read(object);
  ClusterScheduler scheduler({});
  ASSERT_FALSE(scheduler.Curve(job, inventory, "V100-SXM2", kNow).ok()) << "bf16 on a V100";
  StatusOr<std::map<std::string, Allocation>> pass = scheduler.Pass({job}, inventory, kNow);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  const Allocation& a = pass->at("team/anywhere");
  EXPECT_TRUE(a.admitted) << a.message;
  EXPECT_EQ(a.gpu_type, "A100-80GB") << a.message;
  EXPECT_GT(a.gpus, 0);

  // No allowed pool runs a new arrival: the largest one's reason is the message.
  object["spec"]["resources"]["gpuTypes"] = {"V100-SXM2"};
  object["metadata"]["generation"] = 2;
  pass = ClusterScheduler({}).Pass({Read(object)}, inventory, kNow);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_FALSE(pass->at("team/anywhere").admitted);
  EXPECT_NE(pass->at("team/anywhere").message.find("no layout of V100-SXM2"), std::string::npos)
      << pass->at("team/anywhere").message;
}

// A job this scheduler admitted stays admitted while its status does not
// say so yet (the write a reconcile behind in the informer's cache): read
// as an arrival, it was tested again after an older one that fits now that
// a third job finished, and rejected: an admitted job dropped.
TEST(ClusterSchedulerTest, AJobItAdmittedStaysAdmittedBeforeItsStatusSaysSo) {
  ClusterInventory inventory = H100Pool(1, 0);
  ClusterScheduler scheduler({});
  nlohmann::json probe = SmallJob("probe", 40e9, std::nullopt, "time");
  StatusOr<sched::ThroughputCurve> curve =
      scheduler.Curve(Read(probe), inventory, "H100-SXM", kNow);
  ASSERT_TRUE(curve.ok()) << curve.status().ToString();
  // The 40e9-token job's time on all 8 GPUs.
  const double t8 =
      static_cast<double>(TotalSteps(Read(probe).spec)) / curve->IterationsPerSecond(8);
  auto at = [&](double fraction) { return kNow + static_cast<int64_t>(fraction * t8); };

  // `holder` holds the 8 GPUs for about half of t8; the older arrival needs
  // all of t8 by 1.2 t8 and cannot wait for it; the newer one, t8 by 1.9 t8,
  // can. Once `holder` is gone both fit alone, not together.
  nlohmann::json holder = SmallJob("holder", 20e9, at(0.65));
  holder["status"] = {{"phase", "Running"},
                      {"conditions", {{{"type", "Admitted"}, {"status", "True"}}}}};
  Hold(inventory, "team/holder", 8);
  nlohmann::json older = SmallJob("older", 40e9, at(1.2));
  older["metadata"]["creationTimestamp"] = planner::FormatRfc3339(kNow - 100);
  nlohmann::json newer = SmallJob("newer", 40e9, at(1.9));
  newer["metadata"]["creationTimestamp"] = planner::FormatRfc3339(kNow - 50);

  StatusOr<std::map<std::string, Allocation>> pass =
      scheduler.Pass({Read(holder), Read(older), Read(newer)}, inventory, kNow);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  ASSERT_FALSE(pass->at("team/older").admitted) << pass->at("team/older").message;
  ASSERT_TRUE(pass->at("team/newer").admitted) << pass->at("team/newer").message;

  // `holder` finished; `newer`'s status still reads as before (no Admitted).
  inventory = H100Pool(1, 8);
  pass = scheduler.Pass({Read(older), Read(newer)}, inventory, kNow + 60);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_TRUE(pass->at("team/newer").admitted) << pass->at("team/newer").message;
  EXPECT_FALSE(pass->at("team/older").admitted) << pass->at("team/older").message;
}

// One node of 8 free H100s and two of A100s (pool 1) whose 16 GPUs the pods
// of `*running` hold: an admitted job due 1.3 times `*whole_pool_seconds`
// from now, the time the 40e9-token SmallJob takes on the whole A100 pool,
// so that another such job cannot meet the same deadline there.
void H100AndFullA100Pools(ClusterScheduler& scheduler, ClusterInventory* cluster,
                          int64_t* whole_pool_seconds, nlohmann::json* running) {
  *cluster = H100Pool(1, 8);
  AddPool(*cluster, "a100", "A100-80GB", 2);
  ClusterInventory& inventory = *cluster;
  nlohmann::json probe = SmallJob("probe", 40e9, std::nullopt, "time");
  probe["spec"]["resources"]["gpuTypes"] = {"A100-80GB"};
  StatusOr<sched::ThroughputCurve> curve =
      scheduler.Curve(Read(probe), inventory, "A100-80GB", kNow);
  ASSERT_TRUE(curve.ok()) << curve.status().ToString();
  ASSERT_EQ(curve->max_gpus(), 16);
  const int64_t steps = TotalSteps(Read(probe).spec);
  *whole_pool_seconds =
      static_cast<int64_t>(static_cast<double>(steps) / curve->IterationsPerSecond(16));
  *running = SmallJob("running", 40e9, kNow + *whole_pool_seconds * 13 / 10);
  (*running)["spec"]["resources"]["gpuTypes"] = {"A100-80GB"};
  (*running)["status"] = {{"phase", "Pending"},
                          {"conditions", {{{"type", "Admitted"}, {"status", "True"}}}},
                          {"schedule", {{"allocatedGpus", 16}, {"gpuType", "A100-80GB"}}}};
  inventory.trainjob_gpus["team/running"]["A100-80GB"] = 16;
  inventory.inventory.node_pools.at(1).free_gpus = 0;
  for (auto& node : inventory.nodes_by_pool["a100"]) node.free_gpus = 0;
}

// A new job is tested in its allowed pools in turn: tested in the largest
// only (16 A100s, taken by a job with a deadline), it was rejected at every
// pass while an allowed H100 pool that meets its deadline stood idle.
TEST(ClusterSchedulerTest, ANewJobRejectedInTheLargestPoolIsTestedInTheNextOne) {
  ClusterScheduler scheduler({});
  ClusterInventory inventory;
  int64_t whole_pool_seconds = 0;
  nlohmann::json running;
  ASSERT_NO_FATAL_FAILURE(
      H100AndFullA100Pools(scheduler, &inventory, &whole_pool_seconds, &running));

  nlohmann::json newcomer = SmallJob("newcomer", 40e9, kNow + whole_pool_seconds * 12 / 10);
  newcomer["spec"]["resources"]["gpuTypes"] = {"A100-80GB", "H100-SXM"};
  const ScheduledJob arrival = Read(newcomer);
  ASSERT_TRUE(scheduler.Curve(arrival, inventory, "H100-SXM", kNow).ok());

  StatusOr<std::map<std::string, Allocation>> pass =
      scheduler.Pass({Read(running), arrival}, inventory, kNow);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  ASSERT_FALSE(pass->at("team/newcomer").admitted) << pass->at("team/newcomer").message;
  ASSERT_EQ(pass->at("team/newcomer").gpu_type, "A100-80GB");

  pass = scheduler.Pass({Read(running), arrival}, inventory, kNow + 60);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  const Allocation& next = pass->at("team/newcomer");
  EXPECT_TRUE(next.admitted) << next.message;
  EXPECT_EQ(next.gpu_type, "H100-SXM") << next.message;
  EXPECT_GT(next.gpus, 0);
  EXPECT_TRUE(pass->at("team/running").admitted);
  EXPECT_EQ(pass->at("team/running").gpus, 16);
}

// An admitted job whose pool no longer runs it moves to another pool through
// that pool's admission test, as an arrival would: entered as admitted, it
// took GPUs that pool's admitted jobs were promised and made them late. Until
// the new pool admits it, it waits admitted in the old one, saying why.
TEST(ClusterSchedulerTest, AnAdmittedJobMovingPoolsPassesTheNewPoolsAdmissionTest) {
  ClusterScheduler scheduler({});
  // Sized on the A100 curve: each job needs the whole 16-GPU pool for most
  // of the time to its deadline, so the two cannot both meet theirs.
  ClusterInventory inventory;
  int64_t whole_pool_seconds = 0;
  nlohmann::json running;
  ASSERT_NO_FATAL_FAILURE(
      H100AndFullA100Pools(scheduler, &inventory, &whole_pool_seconds, &running));

  // Admitted in the H100 pool, which runs it no more (16 GPUs at least).
  nlohmann::json mover = SmallJob("mover", 40e9, kNow + whole_pool_seconds * 13 / 10);
  mover["spec"]["resources"]["gpuTypes"] = {"H100-SXM", "A100-80GB"};
  mover["spec"]["resources"]["minGPUs"] = 16;
  mover["status"] = {{"phase", "Pending"},
                     {"conditions", {{{"type", "Admitted"}, {"status", "True"}}}},
                     {"schedule", {{"allocatedGpus", 0}, {"gpuType", "H100-SXM"}}}};
  const ScheduledJob moving = Read(mover);
  ASSERT_TRUE(moving.admitted);
  ASSERT_FALSE(scheduler.Curve(moving, inventory, "H100-SXM", kNow).ok());

  StatusOr<std::map<std::string, Allocation>> pass =
      scheduler.Pass({Read(running), moving}, inventory, kNow);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  const Allocation& kept = pass->at("team/running");
  EXPECT_TRUE(kept.admitted);
  EXPECT_EQ(kept.gpus, 16) << "the running job keeps what its deadline needs";
  ASSERT_TRUE(kept.planned_finish_unix_seconds.has_value());
  EXPECT_LE(*kept.planned_finish_unix_seconds, kNow + whole_pool_seconds * 13 / 10);
  const Allocation& waiting = pass->at("team/mover");
  EXPECT_TRUE(waiting.admitted) << "an admitted job is never dropped";
  EXPECT_EQ(waiting.gpus, 0);
  EXPECT_EQ(waiting.gpu_type, "H100-SXM") << "it waits in its old pool: " << waiting.message;
  EXPECT_NE(waiting.message.find("no layout of H100-SXM runs it now"), std::string::npos)
      << waiting.message;
  EXPECT_NE(waiting.message.find("moves to the A100-80GB pool once that pool admits it"),
            std::string::npos)
      << waiting.message;

  // Tested again at every pass: with the running job gone it enters.
  inventory.trainjob_gpus.erase("team/running");
  inventory.inventory.node_pools.at(1).free_gpus = 16;
  for (auto& node : inventory.nodes_by_pool["a100"]) node.free_gpus = 8;
  pass = scheduler.Pass({moving}, inventory, kNow + 60);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_TRUE(pass->at("team/mover").admitted);
  EXPECT_EQ(pass->at("team/mover").gpu_type, "A100-80GB") << pass->at("team/mover").message;
  EXPECT_EQ(pass->at("team/mover").gpus, 16);

  // A mover the new pool would not admit even alone (its deadline has
  // passed) is late wherever it runs: it enters as admitted and takes what
  // is free. Tested as an arrival, it waited at 0 GPUs beside an idle pool.
  mover["spec"]["deadline"] = planner::FormatRfc3339(kNow - 60);
  mover["metadata"]["generation"] = 2;
  ClusterScheduler fresh({});
  pass = fresh.Pass({Read(mover)}, inventory, kNow);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_TRUE(pass->at("team/mover").admitted);
  EXPECT_EQ(pass->at("team/mover").gpu_type, "A100-80GB") << pass->at("team/mover").message;
  EXPECT_GT(pass->at("team/mover").gpus, 0) << pass->at("team/mover").message;

  // A spec edit that drops its pool's type says so, not that its nodes went.
  mover["spec"]["deadline"] = planner::FormatRfc3339(kNow + whole_pool_seconds * 13 / 10);
  mover["spec"]["resources"]["gpuTypes"] = {"A100-80GB"};
  mover["metadata"]["generation"] = 3;
  inventory.trainjob_gpus["team/running"]["A100-80GB"] = 16;
  inventory.inventory.node_pools.at(1).free_gpus = 0;
  for (auto& node : inventory.nodes_by_pool["a100"]) node.free_gpus = 0;
  ClusterScheduler third({});
  pass = third.Pass({Read(running), Read(mover)}, inventory, kNow);
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_NE(
      pass->at("team/mover").message.find("spec.resources.gpuTypes no longer allows H100-SXM"),
      std::string::npos)
      << pass->at("team/mover").message;
}

// After out-of-memory exits the reconciler plans with a memory margin
// (status.memoryMarginFraction); the scheduler's curve must come from the
// same plans, or it sizes the job by layouts that no longer fit.
TEST(ClusterSchedulerTest, TheCurveOfAJobThatRanOutOfMemoryUsesItsMemoryMargin) {
  const ClusterInventory inventory = H100Pool(4, 32);
  ClusterScheduler scheduler({});
  nlohmann::json object = SmallJob("big", 400e9, std::nullopt, "time");
  object["spec"]["model"]["parameters"] = "13B";
  const ScheduledJob plain = Read(object);
  object["status"] = {{"phase", "Pending"}, {"memoryMarginFraction", 0.5}};
  const ScheduledJob margin = Read(object);
  EXPECT_DOUBLE_EQ(margin.spec.memory_margin_fraction, 0.5);

  StatusOr<sched::ThroughputCurve> before = scheduler.Curve(plain, inventory, "H100-SXM", kNow);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  StatusOr<sched::ThroughputCurve> after = scheduler.Curve(margin, inventory, "H100-SXM", kNow);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  // Holding half of each GPU back never makes a count faster, and makes the
  // smallest counts slower or impossible.
  bool slower_somewhere = false;
  for (const sched::ThroughputPoint& level : before->levels()) {
    const double with_margin =
        after->FloorLevel(level.gpus) == level.gpus ? after->IterationsPerSecond(level.gpus) : 0;
    EXPECT_LE(with_margin, level.iterations_per_second * (1 + 1e-9)) << level.gpus << " GPUs";
    if (with_margin < level.iterations_per_second * (1 - 1e-6)) slower_somewhere = true;
  }
  EXPECT_TRUE(slower_somewhere) << "the margin changed no layout of the curve";
}

TEST(ClusterSchedulerTest, JobFromObjectReadsProgressHoldingsAndAdmissionFromStatus) {
  nlohmann::json object = SmallJob("running", 4e9, kNow + 86400);
  object["status"] = {{"phase", "Running"},
                      {"progress", {{"stepsCompleted", 1000}, {"totalSteps", 3815}}},
                      {"measuredStepSeconds", 3.0},
                      {"plan",
                       {{"gpuType", "H100-SXM"},
                        {"pool", "h100"},
                        {"nodes", 1},
                        {"gpusPerNode", 8},
                        {"gpus", 8},
                        {"tensorParallel", 1},
                        {"pipelineParallel", 1},
                        {"dataParallel", 8},
                        {"virtualStages", 1},
                        {"sequenceParallel", false},
                        {"zeroStage", 1},
                        {"microBatchSize", 4},
                        {"gradientAccumulationSteps", 8},
                        {"activationCheckpointing", "none"},
                        {"predictedStepSeconds", 2.0}}},
                      {"conditions", nlohmann::json::array()}};
  std::optional<ScheduledJob> job = ClusterScheduler::JobFromObject(object, kNow);
  ASSERT_TRUE(job.has_value());
  EXPECT_EQ(job->key, "team/running");
  EXPECT_EQ(job->current_gpus, 8);
  EXPECT_EQ(job->current_gpu_type, "H100-SXM");
  EXPECT_TRUE(job->admitted) << "a job holding GPUs is in";
  EXPECT_NEAR(job->step_time_ratio, 1.5, 1e-9);
  EXPECT_EQ(job->deadline_unix_seconds, kNow + 86400);
  EXPECT_EQ(job->remaining_steps,
            Read(SmallJob("fresh", 4e9, std::nullopt)).remaining_steps - 1000);

  // A metrics outage: progress stays at step 1000 while time moves on. The
  // schedule counted the steps from it (an on-track job looked further
  // behind at every pass); it takes the projection the reconciler keeps.
  nlohmann::json outage = object;
  outage["status"]["projectedCompletionTime"] = planner::FormatRfc3339(kNow + 600);
  outage["status"]["conditions"] = {
      {{"type", "Degraded"}, {"status", "True"}, {"reason", "MetricsUnavailable"}}};
  EXPECT_EQ(Read(outage).remaining_steps, 200) << "600 s left at the measured 3 s a step";
  EXPECT_TRUE(Read(outage).progress_unseen);
  EXPECT_FALSE(job->progress_unseen);
  outage["status"]["projectedCompletionTime"] = planner::FormatRfc3339(kNow + 86400 * 30);
  EXPECT_EQ(Read(outage).remaining_steps, job->remaining_steps) << "never more than the status";
  // Past its projection with its workers still running: how far it is, no
  // one knows. Counted as one step, others were admitted onto its GPUs.
  outage["status"]["projectedCompletionTime"] = planner::FormatRfc3339(kNow - 60);
  EXPECT_EQ(Read(outage).remaining_steps, job->remaining_steps)
      << "past its projection: what the status says is left, an upper bound";
  EXPECT_TRUE(Read(outage).past_held_projection);
  nlohmann::json projected_only = object;  // metrics fine: progress counts
  projected_only["status"]["projectedCompletionTime"] = planner::FormatRfc3339(kNow + 600);
  EXPECT_EQ(Read(projected_only).remaining_steps, job->remaining_steps);
  EXPECT_FALSE(Read(projected_only).progress_unseen);
  EXPECT_FALSE(Read(projected_only).past_held_projection);

  nlohmann::json done = object;
  done["status"]["phase"] = "Succeeded";
  EXPECT_FALSE(ClusterScheduler::JobFromObject(done, kNow).has_value());
  nlohmann::json deleting = object;
  deleting["metadata"]["deletionTimestamp"] = planner::FormatRfc3339(kNow);
  EXPECT_FALSE(ClusterScheduler::JobFromObject(deleting, kNow).has_value());
  nlohmann::json invalid = SmallJob("bad", 4e9, std::nullopt);
  invalid["spec"]["training"]["globalBatchSize"] = -1;
  EXPECT_FALSE(ClusterScheduler::JobFromObject(invalid, kNow).has_value());

  nlohmann::json waiting = SmallJob("waiting", 4e9, std::nullopt);
  waiting["status"] = {
      {"phase", "Pending"},
      {"conditions", {{{"type", "Admitted"}, {"status", "True"}, {"reason", "Admitted"}}}}};
  std::optional<ScheduledJob> admitted = ClusterScheduler::JobFromObject(waiting, kNow);
  ASSERT_TRUE(admitted.has_value());
  EXPECT_TRUE(admitted->admitted);
  EXPECT_EQ(admitted->current_gpus, 0);
  EXPECT_EQ(admitted->allocated_gpus, 0) << "no pass has given it a share yet";

  // The share a pass gave it (a previous leader's).
  waiting["status"]["schedule"] = {
      {"admitted", true}, {"allocatedGpus", 4}, {"gpuType", "H100-SXM"}};
  admitted = ClusterScheduler::JobFromObject(waiting, kNow);
  ASSERT_TRUE(admitted.has_value());
  EXPECT_EQ(admitted->allocated_gpus, 4);
  EXPECT_EQ(admitted->allocated_gpu_type, "H100-SXM");
  for (const nlohmann::json& bad :
       {nlohmann::json(-4), nlohmann::json(1e12), nlohmann::json("4")}) {
    waiting["status"]["schedule"]["allocatedGpus"] = bad;
    admitted = ClusterScheduler::JobFromObject(waiting, kNow);
    ASSERT_TRUE(admitted.has_value()) << bad;
    EXPECT_EQ(admitted->allocated_gpus, 0) << bad;
  }
  waiting["status"]["schedule"] = {{"allocatedGpus", 4}};
  EXPECT_EQ(ClusterScheduler::JobFromObject(waiting, kNow)->allocated_gpus, 0) << "no type";
}

TEST(ClusterSchedulerTest, DeadlineOutcomesOfFinishedJobs) {
  auto finished = [](const std::string& phase, int64_t finished_at) {
    nlohmann::json job = SmallJob("j", 4e9, kNow);
    job["status"] = {{"phase", phase},
                     {"deadline", planner::FormatRfc3339(kNow)},
                     {"conditions",
                      {{{"type", "Succeeded"},
                        {"status", "True"},
                        {"reason", "Completed"},
                        {"lastTransitionTime", planner::FormatRfc3339(finished_at)}}}}};
    return job;
  };
  EXPECT_EQ(DeadlineMet(finished("Succeeded", kNow - 10)), std::optional<bool>(true));
  EXPECT_EQ(DeadlineMet(finished("Succeeded", kNow + 10)), std::optional<bool>(false));
  EXPECT_EQ(DeadlineMet(finished("Failed", kNow - 10)), std::optional<bool>(false));
  EXPECT_EQ(DeadlineMet(finished("Running", kNow - 10)), std::nullopt);
}

TEST(AllocationBoardTest, PublishReturnsOnlyJobsWhoseDecisionChanged) {
  AllocationBoard board;
  Allocation a;
  a.admitted = true;
  a.gpus = 8;
  a.gpu_type = "H100-SXM";
  a.planned_finish_unix_seconds = kNow + 100;
  Allocation r;
  r.message = "no";
  EXPECT_EQ(board.Publish({{"ns/a", a}, {"ns/r", r}}).size(), 2u);
  EXPECT_FALSE(board.Get("ns/x").has_value());
  ASSERT_TRUE(board.Get("ns/a").has_value());
  EXPECT_EQ(board.Get("ns/a")->gpus, 8);

  Allocation later = a;
  later.planned_finish_unix_seconds = kNow + 130;  // moves every pass: no reconcile
  EXPECT_TRUE(board.Publish({{"ns/a", later}, {"ns/r", r}}).empty());
  Allocation grown = later;
  grown.gpus = 16;
  EXPECT_EQ(board.Publish({{"ns/a", grown}, {"ns/r", r}}), std::vector<std::string>{"ns/a"});
  EXPECT_EQ(board.Publish({{"ns/a", grown}}), std::vector<std::string>{"ns/r"}) << "gone";
}

}  // namespace
}  // namespace pacer::controller
