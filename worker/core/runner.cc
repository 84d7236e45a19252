#include "core/runner.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/checkpoint.h"
#include "core/exit_codes.h"
#include "core/metrics.h"
#include "core/resume_point.h"
#include "core/signals.h"
#include "core/step_schedule.h"
#include "core/tcp_store.h"
#include "pacer/planner/model_math.h"

namespace pacer::worker {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kStopClaimsKey[] = "runner/stop-claims";
constexpr char kStopAtKey[] = "runner/stop-at";
constexpr char kResumeStepKey[] = "runner/resume-step";

// Kubernetes-style structured log line naming the job and the rank.
void Log(const WorkerConfig& c, int rank, const std::string& fields) {
  std::fprintf(stderr, "pacer-worker job=%s/%s rank=%d %s\n", c.job_namespace.c_str(),
               c.job_name.c_str(), rank, fields.c_str());
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Wall clock for the timestamps the metrics export (alerts compare them
// with Prometheus' time()).
double UnixSecondsNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::chrono::milliseconds Timeout(const WorkerConfig& c) {
  return std::chrono::milliseconds(static_cast<int64_t>(c.timeout_seconds * 1000));
}

// Where every rank resumes, decided by rank 0 from the checkpoints on the
// shared volume (ChooseResumePoint) and published through the store as
// "<step> <steps lost> <run id>", or "data-loss" when checkpoints exist but
// none is usable: then every rank exits with kExitDataLoss rather than
// training fresh weights from step 0 over the job's history.
struct AgreedResume {
  bool data_loss = false;
  int64_t step = 0;
  int64_t steps_lost = 0;
  // This run's id, chosen by rank 0, written into every checkpoint of the
  // run (CheckpointState::run_id).
  std::string run_id;
};
constexpr char kDataLossValue[] = "data-loss";
// "error <StatusCode number> <message>": rank 0 could not choose (an I/O
// error on the volume); the others fail with its status at once instead of
// waiting out their timeout and reporting a rendezvous failure.
constexpr char kResumeErrorPrefix[] = "error ";
// Rank 0 reads every rank's whole checkpoint files (CRCs) before it answers,
// which can outlast one store timeout on a large model; the others wait
// again while the store answers (rank 0 is alive: a dead rank 0 closes the
// connection), up to this many timeouts.
constexpr int kMaxResumeWaits = 12;

// 64 random bits in hex: unique per run for all practical purposes, so a
// rolled-back run's files never pass for the next run's.
std::string NewRunId() {
  std::random_device random;
  const uint64_t bits = (uint64_t{random()} << 32) ^ uint64_t { random() } ^
                        static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(bits));
  return hex;
}

StatusOr<AgreedResume> ChooseResumeOnRank0(const WorkerConfig& c, int rank,
                                           const RunOptions& options) {
  AgreedResume agreed;
  agreed.run_id = NewRunId();
  if (c.checkpoint_dir.empty()) return agreed;
  // A directory no checkpoint can ever be written to (a regular file, a
  // read-only or foreign-owned volume) fails every rank here, as
  // InvalidArgument (exit 2), rather than after the first interval's steps.
  RETURN_IF_ERROR(CheckCheckpointDirectory(c.checkpoint_dir));
  ResumeRequirements want;
  want.job_name = c.job_name;
  want.plan_fingerprints = AcceptedPlanFingerprints(c);
  want.needs_same_plan = options.checkpoint_buffers;
  ASSIGN_OR_RETURN(ResumeChoice choice, ChooseResumePoint(c.checkpoint_dir, want));
  for (const std::string& why : choice.rejected) {
    Log(c, rank, "event=checkpoint-unusable reason=\"" + why + "\"");
  }
  const std::string first_why = choice.rejected.empty() ? "" : choice.rejected.front();
  if (choice.outcome == ResumeChoice::Outcome::kNoUsable) {
    Log(c, rank,
        "event=data-loss newest_step=" + std::to_string(choice.newest_step) +
            " message=\"checkpoints exist but none is usable (" + first_why +
            "); not starting fresh\"");
    agreed.data_loss = true;
  } else {
    agreed.step = choice.step;
    agreed.steps_lost = choice.steps_lost();
    if (agreed.steps_lost > 0) {
      Log(c, rank,
          "event=resume-fallback message=\"checkpoint at step " +
              std::to_string(choice.newest_step) + " unreadable (" + first_why +
              "); resuming from step " + std::to_string(agreed.step) + ", " +
              std::to_string(agreed.steps_lost) + " steps lost\"");
    }
  }
  return agreed;
}

StatusOr<AgreedResume> AgreeOnResumeStep(const WorkerConfig& c, int rank, TcpStoreClient& store,
                                         const RunOptions& options) {
  if (rank == 0) {
    StatusOr<AgreedResume> chosen = ChooseResumeOnRank0(c, rank, options);
    if (!chosen.ok()) {
      (void)store.Set(kResumeStepKey, kResumeErrorPrefix +
                                          std::to_string(static_cast<int>(chosen.status().code())) +
                                          " " + chosen.status().message());
      return chosen.status();
    }
    RETURN_IF_ERROR(store.Set(kResumeStepKey, chosen->data_loss
                                                  ? std::string(kDataLossValue)
                                                  : std::to_string(chosen->step) + " " +
                                                        std::to_string(chosen->steps_lost) + " " +
                                                        chosen->run_id));
    return chosen;
  }
  AgreedResume agreed;
  std::string value;
  for (int waits = 1;; ++waits) {
    StatusOr<std::string> got = store.Get(kResumeStepKey, Timeout(c));
    if (got.ok()) {
      value = std::move(got).value();
      break;
    }
    if (got.status().code() != StatusCode::kDeadlineExceeded || waits >= kMaxResumeWaits) {
      return got.status();
    }
    Log(c, rank,
        "event=waiting-for-resume-step message=\"rank 0 is still checking the "
        "checkpoints\" waits=" +
            std::to_string(waits));
  }
  if (value.rfind(kResumeErrorPrefix, 0) == 0) {
    const std::string rest = value.substr(std::strlen(kResumeErrorPrefix));
    const size_t space = rest.find(' ');
    int code = static_cast<int>(StatusCode::kInternal);
    std::from_chars(rest.data(), rest.data() + std::min(space, rest.size()), code);
    if (code <= 0 || code > static_cast<int>(StatusCode::kInternal)) {
      code = static_cast<int>(StatusCode::kInternal);
    }
    return Status(static_cast<StatusCode>(code),
                  "rank 0 could not choose where to resume: " +
                      (space == std::string::npos ? std::string() : rest.substr(space + 1)));
  }
  if (value == kDataLossValue) {
    agreed.data_loss = true;
    return agreed;
  }
  std::istringstream fields(value);
  if (!(fields >> agreed.step >> agreed.steps_lost >> agreed.run_id)) {
    return InternalError("rank 0 published the resume point \"" + value +
                         "\", not \"<step> <steps lost> <run id>\"");
  }
  return agreed;
}

// When the ranks read the stop claim (runner.h, point 4): at every step
// until `agree_at` (the second step of this process, the first one timed
// without warm-up), then every `interval` steps (StopCheckIntervalSteps of
// rank 0's measured step time), which rank 0 publishes at `agree_at` and
// every rank reads there once. Reading the store at every step would put
// one round trip to rank 0 per rank and step on the critical path, which
// does not scale to thousands of ranks.
constexpr char kStopIntervalKey[] = "runner/stop-interval";

struct StopChecks {
  int64_t agree_at = 0;
  int64_t interval = 1;
  bool IsCheck(int64_t step) const { return step <= agree_at || (step - agree_at) % interval == 0; }
  // The check after `step` (itself a check).
  int64_t Next(int64_t step) const { return step < agree_at ? step + 1 : step + interval; }
};

// Called by every rank at step `agree_at`; rank 0's last step took
// `rank0_step_seconds`.
Status AgreeOnStopInterval(const WorkerConfig& c, int rank, TcpStoreClient& store,
                           double rank0_step_seconds, StopChecks* checks) {
  if (rank == 0) {
    const int64_t interval = StopCheckIntervalSteps(rank0_step_seconds);
    RETURN_IF_ERROR(store.Set(kStopIntervalKey, std::to_string(interval)));
    checks->interval = interval;
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(std::string value, store.Get(kStopIntervalKey, Timeout(c)));
  checks->interval = std::max<int64_t>(1, std::stoll(value));
  return Status::Ok();
}

// Whether every rank must stop before `step` (see runner.h, point 4). Only
// called at checks; `next_check` is the check after this one.
StatusOr<bool> StopBefore(const WorkerConfig& c, TcpStoreClient& store, int64_t step,
                          int64_t next_check, bool stop_requested_here, bool* claimed) {
  if (stop_requested_here && !*claimed) {
    *claimed = true;
    ASSIGN_OR_RETURN(int64_t claims, store.Add(kStopClaimsKey, 1));
    // Only the first claimer picks the step: the next check. Every rank
    // reaches that check only after finishing `step`, which needs this
    // rank's collectives, so after the claim is in the store.
    if (claims == 1) RETURN_IF_ERROR(store.Set(kStopAtKey, std::to_string(next_check)));
  }
  ASSIGN_OR_RETURN(int64_t claims, store.Add(kStopClaimsKey, 0));
  if (claims == 0) return false;
  ASSIGN_OR_RETURN(std::string stop_at, store.Get(kStopAtKey, Timeout(c)));
  return step >= std::stoll(stop_at);
}

std::vector<std::byte> EncodeRng(uint64_t seed, int64_t step) {
  // The worker's data and initialisation are a pure function of (seed,
  // step, rank), so this is the generator state to restore.
  std::vector<std::byte> bytes(16);
  std::memcpy(bytes.data(), &seed, 8);
  std::memcpy(bytes.data() + 8, &step, 8);
  return bytes;
}

// The seed EncodeRng wrote; nullopt for a state too short to hold one.
std::optional<uint64_t> SeedOf(const std::vector<std::byte>& rng_state) {
  if (rng_state.size() < 8) return std::nullopt;
  uint64_t seed = 0;
  std::memcpy(&seed, rng_state.data(), 8);
  return seed;
}

Status SaveCheckpoint(const WorkerConfig& c, int rank, const std::string& run_id, int64_t step,
                      StepBackend& backend, const RunOptions& options, WorkerMetrics* metrics) {
  if (c.checkpoint_dir.empty()) return Status::Ok();
  const Clock::time_point start = Clock::now();
  CheckpointState state;
  state.step = step;
  state.rng_state = EncodeRng(options.seed, step);
  state.job_name = c.job_name;
  state.rank = rank;
  state.world_size = c.world_size;
  state.plan_fingerprint = PlanFingerprint(c);
  state.run_id = run_id;
  if (options.checkpoint_buffers) {
    ASSIGN_OR_RETURN(state.buffers, backend.SaveBuffers());
  }
  RETURN_IF_ERROR(CheckpointStore(c.checkpoint_dir, rank).Save(state));
  const double seconds = SecondsSince(start);
  if (metrics) {
    metrics->ObserveCheckpoint(seconds, UnixSecondsNow());
  }
  char fields[128];
  std::snprintf(fields, sizeof(fields), "event=checkpoint step=%lld seconds=%.3f",
                static_cast<long long>(step), seconds);
  Log(c, rank, fields);
  return Status::Ok();
}

// Rank 0's process hosts the store: it must not exit (and take the store
// with it) while another rank still has a store call to make.
void LeaveTogether(const WorkerConfig& c, int rank, TcpStoreClient& store) {
  if (Status s = store.Barrier("runner/exit", c.world_size, Timeout(c)); !s.ok()) {
    Log(c, rank, "event=exit-barrier-failed error=\"" + s.ToString() + "\"");
  }
}

int Fail(const WorkerConfig& c, int rank, const char* what, const Status& status) {
  const int code = ExitCodeFor(status);
  Log(c, rank,
      std::string("event=failed during=") + what + " exit=" + ExitCodeName(code) + " error=\"" +
          status.ToString() + "\"");
  return code;
}

// A checkpoint that could not be saved: kExitCheckpointFailure (a relaunch
// from the previous checkpoint), except for a misconfigured directory
// (InvalidArgument: a regular file on its path, no permission, a read-only
// volume) met by this run's first save, which a relaunch would meet again:
// exit 2 fails the job with the message that says what to fix. After a
// save has worked, the same errors are the node's (a disk the kernel
// remounted read-only after I/O errors): a relaunch, perhaps elsewhere.
int CheckpointFailed(const WorkerConfig& c, int rank, const Status& status, bool saved_before) {
  const int code = status.code() == StatusCode::kInvalidArgument && !saved_before
                       ? kExitInvalidConfig
                       : kExitCheckpointFailure;
  Log(c, rank,
      std::string("event=failed during=checkpoint exit=") + ExitCodeName(code) + " error=\"" +
          status.ToString() + "\"");
  return code;
}

// Whether `failure`, before this run trained its first step, is the stop
// this rank was asked for: a wait the stop cut short (Aborted, the store's
// interrupt), or one that failed because the peers are leaving on the same
// stop (the store or a peer gone, a rendezvous that cannot finish).
// Failures that would recur (a bad plan, data loss, memory) keep their own
// codes even then.
bool IsStopBeforeTraining(const StopSignal& stop_signal, const Status& failure) {
  if (!stop_signal.requested()) return false;
  switch (failure.code()) {
    case StatusCode::kAborted:
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
      return true;
    default:
      return false;
  }
}

// The clean stop of a rank stopped before it trained a step of this run
// (docs/worker.md, "Process model"): there is nothing to save, and nothing
// is lost, since the checkpoints are as the last run left them. Exit 6, so
// the controller relaunches without counting a restart; exit 1 (the
// supervisor's SIGKILL after its grace period, which a rank blocked in a
// rendezvous for up to PACER_TIMEOUT_SECONDS used to get) spends the
// restart budget on a drain. No exit barrier: the peers it waited for may
// never come.
int StoppedBeforeTraining(const WorkerConfig& c, int rank, const char* during, const Status& why) {
  Log(c, rank,
      std::string("event=stopped during=") + during +
          " checkpoint=not-needed exit=stopped message=\"a stop was requested before this run "
          "trained a step; nothing to save\" interrupted=\"" +
          why.ToString() + "\"");
  return kExitStoppedAfterCheckpoint;
}

}  // namespace

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return kExitSuccess;
    case StatusCode::kInvalidArgument:
      return kExitInvalidConfig;
    case StatusCode::kResourceExhausted:
      return kExitOutOfMemory;
    case StatusCode::kHardwareFault:
      return kExitDeviceFault;
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kAborted:
      return kExitCollectiveFailure;
    default:
      return kExitInternalError;
  }
}

int64_t StopCheckIntervalSteps(double rank0_step_seconds) {
  if (!(rank0_step_seconds > 0)) return 1;
  const double steps = kStopCheckSeconds / rank0_step_seconds;
  return steps >= static_cast<double>(kMaxStopCheckSteps)
             ? kMaxStopCheckSteps
             : std::max<int64_t>(1, static_cast<int64_t>(steps));
}

namespace {

// The fingerprint workers wrote before the attention and MLP shape were in
// it: the layout, precision, recomputation and the model's layers, hidden
// size, sequence and vocabulary.
std::string LegacyPlanFingerprint(const WorkerConfig& c) {
  char buffer[256];
  std::snprintf(buffer, sizeof(buffer), "t%d p%d v%d d%d z%d b%d k%lld %s %s L%d h%d s%d V%d",
                c.tensor_parallel, c.pipeline_parallel, c.virtual_stages, c.data_parallel,
                c.zero_stage, c.micro_batch_size,
                static_cast<long long>(c.gradient_accumulation_steps),
                planner::PrecisionName(c.precision), planner::RecomputeName(c.recompute),
                c.model.layers, c.model.hidden_size, c.model.sequence_length, c.model.vocab_size);
  return buffer;
}

}  // namespace

std::string PlanFingerprint(const WorkerConfig& c) {
  // Heads, KV heads, the MLP's size and kind, tied embeddings and the mask:
  // a change to any of them gives buffers of other shapes, or of the same
  // shapes and another meaning (heads regrouped), so they are never restored.
  const planner::ModelSpec& m = c.model;
  char buffer[128];
  std::snprintf(buffer, sizeof(buffer), " H%d G%d F%d %s T%d C%d", m.attention_heads, m.kv_heads,
                m.ffn_hidden_size, planner::FfnKindName(m.ffn_kind), m.tied_embeddings ? 1 : 0,
                m.causal_attention ? 1 : 0);
  return LegacyPlanFingerprint(c) + buffer;
}

std::string WorldFingerprint(const WorkerConfig& c) {
  char buffer[256];
  std::snprintf(buffer, sizeof(buffer), " W%d N%d l%d B%lld S%lld O%d A%d x%.9g J%s/%s",
                c.world_size, c.nnodes, c.local_world_size,
                static_cast<long long>(c.global_batch_size), static_cast<long long>(c.total_steps),
                static_cast<int>(c.optimizer), static_cast<int>(c.attention), c.scale,
                c.job_namespace.c_str(), c.job_name.c_str());
  return PlanFingerprint(c) + buffer;
}

Status CompareWithRankZero(const std::string& mine, const std::string& theirs) {
  if (mine == theirs) return Status::Ok();
  const auto tokens = [](const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string token; in >> token;) out.push_back(token);
    return out;
  };
  const std::vector<std::string> a = tokens(mine), b = tokens(theirs);
  std::string differ;
  if (a.size() == b.size()) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (a[i] == b[i]) continue;
      if (!differ.empty()) differ += ", ";
      differ += a[i] + " (rank 0: " + b[i] + ")";
    }
  } else {
    differ = "\"" + mine + "\" (rank 0: \"" + theirs + "\")";
  }
  return InvalidArgumentError(
      "this node was started with another plan than rank 0's: " + differ +
      " (t p v d: parallel sizes, z ZeRO, b micro-batch, k accumulation, L h s V H G F: the "
      "model, W N l: WORLD_SIZE, NNODES, LOCAL_WORLD_SIZE, B global batch, S steps); give every "
      "node the same PACER_* and world variables");
}

std::vector<std::string> AcceptedPlanFingerprints(const WorkerConfig& c) {
  return {PlanFingerprint(c), LegacyPlanFingerprint(c)};
}

// " mean_step_seconds=... predicted_step_seconds=... mfu=... peak_memory_bytes=...
// predicted_memory_bytes=...": the run's measurement beside the plan's
// prediction. MFU is model FLOPs (6N + attention, no recomputation) over the
// GPU type's catalog peak, as the pacer_worker_mfu gauge; left out without a
// peak (a CPU run) or without a measured step.
namespace {

std::string DoneSummary(const WorkerConfig& c, const StepBackend& backend,
                        const RunOptions& options, double model_flops_per_rank,
                        double measured_seconds_sum, int64_t measured_steps) {
  std::string out;
  char field[96];
  if (measured_steps > 0) {
    const double mean_seconds = measured_seconds_sum / static_cast<double>(measured_steps);
    std::snprintf(field, sizeof(field), " mean_step_seconds=%.6g", mean_seconds);
    out += field;
    if (options.catalog_peak_flops > 0 && mean_seconds > 0) {
      std::snprintf(field, sizeof(field), " mfu=%.4f",
                    model_flops_per_rank / mean_seconds / options.catalog_peak_flops);
      out += field;
    }
  }
  if (c.predicted_step_seconds) {
    std::snprintf(field, sizeof(field), " predicted_step_seconds=%.6g", *c.predicted_step_seconds);
    out += field;
  }
  std::snprintf(field, sizeof(field), " peak_memory_bytes=%.0f", backend.PeakMemoryBytes());
  out += field;
  if (c.predicted_memory_bytes) {
    std::snprintf(field, sizeof(field), " predicted_memory_bytes=%.0f", *c.predicted_memory_bytes);
    out += field;
  }
  return out;
}

}  // namespace

int RunRank(const WorkerConfig& c, int local_rank, const BackendFactory& make_backend,
            const RunOptions& options) {
  const int rank = c.GlobalRank(local_rank);
  StopSignal stop_signal;

  // A plan this backend cannot run on any hardware fails every rank here,
  // before rank 0 starts the store: failing in Initialize, rank 0 took the
  // store down while its peers were still reading it, and a peer's "lost
  // the store" (exit 4) could be the node's first failure, not the cause.
  if (Status s = make_backend()->CheckPlan(c); !s.ok()) return Fail(c, rank, "plan", s);

  // 0. Metrics: each local rank exports on its own port, bound before the
  // rendezvous. Bound after it (and after the model's initialisation), a
  // taken port failed this rank only once every peer had joined, and they
  // then waited on it until their collectives timed out. Published (values
  // and all) once the resume step is known.
  // (The backend itself comes after the store it keeps a pointer to, and so
  // goes before it; constructing one does no work, so one names the label.)
  MetricsLabels labels{c.job_name,
                       c.job_namespace,
                       std::to_string(rank),
                       make_backend()->name(),
                       c.gpu_type.empty() ? std::string("cpu") : c.gpu_type,
                       c.attempt > 0 ? std::to_string(c.attempt) : std::string()};
  const int port = c.metrics_port == 0 ? 0 : c.metrics_port + local_rank;
  auto metrics_or =
      WorkerMetrics::Create(labels, "0.0.0.0:" + std::to_string(port), /*publish=*/false);
  if (!metrics_or.ok()) return Fail(c, rank, "metrics", metrics_or.status());
  WorkerMetrics& metrics = **metrics_or;

  // 1. Rendezvous.
  std::unique_ptr<TcpStoreServer> server;
  if (rank == 0) {
    // One connection per rank, and room for a few more (a rank that
    // reconnects before its old connection is reaped).
    auto started = TcpStoreServer::Start("0.0.0.0", c.master_port,
                                         static_cast<std::size_t>(c.world_size) + 64);
    if (!started.ok()) return Fail(c, rank, "store", started.status());
    server = std::move(started).value();
  }
  // Start-up: until the first step, every wait in the store (the connect,
  // the rendezvous of Gloo or of NCCL's ids, the resume point) also watches
  // the stop signal, so that a SIGTERM while the peers gather ends in a
  // clean stop well within the supervisor's grace period instead of a wait
  // of up to PACER_TIMEOUT_SECONDS and a SIGKILL.
  auto connected = TcpStoreClient::Connect(c.master_addr, c.master_port, rank, Timeout(c),
                                           [&stop_signal] { return stop_signal.requested(); });
  if (!connected.ok()) {
    if (IsStopBeforeTraining(stop_signal, connected.status())) {
      return StoppedBeforeTraining(c, rank, "rendezvous", connected.status());
    }
    Log(c, rank,
        "event=failed during=rendezvous exit=rendezvous-timeout error=\"" +
            connected.status().ToString() + "\"");
    return kExitRendezvousTimeout;
  }
  TcpStoreClient& store = **connected;

  // Every rank's plan is rank 0's, before a collective of other sizes can
  // abort inside Gloo or another accumulation train on silently wrong.
  {
    const std::string mine = WorldFingerprint(c);
    Status agreed = Status::Ok();
    if (rank == 0) {
      agreed = store.Set(kWorldPlanKey, mine);
    } else if (StatusOr<std::string> theirs = store.Get(kWorldPlanKey, Timeout(c)); theirs.ok()) {
      agreed = CompareWithRankZero(mine, *theirs);
    } else {
      agreed = theirs.status();
    }
    if (!agreed.ok()) {
      if (IsStopBeforeTraining(stop_signal, agreed)) {
        return StoppedBeforeTraining(c, rank, "rendezvous", agreed);
      }
      return Fail(c, rank, "rendezvous", agreed);
    }
  }

  auto schedule = BuildStepSchedule(c, rank);
  if (!schedule.ok()) return Fail(c, rank, "schedule", schedule.status());
  std::unique_ptr<StepBackend> backend = make_backend();
  BackendContext context;
  context.config = &c;
  context.schedule = &*schedule;
  context.global_rank = rank;
  context.local_rank = local_rank;
  context.store = &store;
  context.timeout = Timeout(c);
  if (Status s = backend->Initialize(context, options.seed); !s.ok()) {
    if (IsStopBeforeTraining(stop_signal, s)) {
      return StoppedBeforeTraining(c, rank, "initialize", s);
    }
    return Fail(c, rank, "initialize", s);
  }

  if (options.checkpoint_buffers && !c.checkpoint_dir.empty()) {
    // Before any step: the first checkpoint would refuse it after
    // checkpoint_interval steps, and every restart would again.
    if (Status s = CheckCheckpointBufferBytes(backend->CheckpointBufferBytes()); !s.ok()) {
      return Fail(c, rank, "initialize", s);
    }
  }

  // 2. Resume.
  auto resume = AgreeOnResumeStep(c, rank, store, options);
  if (!resume.ok()) {
    if (IsStopBeforeTraining(stop_signal, resume.status())) {
      return StoppedBeforeTraining(c, rank, "resume", resume.status());
    }
    const int code = Fail(c, rank, "resume", resume.status());
    // Rank 0 published its error in the store its process hosts: leaving
    // at once, it could take the store away before another rank read the
    // error, which then failed with "lost its connection to the store".
    LeaveTogether(c, rank, store);
    return code;
  }
  if (resume->data_loss) {
    Log(c, rank, "event=failed during=resume exit=data-loss");
    LeaveTogether(c, rank, store);
    return kExitDataLoss;
  }
  int64_t step = resume->step;
  if (step > 0 && options.checkpoint_buffers) {
    // Rank 0 checked this file a moment ago; if it went bad since, fresh
    // weights at step `step` would be silent data loss.
    auto state = CheckpointStore(c.checkpoint_dir, rank).Load(step);
    const std::vector<std::string> accepted = AcceptedPlanFingerprints(c);
    if (!state.ok() ||
        std::find(accepted.begin(), accepted.end(), state->plan_fingerprint) == accepted.end()) {
      Log(c, rank,
          "event=failed during=restore exit=data-loss error=\"" +
              (state.ok() ? std::string("plan changed") : state.status().ToString()) + "\"");
      return kExitDataLoss;
    }
    // The data is a function of (seed, step, rank): weights trained on one
    // seed's data and continued on another's are neither run, and nothing
    // said so.
    if (const std::optional<uint64_t> trained = SeedOf(state->rng_state);
        trained && *trained != options.seed) {
      return Fail(
          c, rank, "restore",
          InvalidArgumentError(
              "--seed is " + std::to_string(options.seed) + ", but the checkpoint at step " +
              std::to_string(step) + " in " + c.checkpoint_dir + " was trained with seed " +
              std::to_string(*trained) +
              ": its weights would go on with another seed's data; resume with --seed " +
              std::to_string(*trained) + ", or start a new run in an empty checkpoint directory"));
    }
    if (Status s = backend->LoadBuffers(state->buffers); !s.ok()) {
      return Fail(c, rank, "restore", s);
    }
  }

  metrics.SetTotalSteps(c.total_steps);
  metrics.SetCheckpointIntervalSteps(c.checkpoint_interval_steps);
  metrics.SetStepsCompleted(step);
  metrics.SetResumeStepsLost(resume->steps_lost);
  metrics.SetModelScale(c.scale);
  metrics.SetPeaks(options.catalog_peak_flops, options.calibrated_peak_flops);
  metrics.SetPlanInfo({c.tensor_parallel, c.pipeline_parallel, c.data_parallel, c.zero_stage,
                       c.micro_batch_size, static_cast<int>(c.gradient_accumulation_steps),
                       // What runs, not what the plan asked for (a CPU runs
                       // a bf16 plan's GEMMs in fp32).
                       planner::PrecisionName(backend->ExecutedPrecision(c.precision))});
  metrics.SetPredicted(c.predicted_step_seconds, c.predicted_memory_bytes);
  metrics.Publish();
  Log(c, rank,
      "event=start backend=" + std::string(backend->name()) +
          " resume_step=" + std::to_string(step) + " run=" + resume->run_id +
          " precision=" + planner::PrecisionName(backend->ExecutedPrecision(c.precision)) +
          " total_steps=" + std::to_string(c.total_steps) + " metrics_port=" +
          std::to_string(metrics.port()) + " plan=\"" + PlanFingerprint(c) + "\"");

  // 3. Steps. From here a stop is agreed through the store (StopBefore),
  // whose reads a requested stop must not cut short.
  store.SetInterrupt(nullptr);
  const int64_t first_step = step;
  const double model_flops_per_rank = planner::ModelFlopsPerSequence(c.model) *
                                      static_cast<double>(c.global_batch_size) / c.world_size;
  bool claimed = false;
  bool warmed_up = false;
  bool saved_once = false;  // a periodic checkpoint of this run was saved
  StopChecks checks;
  checks.agree_at = step + 2;
  double last_step_seconds = 0;
  // The run's own step-time average (warm-up step excluded), for the final
  // log line: a user comparing with the plan reads it there, without a scrape.
  double measured_seconds_sum = 0;
  int64_t measured_steps = 0;
  while (step < c.total_steps) {
    if (step == checks.agree_at) {
      if (Status s = AgreeOnStopInterval(c, rank, store, last_step_seconds, &checks); !s.ok()) {
        return Fail(c, rank, "stop-check", s);
      }
      Log(c, rank, "event=stop-checks every_steps=" + std::to_string(checks.interval));
    }
    StatusOr<bool> stop = false;
    if (checks.IsCheck(step)) {
      stop = StopBefore(c, store, step, checks.Next(step), stop_signal.requested(), &claimed);
    }
    if (!stop.ok()) return Fail(c, rank, "stop-check", stop.status());
    if (*stop) {
      if (c.checkpoint_dir.empty()) {
        // Still a clean stop (the controller relaunches without counting a
        // restart), but not "after a checkpoint": say what was not kept.
        Log(c, rank,
            "event=stopped step=" + std::to_string(step) +
                " checkpoint=none exit=stopped message=\"no checkpoint directory "
                "(--checkpoint-dir / PACER_CHECKPOINT_DIR): nothing was saved, and the " +
                std::to_string(step - first_step) +
                " steps this run trained are not kept; a restart begins at step 0\"");
        LeaveTogether(c, rank, store);
        return kExitStoppedAfterCheckpoint;
      }
      if (Status s = SaveCheckpoint(c, rank, resume->run_id, step, *backend, options, &metrics);
          !s.ok()) {
        return CheckpointFailed(c, rank, s, saved_once);
      }
      Log(c, rank, "event=stopped step=" + std::to_string(step) + " exit=stopped-after-checkpoint");
      LeaveTogether(c, rank, store);
      return kExitStoppedAfterCheckpoint;
    }
    auto timing = backend->RunStep(step);
    if (!timing.ok()) {
      // The first step's collectives are the last meeting of start-up: a
      // peer that stopped while starting (this rank finished first) leaves
      // them unanswered. With this rank stopping too, nothing was trained.
      if (step == first_step && IsStopBeforeTraining(stop_signal, timing.status())) {
        return StoppedBeforeTraining(c, rank, "first-step", timing.status());
      }
      return Fail(c, rank, "step", timing.status());
    }
    last_step_seconds = timing->step_seconds;
    ++step;
    metrics.SetPeakMemoryBytes(backend->PeakMemoryBytes());
    if (!warmed_up) {
      // The first step of a process pays for library and communicator
      // warm-up (cuBLAS handles, NCCL connections, first-touch allocations):
      // it counts as progress but not as a measurement of the step time.
      warmed_up = true;
      metrics.ObserveWarmUpStep(step, UnixSecondsNow());
    } else {
      measured_seconds_sum += timing->step_seconds;
      ++measured_steps;
      StepMeasurement m;
      m.step = step;
      m.step_seconds = timing->step_seconds;
      m.global_samples = c.global_batch_size;
      m.global_tokens = c.global_batch_size * c.model.sequence_length;
      m.model_flops = model_flops_per_rank;
      m.collective_seconds = timing->collective_seconds;
      m.collective_bytes = timing->collective_bus_bytes;  // already bus bytes
      m.collective_bus_factor = 1;
      m.exposed_communication_seconds = timing->exposed_communication_seconds;
      m.finished_unix_seconds = UnixSecondsNow();
      metrics.ObserveStep(m);
    }
    if (c.checkpoint_interval_steps > 0 && step % c.checkpoint_interval_steps == 0 &&
        step < c.total_steps) {
      if (Status s = SaveCheckpoint(c, rank, resume->run_id, step, *backend, options, &metrics);
          !s.ok()) {
        return CheckpointFailed(c, rank, s, saved_once);
      }
      saved_once = true;
    }
  }
  // The last step's checkpoint too (the periodic ones stop before it): a
  // job given more steps later (an edit that adds data to a Succeeded job)
  // resumes here instead of training again since the last periodic one,
  // and --checkpoint-buffers keeps the final weights. Not when this run
  // trained nothing: it resumed from the file for this step.
  if (step > first_step) {
    if (Status s = SaveCheckpoint(c, rank, resume->run_id, step, *backend, options, &metrics);
        !s.ok()) {
      // With --checkpoint-buffers the final weights are the run's product:
      // a failure fails the run. Without, the file only saves a later edit
      // that adds steps from training since the last periodic checkpoint
      // again; failing the run for it (a volume full at the very end)
      // relaunched the whole job from that checkpoint, to fail again at its
      // end, restart after restart.
      if (options.checkpoint_buffers) return CheckpointFailed(c, rank, s, saved_once);
      Log(c, rank,
          "event=final-checkpoint-failed step=" + std::to_string(step) + " error=\"" +
              s.ToString() +
              "\" message=\"every step is trained; a later run given more steps resumes from "
              "the last checkpoint before this one\"");
    }
  }
  Log(c, rank,
      "event=done steps=" + std::to_string(step) +
          DoneSummary(c, *backend, options, model_flops_per_rank, measured_seconds_sum,
                      measured_steps));
  LeaveTogether(c, rank, store);
  return kExitSuccess;
}

}  // namespace pacer::worker
