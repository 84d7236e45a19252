#include "core/worker_config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <string_view>

namespace pacer::worker {
namespace {

// torchrun exports each rendezvous variable also as PET_<NAME>.
const char* Lookup(const EnvLookup& getenv, const char* name, bool torchrun_alias) {
  if (const char* v = getenv(name); v != nullptr && *v != '\0') return v;
  if (torchrun_alias) {
    const std::string pet = std::string("PET_") + name;
    if (const char* v = getenv(pet.c_str()); v != nullptr && *v != '\0') return v;
  }
  return nullptr;
}

std::string Quoted(std::string_view v) { return "\"" + std::string(v.substr(0, 64)) + "\""; }

template <typename Int>
Status ReadInt(const EnvLookup& getenv, const char* name, Int min, Int max, Int* out,
               bool torchrun_alias = false) {
  const char* text = Lookup(getenv, name, torchrun_alias);
  if (text == nullptr) return Status::Ok();  // keep the default
  const std::string_view s(text);
  Int value{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size()) {
    return InvalidArgumentError(std::string(name) + ": must be an integer, got " + Quoted(s));
  }
  if (value < min || value > max) {
    return InvalidArgumentError(std::string(name) + ": must be in [" + std::to_string(min) + ", " +
                                std::to_string(max) + "], got " + Quoted(s));
  }
  *out = value;
  return Status::Ok();
}

// A bound as it would be written: "86400", "1e-06", not "86400.000000".
std::string BoundText(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.6g", v);
  return buffer;
}

// Read with from_chars as ReadInt reads integers, so both take the same
// text: decimal only, all of it, no spaces. strtod took leading spaces
// (" 1"), hex ("0x10" as 16) and the locale's decimal comma, all of which
// the integer variables refuse; "inf" and "nan" parse but are not finite.
Status ReadDouble(const EnvLookup& getenv, const char* name, double min, double max,
                  double* out) {
  const char* text = Lookup(getenv, name, false);
  if (text == nullptr) return Status::Ok();
  const std::string_view s(text);
  double value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  const bool whole = end == s.data() + s.size();
  const bool out_of_range = ec == std::errc::result_out_of_range && whole;
  if (!out_of_range && (ec != std::errc() || !whole || !std::isfinite(value))) {
    return InvalidArgumentError(std::string(name) +
                                ": must be a decimal number such as 300, 0.5 or 2e-3 (no spaces, "
                                "no hex), got " +
                                Quoted(s));
  }
  if (out_of_range || value < min || value > max) {
    return InvalidArgumentError(std::string(name) + ": must be a number in [" + BoundText(min) +
                                ", " + BoundText(max) + "], got " + Quoted(s));
  }
  *out = value;
  return Status::Ok();
}

void ReadString(const EnvLookup& getenv, const char* name, std::string* out,
                bool torchrun_alias = false) {
  if (const char* text = Lookup(getenv, name, torchrun_alias)) *out = text;
}

template <typename Enum>
Status ReadEnum(const EnvLookup& getenv, const char* name, std::initializer_list<Enum> values,
                const char* (*name_of)(Enum), Enum* out) {
  const char* text = Lookup(getenv, name, false);
  if (text == nullptr) return Status::Ok();
  std::string allowed;
  for (Enum v : values) {
    if (std::string_view(name_of(v)) == text) {
      *out = v;
      return Status::Ok();
    }
    allowed += (allowed.empty() ? "" : ", ") + std::string(name_of(v));
  }
  return InvalidArgumentError(std::string(name) + ": must be one of " + allowed + ", got " +
                              Quoted(text));
}

const char* BoolName(bool b) { return b ? "true" : "false"; }

// A switch: "1" on, "0" off, unset or empty leaves *out.
Status ReadSwitch(const EnvLookup& getenv, const char* name, bool* out) {
  const char* text = Lookup(getenv, name, false);
  if (text == nullptr) return Status::Ok();
  const std::string_view v(text);
  if (v == "1" || v == "0") {
    *out = v == "1";
    return Status::Ok();
  }
  return InvalidArgumentError(std::string(name) + ": must be 0 or 1, got " + Quoted(text));
}

}  // namespace

const char* BackendName(Backend b) {
  switch (b) {
    case Backend::kAuto: return "auto";
    case Backend::kCpu: return "cpu";
    case Backend::kGpu: return "gpu";
  }
  return "auto";
}

StatusOr<GpuSwitches> GpuSwitchesFromEnvironment(const EnvLookup& getenv) {
  GpuSwitches s;
  RETURN_IF_ERROR(ReadSwitch(getenv, "PACER_GPU_BF16_ACTIVATIONS", &s.bf16_activations));
  RETURN_IF_ERROR(ReadSwitch(getenv, "PACER_GPU_OP_TIMES", &s.op_times));
  RETURN_IF_ERROR(ReadSwitch(getenv, "PACER_CUDNN_ATTENTION", &s.cudnn_attention));
  RETURN_IF_ERROR(ReadSwitch(getenv, "PACER_GPU_CAUSAL_TILES", &s.causal_tiles));
  return s;
}

StatusOr<uint64_t> ParseSeed(std::string_view text) {
  // from_chars, as the environment's integers: CLI11 read "-1" as 2^64 - 1
  // and 2^64 as some other seed, so a typo ran with a seed nobody chose.
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return InvalidArgumentError(
        "--seed: must be a decimal integer in [0, 18446744073709551615] (0 to 2^64 - 1), got " +
        Quoted(text));
  }
  return value;
}

StatusOr<WorkerConfig> ConfigFromEnvironment(const EnvLookup& getenv) {
  using planner::FfnKind;
  using planner::Optimizer;
  using planner::Precision;
  using planner::Recompute;
  constexpr int kMaxRanks = 1 << 20;
  WorkerConfig c;
  RETURN_IF_ERROR(ReadInt(getenv, "RANK", 0, kMaxRanks, &c.rank, true));
  RETURN_IF_ERROR(ReadInt(getenv, "WORLD_SIZE", 1, kMaxRanks, &c.world_size, true));
  RETURN_IF_ERROR(ReadInt(getenv, "LOCAL_RANK", 0, 1024, &c.local_rank, true));
  RETURN_IF_ERROR(ReadInt(getenv, "LOCAL_WORLD_SIZE", 1, 1024, &c.local_world_size, true));
  RETURN_IF_ERROR(ReadInt(getenv, "NODE_RANK", 0, kMaxRanks, &c.node_rank, true));
  RETURN_IF_ERROR(ReadInt(getenv, "NNODES", 1, kMaxRanks, &c.nnodes, true));
  ReadString(getenv, "MASTER_ADDR", &c.master_addr, true);
  RETURN_IF_ERROR(ReadInt(getenv, "MASTER_PORT", 1, 65535, &c.master_port, true));

  RETURN_IF_ERROR(ReadInt(getenv, "PACER_TENSOR_PARALLEL", 1, 1024, &c.tensor_parallel));
  RETURN_IF_ERROR(ReadInt(getenv, "PACER_PIPELINE_PARALLEL", 1, 1024, &c.pipeline_parallel));
  RETURN_IF_ERROR(ReadInt(getenv, "PACER_DATA_PARALLEL", 1, kMaxRanks, &c.data_parallel));
  RETURN_IF_ERROR(ReadInt(getenv, "PACER_VIRTUAL_STAGES", 1, 64, &c.virtual_stages));
  RETURN_IF_ERROR(ReadInt(getenv, "PACER_ZERO_STAGE", 0, 3, &c.zero_stage));
  RETURN_IF_ERROR(ReadInt(getenv, "PACER_MICRO_BATCH_SIZE", 1, 1 << 16, &c.micro_batch_size));
  RETURN_IF_ERROR(ReadInt<int64_t>(getenv, "PACER_GRAD_ACCUM_STEPS", 1, int64_t{1} << 30,
                                   &c.gradient_accumulation_steps));
  RETURN_IF_ERROR(ReadInt<int64_t>(getenv, "PACER_GLOBAL_BATCH_SIZE", 1, int64_t{100'000'000},
                                   &c.global_batch_size));
  RETURN_IF_ERROR(
      ReadInt<int64_t>(getenv, "PACER_TOTAL_STEPS", 1, int64_t{1} << 40, &c.total_steps));
  RETURN_IF_ERROR(ReadEnum(getenv, "PACER_PRECISION",
                           {Precision::kFp32, Precision::kTf32, Precision::kFp16,
                            Precision::kBf16, Precision::kFp8},
                           planner::PrecisionName, &c.precision));
  RETURN_IF_ERROR(ReadEnum(getenv, "PACER_OPTIMIZER",
                           {Optimizer::kAdamW, Optimizer::kAdam, Optimizer::kSgd,
                            Optimizer::kSgdMomentum, Optimizer::kAdafactor},
                           planner::OptimizerName, &c.optimizer));
  RETURN_IF_ERROR(ReadEnum(getenv, "PACER_ACTIVATION_CHECKPOINTING",
                           {Recompute::kNone, Recompute::kSelective, Recompute::kFull},
                           planner::RecomputeName, &c.recompute));
  RETURN_IF_ERROR(ReadEnum(getenv, "PACER_ATTENTION_KERNEL",
                           {planner::AttentionKernel::kFused, planner::AttentionKernel::kUnfused},
                           planner::AttentionKernelName, &c.attention));

  planner::ModelSpec& m = c.model;
  m.layers = 2;
  m.hidden_size = 256;
  m.attention_heads = 4;
  m.vocab_size = 1024;
  m.sequence_length = 128;
  RETURN_IF_ERROR(ReadInt(getenv, "PACER_MODEL_LAYERS", 1, 1000, &m.layers));
  RETURN_IF_ERROR(ReadInt(getenv, "PACER_MODEL_HIDDEN_SIZE", 1, 1'000'000, &m.hidden_size));
  RETURN_IF_ERROR(ReadInt(getenv, "PACER_MODEL_ATTENTION_HEADS", 1, 100'000, &m.attention_heads));
  m.kv_heads = m.attention_heads;
  RETURN_IF_ERROR(ReadInt(getenv, "PACER_MODEL_KV_HEADS", 1, 100'000, &m.kv_heads));
  RETURN_IF_ERROR(ReadEnum(getenv, "PACER_MODEL_FFN_KIND", {FfnKind::kGelu, FfnKind::kSwiglu},
                           planner::FfnKindName, &m.ffn_kind));
  m.ffn_hidden_size = 4 * m.hidden_size;
  RETURN_IF_ERROR(
      ReadInt(getenv, "PACER_MODEL_FFN_HIDDEN_SIZE", 1, 10'000'000, &m.ffn_hidden_size));
  RETURN_IF_ERROR(ReadInt(getenv, "PACER_MODEL_VOCAB_SIZE", 1, 10'000'000, &m.vocab_size));
  RETURN_IF_ERROR(ReadEnum(getenv, "PACER_MODEL_CAUSAL_ATTENTION", {true, false}, BoolName,
                           &m.causal_attention));
  RETURN_IF_ERROR(
      ReadEnum(getenv, "PACER_MODEL_TIED_EMBEDDINGS", {true, false}, BoolName, &m.tied_embeddings));
  RETURN_IF_ERROR(ReadInt(getenv, "PACER_SEQUENCE_LENGTH", 1, 10'000'000, &m.sequence_length));

  ReadString(getenv, "PACER_CHECKPOINT_DIR", &c.checkpoint_dir);
  RETURN_IF_ERROR(ReadInt<int64_t>(getenv, "PACER_CHECKPOINT_INTERVAL_STEPS", 0,
                                   int64_t{1} << 40, &c.checkpoint_interval_steps));
  RETURN_IF_ERROR(ReadInt(getenv, "PACER_METRICS_PORT", 0, 65535, &c.metrics_port));
  ReadString(getenv, "PACER_JOB_NAME", &c.job_name);
  ReadString(getenv, "PACER_JOB_NAMESPACE", &c.job_namespace);
  ReadString(getenv, "PACER_GPU_TYPE", &c.gpu_type);
  RETURN_IF_ERROR(ReadInt(getenv, "PACER_ATTEMPT", 0, 1 << 30, &c.attempt));
  RETURN_IF_ERROR(ReadEnum(getenv, "PACER_BACKEND", {Backend::kAuto, Backend::kCpu, Backend::kGpu},
                           BackendName, &c.backend));
  RETURN_IF_ERROR(ReadDouble(getenv, "PACER_SCALE", 1e-6, 1.0, &c.scale));
  RETURN_IF_ERROR(ReadDouble(getenv, "PACER_TIMEOUT_SECONDS", 1, 86400, &c.timeout_seconds));
  RETURN_IF_ERROR(ReadDouble(getenv, "PACER_STOP_GRACE_SECONDS", 1, 86400, &c.stop_grace_seconds));
  // Linux's PID_MAX_LIMIT is 2^22.
  RETURN_IF_ERROR(ReadInt(getenv, "PACER_PARENT_PID", 0, 1 << 22, &c.parent_pid));
  ASSIGN_OR_RETURN(c.gpu, GpuSwitchesFromEnvironment(getenv));
  double predicted = 0;
  if (Lookup(getenv, "PACER_PREDICTED_STEP_SECONDS", false)) {
    RETURN_IF_ERROR(ReadDouble(getenv, "PACER_PREDICTED_STEP_SECONDS", 0, 1e9, &predicted));
    c.predicted_step_seconds = predicted;
  }
  if (Lookup(getenv, "PACER_PREDICTED_MEMORY_BYTES", false)) {
    RETURN_IF_ERROR(ReadDouble(getenv, "PACER_PREDICTED_MEMORY_BYTES", 0, 1e15, &predicted));
    c.predicted_memory_bytes = predicted;
  }
  // RANK is the global rank of this node's first rank (or, as torchrun sets
  // it for one process per rank, of this rank). A RANK that disagrees with
  // NODE_RANK is a hand-set run that forgot NODE_RANK: every node would be
  // node 0 and their ranks would collide until a timeout.
  const int64_t first_rank = int64_t{c.node_rank} * c.local_world_size;
  if (Lookup(getenv, "RANK", true) == nullptr) {
    c.rank = static_cast<int>(first_rank);  // checked by ValidateConfig below
  } else if (c.rank != first_rank && c.rank != first_rank + c.local_rank) {
    return InvalidArgumentError(
        "RANK: must be NODE_RANK x LOCAL_WORLD_SIZE (" + std::to_string(c.node_rank) + " x " +
        std::to_string(c.local_world_size) + " = " + std::to_string(first_rank) +
        ", the global rank of this node's first rank), got " + std::to_string(c.rank) +
        "; set NODE_RANK for this node");
  }
  RETURN_IF_ERROR(ValidateConfig(c));
  return c;
}

SupervisorOptions SupervisorOptionsFor(const WorkerConfig& config) {
  SupervisorOptions options;
  options.parent_pid = config.parent_pid;
  options.stop_grace_seconds = config.stop_grace_seconds;
  return options;
}

Status ValidateConfig(const WorkerConfig& c) {
  auto fail = [](const std::string& m) { return InvalidArgumentError(m); };
  if (c.world_size != c.nnodes * c.local_world_size) {
    return fail("WORLD_SIZE: must equal NNODES x LOCAL_WORLD_SIZE (" + std::to_string(c.nnodes) +
                " x " + std::to_string(c.local_world_size) + "), got " +
                std::to_string(c.world_size));
  }
  if (c.node_rank >= c.nnodes) {
    return fail("NODE_RANK: must be below NNODES (" + std::to_string(c.nnodes) + "), got " +
                std::to_string(c.node_rank));
  }
  if (c.local_rank >= c.local_world_size) {
    return fail("LOCAL_RANK: must be below LOCAL_WORLD_SIZE (" +
                std::to_string(c.local_world_size) + "), got " + std::to_string(c.local_rank));
  }
  // A NaN timeout would pass any range check below it and reach the
  // collectives as an undefined duration.
  if (!(c.timeout_seconds >= 1 && c.timeout_seconds <= 86400)) {
    return fail(
        "--timeout / PACER_TIMEOUT_SECONDS: must be a number of seconds in [1, 86400], got " +
        std::to_string(c.timeout_seconds));
  }
  if (!(c.stop_grace_seconds >= 1 && c.stop_grace_seconds <= 86400)) {
    return fail("PACER_STOP_GRACE_SECONDS: must be a number of seconds in [1, 86400], got " +
                std::to_string(c.stop_grace_seconds));
  }
  // Node 0's rank 0 serves the rendezvous store on MASTER_PORT and each local
  // rank its metrics on PACER_METRICS_PORT + r: a clash would fail the
  // store's listen as if the network had failed (exit 4, retried, the node
  // blamed) when it is this configuration.
  if (c.node_rank == 0 && c.metrics_port > 0 && c.master_port >= c.metrics_port &&
      c.master_port <= c.metrics_port + c.local_world_size - 1) {
    return fail("MASTER_PORT: " + std::to_string(c.master_port) +
                " is one of this node's metrics ports (PACER_METRICS_PORT " +
                std::to_string(c.metrics_port) + " + local rank 0.." +
                std::to_string(c.local_world_size - 1) +
                "); give the rendezvous store and the metrics different ports");
  }
  if (c.metrics_port > 0 && c.metrics_port + c.local_world_size - 1 > 65535) {
    // Each local rank exports on PACER_METRICS_PORT + its local rank.
    return fail("--metrics-port / PACER_METRICS_PORT: " + std::to_string(c.metrics_port) +
                " + LOCAL_WORLD_SIZE (" + std::to_string(c.local_world_size) +
                ") - 1 must be at most 65535 (local rank r exports on port + r); use a lower "
                "port");
  }
  // Checked before the batch arithmetic below, so the message names the
  // cause rather than a product that does not add up.
  // (Divided, not multiplied: a config built in code may hold any int64.)
  if (c.gradient_accumulation_steps > kMaxMicroBatchPassesPerStep / std::max(1, c.virtual_stages)) {
    return fail("PACER_GRAD_ACCUM_STEPS: accumulation steps x virtual stages (" +
                std::to_string(c.gradient_accumulation_steps) + " x " +
                std::to_string(c.virtual_stages) + ") must be at most " +
                std::to_string(kMaxMicroBatchPassesPerStep) +
                " micro-batch passes per step (the step's schedule lists each); use larger "
                "micro-batches (PACER_MICRO_BATCH_SIZE), more data-parallel ranks or fewer "
                "PACER_VIRTUAL_STAGES");
  }
  const int64_t ranks =
      static_cast<int64_t>(c.tensor_parallel) * c.pipeline_parallel * c.data_parallel;
  if (ranks != c.world_size) {
    return fail("PACER_DATA_PARALLEL: tensor x pipeline x data parallel (" +
                std::to_string(ranks) + ") must equal WORLD_SIZE (" +
                std::to_string(c.world_size) + ")");
  }
  if (c.global_batch_size !=
      static_cast<int64_t>(c.micro_batch_size) * c.gradient_accumulation_steps * c.data_parallel) {
    return fail("PACER_GLOBAL_BATCH_SIZE: must equal micro-batch x accumulation steps x data "
                "parallel (" +
                std::to_string(c.micro_batch_size) + " x " +
                std::to_string(c.gradient_accumulation_steps) + " x " +
                std::to_string(c.data_parallel) + "), got " +
                std::to_string(c.global_batch_size));
  }
  const planner::ModelSpec& m = c.model;
  if (m.layers % (c.pipeline_parallel * c.virtual_stages) != 0) {
    return fail("PACER_MODEL_LAYERS: must be divisible by pipeline parallel x virtual stages (" +
                std::to_string(c.pipeline_parallel * c.virtual_stages) + "), got " +
                std::to_string(m.layers));
  }
  if (m.hidden_size % m.attention_heads != 0) {
    return fail("PACER_MODEL_HIDDEN_SIZE: must be divisible by the attention heads (" +
                std::to_string(m.attention_heads) + "), got " + std::to_string(m.hidden_size));
  }
  if (m.attention_heads % c.tensor_parallel != 0 || m.kv_heads % c.tensor_parallel != 0 ||
      m.attention_heads % m.kv_heads != 0) {
    return fail("PACER_TENSOR_PARALLEL: must divide the attention heads (" +
                std::to_string(m.attention_heads) + ") and KV heads (" +
                std::to_string(m.kv_heads) + "), got " + std::to_string(c.tensor_parallel));
  }
  if (m.ffn_hidden_size % c.tensor_parallel != 0) {
    return fail("PACER_MODEL_FFN_HIDDEN_SIZE: must be divisible by tensor parallel (" +
                std::to_string(c.tensor_parallel) + "), got " +
                std::to_string(m.ffn_hidden_size));
  }
  // Sequence parallelism gives each tensor-parallel rank 1/t of every
  // sequence (Megatron's rule, and the planner's: TensorParallelSplitError).
  // Unchecked, the plan failed only after the rendezvous, in the executor or
  // the GPU's memory plan, with a message that named no variable.
  if (m.sequence_length % c.tensor_parallel != 0) {
    return fail("PACER_SEQUENCE_LENGTH: must be divisible by tensor parallel (" +
                std::to_string(c.tensor_parallel) +
                "; sequence parallelism splits every sequence over the tensor-parallel ranks), "
                "got " +
                std::to_string(m.sequence_length));
  }
  if (c.virtual_stages > 1 && c.gradient_accumulation_steps % c.pipeline_parallel != 0) {
    return fail("PACER_GRAD_ACCUM_STEPS: interleaved pipelines need a multiple of pipeline "
                "parallel (" + std::to_string(c.pipeline_parallel) + "), got " +
                std::to_string(c.gradient_accumulation_steps));
  }
  return Status::Ok();
}

namespace {

// The largest multiple of `unit` not above `value`, at least one `unit`.
int ScaledMultiple(double value, int unit) {
  return std::max(unit, static_cast<int>(value / unit) * unit);
}

}  // namespace

Status ApplyScale(WorkerConfig* c) {
  if (!(c->scale > 0 && c->scale <= 1)) {
    return InvalidArgumentError("PACER_SCALE: must be in (0, 1], got " + std::to_string(c->scale));
  }
  // Flags may have overridden what the environment set: validate again.
  if (c->scale == 1.0) return ValidateConfig(*c);
  planner::ModelSpec& m = c->model;
  const double s = c->scale;
  const int t = c->tensor_parallel;
  // Keep the head count (the head size shrinks with h): heads must stay
  // divisible by t, and the attention shape stays the plan's. Sequence
  // parallelism shards the sequence t ways, the vocabulary is split t ways.
  m.hidden_size = ScaledMultiple(m.hidden_size * s, m.attention_heads);
  m.ffn_hidden_size = ScaledMultiple(m.ffn_hidden_size * s, t);
  m.sequence_length = ScaledMultiple(std::max(8.0, m.sequence_length * s), t);
  m.vocab_size = ScaledMultiple(m.vocab_size * s, t);
  m.layers = ScaledMultiple(m.layers * std::sqrt(s), c->pipeline_parallel * c->virtual_stages);
  return ValidateConfig(*c);
}

std::map<std::string, std::string> EnvironmentForConfig(const WorkerConfig& c) {
  std::map<std::string, std::string> env;
  auto set = [&env](const std::string& k, const std::string& v) { env[k] = v; };
  auto set_torchrun = [&set](const std::string& k, const std::string& v) {
    set(k, v);
    set("PET_" + k, v);
  };
  set_torchrun("RANK", std::to_string(c.rank));
  set_torchrun("WORLD_SIZE", std::to_string(c.world_size));
  set_torchrun("LOCAL_RANK", std::to_string(c.local_rank));
  set_torchrun("LOCAL_WORLD_SIZE", std::to_string(c.local_world_size));
  set_torchrun("NODE_RANK", std::to_string(c.node_rank));
  set_torchrun("NNODES", std::to_string(c.nnodes));
  set_torchrun("MASTER_ADDR", c.master_addr);
  set_torchrun("MASTER_PORT", std::to_string(c.master_port));
  set("PACER_TENSOR_PARALLEL", std::to_string(c.tensor_parallel));
  set("PACER_PIPELINE_PARALLEL", std::to_string(c.pipeline_parallel));
  set("PACER_DATA_PARALLEL", std::to_string(c.data_parallel));
  set("PACER_VIRTUAL_STAGES", std::to_string(c.virtual_stages));
  set("PACER_ZERO_STAGE", std::to_string(c.zero_stage));
  set("PACER_MICRO_BATCH_SIZE", std::to_string(c.micro_batch_size));
  set("PACER_GRAD_ACCUM_STEPS", std::to_string(c.gradient_accumulation_steps));
  set("PACER_GLOBAL_BATCH_SIZE", std::to_string(c.global_batch_size));
  set("PACER_TOTAL_STEPS", std::to_string(c.total_steps));
  set("PACER_PRECISION", planner::PrecisionName(c.precision));
  set("PACER_OPTIMIZER", planner::OptimizerName(c.optimizer));
  set("PACER_ACTIVATION_CHECKPOINTING", planner::RecomputeName(c.recompute));
  set("PACER_ATTENTION_KERNEL", planner::AttentionKernelName(c.attention));
  set("PACER_MODEL_LAYERS", std::to_string(c.model.layers));
  set("PACER_MODEL_HIDDEN_SIZE", std::to_string(c.model.hidden_size));
  set("PACER_MODEL_ATTENTION_HEADS", std::to_string(c.model.attention_heads));
  set("PACER_MODEL_KV_HEADS", std::to_string(c.model.kv_heads));
  set("PACER_MODEL_FFN_HIDDEN_SIZE", std::to_string(c.model.ffn_hidden_size));
  set("PACER_MODEL_FFN_KIND", planner::FfnKindName(c.model.ffn_kind));
  set("PACER_MODEL_VOCAB_SIZE", std::to_string(c.model.vocab_size));
  set("PACER_MODEL_CAUSAL_ATTENTION", BoolName(c.model.causal_attention));
  set("PACER_MODEL_TIED_EMBEDDINGS", BoolName(c.model.tied_embeddings));
  set("PACER_SEQUENCE_LENGTH", std::to_string(c.model.sequence_length));
  if (!c.checkpoint_dir.empty()) set("PACER_CHECKPOINT_DIR", c.checkpoint_dir);
  set("PACER_CHECKPOINT_INTERVAL_STEPS", std::to_string(c.checkpoint_interval_steps));
  set("PACER_METRICS_PORT", std::to_string(c.metrics_port));
  set("PACER_JOB_NAME", c.job_name);
  set("PACER_JOB_NAMESPACE", c.job_namespace);
  if (!c.gpu_type.empty()) set("PACER_GPU_TYPE", c.gpu_type);
  if (c.attempt > 0) set("PACER_ATTEMPT", std::to_string(c.attempt));
  set("PACER_BACKEND", BackendName(c.backend));
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.17g", c.scale);
  set("PACER_SCALE", buffer);
  std::snprintf(buffer, sizeof(buffer), "%.17g", c.timeout_seconds);
  set("PACER_TIMEOUT_SECONDS", buffer);
  std::snprintf(buffer, sizeof(buffer), "%.17g", c.stop_grace_seconds);
  set("PACER_STOP_GRACE_SECONDS", buffer);
  if (c.parent_pid > 0) set("PACER_PARENT_PID", std::to_string(c.parent_pid));
  // The GPU switches only where they differ from the defaults.
  const GpuSwitches defaults;
  const auto switch_if_set = [&](const char* name, bool value, bool default_value) {
    if (value != default_value) set(name, value ? "1" : "0");
  };
  switch_if_set("PACER_GPU_BF16_ACTIVATIONS", c.gpu.bf16_activations, defaults.bf16_activations);
  switch_if_set("PACER_GPU_OP_TIMES", c.gpu.op_times, defaults.op_times);
  switch_if_set("PACER_CUDNN_ATTENTION", c.gpu.cudnn_attention, defaults.cudnn_attention);
  switch_if_set("PACER_GPU_CAUSAL_TILES", c.gpu.causal_tiles, defaults.causal_tiles);
  if (c.predicted_step_seconds) {
    std::snprintf(buffer, sizeof(buffer), "%.17g", *c.predicted_step_seconds);
    set("PACER_PREDICTED_STEP_SECONDS", buffer);
  }
  if (c.predicted_memory_bytes) {
    std::snprintf(buffer, sizeof(buffer), "%.17g", *c.predicted_memory_bytes);
    set("PACER_PREDICTED_MEMORY_BYTES", buffer);
  }
  return env;
}

}  // namespace pacer::worker
