// JobSpec: the validated, typed form of a TrainJob's `spec` (see
// docs/trainjob-reference.md). Produced only by ParseTrainJob (job_parser.h),
// which guarantees every invariant documented on the fields below; the model
// and the search rely on them and do not re-check.
//
// Units: counts are plain numbers (parameters, tokens, samples, sequences);
// times are seconds (`_seconds`) or Unix seconds (`_unix_seconds`, UTC).
// Thread-safety: a plain value type.
#ifndef PACER_PLANNER_JOB_SPEC_H_
#define PACER_PLANNER_JOB_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pacer::planner {

enum class Precision { kFp32, kTf32, kFp16, kBf16, kFp8 };
enum class Optimizer { kAdamW, kAdam, kSgd, kSgdMomentum, kAdafactor };
// Activation recomputation (a.k.a. activation checkpointing), Korthikanti 2022.
enum class Recompute { kNone, kSelective, kFull };
enum class FfnKind { kGelu, kSwiglu };
enum class Objective { kCost, kTime };
// The attention kernel the training stack runs. Fused (FlashAttention, cuDNN
// SDPA: every current stack) never stores the s x s score matrix and
// recomputes it in the backward pass; unfused materialises it (older stacks).
enum class AttentionKernel { kFused, kUnfused };
// How fp8 GEMMs are scaled (TransformerEngine recipes): delayed scaling keeps
// an amax history; current scaling computes each tensor's amax before the GEMM
// (one more pass over it); blockwise scales sub-blocks (MXFP8-style).
enum class Fp8Recipe { kDelayed, kCurrent, kBlockwise };

// A 16-bit (or fp8) plan: weights and activations in 16 bits, master
// weights and optimizer state in fp32.
bool IsMixedPrecision(Precision p);

// The names used in YAML/JSON ("bf16", "adamw", "selective", "swiglu", "cost").
const char* PrecisionName(Precision p);
const char* OptimizerName(Optimizer o);
const char* RecomputeName(Recompute r);
const char* FfnKindName(FfnKind f);
const char* ObjectiveName(Objective o);
const char* AttentionKernelName(AttentionKernel a);
const char* Fp8RecipeName(Fp8Recipe r);

// The model. Either `parameters` alone, or the architecture (layers through
// sequence_length), or both. When only `parameters` is given the parser fills
// in a standard GPT shape for it (documented in docs/planner.md) and sets
// `architecture_inferred`, so the model code can always use the architecture.
struct ModelSpec {
  std::optional<double> parameters;  // as given by the user (count)
  int layers = 0;
  int hidden_size = 0;
  int attention_heads = 0;
  int kv_heads = 0;         // == attention_heads unless grouped-query attention
  int ffn_hidden_size = 0;  // intermediate size of the MLP
  FfnKind ffn_kind = FfnKind::kGelu;
  int vocab_size = 0;
  int sequence_length = 0;  // tokens per sequence (sample)
  bool tied_embeddings = false;
  // Dropout after attention and MLP (GPT-2/3, Megatron's GPT): its masks are
  // stored activations. Current LLMs (Llama, MPT, Mistral) train without.
  bool dropout = false;
  // A causal mask (decoder language models): each query attends to the
  // keys before it, and a fused kernel skips the masked half of the score
  // tiles. false: full attention (encoders; and what Pacer's own worker
  // runs, docs/worker.md "Known gaps").
  bool causal_attention = true;
  bool architecture_inferred = false;
};

// Training data: `tokens` or `samples` (sequences of sequence_length tokens).
struct DataSpec {
  std::optional<double> tokens;
  std::optional<double> samples;
  int epochs = 1;  // >= 1
};

// The software stack, where it changes time or memory. Defaults describe a
// current Megatron-Core / NeMo / PyTorch FSDP stack.
struct StackSpec {
  AttentionKernel attention = AttentionKernel::kFused;
  // Megatron's --tp-comm-overlap: tensor-parallel collectives pipelined with
  // the GEMMs that produce and consume them.
  bool tensor_parallel_overlap = true;
  // Data-parallel / ZeRO collectives overlapped with compute (DDP gradient
  // buckets, FSDP prefetch of the next layer's weights).
  bool data_parallel_overlap = true;
  // Under a 16-bit plan, gradients accumulated and data-parallel reduced in
  // fp32 (Megatron's main gradients, its default for bf16, and Pacer's
  // worker): 4 bytes per parameter held and reduced. false: in the plan's
  // 16-bit precision (PyTorch FSDP's PURE mixed precision), 2 bytes.
  bool fp32_gradients = true;
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;  // used only when precision is fp8
};

struct TrainingSpec {
  int64_t global_batch_size = 0;  // sequences per optimizer step; > 0
  Precision precision = Precision::kBf16;
  Optimizer optimizer = Optimizer::kAdamW;
  std::optional<Recompute> activation_checkpointing;  // nullopt = auto
  std::vector<int> micro_batch_sizes;                 // allowed set; empty = any divisor
  StackSpec stack;
};

struct ResourcesSpec {
  std::vector<std::string> gpu_types;  // allowed catalog names; empty = any
  int min_gpus = 1;
  std::optional<int> max_gpus;
};

class GpuCatalog;
// Whether `resources` allows GPUs of `gpu_type`: gpu_types is empty, or one
// of its names is the same `catalog` GPU as `gpu_type` (any spelling; a name
// the catalog does not know matches nothing).
bool AllowsGpuType(const ResourcesSpec& resources, const GpuCatalog& catalog,
                   const std::string& gpu_type);

// Pins from spec.parallelism; nullopt = "auto".
struct ParallelismSpec {
  std::optional<int> tensor_parallel;
  std::optional<int> pipeline_parallel;
  std::optional<int> zero_stage;  // 0..3
};

struct EnvVar {
  std::string name;
  std::string value;
};

struct WorkerSpec {
  std::string image;  // "" = the platform's default (pacer-controller --worker-image)
  std::vector<std::string> command;
  std::vector<EnvVar> env;
};

struct CheckpointSpec {
  std::string volume_claim_name;           // empty = no persistent volume
  std::optional<double> interval_seconds;  // nullopt = auto (Young/Daly)
};

struct ReplanSpec {
  bool enabled = true;
  double interval_seconds = 60;
  double slack_fraction = 0.05;  // share of the remaining time; [0, 1)
};

struct JobSpec {
  // metadata
  std::string name;
  std::string namespace_name = "default";
  std::optional<int64_t> creation_unix_seconds;  // metadata.creationTimestamp

  ModelSpec model;
  DataSpec data;
  TrainingSpec training;

  // Exactly one of the two (or neither: no deadline, plan for the objective).
  std::optional<int64_t> deadline_unix_seconds;
  std::optional<double> max_duration_seconds;  // relative to creation (or "now")

  Objective objective = Objective::kCost;
  ResourcesSpec resources;
  ParallelismSpec parallelism;
  WorkerSpec worker;
  CheckpointSpec checkpoint;
  ReplanSpec replan;

  // Share of each GPU's memory (0..0.5) the memory fit holds back on top of
  // the model's own reserve. Not part of the TrainJob spec: the controller
  // raises it after the workers ran out of memory (+0.1 per failure), so the
  // next plan leaves more room than the one that failed.
  double memory_margin_fraction = 0;
};

// The deadline in Unix seconds given the wall-clock `now_unix_seconds`
// (maxDuration counts from creationTimestamp when known, else from now), or
// nullopt when the job has none.
std::optional<int64_t> EffectiveDeadline(const JobSpec& job, int64_t now_unix_seconds);

// Sequences to train on over all epochs (samples x epochs, or tokens / s x epochs).
double TotalSequences(const JobSpec& job);

// Sequences in one epoch: data.samples, or ceil(tokens / s).
double SamplesPerEpoch(const JobSpec& job);

// Optimizer steps of the whole run: ceil(samples per epoch / GBS) x epochs,
// with samples = ceil(tokens / s) when tokens are given (accumulation does
// not change it: it multiplies micro-steps). A double, so that the parser
// can bound it before anything converts it to int64.
double OptimizerSteps(const JobSpec& job);

}  // namespace pacer::planner

#endif  // PACER_PLANNER_JOB_SPEC_H_
