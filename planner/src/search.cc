// The layout search. Variables: node pool (GPU type), tensor parallel t,
// pipeline parallel p, interleaving v, micro-batch b, recomputation r, ZeRO
// stage z and data parallel d; GPUs = t p d, k = GBS / (b d) exactly.
//
// Enumerating d blindly is what makes naive planners slow on big clusters.
// Two monotonicities let us avoid it (docs/planner.md, "The search"):
//   * memory per GPU never grows with d (ZeRO shards more, fewer micro-
//     batches are in flight), and grows with b;
//   * step time falls as d grows for a fixed (t, p, v, b, r, z).
// So for each (pool, t, p, v, b) we evaluate the largest d first: if it does
// not fit, no d does and no larger b will. Then, separately for each run of
// consecutive d in the same regime of the cost model (d = 1; one node; the
// data-parallel group on one node's NVLink; the group across nodes: the step
// jumps where the regime changes): the walk down from the run's largest d
// stops at the first slower one; for `cost`, once a d meets the deadline a
// binary search finds the smallest d that meets it, the cheapest at the same
// ZeRO stage and recomputation (GPU-hours grow with d), and the d above it
// are tried until the top's stage and recomputation fit again.
#include "pacer/planner/search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "cost_model_internal.h"
#include "pacer/planner/layer_shapes.h"
#include "pacer/planner/units.h"
#include "search_internal.h"

namespace pacer::planner {
namespace internal {
namespace {

std::vector<int> Divisors(int64_t n, int64_t limit) {
  // Pairs (i, n / i) up to sqrt(n): a global batch of 1e8 takes 1e4 tries,
  // not 1e8, for each (t, p, v, b) the search visits.
  std::vector<int> out, large;
  for (int64_t i = 1; i * i <= n; ++i) {
    if (n % i != 0) continue;
    if (i <= limit) out.push_back(static_cast<int>(i));
    const int64_t j = n / i;
    if (j != i && j <= limit) large.push_back(static_cast<int>(j));
  }
  out.insert(out.end(), large.rbegin(), large.rend());
  return out;
}

auto TieKey(const Evaluation& e) {
  const Layout& l = e.layout;
  return std::make_tuple(l.gpus(), l.pool, l.tensor_parallel, l.pipeline_parallel, l.virtual_stages,
                         l.micro_batch_size, static_cast<int>(l.recompute), l.zero_stage,
                         l.gpus_per_node);
}

double CostKey(const Evaluation& e, bool use_money) { return use_money ? e.cost : e.gpu_hours; }

// objective: time treats finishes within this fraction of the fastest as a
// tie and takes the cheapest of them: the model is not that precise, and a
// plan 1% faster on twice the GPUs is not what anyone asks for.
constexpr double kTimeTieFraction = 0.03;

bool WithinTimeTie(const Evaluation& e, double fastest_seconds) {
  return e.total.total_seconds <= fastest_seconds * (1 + kTimeTieFraction);
}

// Relative tolerance so that floating-point noise never decides a tie.
bool Less(double a, double b) { return a < b * (1 - 1e-12); }

}  // namespace

bool FasterThan(const Evaluation& a, const Evaluation& b) {
  if (Less(a.total.total_seconds, b.total.total_seconds)) return true;
  if (Less(b.total.total_seconds, a.total.total_seconds)) return false;
  if (Less(a.gpu_hours, b.gpu_hours)) return true;
  if (Less(b.gpu_hours, a.gpu_hours)) return false;
  return TieKey(a) < TieKey(b);
}

bool BetterThan(const Evaluation& a, const Evaluation& b, Objective objective, bool use_money) {
  if (objective == Objective::kTime) return FasterThan(a, b);
  const double ca = CostKey(a, use_money), cb = CostKey(b, use_money);
  if (Less(ca, cb)) return true;
  if (Less(cb, ca)) return false;
  return FasterThan(a, b);
}

namespace {

class Searcher {
 public:
  Searcher(const JobSpec& job, const Inventory& inventory, const Calibration& calibration,
           std::optional<int64_t> deadline, const PlanOptions& options)
      : job_(job),
        inventory_(inventory),
        calibration_(calibration),
        deadline_(deadline),
        options_(options),
        gbs_(job.training.global_batch_size) {
    for (int i = 0; i < kRejectReasonCount; ++i) {
      out_.rejections[i].reason = static_cast<RejectReason>(i);
    }
  }

  SearchOutcome Run(const std::vector<int>& pools) {
    use_money_ = !pools.empty();
    for (int index : pools) {
      const NodePool& pool = inventory_.node_pools[index];
      const GpuType* gpu = inventory_.catalog.Find(pool.gpu_type);
      if (gpu == nullptr || gpu->price_per_gpu_hour <= 0) {
        if (pool.price_per_gpu_hour <= 0) use_money_ = false;
      }
    }
    for (int index : pools) SearchPool(index);
    FinishAlternatives();
    return std::move(out_);
  }

 private:
  void Reject(RejectReason reason, int64_t count, const Evaluation* candidate,
              const std::string& detail) {
    RejectionSummary& r = out_.rejections[static_cast<int>(reason)];
    r.count += count;
    if (candidate == nullptr) {
      if (r.detail.empty()) r.detail = detail;
      return;
    }
    // Out-of-memory candidates are ranked by how close they came to fitting;
    // the rest by how fast they are.
    bool better = !r.best.has_value();
    if (!better) {
      if (reason == RejectReason::kOutOfMemory) {
        better = candidate->memory.total_bytes() < r.best->memory.total_bytes();
      } else {
        better = FasterThan(*candidate, *r.best);
      }
    }
    if (better) {
      r.best = *candidate;
      r.detail = detail;
    }
  }

  // GPUs per node for a layout of `gpus` GPUs with t-way tensor parallelism on
  // `pool`: the largest divisor of the node size that keeps each TP group in a
  // node and for which enough nodes have that many free GPUs; 0 when none.
  int PlaceGpusPerNode(const NodePool& pool, int64_t gpus, int t) {
    for (int g = pool.gpus_per_node; g >= 1; --g) {
      if (pool.gpus_per_node % g != 0 || g % t != 0 || gpus % g != 0) continue;
      const int64_t nodes = gpus / g;
      if (options_.ignore_free_gpus) return g;
      if (nodes <= NodesWithFreeGpus(pool, g)) return g;
    }
    return 0;
  }

  // Why `gpus` GPUs with tensor parallel `t` cannot be placed in `pool`:
  // too few free in all, or (the count is there) not the same number on
  // each of enough nodes. "pool p has 12 free GPUs; 8 needed" contradicted
  // itself when the split was the limit.
  std::string PlacementShortfall(const NodePool& pool, int64_t gpus, int t) {
    const std::string head = "pool " + pool.name + " has " + std::to_string(pool.free_gpus) +
                             " free " + pool.gpu_type + " GPUs";
    if (gpus > pool.free_gpus) return head + "; " + std::to_string(gpus) + " needed";
    std::string ways;
    for (int g = pool.gpus_per_node; g >= 1; --g) {
      if (pool.gpus_per_node % g != 0 || g % t != 0 || gpus % g != 0) continue;
      if (!ways.empty()) ways += ", or ";
      const int64_t nodes = gpus / g;
      ways += std::to_string(nodes) + (nodes == 1 ? " node" : " nodes") + " with " +
              std::to_string(g) + " free (" + std::to_string(NodesWithFreeGpus(pool, g)) + " have)";
    }
    const std::string rule = "a layout puts the same number of GPUs on each node, a divisor of " +
                             std::to_string(pool.gpus_per_node) +
                             " GPUs per node that tensor parallel " + std::to_string(t) +
                             " divides";
    if (ways.empty()) {
      return head + ", but " + std::to_string(gpus) + " cannot be split over its nodes: " + rule;
    }
    return head + ", but not " + std::to_string(gpus) + " split over its nodes (" + rule +
           "): " + std::to_string(gpus) + " need " + ways;
  }

  // NodePool::NodesWithFreeGpus walks every node when the pool lists each
  // node's free GPUs, and the search asks for every candidate layout: one
  // walk per (pool, GPUs per node) instead (planner_bench,
  // PlanLargeClusterPerNodeFreeGpus).
  int NodesWithFreeGpus(const NodePool& pool, int gpus_per_worker) {
    if (&pool != nodes_with_free_gpus_pool_) {
      nodes_with_free_gpus_pool_ = &pool;
      nodes_with_free_gpus_.clear();
    }
    auto [it, inserted] = nodes_with_free_gpus_.try_emplace(gpus_per_worker, 0);
    if (inserted) it->second = pool.NodesWithFreeGpus(gpus_per_worker);
    return it->second;
  }

  void SearchPool(int pool_index) {
    const NodePool& pool = inventory_.node_pools[pool_index];
    const GpuType* gpu = inventory_.catalog.Find(pool.gpu_type);
    if (gpu == nullptr) return;  // validated by ParseInventory
    if (gpu->PeakFlops(job_.training.precision) <= 0) {
      Reject(RejectReason::kPrecisionUnsupported, 1, nullptr,
             pool.gpu_type + " does not support " + PrecisionName(job_.training.precision));
      return;
    }
    const PoolContext ctx =
        MakePoolContext(job_, pool, *gpu, calibration_.Find(pool.gpu_type), options_.constants);
    const ModelSpec& m = job_.model;
    if (const std::optional<int>& pinned = job_.parallelism.tensor_parallel;
        pinned && pool.gpus_per_node % *pinned != 0) {
      Reject(RejectReason::kLayoutIndivisible, 1, nullptr,
             "spec.parallelism.tensorParallel " + std::to_string(*pinned) +
                 " must divide the GPUs per node of pool " + pool.name + " (" +
                 std::to_string(pool.gpus_per_node) + "): a tensor-parallel group stays in a node");
      return;
    }
    for (int t : Divisors(pool.gpus_per_node, pool.gpus_per_node)) {
      if (job_.parallelism.tensor_parallel && *job_.parallelism.tensor_parallel != t) continue;
      if (std::string why = TensorParallelSplitError(m, t); !why.empty()) {
        Reject(RejectReason::kLayoutIndivisible, 1, nullptr,
               "tensor parallel " + std::to_string(t) + " " + why);
        continue;
      }
      for (int p : Divisors(m.layers, m.layers)) {
        if (job_.parallelism.pipeline_parallel && *job_.parallelism.pipeline_parallel != p) {
          continue;
        }
        for (int v = 1; v <= 4; ++v) {
          if (v > 1 && (p == 1 || m.layers % (p * v) != 0)) continue;
          SearchStageLayout(ctx, pool_index, t, p, v);
        }
      }
    }
  }

  std::vector<int> MicroBatchCandidates() const {
    std::vector<int> out;
    if (!job_.training.micro_batch_sizes.empty()) {
      for (int b : job_.training.micro_batch_sizes) {
        if (gbs_ % b == 0) out.push_back(b);
      }
      return out;
    }
    // Beyond 64 sequences per micro-batch GEMMs are already large; bigger
    // only costs memory.
    return Divisors(gbs_, 64);
  }

  void SearchStageLayout(const PoolContext& ctx, int pool_index, int t, int p, int v) {
    const NodePool& pool = *ctx.pool;
    // The largest d whose layout did not fit memory at a smaller b. Memory
    // grows with b and shrinks with d, so a larger b cannot fit at that d or
    // below; it can at a larger d, which free GPUs or spec.resources.maxGPUs
    // may allow only for the larger b (12 sequences on at most 4 GPUs: b 2
    // reaches d 3, b 3 reaches d 4).
    int unfit_top_d = 0;
    bool single_unfit = false;              // d = 1 did not fit at a smaller b
    for (int b : MicroBatchCandidates()) {  // ascending
      // Valid data-parallel sizes for this b, ascending.
      std::vector<DCandidate> ds;
      // No layout has more than kMaxLayoutGpus GPUs (also when free GPUs
      // are ignored, as the advice's search does): t x p x d stays an int.
      const int64_t max_d = std::min<int64_t>(gbs_ / b, kMaxLayoutGpus / (int64_t{t} * p));
      for (int d : Divisors(gbs_ / b, max_d)) {
        ++out_.stats.layouts_considered;
        const int64_t k = gbs_ / (static_cast<int64_t>(b) * d);
        const int64_t gpus = static_cast<int64_t>(t) * p * d;
        if (k * v > kMaxMicroBatchPassesPerStep) {
          // The worker refuses a step of more micro-batch passes than that
          // (a plan of 2,000,000 accumulation steps launched and failed
          // with InvalidWorkerConfig).
          Reject(RejectReason::kLayoutIndivisible, 1, nullptr,
                 "more than " + std::to_string(kMaxMicroBatchPassesPerStep) +
                     " micro-batch passes per step (accumulation steps x virtual stages); "
                     "allow larger micro-batches (spec.training.microBatchSizes)");
          continue;
        }
        if (v > 1 && k % p != 0) {
          // Megatron's interleaved schedule needs micro-batches in multiples of p.
          Reject(RejectReason::kLayoutIndivisible, 1, nullptr,
                 "interleaved pipelines need gradient accumulation steps divisible by p");
          continue;
        }
        if (options_.exact_gpus && gpus != *options_.exact_gpus) continue;
        if (gpus < job_.resources.min_gpus ||
            (job_.resources.max_gpus && gpus > *job_.resources.max_gpus)) {
          Reject(RejectReason::kGpuCountLimits, 1, nullptr,
                 job_.resources.max_gpus
                     ? "spec.resources allows " + std::to_string(job_.resources.min_gpus) + " to " +
                           std::to_string(*job_.resources.max_gpus) + " GPUs"
                     : "spec.resources.minGPUs is " + std::to_string(job_.resources.min_gpus));
          continue;
        }
        const int gpn = PlaceGpusPerNode(pool, gpus, t);
        if (gpn == 0) {
          Reject(RejectReason::kNotEnoughFreeGpus, 1, nullptr, PlacementShortfall(pool, gpus, t));
          continue;
        }
        ds.push_back({d, gpn});
      }
      if (ds.empty()) continue;
      // d = 1 is its own case for memory: unsharded, but without ZeRO-3's
      // gather buffers, it can fit where d = 2 does not (2 layers of hidden
      // 24576 a stage, fp32: d = 1 at 59.8 of 79.6 GiB, d = 2 over), so
      // the prunes below, which assume memory shrinks as d grows, never
      // rule it out: it is searched on its own, and rules out only itself
      // at larger micro-batches.
      if (ds.front().d == 1) {
        const std::vector<DCandidate> single = {ds.front()};
        ds.erase(ds.begin());
        if (single_unfit) {
          Reject(RejectReason::kOutOfMemory, 1, nullptr,
                 "a smaller micro-batch did not fit with one replica");
          ++out_.stats.pruned;
        } else if (!SearchDataParallel(ctx, pool_index, t, p, v, b, single)) {
          single_unfit = true;
        }
        if (ds.empty()) continue;
      }
      if (ds.back().d <= unfit_top_d) {
        Reject(RejectReason::kOutOfMemory, static_cast<int64_t>(ds.size()), nullptr,
               "a smaller micro-batch did not fit at as many data-parallel ranks");
        out_.stats.pruned += static_cast<int64_t>(ds.size());
        continue;
      }
      if (!SearchDataParallel(ctx, pool_index, t, p, v, b, ds)) unfit_top_d = ds.back().d;
    }
  }

  struct DCandidate {
    int d;
    int gpus_per_node;
  };

  Layout MakeLayout(int t, int p, int v, int b, const DCandidate& dc) const {
    Layout l;
    l.tensor_parallel = t;
    l.pipeline_parallel = p;
    l.virtual_stages = v;
    l.data_parallel = dc.d;
    l.gpus_per_node = dc.gpus_per_node;
    l.nodes = t * p * dc.d / dc.gpus_per_node;
    l.micro_batch_size = b;
    l.gradient_accumulation_steps = gbs_ / (static_cast<int64_t>(b) * dc.d);
    l.sequence_parallel = t > 1;
    return l;
  }

  // The fastest (r, z) for one layout that fits memory; nullopt when none fits
  // (then `closest` gets the candidate with the least memory).
  std::optional<Evaluation> BestFitting(const PoolContext& ctx, Layout l, Evaluation* closest) {
    static constexpr Recompute kRecomputeOrder[] = {Recompute::kNone, Recompute::kSelective,
                                                    Recompute::kFull};
    std::optional<Evaluation> best;
    bool have_closest = false;
    for (Recompute r : kRecomputeOrder) {
      if (job_.training.activation_checkpointing && *job_.training.activation_checkpointing != r) {
        continue;
      }
      l.recompute = r;
      // ZeRO stages in order of speed; with d = 1 they are all the same as 0.
      // Stage 0 keeps full optimizer state on every rank for no speed gain
      // over stage 1 here, so it is only used when pinned or d = 1.
      bool fitted = false;
      for (int z = 0; z <= 3 && !fitted; ++z) {
        if (job_.parallelism.zero_stage) {
          if (*job_.parallelism.zero_stage != z) continue;
        } else if ((l.data_parallel == 1) != (z == 0)) {
          continue;
        }
        l.zero_stage = z;
        const MemoryBreakdown mem = PredictMemory(ctx, l);
        if (!mem.fits()) {
          if (!have_closest || mem.total_bytes() < closest->memory.total_bytes()) {
            EvaluateInto(ctx, l, closest);
            closest->layout = l;
            have_closest = true;
          }
          continue;
        }
        fitted = true;
        Evaluation e;
        EvaluateInto(ctx, l, &e);
        e.layout = l;
        ++out_.stats.evaluated;
        if (!best || e.step.step_seconds < best->step.step_seconds) best = std::move(e);
      }
    }
    return best;
  }

  bool MeetsDeadline(const Evaluation& e) const {
    return !deadline_ || static_cast<double>(options_.now_unix_seconds) + e.total.total_seconds <=
                             static_cast<double>(*deadline_);
  }

  void Consider(const Evaluation& e, int pool_index) {
    Evaluation named = e;
    named.layout.pool = inventory_.node_pools[pool_index].name;
    named.layout.gpu_type = inventory_.node_pools[pool_index].gpu_type;
    if (!out_.fastest || FasterThan(named, *out_.fastest)) out_.fastest = named;
    if (!MeetsDeadline(named)) {
      Reject(RejectReason::kMissesDeadline, 1, &named,
             FormatDurationHuman(static_cast<double>(
                 CompletionUnixSeconds(options_.now_unix_seconds, named.total.total_seconds) -
                 *deadline_)) +
                 " after the deadline");
      return;
    }
    ++met_deadline_;
    AddCandidate(std::move(named));
  }

  // ds[end - 1] at its fastest fitting settings; none when it does not fit,
  // and then (memory shrinks with d) no smaller d of ds[begin, end) fits
  // either: all are rejected.
  std::optional<Evaluation> RunTop(const PoolContext& ctx, int pool_index, int t, int p, int v,
                                   int b, const std::vector<DCandidate>& ds, int begin, int end) {
    Evaluation closest;
    std::optional<Evaluation> top = BestFitting(ctx, MakeLayout(t, p, v, b, ds[end - 1]), &closest);
    if (!top) {
      closest.layout.pool = inventory_.node_pools[pool_index].name;
      closest.layout.gpu_type = inventory_.node_pools[pool_index].gpu_type;
      Reject(RejectReason::kOutOfMemory, end - begin, &closest,
             "needs " + FormatGiB(closest.memory.total_bytes()) + " GiB of " +
                 FormatGiB(closest.memory.capacity_bytes) + " GiB");
      out_.stats.pruned += end - begin - 1;
    }
    return top;
  }

  // The regimes of the cost model in d for one (t, p, v, b): within one, total
  // time is unimodal in d; between two it can jump either way.
  enum class DRegime {
    // No data-parallel collectives and nothing to shard: with ZeRO-2/3
    // pinned, d = 1 skips the per-layer sharding waits and the per-micro-
    // batch reduce-scatters that every d > 1 pays (a 12-layer job, t = 8,
    // p = 4, b = 8, ZeRO-2 on H200 finishes in 8h8m at d = 1, 1d10h at d = 2
    // and 12h56m at d = 12: the walk down from 12 stopped at 8, slower, and
    // called a 9-hour deadline infeasible).
    kSingleReplica,
    // Every collective and pipeline send over NVLink.
    kOneNode,
    // Across nodes, but each data-parallel group (t d consecutive ranks:
    // Megatron puts TP innermost, then DP) inside one node, reducing over
    // NVLink: with p > 1, a stage per node or fewer (a 7B job, t = 1, p = 2,
    // on nodes with 400 Gbit/s NICs: 0.663 s at d = 4 on one node, 0.417 s
    // at d = 8 on two, 0.737 s at d = 16 and 0.667 s at d = 32 whose groups
    // cross nodes; the walk down from 32 stopped at 16).
    kGroupInNode,
    // The data-parallel group spans nodes and reduces over their NICs.
    kGroupAcrossNodes,
  };

  static DRegime RegimeOf(int t, int p, const DCandidate& dc) {
    if (dc.d == 1) return DRegime::kSingleReplica;
    if (int64_t{t} * p * dc.d == dc.gpus_per_node) return DRegime::kOneNode;
    // The cost model's DP group holds min(d, GPUs per node / t) ranks a node
    // (cost_model.cc, MakeGroup): all of them exactly when t d <= GPUs per
    // node.
    if (int64_t{t} * dc.d <= dc.gpus_per_node) return DRegime::kGroupInNode;
    return DRegime::kGroupAcrossNodes;
  }

  // Returns false when even the largest d does not fit memory (so a larger
  // micro-batch cannot fit at this d or any smaller one).
  bool SearchDataParallel(const PoolContext& ctx, int pool_index, int t, int p, int v, int b,
                          const std::vector<DCandidate>& ds) {
    const int n = static_cast<int>(ds.size());
    std::optional<Evaluation> top = RunTop(ctx, pool_index, t, p, v, b, ds, 0, n);
    if (!top) return false;
    // Time is unimodal in d only within one regime of the cost model
    // (DRegime): the step jumps where the layout comes to fit one node (a 7B
    // job: 1.21 s at 64 GPUs, 1.38 s at 16, 0.70 s at 8), where the data-
    // parallel group comes to fit one node's NVLink, and at d = 1. One walk
    // over all d stopped at 32 and called the job infeasible that 8 GPUs
    // finish in time. So each run of consecutive d in one regime is searched
    // on its own: a few more evaluations (each run's top and its walk), not
    // every d.
    std::vector<DRegime> regime(n);
    for (int i = 0; i < n; ++i) regime[i] = RegimeOf(t, p, ds[i]);
    int end = n;
    while (end > 0) {
      int begin = end - 1;
      while (begin > 0 && regime[begin - 1] == regime[end - 1]) --begin;
      if (end < n) {
        // Memory never shrinks as d falls: when this run's top does not fit,
        // neither does any d below it, and all of ds[0, end) are rejected.
        top = RunTop(ctx, pool_index, t, p, v, b, ds, 0, end);
        if (!top) break;
      }
      if (SearchRun(ctx, pool_index, t, p, v, b, ds, begin, end, std::move(*top))) {
        // A d of this run did not fit, so no smaller d does: the runs below
        // are not evaluated.
        if (begin > 0) {
          Reject(RejectReason::kOutOfMemory, begin, nullptr,
                 "a larger data-parallel size did not fit, and memory grows as it falls");
          out_.stats.pruned += begin;
        }
        break;
      }
      end = begin;
    }
    return true;
  }

  // One run ds[begin, end) in one regime (DRegime), whose largest d,
  // ds[end - 1], evaluated to `top`. Returns whether some d of the run did not
  // fit memory (then no d below the run fits either).
  bool SearchRun(const PoolContext& ctx, int pool_index, int t, int p, int v, int b,
                 const std::vector<DCandidate>& ds, int begin, int end, Evaluation top) {
    const int n = end - begin;
    // Each d of the run is evaluated and considered at most once (the walk
    // up below revisits d the binary search saw).
    int evaluated_ds = 1;
    bool unfit = false;
    std::map<int, std::optional<Evaluation>> seen;
    std::set<int> considered;
    seen[end - 1] = std::move(top);
    auto evaluate = [&](int i) -> const std::optional<Evaluation>& {
      auto [it, inserted] = seen.try_emplace(i);
      if (inserted) {
        Evaluation ignored;
        it->second = BestFitting(ctx, MakeLayout(t, p, v, b, ds[i]), &ignored);
        ++evaluated_ds;
        unfit = unfit || !it->second;
      }
      return it->second;
    };
    auto consider = [&](int i) {
      const std::optional<Evaluation>& e = seen.at(i);
      if (e && considered.insert(i).second) Consider(*e, pool_index);
    };
    const Evaluation& run_top = *seen.at(end - 1);
    consider(end - 1);
    // Total time is unimodal in d within the run: more replicas shorten the
    // step until collectives, the latency floor and the failure rate's
    // rework (which grows with the GPU count) take over. So the largest d
    // need not be the fastest: walk down while it gets faster (objective
    // time: or stays a near-tie of the fastest, a cheaper plan), and past the
    // fastest every smaller d is slower still. A smaller d needs more
    // memory, so one that does not fit ends the walk too.
    const bool by_time = job_.objective == Objective::kTime;
    int good = MeetsDeadline(run_top) ? end - 1 : -1;  // the smallest index known to meet it
    double fastest = run_top.total.total_seconds;
    for (int i = end - 2; i >= begin && (by_time || good < 0); --i) {
      const std::optional<Evaluation>& e = evaluate(i);
      if (!e) break;
      const bool faster = e->total.total_seconds < fastest;
      if (!faster && !(by_time && WithinTimeTie(*e, fastest))) break;
      fastest = std::min(fastest, e->total.total_seconds);
      consider(i);
      if (MeetsDeadline(*e)) good = i;
    }
    if (!by_time && good > begin) {
      // The d that meet the deadline are a run of consecutive indices ending
      // at or above `good`; below it, meeting it is monotone in d: binary
      // search for the smallest.
      int lo = begin, hi = good;  // ds[hi] is known good
      while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        const std::optional<Evaluation>& e = evaluate(mid);
        consider(mid);  // records it as a miss or a candidate
        if (e && MeetsDeadline(*e)) {
          hi = mid;
        } else {
          lo = mid + 1;
        }
      }
      // GPU-hours grow with d only at one ZeRO stage and recomputation: the
      // smallest d may fit only with ZeRO-2/3 or recomputation, whose extra
      // time costs more than a few more replicas at the top's settings (a
      // 7B job: d = 2 fits only with ZeRO-2 and costs more than d = 4 with
      // ZeRO-1, 142 GPU-hours; 8 cost 155). Walk up until the top's
      // settings fit again.
      auto heavier = [&](int i) {
        const std::optional<Evaluation>& e = seen.at(i);
        return e && (e->layout.zero_stage != run_top.layout.zero_stage ||
                     e->layout.recompute != run_top.layout.recompute);
      };
      for (int i = hi; i < good && heavier(i); ++i) {
        evaluate(i + 1);
        consider(i + 1);
      }
    }
    if (good < 0 && n > evaluated_ds) {
      // Nothing met the deadline: the d not evaluated are slower still.
      Reject(RejectReason::kMissesDeadline, n - evaluated_ds, nullptr, "");
    }
    out_.stats.pruned += n - evaluated_ds;
    return unfit;
  }

  static std::string FormatGiB(double bytes) {
    const double gib = bytes / (1024.0 * 1024 * 1024);
    char buffer[32];
    std::snprintf(buffer, sizeof(buffer), "%.1f", gib);
    return buffer;
  }

  // Keeps the best plan and a diverse set of runners-up: the best per
  // (pool, GPUs, t, p), so alternatives differ in more than a micro-batch.
  void AddCandidate(Evaluation e) {
    auto same_shape = [&e](const Evaluation& x) {
      return x.layout.pool == e.layout.pool && x.layout.gpus() == e.layout.gpus() &&
             x.layout.tensor_parallel == e.layout.tensor_parallel &&
             x.layout.pipeline_parallel == e.layout.pipeline_parallel;
    };
    auto it = std::find_if(pool_.begin(), pool_.end(), same_shape);
    if (it != pool_.end()) {
      if (BetterThan(e, *it, job_.objective, use_money_)) *it = std::move(e);
      return;
    }
    pool_.push_back(std::move(e));
    const size_t keep = static_cast<size_t>(std::max(1, options_.alternatives + 1)) * 4;
    if (pool_.size() > keep * 2) Trim(keep);
  }

  void Trim(size_t keep) {
    std::sort(pool_.begin(), pool_.end(), [this](const Evaluation& a, const Evaluation& b) {
      return BetterThan(a, b, job_.objective, use_money_);
    });
    if (job_.objective == Objective::kTime && !pool_.empty()) {
      // Near-ties of the fastest first, cheapest first among them.
      const double fastest = pool_.front().total.total_seconds;
      const auto ties = std::stable_partition(
          pool_.begin(), pool_.end(),
          [fastest](const Evaluation& e) { return WithinTimeTie(e, fastest); });
      std::stable_sort(pool_.begin(), ties, [this](const Evaluation& a, const Evaluation& b) {
        return BetterThan(a, b, Objective::kCost, use_money_);
      });
    }
    if (pool_.size() > keep) pool_.resize(keep);
  }

  void FinishAlternatives() {
    Trim(static_cast<size_t>(std::max(0, options_.alternatives)) + 1);
    if (pool_.empty()) return;
    out_.best = pool_.front();
    for (size_t i = 1; i < pool_.size(); ++i) out_.alternatives.push_back(pool_[i]);
    RejectionSummary& r = out_.rejections[static_cast<int>(RejectReason::kDominated)];
    r.count = met_deadline_ - 1;  // every plan that met the deadline but the chosen one
    if (!out_.alternatives.empty()) {
      r.best = out_.alternatives.front();
      r.detail = job_.objective == Objective::kTime ? "finishes later than the chosen plan"
                                                    : "costs more than the chosen plan";
    }
  }

  const JobSpec& job_;
  const Inventory& inventory_;
  const Calibration& calibration_;
  std::optional<int64_t> deadline_;
  const PlanOptions& options_;
  const int64_t gbs_;
  bool use_money_ = false;
  int64_t met_deadline_ = 0;
  std::vector<Evaluation> pool_;
  SearchOutcome out_;
  // NodesWithFreeGpus's answers for one pool: GPUs per worker -> nodes.
  const NodePool* nodes_with_free_gpus_pool_ = nullptr;
  std::map<int, int> nodes_with_free_gpus_;
};

}  // namespace

SearchOutcome RunSearch(const JobSpec& job, const Inventory& inventory,
                        const Calibration& calibration, const std::vector<int>& pools,
                        std::optional<int64_t> deadline, const PlanOptions& options) {
  Searcher searcher(job, inventory, calibration, deadline, options);
  return searcher.Run(pools);
}

}  // namespace internal
}  // namespace pacer::planner
