// WorkerConfig: everything one pacer-worker rank needs to know, read from the
// environment the controller sets (the controller -> worker contract,
// docs/worker.md) and overridden by command-line flags.
//
// The contract: torchrun-compatible rendezvous variables, so a user's own
// PyTorch image works unchanged,
//   RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE NODE_RANK NNODES MASTER_ADDR
//   MASTER_PORT (each also accepted with the PET_ prefix torchrun uses),
// plus PACER_* variables carrying the plan:
//   PACER_TENSOR_PARALLEL PACER_PIPELINE_PARALLEL PACER_DATA_PARALLEL
//   PACER_VIRTUAL_STAGES PACER_ZERO_STAGE PACER_MICRO_BATCH_SIZE
//   PACER_GRAD_ACCUM_STEPS PACER_GLOBAL_BATCH_SIZE PACER_TOTAL_STEPS
//   PACER_PRECISION PACER_OPTIMIZER PACER_ACTIVATION_CHECKPOINTING PACER_ATTENTION_KERNEL
//   PACER_MODEL_LAYERS PACER_MODEL_HIDDEN_SIZE PACER_MODEL_ATTENTION_HEADS
//   PACER_MODEL_KV_HEADS PACER_MODEL_FFN_HIDDEN_SIZE PACER_MODEL_FFN_KIND
//   PACER_MODEL_VOCAB_SIZE PACER_MODEL_CAUSAL_ATTENTION (true|false) PACER_SEQUENCE_LENGTH
//   PACER_CHECKPOINT_DIR PACER_CHECKPOINT_INTERVAL_STEPS PACER_METRICS_PORT
//   PACER_JOB_NAME PACER_JOB_NAMESPACE PACER_GPU_TYPE
//   PACER_BACKEND (auto|cpu|gpu) PACER_SCALE PACER_TIMEOUT_SECONDS
//   PACER_PREDICTED_STEP_SECONDS PACER_PREDICTED_MEMORY_BYTES
//
// Units are in the names. Thread-safety: a plain value; the parsing
// functions are pure (the environment is read through a callback).
#ifndef PACER_WORKER_CORE_WORKER_CONFIG_H_
#define PACER_WORKER_CORE_WORKER_CONFIG_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "core/supervisor.h"
#include "pacer/planner/job_spec.h"
#include "pacer/planner/layout.h"
#include "pacer/status.h"

namespace pacer::worker {

enum class Backend { kAuto, kCpu, kGpu };
const char* BackendName(Backend b);  // "auto", "cpu", "gpu"

// The GPU device's switches (docs/worker.md, "Environment"): each "0" or
// "1" when set; anything else is refused, so a misspelt switch never
// silently runs another path than the operator asked for.
struct GpuSwitches {
  bool bf16_activations = false;  // PACER_GPU_BF16_ACTIVATIONS: bf16 activation storage
  bool op_times = false;          // PACER_GPU_OP_TIMES: time every operation by kind
  bool cudnn_attention = true;    // PACER_CUDNN_ATTENTION: cuDNN's SDPA for full attention
  bool causal_tiles = true;       // PACER_GPU_CAUSAL_TILES: the causal bf16 tiles
  bool operator==(const GpuSwitches& o) const {
    return bf16_activations == o.bf16_activations && op_times == o.op_times &&
           cudnn_attention == o.cudnn_attention && causal_tiles == o.causal_tiles;
  }
};

struct WorkerConfig {
  // Rendezvous (torchrun names). `rank` is the global rank of local rank 0 of
  // this node when the process supervises several local ranks; a rank's own
  // global rank is node_rank * local_world_size + local_rank.
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  int nnodes = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;

  // The plan.
  int tensor_parallel = 1;
  int pipeline_parallel = 1;
  int data_parallel = 1;
  int virtual_stages = 1;
  int zero_stage = 0;
  int micro_batch_size = 1;
  int64_t gradient_accumulation_steps = 1;
  int64_t global_batch_size = 1;
  int64_t total_steps = 1;
  planner::Precision precision = planner::Precision::kBf16;
  planner::Optimizer optimizer = planner::Optimizer::kAdamW;
  planner::Recompute recompute = planner::Recompute::kNone;
  // The plan's attention kernel (spec.training.stack.attention): fused
  // stores no score matrix and recomputes the scores in the backward pass.
  planner::AttentionKernel attention = planner::AttentionKernel::kFused;
  planner::ModelSpec model;
  // The executor's gradients are fp32 under every plan (Megatron's main
  // gradients): accumulated, reduced and stored in 4 bytes, as the planner
  // counts with spec.training.stack.fp32Gradients (its default).
  static constexpr bool kFp32Gradients = true;

  // Where and how.
  std::string checkpoint_dir;             // empty = no checkpoints
  int64_t checkpoint_interval_steps = 0;  // 0 = only on stop
  int metrics_port = 9400;                // 0 = pick a free port
  std::string job_name = "local";
  std::string job_namespace = "default";
  std::string gpu_type;  // catalog name, "" = unknown (CPU)
  // The controller's launch attempt (PACER_ATTEMPT: 1, 2, ...), exported as
  // the metrics' `attempt` label so that a new attempt's step time is not
  // mixed with the previous attempt's pods (still in Prometheus' window);
  // 0 = not given (no label).
  int attempt = 0;
  Backend backend = Backend::kAuto;
  // Shrinks the model for CPU runs (hidden size, FFN and sequence length
  // scale by it, layers by sqrt of it); 1 = the planned size. The metrics
  // export it, so a scaled run is never mistaken for the real one.
  double scale = 1.0;
  double timeout_seconds = 300;  // rendezvous and collective timeout
  // Seconds a stop signal leaves the ranks to finish their step and write
  // the checkpoint before the supervisor kills them
  // (PACER_STOP_GRACE_SECONDS). The controller sets it inside the pod's
  // terminationGracePeriodSeconds; the default suits Kubernetes' 30 s.
  double stop_grace_seconds = 25;
  // The process that started this worker and whose end stops it (local
  // mode's `pacer run`); 0 = none (a pod's worker outlives no parent).
  int parent_pid = 0;
  std::optional<double> predicted_step_seconds;
  std::optional<double> predicted_memory_bytes;
  GpuSwitches gpu;

  // The global rank of `local` on this node.
  int GlobalRank(int local) const { return node_rank * local_world_size + local; }
};

// The supervisor's options for this worker: its stop grace and the parent
// it outlives no longer.
SupervisorOptions SupervisorOptionsFor(const WorkerConfig& config);

// Reads the contract through `getenv` (returns nullptr for unset). Errors are
// InvalidArgument naming the variable, e.g.
//   "PACER_TENSOR_PARALLEL: must be a positive integer, got \"x\"".
// Checks consistency: WORLD_SIZE = NNODES x LOCAL_WORLD_SIZE =
// t x p x d, GBS = b x k x d, layers divisible by p x v, heads, FFN and
// sequence by t, k x v at most kMaxMicroBatchPassesPerStep.
using EnvLookup = std::function<const char*(const char*)>;
StatusOr<WorkerConfig> ConfigFromEnvironment(const EnvLookup& getenv);
// The GPU switches alone (ConfigFromEnvironment reads them too; the GPU
// smoke, which builds its own plan, reads only these). InvalidArgument
// naming the variable for a value other than 0 or 1.
StatusOr<GpuSwitches> GpuSwitchesFromEnvironment(const EnvLookup& getenv);

// The --seed flag's value: a decimal integer in [0, 2^64 - 1], all of the
// text (no sign, spaces or hex), as the environment's integers are read.
// InvalidArgument naming the flag and the range otherwise.
StatusOr<uint64_t> ParseSeed(std::string_view text);

// The environment a controller or local launcher sets for `config` (the
// inverse of ConfigFromEnvironment, for one node's worker process).
std::map<std::string, std::string> EnvironmentForConfig(const WorkerConfig& config);

// Shrinks config.model by config.scale (in (0, 1]) so a CPU run of a big
// plan takes seconds per step, keeping every divisibility rule of the plan:
// hidden size, FFN, sequence length and vocabulary scale by `scale` (hidden
// stays a multiple of the heads, the others of t), layers by sqrt(scale) (a
// multiple of p x v). scale = 1 leaves the model untouched. The metrics
// export the scale, so a scaled run is never mistaken for the real one.
// Then validates the whole config, so that values flags set after
// ConfigFromEnvironment are checked as the environment's were.
Status ApplyScale(WorkerConfig* config);

// Micro-batch passes of one rank in one step (accumulation steps x virtual
// stages) that a plan may ask for: the planner's bound, which its search
// keeps to. The schedule lists two actions for each (step_schedule.h), and
// 64 virtual stages x 10^8 accumulation steps, which every other rule
// accepts, asked for 150 GB of them (std::bad_alloc, exit 1).
inline constexpr int64_t kMaxMicroBatchPassesPerStep = planner::kMaxMicroBatchPassesPerStep;

// Validates the cross-field rules above, the timeout's range, the sequence's
// split over tensor parallelism and the step's micro-batch passes
// (kMaxMicroBatchPassesPerStep) on an already-built config (flags may have
// changed it after the environment).
Status ValidateConfig(const WorkerConfig& config);

}  // namespace pacer::worker

#endif  // PACER_WORKER_CORE_WORKER_CONFIG_H_
