#include "pacer_policy.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "min_share.h"

namespace pacer::sched {
namespace {

// A deadline job that can still make it (its deadline is ahead).
bool HasLiveDeadline(const SchedJob& job, double now) {
  return job.deadline_seconds.has_value() && *job.deadline_seconds > now;
}

// Earliest deadline first; ties by arrival, then id (a total order).
bool EdfLess(const SchedJob& a, const SchedJob& b) {
  if (*a.deadline_seconds != *b.deadline_seconds) return *a.deadline_seconds < *b.deadline_seconds;
  if (a.arrival_seconds != b.arrival_seconds) return a.arrival_seconds < b.arrival_seconds;
  return a.id < b.id;
}

// Plans `order` in that order on a fresh pool; returns how many cannot make
// their deadline. Those take what the others leave, never GPUs that a job
// that still can needs.
int PlanInOrder(const std::vector<const SchedJob*>& jobs, const std::vector<size_t>& order,
                int gpus, double now, const SchedOptions& options, bool keep,
                std::vector<Reservation>& reservations) {
  FreeTimeline free(now, gpus);
  int infeasible = 0;
  // Kept reservations first, then the others around them: a job re-planned
  // from scratch never takes the slots another job still holds.
  std::vector<bool> kept(reservations.size(), false);
  if (keep) {
    for (size_t i : order) kept[i] = KeepReservation(*jobs[i], now, options, free, reservations[i]);
  }
  for (size_t i : order) {
    if (kept[i]) continue;
    reservations[i] =
        ReserveMinShare(*jobs[i], now, options, /*reserve_if_infeasible=*/false, free);
  }
  for (size_t i : order) {
    if (reservations[i].feasible) continue;
    ++infeasible;
    reservations[i] = ReserveMinShare(*jobs[i], now, options, /*reserve_if_infeasible=*/true, free);
  }
  return infeasible;
}

// Plans `members` (indices of deadline jobs) on a fresh pool, earliest
// deadline first. reservations[i] is filled for each member. With `keep`,
// jobs keep last pass's reservation where it still holds.
void PlanAll(const std::vector<const SchedJob*>& jobs, std::vector<size_t> members, int gpus,
             double now, const SchedOptions& options, std::vector<Reservation>& reservations,
             bool keep = true) {
  std::sort(members.begin(), members.end(),
            [&](size_t a, size_t b) { return EdfLess(*jobs[a], *jobs[b]); });
  PlanInOrder(jobs, members, gpus, now, options, keep, reservations);
}

// Admission of `candidate` next to `admitted`: every admitted job that was
// feasible stays feasible, and the candidate is feasible.
bool Admits(const std::vector<const SchedJob*>& jobs, const std::vector<size_t>& admitted,
            const std::vector<bool>& was_feasible, size_t candidate, int gpus, double now,
            const SchedOptions& options, std::vector<Reservation>& reservations) {
  std::vector<size_t> members = admitted;
  members.push_back(candidate);
  // First around the reservations kept from earlier passes; failing that,
  // re-planning everyone from scratch.
  for (bool keep : {true, false}) {
    PlanAll(jobs, members, gpus, now, options, reservations, keep);
    bool all = reservations[candidate].feasible;
    for (size_t i : admitted) all = all && (!was_feasible[i] || reservations[i].feasible);
    if (all) return true;
  }
  return false;
}

// The same test with the candidate changed (advice).
bool AdmitsVariant(std::vector<const SchedJob*> jobs, const std::vector<size_t>& admitted,
                   const std::vector<bool>& was_feasible, size_t candidate, const SchedJob& variant,
                   int gpus, double now, const SchedOptions& options) {
  jobs[candidate] = &variant;
  std::vector<Reservation> scratch(jobs.size());
  return Admits(jobs, admitted, was_feasible, candidate, gpus, now, options, scratch);
}

Advice AdviseRejected(const std::vector<const SchedJob*>& jobs, const std::vector<size_t>& admitted,
                      const std::vector<bool>& was_feasible, size_t candidate, int gpus, double now,
                      const SchedOptions& options) {
  Advice advice;
  const SchedJob& job = *jobs[candidate];
  SchedJob variant = job;
  // Later deadline: double the window until admitted, then bisect to 1 s.
  double lo = *job.deadline_seconds - now;
  double hi = lo;
  bool found = false;
  for (int i = 0; i < 12 && !found; ++i) {
    hi *= 2;
    variant.deadline_seconds = now + hi;
    found = AdmitsVariant(jobs, admitted, was_feasible, candidate, variant, gpus, now, options);
    if (!found) lo = hi;
  }
  if (found) {
    while (hi - lo > 1.0) {
      const double mid = (lo + hi) / 2;
      variant.deadline_seconds = now + mid;
      if (AdmitsVariant(jobs, admitted, was_feasible, candidate, variant, gpus, now, options)) {
        hi = mid;
      } else {
        lo = mid;
      }
    }
    advice.deadline_seconds = now + std::ceil(hi);
  }
  // Fewer iterations: bisect on the count.
  variant = job;
  double ok_iterations = 0;
  double bad_iterations = job.remaining_iterations;
  for (int i = 0; i < 40 && bad_iterations - ok_iterations > 1.0; ++i) {
    variant.remaining_iterations = (ok_iterations + bad_iterations) / 2;
    if (AdmitsVariant(jobs, admitted, was_feasible, candidate, variant, gpus, now, options)) {
      ok_iterations = variant.remaining_iterations;
    } else {
      bad_iterations = variant.remaining_iterations;
    }
  }
  if (ok_iterations >= 1.0) advice.iterations = std::floor(ok_iterations);
  // More GPUs: double the pool until admitted, then bisect.
  int low = gpus;
  int high = gpus;
  found = false;
  for (int i = 0; i < 6 && !found; ++i) {
    high *= 2;
    found = AdmitsVariant(jobs, admitted, was_feasible, candidate, job, high, now, options);
    if (!found) low = high;
  }
  if (found) {
    while (high - low > 1) {
      const int mid = low + (high - low) / 2;
      if (AdmitsVariant(jobs, admitted, was_feasible, candidate, job, mid, now, options)) {
        high = mid;
      } else {
        low = mid;
      }
    }
    advice.cluster_gpus = high;
  }
  return advice;
}

std::string RejectReason(const SchedJob& job, int gpus, double now, const SchedOptions& options) {
  // Alone on an empty pool?
  FreeTimeline empty(now, gpus);
  if (!ReserveMinShare(job, now, options,
                       /*reserve_if_infeasible=*/false, empty)
           .feasible) {
    const int top = job.curve.FloorLevel(gpus);
    if (top <= 0 || job.curve.IterationsPerSecond(top) <= 0) {
      // No level fits the pool: no time to quote (it would be infinite).
      return "needs at least " + std::to_string(job.curve.min_gpus()) +
             " GPUs (its smallest throughput level) and the pool has " + std::to_string(gpus);
    }
    // The time the admission test counted, not the bare work: quoting
    // remaining / rate, a job refused for want of its stall headroom and
    // start-up read "need 3,500 s, the deadline is 3,600 s away".
    const double rate = job.curve.IterationsPerSecond(top);
    const double work_seconds = job.remaining_iterations / rate;
    const double seconds = NeededIterations(job, top, rate, options) / rate;
    return "cannot finish by its deadline even alone: " + std::to_string(top) + " GPUs (its most " +
           "useful) need " + std::to_string(static_cast<long long>(std::ceil(seconds))) + " s (" +
           std::to_string(static_cast<long long>(std::ceil(work_seconds))) +
           " s of work, the rest for start-up and stalls), the deadline is " +
           std::to_string(static_cast<long long>(std::floor(*job.deadline_seconds - now))) +
           " s away" +
           (options.deadline_guard_seconds > 0
                ? " (plans finish " +
                      std::to_string(static_cast<long long>(options.deadline_guard_seconds)) +
                      " s before it)"
                : "");
  }
  return "the GPUs it needs before its deadline are reserved for admitted jobs";
}

// Marginal return of growing a job from g to the next level: the fraction of
// its remaining work per second gained, per added GPU.
double GrowScore(const SchedJob& job, int g, int next) {
  const double gain = job.curve.IterationsPerSecond(next) - job.curve.IterationsPerSecond(g);
  return gain / (job.remaining_iterations * static_cast<double>(next - g));
}

struct Slot {
  const SchedJob* job = nullptr;
  int must = 0;         // the reservation's GPUs now (never shrunk below)
  int gpus = 0;         // the allocation being built
  bool urgent = false;  // a live deadline job: grows before best-effort jobs
  bool frozen = false;  // kept as is by hysteresis
};

// Fills the pool's free GPUs one level step at a time, each to the job with
// the highest marginal return; deadline jobs first, then best effort.
void GrowGreedy(std::vector<Slot>& slots, int& free) {
  while (free > 0) {
    Slot* best = nullptr;
    double best_score = -1;
    for (Slot& slot : slots) {
      if (slot.frozen) continue;
      const int next = slot.job->curve.NextLevel(slot.gpus);
      if (next == 0 || next - slot.gpus > free) continue;
      const double score = GrowScore(*slot.job, slot.gpus, next);
      if (best == nullptr || (slot.urgent && !best->urgent) ||
          (slot.urgent == best->urgent && score > best_score)) {
        best = &slot;
        best_score = score;
      }
    }
    if (best == nullptr) return;
    const int next = best->job->curve.NextLevel(best->gpus);
    free -= next - best->gpus;
    best->gpus = next;
  }
}

// Takes GPUs back, one level step at a time, from the job that loses the
// least: best effort (and late) jobs first. Never below `must`.
void ShrinkToFit(std::vector<Slot>& slots, int& free) {
  while (free < 0) {
    Slot* best = nullptr;
    double best_loss = 0;
    for (Slot& slot : slots) {
      if (slot.gpus <= slot.must) continue;
      const int lower = std::max(slot.must, slot.job->curve.FloorLevel(slot.gpus - 1));
      const double loss = GrowScore(*slot.job, lower, slot.gpus);
      if (best == nullptr || (!slot.urgent && best->urgent) ||
          (slot.urgent == best->urgent && loss < best_loss)) {
        best = &slot;
        best_loss = loss;
      }
    }
    if (best == nullptr) return;  // cannot happen: the musts fit the pool
    const int lower = std::max(best->must, best->job->curve.FloorLevel(best->gpus - 1));
    free += best->gpus - lower;
    best->gpus = lower;
  }
}

// A running job grows only when the time it saves pays for the relaunch.
bool GrowthPays(const Slot& slot, const SchedOptions& options) {
  const SchedJob& job = *slot.job;
  const int current = job.current_gpus;
  if (current == 0 || slot.gpus <= current || slot.must > current) return true;
  const double saved = job.remaining_iterations / job.curve.IterationsPerSecond(current) -
                       job.remaining_iterations / job.curve.IterationsPerSecond(slot.gpus);
  return saved >= options.hysteresis_factor * options.restart.RelaunchSeconds(slot.gpus);
}

// One class of jobs on the GPUs `free` leaves: sizes as they are (never below
// `must`), shrunk where they do not fit, then leftovers by marginal return,
// undoing growth that does not pay for its relaunch.
void AllocateClass(std::vector<Slot>::iterator begin, std::vector<Slot>::iterator end, int& free,
                   const SchedOptions& options) {
  std::vector<Slot> slots(begin, end);
  for (const Slot& slot : slots) free -= slot.gpus;
  ShrinkToFit(slots, free);
  if (free < 0) {  // best effort: nothing left at all
    for (Slot& slot : slots) {
      free += slot.gpus - slot.must;
      slot.gpus = slot.must;
    }
  }
  GrowGreedy(slots, free);
  // Until no growth is undone: each round that undoes one freezes at least
  // one slot, so there are at most slots.size() + 1 rounds. (A cap of 8 left
  // the growth of the ninth job a free GPU was offered to unchecked.)
  while (true) {
    bool reverted = false;
    for (Slot& slot : slots) {
      if (slot.frozen || GrowthPays(slot, options)) continue;
      const int keep = std::max(slot.must, slot.job->current_gpus);
      free += slot.gpus - keep;
      slot.gpus = keep;
      slot.frozen = true;
      reverted = true;
    }
    if (!reverted) break;
    GrowGreedy(slots, free);
  }
  std::copy(slots.begin(), slots.end(), begin);
}

}  // namespace

ScheduleResult SchedulePacer(const std::vector<SchedJob>& input, int cluster_gpus,
                             double now_seconds, const SchedOptions& options) {
  const size_t n = input.size();
  std::vector<const SchedJob*> jobs(n);
  for (size_t i = 0; i < n; ++i) jobs[i] = &input[i];
  ScheduleResult result;
  result.decisions.resize(n);
  for (size_t i = 0; i < n; ++i) result.decisions[i].id = input[i].id;

  // 1. Re-plan the admitted deadline jobs that can still make it.
  std::vector<size_t> admitted;
  for (size_t i = 0; i < n; ++i) {
    if (input[i].admitted && HasLiveDeadline(input[i], now_seconds)) admitted.push_back(i);
  }
  std::vector<Reservation> reservations(n);
  PlanAll(jobs, admitted, cluster_gpus, now_seconds, options, reservations);
  std::vector<bool> feasible(n, false);
  int lost = 0;
  for (size_t i : admitted) {
    feasible[i] = reservations[i].feasible;
    lost += feasible[i] ? 0 : 1;
  }
  if (lost > 0) {
    // Around the kept reservations a job that fell behind may find no
    // room, while a plan from scratch holds every job: kept, it got no
    // plan and no GPUs, and missed a deadline it could have met. The
    // fresh plans win when they leave fewer admitted jobs without one.
    std::vector<Reservation> fresh(n);
    PlanAll(jobs, admitted, cluster_gpus, now_seconds, options, fresh, /*keep=*/false);
    int fresh_lost = 0;
    for (size_t i : admitted) fresh_lost += fresh[i].feasible ? 0 : 1;
    if (fresh_lost < lost) {
      for (size_t i : admitted) {
        reservations[i] = fresh[i];
        feasible[i] = fresh[i].feasible;
      }
    }
  }

  // 2. Arrivals one by one, in arrival order: one job that does not fit
  // never keeps out another that does.
  std::vector<size_t> arrivals;
  for (size_t i = 0; i < n; ++i) {
    if (!input[i].admitted) arrivals.push_back(i);
  }
  std::sort(arrivals.begin(), arrivals.end(), [&](size_t a, size_t b) {
    if (input[a].arrival_seconds != input[b].arrival_seconds) {
      return input[a].arrival_seconds < input[b].arrival_seconds;
    }
    return input[a].id < input[b].id;
  });
  std::vector<bool> in_pool(n, false);  // admitted and not rejected
  for (size_t i = 0; i < n; ++i) in_pool[i] = input[i].admitted;
  for (size_t c : arrivals) {
    JobDecision& decision = result.decisions[c];
    if (!input[c].deadline_seconds.has_value()) {
      in_pool[c] = true;  // best effort: always admitted, runs on what is left
      continue;
    }
    if (*input[c].deadline_seconds <= now_seconds) {
      decision.admission = Admission::kRejected;
      decision.reason = "its deadline has passed";
      continue;
    }
    std::vector<Reservation> trial(n);
    if (Admits(jobs, admitted, feasible, c, cluster_gpus, now_seconds, options, trial)) {
      admitted.push_back(c);
      in_pool[c] = true;
      for (size_t i : admitted) {
        reservations[i] = trial[i];
        feasible[i] = trial[i].feasible;
      }
      continue;
    }
    decision.admission = Admission::kRejected;
    decision.reason = RejectReason(input[c], cluster_gpus, now_seconds, options);
    if (options.compute_advice) {
      decision.advice =
          AdviseRejected(jobs, admitted, feasible, c, cluster_gpus, now_seconds, options);
    }
  }

  // 3. Allocation, live deadline jobs first: their reservations now, their
  // current sizes (sticky), then leftovers. Best-effort and late jobs get
  // what is left, so they are the ones shrunk. Late: past its deadline, or
  // before it with no plan that meets it. (Counted as live, a late job's
  // reservation of the most it can get was held now, and a running job
  // whose own plan started later was stopped for it: a relaunch its plan
  // did not count.) In its last guard interval a job has no plan (plans aim
  // that much before the deadline) but is not late.
  std::vector<bool> live(n, false);
  for (size_t i = 0; i < n; ++i) {
    live[i] = HasLiveDeadline(input[i], now_seconds) &&
              (reservations[i].feasible ||
               *input[i].deadline_seconds - options.deadline_guard_seconds <= now_seconds);
  }
  std::vector<Slot> slots;
  std::vector<size_t> slot_job;
  for (bool urgent : {true, false}) {
    for (size_t i = 0; i < n; ++i) {
      if (!in_pool[i] || live[i] != urgent) continue;
      Slot slot;
      slot.job = jobs[i];
      slot.urgent = urgent;
      // The next pass is an interval away: hold now what the plan needs
      // before then.
      slot.must = urgent ? MostGpusWithin(reservations[i], now_seconds,
                                          now_seconds + options.decision_interval_seconds)
                         : 0;
      slot.gpus = std::max(slot.must, input[i].curve.FloorLevel(input[i].current_gpus));
      slots.push_back(slot);
      slot_job.push_back(i);
    }
  }
  // Plans that start before the next pass may together ask for more than the
  // pool; then the latest deadlines wait for their reservation proper.
  int musts = 0;
  for (const Slot& slot : slots) musts += slot.must;
  std::vector<size_t> latest_first;
  for (size_t s = 0; s < slots.size(); ++s) {
    if (slots[s].urgent) latest_first.push_back(s);
  }
  std::sort(latest_first.begin(), latest_first.end(),
            [&](size_t a, size_t b) { return EdfLess(*slots[b].job, *slots[a].job); });
  for (size_t s : latest_first) {
    if (musts <= cluster_gpus) break;
    // Cut to the fewest GPUs its plan holds before the next pass, not to
    // what it holds now: a plan that shrinks within the interval has its
    // peak now, and skipping it cut the job whose plan starts in the
    // interval, whatever its deadline.
    const int now_gpus = FewestGpusWithin(reservations[slot_job[s]], now_seconds,
                                          now_seconds + options.decision_interval_seconds);
    if (now_gpus >= slots[s].must) continue;
    musts -= slots[s].must - now_gpus;
    const int current = input[slot_job[s]].curve.FloorLevel(input[slot_job[s]].current_gpus);
    slots[s].must = now_gpus;
    slots[s].gpus = std::max(now_gpus, current);
  }
  const auto first_other =
      std::find_if(slots.begin(), slots.end(), [](const Slot& slot) { return !slot.urgent; });
  int free = cluster_gpus;
  AllocateClass(slots.begin(), first_other, free, options);
  AllocateClass(first_other, slots.end(), free, options);

  for (size_t s = 0; s < slots.size(); ++s) {
    const size_t i = slot_job[s];
    result.decisions[i].gpus = slots[s].gpus;
    if (slots[s].urgent && reservations[i].feasible) {
      result.decisions[i].planned_finish_seconds = reservations[i].finish_seconds;
      result.decisions[i].reservation = reservations[i].segments;
    }
    // Wake up when a reservation asks for more than the job will hold.
    for (const PlanSegment& segment : reservations[i].segments) {
      if (segment.start_seconds > now_seconds + 1e-3 && segment.gpus > slots[s].gpus) {
        if (!result.next_wakeup_seconds || segment.start_seconds < *result.next_wakeup_seconds) {
          result.next_wakeup_seconds = segment.start_seconds;
        }
        break;
      }
    }
  }
  return result;
}

}  // namespace pacer::sched
