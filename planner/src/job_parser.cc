#include "pacer/planner/job_parser.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <string_view>

#include "pacer/planner/layout.h"
#include "pacer/planner/model_math.h"
#include "pacer/planner/units.h"
#include "text.h"
#include "yaml_fields.h"

namespace pacer::planner {
namespace {

using yaml_fields::Field;

constexpr std::string_view kApiVersion = "pacer.dev/v1alpha1";
constexpr std::string_view kKind = "TrainJob";

// Bounds far beyond any real job: they exist so that a typo ("1e21" tokens)
// or a hostile document cannot drive the planner into overflow.
constexpr double kMinParameters = 1e6;
constexpr double kMaxParameters = 1e14;
constexpr int kMaxLayers = 1000;
constexpr int kMaxHiddenSize = 1'000'000;
constexpr int kMaxAttentionHeads = 65536;
constexpr int kMaxFfnHiddenSize = 10'000'000;
constexpr int kMaxVocabSize = 10'000'000;
constexpr int kMaxSequenceLength = 10'000'000;
constexpr double kMaxTokens = 1e16;
constexpr double kMaxSamples = 1e14;
constexpr int kMaxEpochs = 10000;
constexpr int kMaxMicroBatchSize = 65536;  // the worker's PACER_MICRO_BATCH_SIZE bound
constexpr std::size_t kMaxAllowedGpuTypes = 100;
// The CRD's maxItems and maxLength (manifests/crd): a file the API server
// would refuse is refused by `pacer plan` too, with the same bound.
constexpr std::size_t kMaxGpuTypeChars = 64;
constexpr std::size_t kMaxMicroBatchSizes = 64;
constexpr std::size_t kMaxImageChars = 1024;
constexpr std::size_t kMaxCommandArgs = 256;
constexpr std::size_t kMaxEnvVars = 256;
constexpr std::size_t kMaxArgOrValueChars = 32768;
constexpr int kMaxTensorParallel = 1024;
constexpr int kMaxPipelineParallel = 1000;
constexpr double kMaxDurationSeconds = 36500.0 * 86400;  // 100 years
// Optimizer steps of the whole run: a trillion at a millisecond each is 30
// years; the bound keeps step counts (int64) and times far from overflow.
constexpr double kMaxOptimizerSteps = 1e12;
constexpr int kDefaultSequenceLength = 2048;
constexpr int kDefaultVocabSize = 51200;

const char* const kModelHint =
    "give parameters (e.g. \"6.7B\") or the architecture (layers, hiddenSize, attentionHeads)";

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// Kubernetes object names (RFC 1123 subdomains) and namespaces (labels), as
// the API server checks them: dot-separated parts, each of lowercase letters,
// digits and '-' that starts and ends with a letter or digit. ("a..b" and
// "a.-b" passed a check of the two ends alone; kubectl apply refuses them.)
bool IsDns1123Subdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = s.find('.', start);
    const std::string_view part =
        s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (part.empty() || !IsLowerAlnum(part.front()) || !IsLowerAlnum(part.back())) return false;
    if (!std::all_of(part.begin(), part.end(),
                     [](char c) { return IsLowerAlnum(c) || c == '-'; })) {
      return false;
    }
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

bool IsDns1123Label(std::string_view s) {
  return s.size() <= 63 && s.find('.') == std::string_view::npos && IsDns1123Subdomain(s);
}

bool IsAuto(const Field& f) {
  return f.is_scalar() && text::EqualsIgnoreCase(f.node().Scalar(), "auto");
}

// A positive integer pin or "auto" (nullopt).
StatusOr<std::optional<int>> IntOrAuto(const Field& f, int max) {
  if (!f.present() || IsAuto(f)) return std::optional<int>();
  if (!f.Number().ok()) return f.ErrorGot("must be a positive integer or \"auto\"");
  ASSIGN_OR_RETURN(const int value, f.Int(1, max));
  return std::optional<int>(value);
}

// A duration in (0, 100 years].
StatusOr<double> PositiveDuration(const Field& f) {
  ASSIGN_OR_RETURN(const double seconds, f.DurationSeconds());
  if (seconds <= 0) return f.ErrorGot("must be longer than zero");
  if (seconds > kMaxDurationSeconds) return f.ErrorGot("must be at most 36500d (100 years)");
  return seconds;
}

Status ParseMetadata(const Field& f, JobSpec* job) {
  if (!f.present()) return f.Error("required (it holds the job's name)");
  // Only name, namespace and creationTimestamp matter to the planner; the
  // server adds uid, resourceVersion, managedFields... which are ignored.
  if (!f.is_map()) return f.ErrorGot("must be a map (an object with fields)");
  const Field name = f.Get("name");
  if (!name.present()) return name.Error("required");
  ASSIGN_OR_RETURN(job->name, name.String());
  if (!IsDns1123Subdomain(job->name)) {
    return name.ErrorGot(
        "must be a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', each "
        "dot-separated part starting and ending with a letter or digit, at most 63 "
        "characters: it labels the job's pods)");
  }
  if (job->name.size() > 63) {
    // The name is the value of the pacer.dev/job label on the job's pods
    // and Service, which Kubernetes limits to 63 characters.
    return name.Error("must be at most 63 characters (it is the pacer.dev/job label of the "
                      "job's pods and Service), got " +
                      std::to_string(job->name.size()));
  }
  const Field ns = f.Get("namespace");
  if (ns.present()) {
    ASSIGN_OR_RETURN(job->namespace_name, ns.String());
    if (!IsDns1123Label(job->namespace_name)) {
      return ns.ErrorGot(
          "must be a DNS-1123 label (lowercase letters, digits and '-', starting and ending "
          "with a letter or digit, at most 63 characters)");
    }
  }
  const Field created = f.Get("creationTimestamp");
  if (created.present()) {
    ASSIGN_OR_RETURN(const std::string text, created.String());
    StatusOr<int64_t> when = ParseRfc3339(text);
    if (!when.ok()) return created.Error(when.status().message());
    job->creation_unix_seconds = *when;
  }
  return Status::Ok();
}

Status ParseModel(const Field& f, ModelSpec* m) {
  if (!f.present()) return f.Error(std::string("required; ") + kModelHint);
  RETURN_IF_ERROR(f.CheckMap({"parameters", "layers", "hiddenSize", "attentionHeads", "kvHeads",
                              "ffnHiddenSize", "ffnKind", "vocabSize", "sequenceLength",
                              "tiedEmbeddings", "dropout", "causalAttention"}));
  std::optional<double> parameters;
  if (const Field p = f.Get("parameters"); p.present()) {
    ASSIGN_OR_RETURN(parameters, p.Count(kMinParameters, kMaxParameters));
  }
  int sequence_length = kDefaultSequenceLength;
  if (const Field s = f.Get("sequenceLength"); s.present()) {
    ASSIGN_OR_RETURN(sequence_length, s.Int(1, kMaxSequenceLength));
  }
  bool dropout = false;
  if (const Field d = f.Get("dropout"); d.present()) {
    ASSIGN_OR_RETURN(dropout, d.Bool());
  }
  bool causal_attention = true;
  if (const Field c = f.Get("causalAttention"); c.present()) {
    ASSIGN_OR_RETURN(causal_attention, c.Bool());
  }

  static constexpr std::string_view kArchitectureFields[] = {
      "layers",        "hiddenSize", "attentionHeads", "kvHeads",
      "ffnHiddenSize", "ffnKind",    "vocabSize",      "tiedEmbeddings"};
  const bool has_architecture =
      std::any_of(std::begin(kArchitectureFields), std::end(kArchitectureFields),
                  [&](std::string_view key) { return f.Get(key).present(); });
  if (!has_architecture) {
    if (!parameters) return f.Error(kModelHint);
    *m = InferArchitecture(*parameters, sequence_length);
    if (m->layers > kMaxLayers) {
      // The widest published shape, deepened to the count: past 1,000
      // layers (about 3.5e12 parameters) the worker refuses the plan
      // (PACER_MODEL_LAYERS), so the job failed only at launch.
      return f.Get("parameters")
          .Error("infers a model of " + std::to_string(m->layers) +
                 " layers at the widest published width, more than " + std::to_string(kMaxLayers) +
                 "; give the architecture (layers, hiddenSize, attentionHeads) for a model this "
                 "large");
    }
    m->parameters = parameters;
    m->sequence_length = sequence_length;
    m->dropout = dropout;
    m->causal_attention = causal_attention;
    m->architecture_inferred = true;
    return Status::Ok();
  }

  for (std::string_view key : {"layers", "hiddenSize", "attentionHeads"}) {
    const Field required = f.Get(key);
    if (!required.present()) {
      return required.Error(
          "required with the architecture (layers, hiddenSize and attentionHeads go together); "
          "or give only parameters");
    }
  }
  ModelSpec out;
  out.parameters = parameters;
  out.sequence_length = sequence_length;
  out.dropout = dropout;
  out.causal_attention = causal_attention;
  ASSIGN_OR_RETURN(out.layers, f.Get("layers").Int(1, kMaxLayers));
  const Field hidden = f.Get("hiddenSize");
  ASSIGN_OR_RETURN(out.hidden_size, hidden.Int(1, kMaxHiddenSize));
  const Field heads = f.Get("attentionHeads");
  ASSIGN_OR_RETURN(out.attention_heads, heads.Int(1, kMaxAttentionHeads));
  if (out.hidden_size % out.attention_heads != 0) {
    return hidden.ErrorGot("must be divisible by attentionHeads (" +
                           std::to_string(out.attention_heads) + ")");
  }
  out.kv_heads = out.attention_heads;
  if (const Field kv = f.Get("kvHeads"); kv.present()) {
    ASSIGN_OR_RETURN(out.kv_heads, kv.Int(1, out.attention_heads));
    if (out.attention_heads % out.kv_heads != 0) {
      return kv.ErrorGot("must divide attentionHeads (" + std::to_string(out.attention_heads) +
                         ")");
    }
  }
  if (const Field kind = f.Get("ffnKind"); kind.present()) {
    ASSIGN_OR_RETURN(const std::size_t i, kind.OneOf({"gelu", "swiglu"}));
    out.ffn_kind = i == 0 ? FfnKind::kGelu : FfnKind::kSwiglu;
  }
  if (const Field ffn = f.Get("ffnHiddenSize"); ffn.present()) {
    ASSIGN_OR_RETURN(out.ffn_hidden_size, ffn.Int(1, kMaxFfnHiddenSize));
  } else if (out.ffn_kind == FfnKind::kGelu) {
    out.ffn_hidden_size = 4 * out.hidden_size;
  } else {
    // LLaMA's rule: 2/3 of 4h (keeps SwiGLU's three matrices at GELU's
    // parameter count), rounded up to a multiple of 256.
    const int64_t h = out.hidden_size;
    out.ffn_hidden_size = static_cast<int>((8 * h + 3 * 256 - 1) / (3 * 256) * 256);
  }
  out.vocab_size = kDefaultVocabSize;
  if (const Field vocab = f.Get("vocabSize"); vocab.present()) {
    ASSIGN_OR_RETURN(out.vocab_size, vocab.Int(1, kMaxVocabSize));
  }
  if (const Field tied = f.Get("tiedEmbeddings"); tied.present()) {
    ASSIGN_OR_RETURN(out.tied_embeddings, tied.Bool());
  }
  const double total = TotalParameters(out);
  if (!(total <= kMaxParameters)) {
    return f.Error("the architecture has " + yaml_fields::FormatNumber(total) +
                   " parameters; at most " + yaml_fields::FormatNumber(kMaxParameters) +
                   " are supported");
  }
  *m = out;
  return Status::Ok();
}

Status ParseData(const Field& f, DataSpec* d) {
  if (!f.present()) return f.Error("required; give tokens (e.g. \"300B\") or samples");
  RETURN_IF_ERROR(f.CheckMap({"tokens", "samples", "epochs"}));
  const Field tokens = f.Get("tokens");
  const Field samples = f.Get("samples");
  if (tokens.present() && samples.present()) {
    return f.Error("give tokens or samples, not both");
  }
  if (tokens.present()) {
    ASSIGN_OR_RETURN(d->tokens, tokens.Count(1, kMaxTokens));
  } else if (samples.present()) {
    ASSIGN_OR_RETURN(const double n, samples.Count(1, kMaxSamples));
    if (n != std::floor(n)) return samples.ErrorGot("must be a whole number of sequences");
    d->samples = n;
  } else {
    return f.Error("give tokens (e.g. \"300B\") or samples (sequences of sequenceLength)");
  }
  if (const Field epochs = f.Get("epochs"); epochs.present()) {
    ASSIGN_OR_RETURN(d->epochs, epochs.Int(1, kMaxEpochs));
  }
  return Status::Ok();
}

Status ParseStack(const Field& f, StackSpec* s) {
  if (!f.present()) return Status::Ok();
  RETURN_IF_ERROR(f.CheckMap(
      {"attention", "tensorParallelOverlap", "dataParallelOverlap", "fp32Gradients", "fp8Recipe"}));
  if (const Field a = f.Get("attention"); a.present()) {
    ASSIGN_OR_RETURN(const std::size_t i, a.OneOf({"fused", "unfused"}));
    s->attention = i == 0 ? AttentionKernel::kFused : AttentionKernel::kUnfused;
  }
  if (const Field o = f.Get("tensorParallelOverlap"); o.present()) {
    ASSIGN_OR_RETURN(s->tensor_parallel_overlap, o.Bool());
  }
  if (const Field o = f.Get("dataParallelOverlap"); o.present()) {
    ASSIGN_OR_RETURN(s->data_parallel_overlap, o.Bool());
  }
  if (const Field g = f.Get("fp32Gradients"); g.present()) {
    ASSIGN_OR_RETURN(s->fp32_gradients, g.Bool());
  }
  if (const Field r = f.Get("fp8Recipe"); r.present()) {
    ASSIGN_OR_RETURN(const std::size_t i, r.OneOf({"delayed", "current", "blockwise"}));
    static constexpr Fp8Recipe kValues[] = {Fp8Recipe::kDelayed, Fp8Recipe::kCurrent,
                                            Fp8Recipe::kBlockwise};
    s->fp8_recipe = kValues[i];
  }
  return Status::Ok();
}

Status ParseTraining(const Field& f, TrainingSpec* t) {
  if (!f.present()) return f.Error("required (it holds globalBatchSize)");
  RETURN_IF_ERROR(f.CheckMap({"globalBatchSize", "precision", "optimizer",
                              "activationCheckpointing", "microBatchSizes", "stack"}));
  const Field gbs = f.Get("globalBatchSize");
  if (!gbs.present()) return gbs.Error("required: sequences per optimizer step, e.g. 1024");
  ASSIGN_OR_RETURN(t->global_batch_size, gbs.Integer(1, kMaxGlobalBatchSize));
  if (const Field p = f.Get("precision"); p.present()) {
    ASSIGN_OR_RETURN(const std::size_t i, p.OneOf({"fp32", "tf32", "fp16", "bf16", "fp8"}));
    static constexpr Precision kValues[] = {Precision::kFp32, Precision::kTf32, Precision::kFp16,
                                            Precision::kBf16, Precision::kFp8};
    t->precision = kValues[i];
  }
  if (const Field o = f.Get("optimizer"); o.present()) {
    ASSIGN_OR_RETURN(const std::size_t i,
                     o.OneOf({"adamw", "adam", "sgd", "sgd-momentum", "adafactor"}));
    static constexpr Optimizer kValues[] = {Optimizer::kAdamW, Optimizer::kAdam, Optimizer::kSgd,
                                            Optimizer::kSgdMomentum, Optimizer::kAdafactor};
    t->optimizer = kValues[i];
  }
  if (const Field r = f.Get("activationCheckpointing"); r.present()) {
    ASSIGN_OR_RETURN(const std::size_t i, r.OneOf({"none", "selective", "full", "auto"}));
    static constexpr Recompute kValues[] = {Recompute::kNone, Recompute::kSelective,
                                            Recompute::kFull};
    if (i < 3) t->activation_checkpointing = kValues[i];
  }
  if (const Field mbs = f.Get("microBatchSizes"); mbs.present()) {
    RETURN_IF_ERROR(mbs.CheckList(kMaxMicroBatchSizes));
    for (const Field& e : mbs.Elements()) {
      ASSIGN_OR_RETURN(const int b, e.Int(1, kMaxMicroBatchSize));
      t->micro_batch_sizes.push_back(b);
    }
    std::sort(t->micro_batch_sizes.begin(), t->micro_batch_sizes.end());
    t->micro_batch_sizes.erase(
        std::unique(t->micro_batch_sizes.begin(), t->micro_batch_sizes.end()),
        t->micro_batch_sizes.end());
    // b x k x d = globalBatchSize: a list with no divisor allows no layout.
    if (std::none_of(t->micro_batch_sizes.begin(), t->micro_batch_sizes.end(),
                     [&](int b) { return t->global_batch_size % b == 0; })) {
      return mbs.Error("none of these divides training.globalBatchSize (" +
                       std::to_string(t->global_batch_size) +
                       "), which must be micro-batch x gradient accumulation x data parallel; "
                       "add a divisor such as 1, or leave microBatchSizes out");
    }
  }
  return ParseStack(f.Get("stack"), &t->stack);
}

Status ParseResources(const Field& f, ResourcesSpec* r) {
  if (!f.present()) return Status::Ok();
  RETURN_IF_ERROR(f.CheckMap({"gpuTypes", "minGPUs", "maxGPUs"}));
  if (const Field types = f.Get("gpuTypes"); types.present()) {
    RETURN_IF_ERROR(types.CheckList(kMaxAllowedGpuTypes));
    // Whether a type exists is the planner's question (the inventory may
    // define new ones); the parser only checks the shape.
    std::set<std::string> seen;
    for (const Field& e : types.Elements()) {
      ASSIGN_OR_RETURN(std::string name, e.Name(kMaxGpuTypeChars));
      if (seen.insert(text::Lowercase(name)).second) r->gpu_types.push_back(std::move(name));
    }
  }
  if (const Field min = f.Get("minGPUs"); min.present()) {
    ASSIGN_OR_RETURN(r->min_gpus, min.Int(1, kMaxLayoutGpus));
  }
  if (const Field max = f.Get("maxGPUs"); max.present()) {
    ASSIGN_OR_RETURN(r->max_gpus, max.Int(1, kMaxLayoutGpus));
    if (*r->max_gpus < r->min_gpus) {
      return max.ErrorGot("must be at least minGPUs (" + std::to_string(r->min_gpus) + ")");
    }
  }
  return Status::Ok();
}

Status ParseParallelism(const Field& f, ParallelismSpec* p) {
  if (!f.present()) return Status::Ok();
  RETURN_IF_ERROR(f.CheckMap({"tensorParallel", "pipelineParallel", "zeroStage"}));
  ASSIGN_OR_RETURN(p->tensor_parallel, IntOrAuto(f.Get("tensorParallel"), kMaxTensorParallel));
  ASSIGN_OR_RETURN(p->pipeline_parallel,
                   IntOrAuto(f.Get("pipelineParallel"), kMaxPipelineParallel));
  const Field zero = f.Get("zeroStage");
  if (zero.present() && !IsAuto(zero)) {
    StatusOr<int> stage = zero.Int(0, 3);
    if (!stage.ok()) return zero.ErrorGot("must be 0, 1, 2, 3 or \"auto\"");
    p->zero_stage = *stage;
  }
  return Status::Ok();
}

Status ParseWorker(const Field& f, WorkerSpec* w) {
  if (!f.present()) return Status::Ok();
  RETURN_IF_ERROR(f.CheckMap({"image", "command", "env"}));
  if (const Field image = f.Get("image"); image.present()) {
    ASSIGN_OR_RETURN(w->image, image.NonEmptyString(kMaxImageChars));
  }
  if (const Field command = f.Get("command"); command.present()) {
    RETURN_IF_ERROR(command.CheckList(kMaxCommandArgs));
    for (const Field& e : command.Elements()) {
      ASSIGN_OR_RETURN(std::string arg, e.String(kMaxArgOrValueChars));
      w->command.push_back(std::move(arg));
    }
  }
  if (const Field env = f.Get("env"); env.present()) {
    RETURN_IF_ERROR(env.CheckList(kMaxEnvVars));
    std::set<std::string> names;
    for (const Field& e : env.Elements()) {
      RETURN_IF_ERROR(e.CheckMap({"name", "value"}));
      const Field name = e.Get("name");
      if (!name.present()) return name.Error("required");
      EnvVar var;
      ASSIGN_OR_RETURN(var.name, name.NonEmptyString());
      // kube-apiserver's IsEnvVarName (the rule before 1.32 relaxed it, so
      // that every supported cluster takes the pod): the pod API refused
      // anything else with 422 at launch.
      const bool valid_name =
          var.name.size() <= 256 && !(var.name[0] >= '0' && var.name[0] <= '9') &&
          var.name != "." && var.name.rfind("..", 0) != 0 &&
          std::all_of(var.name.begin(), var.name.end(), [](char ch) {
            return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                   (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' || ch == '.';
          });
      if (!valid_name) {
        return name.ErrorGot(
            "must be an environment variable name: letters, digits, '_', '-' and '.', not "
            "starting with a digit or \"..\", not \".\", at most 256 characters");
      }
      // A list keyed by name in the CRD: the API server refuses a repeat.
      if (!names.insert(var.name).second) {
        return name.ErrorGot("is set twice; give each variable once");
      }
      if (const Field value = e.Get("value"); value.present()) {
        ASSIGN_OR_RETURN(var.value, value.String(kMaxArgOrValueChars));
      }
      w->env.push_back(std::move(var));
    }
  }
  return Status::Ok();
}

Status ParseCheckpoint(const Field& f, CheckpointSpec* c) {
  if (!f.present()) return Status::Ok();
  RETURN_IF_ERROR(f.CheckMap({"volumeClaimName", "interval"}));
  if (const Field claim = f.Get("volumeClaimName"); claim.present()) {
    ASSIGN_OR_RETURN(c->volume_claim_name, claim.String());
    if (!c->volume_claim_name.empty() && !IsDns1123Subdomain(c->volume_claim_name)) {
      return claim.ErrorGot("must be a PersistentVolumeClaim name (a DNS-1123 subdomain)");
    }
  }
  if (const Field interval = f.Get("interval"); interval.present() && !IsAuto(interval)) {
    ASSIGN_OR_RETURN(c->interval_seconds, PositiveDuration(interval));
  }
  return Status::Ok();
}

Status ParseReplan(const Field& f, ReplanSpec* r) {
  if (!f.present()) return Status::Ok();
  RETURN_IF_ERROR(f.CheckMap({"enabled", "interval", "slack"}));
  if (const Field enabled = f.Get("enabled"); enabled.present()) {
    ASSIGN_OR_RETURN(r->enabled, enabled.Bool());
  }
  if (const Field interval = f.Get("interval"); interval.present()) {
    ASSIGN_OR_RETURN(r->interval_seconds, PositiveDuration(interval));
    if (r->interval_seconds < 1) return interval.ErrorGot("must be at least 1s");
  }
  if (const Field slack = f.Get("slack"); slack.present()) {
    if (!slack.is_scalar()) return slack.ErrorGot("expected a percentage such as 5%");
    StatusOr<double> fraction = ParseFraction(slack.node().Scalar());
    if (!fraction.ok() || !(*fraction < 1)) {
      return slack.ErrorGot("must be a share of the remaining time in [0%, 100%), e.g. 5% or 0.05");
    }
    r->slack_fraction = *fraction;
  }
  return Status::Ok();
}

Status ParseSpec(const Field& f, JobSpec* job) {
  if (!f.present())
    return f.Error("required (model, data, training, and a deadline or maxDuration)");
  RETURN_IF_ERROR(f.CheckMap({"model", "data", "training", "deadline", "maxDuration", "objective",
                              "resources", "parallelism", "worker", "checkpoint", "replan"}));
  RETURN_IF_ERROR(ParseModel(f.Get("model"), &job->model));
  RETURN_IF_ERROR(ParseData(f.Get("data"), &job->data));
  RETURN_IF_ERROR(ParseTraining(f.Get("training"), &job->training));
  if (const double samples = SamplesPerEpoch(*job);
      static_cast<double>(job->training.global_batch_size) > samples) {
    // One optimizer step would read every sample many times over: a typo
    // in one of the two, and a plan timed on data that does not exist.
    return f.Get("training")
        .Get("globalBatchSize")
        .Error("is " + std::to_string(job->training.global_batch_size) +
               " sequences, more than the " + yaml_fields::FormatNumber(samples) +
               " in one epoch (spec.data.samples, or tokens / sequenceLength): one optimizer step "
               "would repeat the data; use a globalBatchSize of at most that, or more data");
  }
  if (const double steps = OptimizerSteps(*job); !(steps <= kMaxOptimizerSteps)) {
    return f.Get("data").Error(
        "makes " + yaml_fields::FormatNumber(steps) + " optimizer steps (epochs x samples / " +
        "training.globalBatchSize); at most " + yaml_fields::FormatNumber(kMaxOptimizerSteps) +
        ": fewer tokens or epochs, or a larger globalBatchSize");
  }

  const Field deadline = f.Get("deadline");
  const Field max_duration = f.Get("maxDuration");
  if (deadline.present() && max_duration.present()) {
    return max_duration.Error(
        "cannot be combined with spec.deadline; pick one (deadline is an absolute time, "
        "maxDuration counts from the job's creation)");
  }
  if (deadline.present()) {
    if (!deadline.is_scalar()) {
      return deadline.ErrorGot("expected an RFC 3339 time such as \"2026-12-24T00:00:00Z\"");
    }
    StatusOr<int64_t> when = ParseRfc3339(deadline.node().Scalar());
    if (!when.ok()) return deadline.Error(when.status().message());
    job->deadline_unix_seconds = *when;
  }
  if (max_duration.present()) {
    ASSIGN_OR_RETURN(job->max_duration_seconds, PositiveDuration(max_duration));
  }
  if (const Field objective = f.Get("objective"); objective.present()) {
    ASSIGN_OR_RETURN(const std::size_t i, objective.OneOf({"cost", "time"}));
    job->objective = i == 0 ? Objective::kCost : Objective::kTime;
  }
  RETURN_IF_ERROR(ParseResources(f.Get("resources"), &job->resources));
  RETURN_IF_ERROR(ParseParallelism(f.Get("parallelism"), &job->parallelism));
  RETURN_IF_ERROR(ParseWorker(f.Get("worker"), &job->worker));
  RETURN_IF_ERROR(ParseCheckpoint(f.Get("checkpoint"), &job->checkpoint));
  RETURN_IF_ERROR(ParseReplan(f.Get("replan"), &job->replan));
  return Status::Ok();
}

StatusOr<JobSpec> ParseTrainJobDocument(const std::string& document) {
  ASSIGN_OR_RETURN(const YAML::Node root, yaml_fields::Load(document, "TrainJob"));
  const Field top(root, "");
  if (!top.is_map()) {
    return InvalidArgumentError(
        "TrainJob: expected a map with apiVersion, kind, metadata and "
        "spec, got " +
        top.Describe());
  }
  RETURN_IF_ERROR(top.CheckMap({"apiVersion", "kind", "metadata", "spec", "status"}));

  const Field api_version = top.Get("apiVersion");
  if (!api_version.present())
    return api_version.Error(std::string("required: ") + std::string(kApiVersion));
  if (!api_version.is_scalar() || api_version.node().Scalar() != kApiVersion) {
    return api_version.ErrorGot(std::string("must be ") + std::string(kApiVersion));
  }
  const Field kind = top.Get("kind");
  if (!kind.present()) return kind.Error(std::string("required: ") + std::string(kKind));
  if (!kind.is_scalar() || kind.node().Scalar() != kKind) {
    return kind.ErrorGot(std::string("must be ") + std::string(kKind));
  }

  JobSpec job;
  RETURN_IF_ERROR(ParseMetadata(top.Get("metadata"), &job));
  RETURN_IF_ERROR(ParseSpec(top.Get("spec"), &job));
  return job;
}

}  // namespace

StatusOr<JobSpec> ParseTrainJob(const std::string& document) {
  return yaml_fields::Guard<JobSpec>("TrainJob", [&] { return ParseTrainJobDocument(document); });
}

}  // namespace pacer::planner
