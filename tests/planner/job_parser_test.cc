#include "pacer/planner/job_parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "pacer/planner/job_spec.h"

namespace pacer::planner {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The 7B example of the TrainJob reference, with every field given.
constexpr char kFullYaml[] = R"(apiVersion: pacer.dev/v1alpha1
kind: TrainJob
metadata:
  name: llama-7b-pretrain
  namespace: research
  creationTimestamp: "2026-03-01T10:00:00Z"
spec:
  model:
    parameters: 6.7e9
    layers: 32
    hiddenSize: 4096
    attentionHeads: 32
    kvHeads: 8
    ffnHiddenSize: 11008
    ffnKind: swiglu
    vocabSize: 32000
    sequenceLength: 4096
    tiedEmbeddings: false
    dropout: true
    causalAttention: false
  data:
    tokens: 1T
    epochs: 2
  training:
    globalBatchSize: 1024
    precision: fp8
    optimizer: sgd-momentum
    activationCheckpointing: selective
    microBatchSizes: [8, 1, 4, 2, 4]
  maxDuration: 72h
  objective: time
  resources:
    gpuTypes: [H100-SXM, A100-80GB]
    minGPUs: 8
    maxGPUs: 512
  parallelism:
    tensorParallel: 2
    pipelineParallel: auto
    zeroStage: 1
  worker:
    image: registry.example.com/train:1.2
    command: [python, train.py, --lr, "3e-4"]
    env:
      - name: NCCL_DEBUG
        value: WARN
      - name: EMPTY
  checkpoint:
    volumeClaimName: ckpt
    interval: 30m
  replan:
    enabled: false
    interval: 2m
    slack: 10%
status:
  phase: Running
  replans: 1
)";

// The same job as the API server returns it: JSON, with server-set metadata
// and a status.
constexpr char kFullJson[] = R"({
  "apiVersion": "pacer.dev/v1alpha1",
  "kind": "TrainJob",
  "metadata": {
    "name": "llama-7b-pretrain",
    "namespace": "research",
    "uid": "8a1c7c2e-5f0e-4e0f-9d7b-1d2f3a4b5c6d",
    "resourceVersion": "123456",
    "generation": 3,
    "creationTimestamp": "2026-03-01T10:00:00Z",
    "labels": {"team": "nlp"},
    "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"x\": 1}"},
    "managedFields": [
      {"manager": "kubectl-client-side-apply", "operation": "Update",
       "apiVersion": "pacer.dev/v1alpha1", "time": "2026-03-01T10:00:00Z",
       "fieldsType": "FieldsV1",
       "fieldsV1": {"f:spec": {".": {}, "f:model": {"f:layers": {}}}}}
    ]
  },
  "spec": {
    "model": {"parameters": 6700000000, "layers": 32, "hiddenSize": 4096,
              "attentionHeads": 32, "kvHeads": 8, "ffnHiddenSize": 11008,
              "ffnKind": "swiglu", "vocabSize": 32000, "sequenceLength": 4096,
              "tiedEmbeddings": false, "dropout": true, "causalAttention": false},
    "data": {"tokens": 1e12, "epochs": 2},
    "training": {"globalBatchSize": 1024, "precision": "fp8", "optimizer": "sgd-momentum",
                 "activationCheckpointing": "selective", "microBatchSizes": [1, 2, 4, 8]},
    "maxDuration": "72h",
    "objective": "time",
    "resources": {"gpuTypes": ["H100-SXM", "A100-80GB"], "minGPUs": 8, "maxGPUs": 512},
    "parallelism": {"tensorParallel": 2, "pipelineParallel": "auto", "zeroStage": 1},
    "worker": {"image": "registry.example.com/train:1.2",
               "command": ["python", "train.py", "--lr", "3e-4"],
               "env": [{"name": "NCCL_DEBUG", "value": "WARN"}, {"name": "EMPTY"}]},
    "checkpoint": {"volumeClaimName": "ckpt", "interval": "30m"},
    "replan": {"enabled": false, "interval": "2m", "slack": 0.1}
  },
  "status": {"phase": "Running", "conditions": [], "replans": 1,
             "plan": {"gpuType": "H100-SXM", "nodes": 8}}
})";

constexpr char kMinimalYaml[] = R"(apiVersion: pacer.dev/v1alpha1
kind: TrainJob
metadata:
  name: tiny
spec:
  model:
    layers: 24
    hiddenSize: 1024
    attentionHeads: 16
  data:
    tokens: 2e9
  training:
    globalBatchSize: 256
)";

void ExpectSameJob(const JobSpec& a, const JobSpec& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.namespace_name, b.namespace_name);
  EXPECT_EQ(a.creation_unix_seconds, b.creation_unix_seconds);
  EXPECT_EQ(a.model.parameters, b.model.parameters);
  EXPECT_EQ(a.model.layers, b.model.layers);
  EXPECT_EQ(a.model.hidden_size, b.model.hidden_size);
  EXPECT_EQ(a.model.attention_heads, b.model.attention_heads);
  EXPECT_EQ(a.model.kv_heads, b.model.kv_heads);
  EXPECT_EQ(a.model.ffn_hidden_size, b.model.ffn_hidden_size);
  EXPECT_EQ(a.model.ffn_kind, b.model.ffn_kind);
  EXPECT_EQ(a.model.vocab_size, b.model.vocab_size);
  EXPECT_EQ(a.model.sequence_length, b.model.sequence_length);
  EXPECT_EQ(a.model.tied_embeddings, b.model.tied_embeddings);
  EXPECT_EQ(a.model.dropout, b.model.dropout);
  EXPECT_EQ(a.model.causal_attention, b.model.causal_attention);
  EXPECT_EQ(a.model.architecture_inferred, b.model.architecture_inferred);
  EXPECT_EQ(a.data.tokens, b.data.tokens);
  EXPECT_EQ(a.data.samples, b.data.samples);
  EXPECT_EQ(a.data.epochs, b.data.epochs);
  EXPECT_EQ(a.training.global_batch_size, b.training.global_batch_size);
  EXPECT_EQ(a.training.precision, b.training.precision);
  EXPECT_EQ(a.training.optimizer, b.training.optimizer);
  EXPECT_EQ(a.training.activation_checkpointing, b.training.activation_checkpointing);
  EXPECT_EQ(a.training.micro_batch_sizes, b.training.micro_batch_sizes);
  EXPECT_EQ(a.deadline_unix_seconds, b.deadline_unix_seconds);
  EXPECT_EQ(a.max_duration_seconds, b.max_duration_seconds);
  EXPECT_EQ(a.objective, b.objective);
  EXPECT_EQ(a.resources.gpu_types, b.resources.gpu_types);
  EXPECT_EQ(a.resources.min_gpus, b.resources.min_gpus);
  EXPECT_EQ(a.resources.max_gpus, b.resources.max_gpus);
  EXPECT_EQ(a.parallelism.tensor_parallel, b.parallelism.tensor_parallel);
  EXPECT_EQ(a.parallelism.pipeline_parallel, b.parallelism.pipeline_parallel);
  EXPECT_EQ(a.parallelism.zero_stage, b.parallelism.zero_stage);
  EXPECT_EQ(a.worker.image, b.worker.image);
  EXPECT_EQ(a.worker.command, b.worker.command);
  ASSERT_EQ(a.worker.env.size(), b.worker.env.size());
  for (std::size_t i = 0; i < a.worker.env.size(); ++i) {
    EXPECT_EQ(a.worker.env[i].name, b.worker.env[i].name);
    EXPECT_EQ(a.worker.env[i].value, b.worker.env[i].value);
  }
  EXPECT_EQ(a.checkpoint.volume_claim_name, b.checkpoint.volume_claim_name);
  EXPECT_EQ(a.checkpoint.interval_seconds, b.checkpoint.interval_seconds);
  EXPECT_EQ(a.replan.enabled, b.replan.enabled);
  EXPECT_EQ(a.replan.interval_seconds, b.replan.interval_seconds);
  EXPECT_EQ(a.replan.slack_fraction, b.replan.slack_fraction);
}

// Replaces the first occurrence of `from` in kMinimalYaml.
std::string Minimal(const std::string& from, const std::string& to) {
  std::string doc = kMinimalYaml;
  const std::size_t pos = doc.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  if (pos != std::string::npos) doc.replace(pos, from.size(), to);
  return doc;
}

std::string TrainJobErrorOf(const std::string& doc) {
  StatusOr<JobSpec> job = ParseTrainJob(doc);
  if (job.ok()) return "OK";
  EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument) << job.status().ToString();
  return job.status().message();
}

TEST(JobParserTest, ParsesEveryField) {
  StatusOr<JobSpec> parsed = ParseTrainJob(kFullYaml);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const JobSpec& job = *parsed;
  EXPECT_EQ(job.name, "llama-7b-pretrain");
  EXPECT_EQ(job.namespace_name, "research");
  EXPECT_EQ(job.creation_unix_seconds, 1772359200);
  EXPECT_EQ(job.model.parameters, 6.7e9);
  EXPECT_EQ(job.model.layers, 32);
  EXPECT_EQ(job.model.hidden_size, 4096);
  EXPECT_EQ(job.model.attention_heads, 32);
  EXPECT_EQ(job.model.kv_heads, 8);
  EXPECT_EQ(job.model.ffn_hidden_size, 11008);
  EXPECT_EQ(job.model.ffn_kind, FfnKind::kSwiglu);
  EXPECT_EQ(job.model.vocab_size, 32000);
  EXPECT_EQ(job.model.sequence_length, 4096);
  EXPECT_FALSE(job.model.tied_embeddings);
  EXPECT_TRUE(job.model.dropout);            // not the default
  EXPECT_FALSE(job.model.causal_attention);  // not the default
  EXPECT_FALSE(job.model.architecture_inferred);
  EXPECT_EQ(job.data.tokens, 1e12);
  EXPECT_FALSE(job.data.samples.has_value());
  EXPECT_EQ(job.data.epochs, 2);
  EXPECT_EQ(job.training.global_batch_size, 1024);
  EXPECT_EQ(job.training.precision, Precision::kFp8);
  EXPECT_EQ(job.training.optimizer, Optimizer::kSgdMomentum);
  EXPECT_EQ(job.training.activation_checkpointing, Recompute::kSelective);
  EXPECT_EQ(job.training.micro_batch_sizes, (std::vector<int>{1, 2, 4, 8}));
  EXPECT_FALSE(job.deadline_unix_seconds.has_value());
  EXPECT_EQ(job.max_duration_seconds, 72 * 3600.0);
  EXPECT_EQ(job.objective, Objective::kTime);
  EXPECT_EQ(job.resources.gpu_types, (std::vector<std::string>{"H100-SXM", "A100-80GB"}));
  EXPECT_EQ(job.resources.min_gpus, 8);
  EXPECT_EQ(job.resources.max_gpus, 512);
  EXPECT_EQ(job.parallelism.tensor_parallel, 2);
  EXPECT_FALSE(job.parallelism.pipeline_parallel.has_value());
  EXPECT_EQ(job.parallelism.zero_stage, 1);
  EXPECT_EQ(job.worker.image, "registry.example.com/train:1.2");
  EXPECT_EQ(job.worker.command, (std::vector<std::string>{"python", "train.py", "--lr", "3e-4"}));
  ASSERT_EQ(job.worker.env.size(), 2u);
  EXPECT_EQ(job.worker.env[0].name, "NCCL_DEBUG");
  EXPECT_EQ(job.worker.env[0].value, "WARN");
  EXPECT_EQ(job.worker.env[1].value, "");
  EXPECT_EQ(job.checkpoint.volume_claim_name, "ckpt");
  EXPECT_EQ(job.checkpoint.interval_seconds, 1800);
  EXPECT_FALSE(job.replan.enabled);
  EXPECT_EQ(job.replan.interval_seconds, 120);
  EXPECT_DOUBLE_EQ(job.replan.slack_fraction, 0.1);
}

TEST(JobParserTest, ApiServerJsonParsesLikeYaml) {
  StatusOr<JobSpec> yaml = ParseTrainJob(kFullYaml);
  StatusOr<JobSpec> json = ParseTrainJob(kFullJson);
  ASSERT_TRUE(yaml.ok()) << yaml.status().ToString();
  ASSERT_TRUE(json.ok()) << json.status().ToString();
  ExpectSameJob(*yaml, *json);
}

TEST(JobParserTest, Defaults) {
  StatusOr<JobSpec> parsed = ParseTrainJob(kMinimalYaml);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const JobSpec& job = *parsed;
  EXPECT_EQ(job.namespace_name, "default");
  EXPECT_FALSE(job.creation_unix_seconds.has_value());
  EXPECT_FALSE(job.model.parameters.has_value());
  EXPECT_EQ(job.model.kv_heads, 16);
  EXPECT_EQ(job.model.ffn_kind, FfnKind::kGelu);
  EXPECT_EQ(job.model.ffn_hidden_size, 4096);
  EXPECT_EQ(job.model.vocab_size, 51200);
  EXPECT_EQ(job.model.sequence_length, 2048);
  EXPECT_FALSE(job.model.tied_embeddings);
  EXPECT_EQ(job.data.epochs, 1);
  EXPECT_EQ(job.training.precision, Precision::kBf16);
  EXPECT_EQ(job.training.optimizer, Optimizer::kAdamW);
  EXPECT_FALSE(job.training.activation_checkpointing.has_value());
  EXPECT_TRUE(job.training.micro_batch_sizes.empty());
  EXPECT_FALSE(job.deadline_unix_seconds.has_value());
  EXPECT_FALSE(job.max_duration_seconds.has_value());
  EXPECT_EQ(job.objective, Objective::kCost);
  EXPECT_TRUE(job.resources.gpu_types.empty());
  EXPECT_EQ(job.resources.min_gpus, 1);
  EXPECT_FALSE(job.resources.max_gpus.has_value());
  EXPECT_FALSE(job.parallelism.tensor_parallel.has_value());
  EXPECT_FALSE(job.parallelism.zero_stage.has_value());
  EXPECT_EQ(job.worker.image, "");  // the controller's --worker-image
  EXPECT_TRUE(job.checkpoint.volume_claim_name.empty());
  EXPECT_FALSE(job.checkpoint.interval_seconds.has_value());
  EXPECT_TRUE(job.replan.enabled);
  EXPECT_EQ(job.replan.interval_seconds, 60);
  EXPECT_DOUBLE_EQ(job.replan.slack_fraction, 0.05);
}

TEST(JobParserTest, SwigluDefaultFfnRoundsUpTo256) {
  StatusOr<JobSpec> job =
      ParseTrainJob(Minimal("    layers: 24\n    hiddenSize: 1024\n",
                            "    layers: 32\n    hiddenSize: 4096\n    ffnKind: swiglu\n"));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->model.ffn_hidden_size, 11008);  // LLaMA-7B's
}

TEST(JobParserTest, ParametersOnlyInfersTheArchitecture) {
  StatusOr<JobSpec> job =
      ParseTrainJob(Minimal("    layers: 24\n    hiddenSize: 1024\n    attentionHeads: 16\n",
                            "    parameters: \"350M\"\n    sequenceLength: 1024\n"));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->model.parameters, 350e6);
  EXPECT_TRUE(job->model.architecture_inferred);
  EXPECT_EQ(job->model.sequence_length, 1024);
  EXPECT_GT(job->model.layers, 0);
  EXPECT_GT(job->model.hidden_size, 0);
  EXPECT_GT(job->model.attention_heads, 0);
}

TEST(JobParserTest, BothParametersAndArchitectureKeepTheUsersCount) {
  StatusOr<JobSpec> job =
      ParseTrainJob(Minimal("    layers: 24\n", "    parameters: 355M\n    layers: 24\n"));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->model.parameters, 355e6);
  EXPECT_FALSE(job->model.architecture_inferred);
  EXPECT_EQ(job->model.layers, 24);
}

TEST(JobParserTest, SamplesAndDeadline) {
  std::string doc = Minimal("    tokens: 2e9\n", "    samples: 1M\n    epochs: 3\n");
  doc += "  deadline: \"2026-12-24T09:00:00+02:00\"\n";
  StatusOr<JobSpec> job = ParseTrainJob(doc);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->data.samples, 1e6);
  EXPECT_FALSE(job->data.tokens.has_value());
  EXPECT_EQ(job->deadline_unix_seconds, 1798070400 + 7 * 3600);
  EXPECT_DOUBLE_EQ(TotalSequences(*job), 3e6);
  EXPECT_EQ(EffectiveDeadline(*job, 0), 1798070400 + 7 * 3600);
}

TEST(JobParserTest, UnquotedTimestampIsAString) {
  std::string doc = kMinimalYaml;
  doc += "  deadline: 2026-12-24T00:00:00Z\n";
  StatusOr<JobSpec> job = ParseTrainJob(doc);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->deadline_unix_seconds, 1798070400);
}

TEST(JobParserTest, NullsCountAsNotGiven) {
  std::string doc = kMinimalYaml;
  doc += "  parallelism:\n  worker: null\n  deadline: ~\n";
  StatusOr<JobSpec> job = ParseTrainJob(doc);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_FALSE(job->deadline_unix_seconds.has_value());
}

TEST(JobParserTest, AutoEverywhere) {
  std::string doc = kMinimalYaml;
  doc += R"(  parallelism: {tensorParallel: auto, pipelineParallel: auto, zeroStage: auto}
  checkpoint: {interval: auto}
)";
  doc = std::string(doc).replace(doc.find("    globalBatchSize"), 0,
                                 "    activationCheckpointing: auto\n");
  StatusOr<JobSpec> job = ParseTrainJob(doc);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_FALSE(job->parallelism.tensor_parallel.has_value());
  EXPECT_FALSE(job->parallelism.pipeline_parallel.has_value());
  EXPECT_FALSE(job->parallelism.zero_stage.has_value());
  EXPECT_FALSE(job->checkpoint.interval_seconds.has_value());
  EXPECT_FALSE(job->training.activation_checkpointing.has_value());
}

TEST(JobParserTest, ErrorMessagesNameThePathAndTheValue) {
  EXPECT_EQ(TrainJobErrorOf(Minimal("globalBatchSize: 256", "globalBatchSize: -4")),
            "spec.training.globalBatchSize: must be a positive integer, got -4");
  EXPECT_EQ(TrainJobErrorOf(Minimal("globalBatchSize: 256", "globalBatchSize: 4.5")),
            "spec.training.globalBatchSize: must be an integer, got 4.5");
  EXPECT_EQ(TrainJobErrorOf(Minimal("globalBatchSize: 256", "globalBatchSize: {a: 1}")),
            "spec.training.globalBatchSize: must be a positive integer, got a map");
  EXPECT_EQ(TrainJobErrorOf(Minimal("globalBatchSize: 256", "globalBatchSize: 1e300")),
            "spec.training.globalBatchSize: must be at most 1e8, got 1e300");
  EXPECT_EQ(
      TrainJobErrorOf(Minimal("globalBatchSize: 256", "globalBatchSize: 256\n    precision: bf32")),
      "spec.training.precision: must be one of fp32, tf32, fp16, bf16, fp8, got \"bf32\"");
  EXPECT_EQ(TrainJobErrorOf(Minimal("globalBatchSize: 256", "globalBatchSzie: 256")),
            "spec.training.globalBatchSzie: unknown field; did you mean globalBatchSize?");
  EXPECT_EQ(
      TrainJobErrorOf(Minimal("    layers: 24\n    hiddenSize: 1024\n    attentionHeads: 16\n",
                              "    sequenceLength: 2048\n")),
      "spec.model: give parameters (e.g. \"6.7B\") or the architecture (layers, "
      "hiddenSize, attentionHeads)");
  EXPECT_EQ(TrainJobErrorOf(Minimal("hiddenSize: 1024", "hiddenSize: 1000")),
            "spec.model.hiddenSize: must be divisible by attentionHeads (16), got 1000");
  EXPECT_EQ(TrainJobErrorOf(Minimal("attentionHeads: 16", "attentionHeads: 16\n    kvHeads: 5")),
            "spec.model.kvHeads: must divide attentionHeads (16), got 5");
  EXPECT_THAT(TrainJobErrorOf(Minimal("    layers: 24\n", "")),
              HasSubstr("spec.model.layers: required with the architecture"));
  EXPECT_EQ(TrainJobErrorOf(Minimal("tokens: 2e9", "tokens: 2e9\n    samples: 5")),
            "spec.data: give tokens or samples, not both");
  EXPECT_EQ(TrainJobErrorOf(Minimal("tokens: 2e9", "tokens: lots")),
            "spec.data.tokens: expected a count such as 6.7B, 350M or 2e12, got \"lots\"");
  EXPECT_THAT(TrainJobErrorOf(Minimal("tokens: 2e9", "tokens: 1e20")),
              HasSubstr("spec.data.tokens: must be in [1, 1e16], got 1e20"));
  EXPECT_EQ(TrainJobErrorOf(Minimal("name: tiny", "name: My_Job")).substr(0, 48),
            "metadata.name: must be a DNS-1123 subdomain (low");
  // Kubernetes checks each dot-separated part of a name.
  for (const char* claim : {"a..b", "a.-b", "a-.b", ".a", "-a"}) {
    EXPECT_THAT(TrainJobErrorOf(Minimal("globalBatchSize: 256",
                                        std::string("globalBatchSize: 256\n  checkpoint:\n    "
                                                    "volumeClaimName: \"") +
                                            claim + "\"")),
                HasSubstr("spec.checkpoint.volumeClaimName: must be a PersistentVolumeClaim name"))
        << claim;
  }
  EXPECT_EQ(TrainJobErrorOf(Minimal("kind: TrainJob", "kind: Job")),
            "kind: must be TrainJob, got \"Job\"");
  EXPECT_EQ(TrainJobErrorOf(Minimal("pacer.dev/v1alpha1", "pacer.dev/v1")),
            "apiVersion: must be pacer.dev/v1alpha1, got \"pacer.dev/v1\"");
}

// spec.training.stack.fp32Gradients: fp32 main gradients unless the job
// says its stack reduces 16-bit ones.
TEST(JobParserTest, Fp32GradientsDefaultsToTrueAndParsesABool) {
  StatusOr<JobSpec> plain = ParseTrainJob(kMinimalYaml);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_TRUE(plain->training.stack.fp32_gradients);
  StatusOr<JobSpec> half = ParseTrainJob(Minimal(
      "globalBatchSize: 256", "globalBatchSize: 256\n    stack:\n      fp32Gradients: false"));
  ASSERT_TRUE(half.ok()) << half.status().ToString();
  EXPECT_FALSE(half->training.stack.fp32_gradients);
  EXPECT_THAT(
      TrainJobErrorOf(Minimal("globalBatchSize: 256",
                              "globalBatchSize: 256\n    stack:\n      fp32Gradients: maybe")),
      HasSubstr("spec.training.stack.fp32Gradients"));
  EXPECT_THAT(
      TrainJobErrorOf(Minimal("globalBatchSize: 256",
                              "globalBatchSize: 256\n    stack:\n      fp32Gradient: true")),
      HasSubstr("did you mean fp32Gradients?"));
}

// spec.model.causalAttention: a causal decoder unless the job says full
// attention; like dropout it goes with the architecture or with parameters
// alone.
TEST(JobParserTest, CausalAttentionDefaultsToTrueAndParsesABool) {
  StatusOr<JobSpec> plain = ParseTrainJob(kMinimalYaml);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_TRUE(plain->model.causal_attention);
  StatusOr<JobSpec> full = ParseTrainJob(
      Minimal("attentionHeads: 16", "attentionHeads: 16\n    causalAttention: false"));
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_FALSE(full->model.causal_attention);
  StatusOr<JobSpec> inferred =
      ParseTrainJob(Minimal("    layers: 24\n    hiddenSize: 1024\n    attentionHeads: 16",
                            "    parameters: 1.3B\n    causalAttention: false"));
  ASSERT_TRUE(inferred.ok()) << inferred.status().ToString();
  EXPECT_TRUE(inferred->model.architecture_inferred);
  EXPECT_FALSE(inferred->model.causal_attention);
  EXPECT_THAT(
      TrainJobErrorOf(Minimal("attentionHeads: 16", "attentionHeads: 16\n    causalAttention: no")),
      HasSubstr("spec.model.causalAttention"));
  EXPECT_THAT(TrainJobErrorOf(
                  Minimal("attentionHeads: 16", "attentionHeads: 16\n    causalAtention: false")),
              HasSubstr("did you mean causalAttention?"));
}

// b x k x d = globalBatchSize: a micro-batch list without a divisor of it
// allows no layout, which the search used to report as "no layout is
// possible" blaming whatever else it rejected (exit 4, not 2).
TEST(JobParserTest, MicroBatchSizesNeedADivisorOfTheGlobalBatch) {
  const std::string error = TrainJobErrorOf(
      Minimal("globalBatchSize: 256", "globalBatchSize: 256\n    microBatchSizes: [3, 5]"));
  EXPECT_THAT(error, HasSubstr("spec.training.microBatchSizes"));
  EXPECT_THAT(error, HasSubstr("none of these divides training.globalBatchSize (256)"));
  EXPECT_EQ(TrainJobErrorOf(Minimal("globalBatchSize: 256",
                                    "globalBatchSize: 256\n    microBatchSizes: [3, 4]")),
            "OK");
}

// What the worker cannot run is refused when the spec is read, naming the
// field: a parameter count whose inferred shape has more than 1,000 layers
// (the worker's PACER_MODEL_LAYERS bound), and micro-batches over 65,536
// (PACER_MICRO_BATCH_SIZE). Both passed and failed at launch as
// InvalidWorkerConfig, naming the worker's variables.
TEST(JobParserTest, ModelsAndMicroBatchesTheWorkerCannotRunAreRefused) {
  const std::string architecture = "layers: 24\n    hiddenSize: 1024\n    attentionHeads: 16";
  const std::string huge = TrainJobErrorOf(Minimal(architecture, "parameters: 1e14"));
  EXPECT_THAT(huge, HasSubstr("spec.model.parameters"));
  EXPECT_THAT(huge, HasSubstr("more than 1000"));
  EXPECT_THAT(huge, HasSubstr("give the architecture"));
  EXPECT_EQ(TrainJobErrorOf(Minimal(architecture, "parameters: 1e12")), "OK");
  const std::string mbs = TrainJobErrorOf(
      Minimal("globalBatchSize: 256", "globalBatchSize: 131072\n    microBatchSizes: [65537]"));
  EXPECT_THAT(mbs, HasSubstr("spec.training.microBatchSizes[0]"));
  EXPECT_EQ(TrainJobErrorOf(Minimal("globalBatchSize: 256",
                                    "globalBatchSize: 131072\n    microBatchSizes: [65536]")),
            "OK");
}

// The run's optimizer steps stay far from int64's end (tokens 1e16 at 8
// tokens a sequence, a batch of 1 and 10,000 epochs made 1.25e19).
TEST(JobParserTest, OptimizerStepsAreBounded) {
  std::string doc = Minimal("tokens: 2e9", "tokens: 1e16\n    epochs: 10000");
  const std::size_t at = doc.find("globalBatchSize: 256");
  doc.replace(at, 20, "globalBatchSize: 1");
  const std::string error = TrainJobErrorOf(doc);
  EXPECT_THAT(error, HasSubstr("spec.data"));
  EXPECT_THAT(error, HasSubstr("optimizer steps"));
  EXPECT_THAT(error, HasSubstr("at most 1e12"));
}

// A global batch larger than one epoch of data was planned as one step
// over sequences that do not exist (samples: 1000 at globalBatchSize 1e8).
TEST(JobParserTest, AGlobalBatchLargerThanTheDataIsRefused) {
  EXPECT_EQ(TrainJobErrorOf(Minimal("tokens: 2e9", "samples: 1000")), "OK");
  const std::string doc = Minimal("tokens: 2e9", "samples: 100");
  const std::string error = TrainJobErrorOf(doc);
  EXPECT_THAT(error, HasSubstr("spec.training.globalBatchSize"));
  EXPECT_THAT(error, HasSubstr("more than the 100 in one epoch"));
  // With tokens: 1e5 tokens of 2048-token sequences are 49 samples.
  EXPECT_THAT(TrainJobErrorOf(Minimal("tokens: 2e9", "tokens: 1e5")),
              HasSubstr("more than the 49"));
  // Exactly one epoch per step is allowed.
  EXPECT_EQ(TrainJobErrorOf(Minimal("tokens: 2e9", "samples: 256")), "OK");
}

// The name is the pacer.dev/job label value of the job's pods, which
// Kubernetes limits to 63 characters: a longer (valid subdomain) name made
// every pod and the Service invalid.
TEST(JobParserTest, NamesAreAtMost63Characters) {
  EXPECT_EQ(TrainJobErrorOf(Minimal("name: tiny", "name: " + std::string(63, 'a'))), "OK");
  EXPECT_EQ(TrainJobErrorOf(Minimal("name: tiny", "name: " + std::string(70, 'a'))),
            "metadata.name: must be at most 63 characters (it is the pacer.dev/job label of the "
            "job's pods and Service), got 70");
}

// Names the pod API refuses (kube-apiserver's IsEnvVarName) are refused
// here, with the field, instead of as a 422 at launch.
TEST(JobParserTest, EnvNamesAreThoseThePodApiTakes) {
  const auto with_env = [](const std::string& name) {
    return Minimal("globalBatchSize: 256",
                   "globalBatchSize: 256\n  worker: {env: [{name: \"" + name + "\", value: x}]}");
  };
  EXPECT_EQ(TrainJobErrorOf(with_env("NCCL_DEBUG")), "OK");
  EXPECT_EQ(TrainJobErrorOf(with_env("my.var-2")), "OK");
  EXPECT_EQ(TrainJobErrorOf(with_env("1FOO")),
            "spec.worker.env[0].name: must be an environment variable name: letters, digits, "
            "'_', '-' and '.', not starting with a digit or \"..\", not \".\", at most 256 "
            "characters, got \"1FOO\"");
  EXPECT_NE(TrainJobErrorOf(with_env(".")), "OK");
  EXPECT_NE(TrainJobErrorOf(with_env("..FOO")), "OK");
  EXPECT_EQ(TrainJobErrorOf(with_env(".FOO")), "OK");
  EXPECT_NE(TrainJobErrorOf(with_env("A=B")), "OK");
  EXPECT_NE(TrainJobErrorOf(with_env("TAB\there")), "OK");
}

// The CRD's list and length bounds: a file `kubectl apply` would refuse
// ("Too many", "Too long", a repeated env name) is refused here too, with
// the bound, instead of planning as if it could run.
TEST(JobParserTest, ListsAndStringsAreBoundedAsTheCrdBoundsThem) {
  const auto with = [](const std::string& what) {
    return Minimal("globalBatchSize: 256", "globalBatchSize: 256\n" + what);
  };
  const auto list = [](int n, const std::string& item) {
    std::string out = "[";
    for (int i = 0; i < n; ++i) out += (i ? ", " : "") + item;
    return out + "]";
  };
  std::string env256 = "[";
  for (int i = 0; i < 256; ++i) env256 += (i ? ", " : "") + ("{name: V" + std::to_string(i) + "}");
  env256 += "]";
  EXPECT_EQ(TrainJobErrorOf(with("  worker: {env: " + env256 + "}")), "OK");
  EXPECT_EQ(TrainJobErrorOf(with("  worker: {env: " + env256.substr(0, env256.size() - 1) +
                                 ", {name: V256}]}")),
            "spec.worker.env: must have at most 256 entries, got 257");
  EXPECT_EQ(TrainJobErrorOf(with("  worker: {env: [{name: A, value: x}, {name: A, value: y}]}")),
            "spec.worker.env[1].name: is set twice; give each variable once, got \"A\"");
  EXPECT_EQ(TrainJobErrorOf(with("  worker: {command: " + list(256, "x") + "}")), "OK");
  EXPECT_EQ(TrainJobErrorOf(with("  worker: {command: " + list(257, "x") + "}")),
            "spec.worker.command: must have at most 256 entries, got 257");
  EXPECT_EQ(TrainJobErrorOf(with("  worker: {command: [" + std::string(32769, 'x') + "]}")),
            "spec.worker.command[0]: must be at most 32768 characters, got 32769");
  EXPECT_EQ(
      TrainJobErrorOf(with("  worker: {env: [{name: A, value: " + std::string(32769, 'x') + "}]}")),
      "spec.worker.env[0].value: must be at most 32768 characters, got 32769");
  // Characters as the CRD counts them: a 2-byte letter is one.
  std::string letters;
  for (int i = 0; i < 32768; ++i) letters += "\u00e9";
  EXPECT_EQ(TrainJobErrorOf(with("  worker: {env: [{name: A, value: " + letters + "}]}")), "OK");
  EXPECT_EQ(TrainJobErrorOf(with("  worker: {env: [{name: A, value: " + letters + "\u00e9}]}")),
            "spec.worker.env[0].value: must be at most 32768 characters, got 32769");
  // A byte of no well-formed sequence counts one, as the API server counts it.
  EXPECT_EQ(TrainJobErrorOf(with("  worker: {command: [" + std::string(32768, 'x') + "\x80]}")),
            "spec.worker.command[0]: must be at most 32768 characters, got 32769");
  EXPECT_EQ(TrainJobErrorOf(with("  worker: {image: " + std::string(1024, 'i') + "}")), "OK");
  EXPECT_EQ(TrainJobErrorOf(with("  worker: {image: " + std::string(1025, 'i') + "}")),
            "spec.worker.image: must be at most 1024 characters, got 1025");
  EXPECT_EQ(TrainJobErrorOf(with("  resources: {gpuTypes: [" + std::string(65, 'g') + "]}")),
            "spec.resources.gpuTypes[0]: must be at most 64 characters, got 65");
  EXPECT_EQ(TrainJobErrorOf(with("    microBatchSizes: " + list(65, "1"))),
            "spec.training.microBatchSizes: must have at most 64 entries, got 65");
}

TEST(JobParserTest, DeadlineAndMaxDurationConflict) {
  std::string doc = kMinimalYaml;
  doc += "  deadline: \"2026-12-24T00:00:00Z\"\n  maxDuration: 72h\n";
  EXPECT_THAT(TrainJobErrorOf(doc),
              HasSubstr("spec.maxDuration: cannot be combined with spec.deadline; "
                        "pick one"));
}

TEST(JobParserTest, DurationErrorsQuoteTheInput) {
  std::string doc = kMinimalYaml;
  doc += "  maxDuration: abc\n";
  EXPECT_EQ(TrainJobErrorOf(doc),
            "spec.maxDuration: expected a duration such as 72h or 1h30m, got \"abc\"");
}

TEST(JobParserTest, MinGpusAboveMaxGpus) {
  std::string doc = kMinimalYaml;
  doc += "  resources: {minGPUs: 16, maxGPUs: 8}\n";
  EXPECT_EQ(TrainJobErrorOf(doc), "spec.resources.maxGPUs: must be at least minGPUs (16), got 8");
}

TEST(JobParserTest, SlackRange) {
  std::string doc = kMinimalYaml;
  EXPECT_THAT(TrainJobErrorOf(doc + "  replan: {slack: 100%}\n"), HasSubstr("spec.replan.slack"));
  EXPECT_THAT(TrainJobErrorOf(doc + "  replan: {slack: -1}\n"), HasSubstr("spec.replan.slack"));
  EXPECT_THAT(TrainJobErrorOf(doc + "  replan: {interval: 500ms}\n"),
              HasSubstr("spec.replan.interval: must be at least 1s"));
  StatusOr<JobSpec> job = ParseTrainJob(doc + "  replan: {slack: 0}\n");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->replan.slack_fraction, 0);
}

TEST(JobParserTest, UnknownGpuTypeIsForThePlanner) {
  std::string doc = kMinimalYaml;
  doc += "  resources: {gpuTypes: [H1000]}\n";
  StatusOr<JobSpec> job = ParseTrainJob(doc);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->resources.gpu_types, std::vector<std::string>{"H1000"});
}

TEST(JobParserTest, GpuTypesAreDeduplicatedAndBounded) {
  StatusOr<JobSpec> job = ParseTrainJob(std::string(kMinimalYaml) +
                                        "  resources: {gpuTypes: [H100-SXM, h100-sxm, H200]}\n");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->resources.gpu_types, (std::vector<std::string>{"H100-SXM", "H200"}));

  std::string many = "  resources:\n    gpuTypes:\n";
  for (int i = 0; i < 101; ++i) many += "      - T" + std::to_string(i) + "\n";
  EXPECT_EQ(TrainJobErrorOf(kMinimalYaml + many),
            "spec.resources.gpuTypes: must have at most 100 entries, got 101");
}

// A GPU type name is quoted back in one-line errors and plans.
TEST(JobParserTest, GpuTypeNamesHoldNoControlCharacters) {
  EXPECT_EQ(TrainJobErrorOf(std::string(kMinimalYaml) +
                            "  resources:\n    gpuTypes: [\"H100\\e[2J\\nX\"]\n"),
            "spec.resources.gpuTypes[0]: must be a name: not empty, without control characters or "
            "leading or trailing spaces, got \"H100\\x1b[2J\\x0aX\"");
}

TEST(JobParserTest, DocumentLevelErrors) {
  EXPECT_EQ(TrainJobErrorOf(""), "TrainJob: the document is empty");
  EXPECT_EQ(TrainJobErrorOf("# only a comment\n"), "TrainJob: the document is empty");
  EXPECT_THAT(TrainJobErrorOf("- a\n- b\n"), HasSubstr("expected a map"));
  EXPECT_THAT(TrainJobErrorOf("spec: {model: [\n"), HasSubstr("malformed YAML at line"));
  EXPECT_THAT(TrainJobErrorOf(std::string(kMinimalYaml) + "---\n" + kMinimalYaml),
              HasSubstr("more than one YAML document"));
  EXPECT_THAT(TrainJobErrorOf(Minimal("spec:", "extra: 1\nspec:")),
              HasSubstr("extra: unknown field"));
}

// yaml-cpp's depth guard said only "bad file".
TEST(JobParserTest, NestingTooDeepSaysSo) {
  const std::string deep = "spec: " + std::string(600, '[') + std::string(600, ']') + "\n";
  const std::string error = TrainJobErrorOf(deep);
  EXPECT_THAT(error, HasSubstr("TrainJob: malformed YAML at line 1, column "));
  EXPECT_THAT(error, HasSubstr("nested too deeply"));
  EXPECT_THAT(error, Not(HasSubstr("bad file")));
}

TEST(JobParserTest, TrailingEmptyDocumentIsHarmless) {
  StatusOr<JobSpec> job = ParseTrainJob(std::string("---\n") + kMinimalYaml + "---\n# end\n");
  EXPECT_TRUE(job.ok()) << job.status().ToString();
}

// Inputs the fuzzer found. yaml-cpp's LoadAll never returns on a stray comma
// after a document (it yields empty documents forever).
TEST(JobParserTest, FuzzRegressions) {
  for (const char* input : {"{},", ",", "a: 1\n,", "{\"apiVersion\": \"pacer.dev/v1alpha1\"},"}) {
    StatusOr<JobSpec> job = ParseTrainJob(input);
    ASSERT_FALSE(job.ok()) << input;
    EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument) << input;
  }
  EXPECT_EQ(TrainJobErrorOf("{},"),
            "TrainJob: malformed YAML at line 1, column 3: unexpected content "
            "after the document");
}

// yaml-cpp reads a quote left open before the file's last line break as a
// string running to the end: `name: "tiny` took in the spec below it, and
// the job planned with the rest of the file as its name (or, with an image
// left open, without the settings after it).
TEST(JobParserTest, AQuoteLeftOpenIsRefusedWhereItStarts) {
  for (const std::string& ending : {std::string(""), std::string("\n\n  \n")}) {
    const std::string doc = Minimal("  name: tiny", "  name: \"tiny") + ending;
    EXPECT_EQ(TrainJobErrorOf(doc),
              "TrainJob: malformed YAML at line 4, column 9: a quoted string starts here and is "
              "never closed: it runs to the end of the file and takes in every line after it; "
              "close the quote")
        << "ending " << testing::PrintToString(ending);
  }
  const std::string single = std::string(kMinimalYaml) + "  maxDuration: '72h\n";
  EXPECT_THAT(TrainJobErrorOf(single), HasSubstr("at line 14, column 16: a quoted string starts"));
  // A string that spans lines and is closed is read as a string (this name
  // is then refused for its space, not for a quote).
  const std::string spanning =
      TrainJobErrorOf(Minimal("  name: tiny", "  name: \"ti\n    ny\"") + "\n\n");
  EXPECT_THAT(spanning, HasSubstr("metadata.name"));
  EXPECT_THAT(spanning, Not(HasSubstr("quoted string")));
}

TEST(JobParserTest, MalformedYamlReportsLineAndColumn) {
  const std::string doc = Minimal("    globalBatchSize: 256\n", "    globalBatchSize: [256\n");
  EXPECT_THAT(TrainJobErrorOf(doc), HasSubstr("line "));
  EXPECT_THAT(TrainJobErrorOf(doc), HasSubstr("column "));
}

TEST(JobParserTest, DuplicateKeysAreErrors) {
  EXPECT_EQ(TrainJobErrorOf(
                Minimal("globalBatchSize: 256", "globalBatchSize: 256\n    globalBatchSize: 8")),
            "spec.training.globalBatchSize: given more than once");
}

TEST(JobParserTest, OversizedDocumentIsResourceExhausted) {
  std::string doc = kMinimalYaml;
  doc += "# " + std::string(kMaxDocumentBytes, 'x') + "\n";
  StatusOr<JobSpec> job = ParseTrainJob(doc);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), StatusCode::kResourceExhausted);
}

TEST(JobParserTest, DeepNestingIsAnErrorNotACrash) {
  std::string doc = kMinimalYaml;
  doc += "  worker: {command: " + std::string(5000, '[') + std::string(5000, ']') + "}\n";
  EXPECT_FALSE(ParseTrainJob(doc).ok());
}

TEST(JobSpecTest, EffectiveDeadlineCountsMaxDurationFromCreation) {
  JobSpec job;
  EXPECT_FALSE(EffectiveDeadline(job, 1000).has_value());
  job.max_duration_seconds = 3600;
  EXPECT_EQ(EffectiveDeadline(job, 1000), 4600);
  job.creation_unix_seconds = 500;
  EXPECT_EQ(EffectiveDeadline(job, 1000), 4100);
  // A creation time after now (a hand-written one, or the API server's clock
  // ahead of ours) counts from now: a 1-hour job created "in 2031" was
  // planned against a deadline years away.
  job.creation_unix_seconds = 1'000'000'000;
  EXPECT_EQ(EffectiveDeadline(job, 1000), 4600);
  job.max_duration_seconds.reset();
  job.deadline_unix_seconds = 99;
  EXPECT_EQ(EffectiveDeadline(job, 1000), 99);
}

TEST(JobSpecTest, TotalSequences) {
  JobSpec job;
  job.model.sequence_length = 2048;
  job.data.tokens = 2048.0 * 1000;
  job.data.epochs = 2;
  EXPECT_DOUBLE_EQ(TotalSequences(job), 2000);
  job.data.tokens.reset();
  job.data.samples = 10;
  EXPECT_DOUBLE_EQ(TotalSequences(job), 20);
}

TEST(JobSpecTest, Names) {
  EXPECT_STREQ(PrecisionName(Precision::kFp32), "fp32");
  EXPECT_STREQ(PrecisionName(Precision::kTf32), "tf32");
  EXPECT_STREQ(PrecisionName(Precision::kFp16), "fp16");
  EXPECT_STREQ(PrecisionName(Precision::kBf16), "bf16");
  EXPECT_STREQ(PrecisionName(Precision::kFp8), "fp8");
  EXPECT_STREQ(OptimizerName(Optimizer::kAdamW), "adamw");
  EXPECT_STREQ(OptimizerName(Optimizer::kAdam), "adam");
  EXPECT_STREQ(OptimizerName(Optimizer::kSgd), "sgd");
  EXPECT_STREQ(OptimizerName(Optimizer::kSgdMomentum), "sgd-momentum");
  EXPECT_STREQ(OptimizerName(Optimizer::kAdafactor), "adafactor");
  EXPECT_STREQ(RecomputeName(Recompute::kNone), "none");
  EXPECT_STREQ(RecomputeName(Recompute::kSelective), "selective");
  EXPECT_STREQ(RecomputeName(Recompute::kFull), "full");
  EXPECT_STREQ(FfnKindName(FfnKind::kGelu), "gelu");
  EXPECT_STREQ(FfnKindName(FfnKind::kSwiglu), "swiglu");
  EXPECT_STREQ(ObjectiveName(Objective::kCost), "cost");
  EXPECT_STREQ(ObjectiveName(Objective::kTime), "time");
}

}  // namespace
}  // namespace pacer::planner
