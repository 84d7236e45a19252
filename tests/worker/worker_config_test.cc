// The controller -> worker environment contract.
#include "core/worker_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

namespace pacer::worker {
namespace {

EnvLookup FromMap(const std::map<std::string, std::string>& env) {
  return [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

WorkerConfig ExampleConfig() {
  WorkerConfig c;
  c.rank = 8;
  c.world_size = 16;
  c.local_rank = 0;
  c.local_world_size = 8;
  c.node_rank = 1;
  c.nnodes = 2;
  c.master_addr = "job-0.job";
  c.master_port = 29400;
  c.tensor_parallel = 2;
  c.pipeline_parallel = 2;
  c.data_parallel = 4;
  c.virtual_stages = 2;
  c.zero_stage = 1;
  c.micro_batch_size = 2;
  c.gradient_accumulation_steps = 8;
  c.global_batch_size = 64;
  c.total_steps = 1000;
  c.precision = planner::Precision::kBf16;
  c.recompute = planner::Recompute::kSelective;
  c.attention = planner::AttentionKernel::kUnfused;  // not the default: the round trip carries it
  c.model.layers = 32;
  c.model.hidden_size = 4096;
  c.model.attention_heads = 32;
  c.model.kv_heads = 8;
  c.model.ffn_hidden_size = 11008;
  c.model.ffn_kind = planner::FfnKind::kSwiglu;
  c.model.vocab_size = 32000;
  c.model.sequence_length = 4096;
  c.model.causal_attention = false;  // not the default: the round trip carries it
  c.checkpoint_dir = "/ckpt";
  c.checkpoint_interval_steps = 50;
  c.metrics_port = 9400;
  c.job_name = "llama";
  c.job_namespace = "research";
  c.gpu_type = "H100-SXM";
  c.backend = Backend::kGpu;
  c.scale = 0.25;
  c.predicted_step_seconds = 7.5;
  return c;
}

TEST(WorkerConfigTest, EnvironmentRoundTrips) {
  const WorkerConfig c = ExampleConfig();
  const auto env = EnvironmentForConfig(c);
  EXPECT_EQ(env.at("PET_MASTER_ADDR"), "job-0.job");  // torchrun's names for user images
  auto parsed = ConfigFromEnvironment(FromMap(env));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->rank, 8);
  EXPECT_EQ(parsed->GlobalRank(3), 11);
  EXPECT_EQ(parsed->master_addr, "job-0.job");
  EXPECT_EQ(parsed->tensor_parallel, 2);
  EXPECT_EQ(parsed->virtual_stages, 2);
  EXPECT_EQ(parsed->gradient_accumulation_steps, 8);
  EXPECT_EQ(parsed->recompute, planner::Recompute::kSelective);
  EXPECT_EQ(parsed->attention, planner::AttentionKernel::kUnfused);
  EXPECT_EQ(parsed->model.kv_heads, 8);
  EXPECT_EQ(parsed->model.ffn_kind, planner::FfnKind::kSwiglu);
  EXPECT_FALSE(parsed->model.causal_attention);
  EXPECT_EQ(parsed->backend, Backend::kGpu);
  EXPECT_DOUBLE_EQ(parsed->scale, 0.25);
  EXPECT_DOUBLE_EQ(*parsed->predicted_step_seconds, 7.5);
  EXPECT_FALSE(parsed->predicted_memory_bytes.has_value());
  EXPECT_EQ(EnvironmentForConfig(*parsed), env);
}

// The stop grace reaches the supervisor: a fixed 25 s killed every rank
// whose step and checkpoint took longer, on every drain and re-plan.
TEST(WorkerConfigTest, TheStopGraceAndTheParentReachTheSupervisor) {
  auto env = EnvironmentForConfig(ExampleConfig());
  env["PACER_STOP_GRACE_SECONDS"] = "270";
  env["PACER_PARENT_PID"] = "4242";
  auto parsed = ConfigFromEnvironment(FromMap(env));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_DOUBLE_EQ(parsed->stop_grace_seconds, 270);
  const SupervisorOptions options = SupervisorOptionsFor(*parsed);
  EXPECT_DOUBLE_EQ(options.stop_grace_seconds, 270);
  EXPECT_EQ(options.parent_pid, 4242);
  env.erase("PACER_STOP_GRACE_SECONDS");
  parsed = ConfigFromEnvironment(FromMap(env));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_DOUBLE_EQ(SupervisorOptionsFor(*parsed).stop_grace_seconds, 25);
}

// Node 0's store on a metrics port failed its listen as a network error
// (exit 4: retried, and the node blamed); it is this configuration (exit 2).
// Other nodes serve no store: the same port numbers are theirs to use.
TEST(WorkerConfigTest, ARendezvousPortOnAMetricsPortOfNodeZeroIsRefused) {
  WorkerConfig c = ExampleConfig();
  c.node_rank = 0;
  c.rank = 0;
  c.metrics_port = 9400;
  for (int port : {9400, 9403, 9407}) {
    c.master_port = port;
    const Status s = ValidateConfig(c);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << port;
    EXPECT_NE(s.message().find("MASTER_PORT: " + std::to_string(port) +
                               " is one of this node's metrics ports"),
              std::string::npos)
        << s.message();
  }
  for (int port : {9399, 9408}) {
    c.master_port = port;
    EXPECT_TRUE(ValidateConfig(c).ok()) << port;
  }
  c.master_port = 9400;
  c.metrics_port = 0;  // any free port: the OS never hands out a bound one
  EXPECT_TRUE(ValidateConfig(c).ok());
  c.metrics_port = 9400;
  c.node_rank = 1;
  c.rank = 8;
  EXPECT_TRUE(ValidateConfig(c).ok());
}

// Without RANK the node's first rank is NODE_RANK x LOCAL_WORLD_SIZE.
TEST(WorkerConfigTest, TorchrunPrefixedNamesAreAccepted) {
  std::map<std::string, std::string> env = {{"PET_WORLD_SIZE", "2"}, {"PET_NNODES", "2"},
                                            {"PET_NODE_RANK", "1"}, {"PACER_DATA_PARALLEL", "2"},
                                            {"PACER_GRAD_ACCUM_STEPS", "4"},
                                            {"PACER_GLOBAL_BATCH_SIZE", "8"}};
  auto parsed = ConfigFromEnvironment(FromMap(env));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->world_size, 2);
  EXPECT_EQ(parsed->node_rank, 1);
  EXPECT_EQ(parsed->rank, 1);
  EXPECT_TRUE(parsed->model.causal_attention);  // a decoder's mask unless told otherwise
}

TEST(WorkerConfigTest, ErrorsNameTheVariable) {
  struct Case {
    std::string variable, value, expect;
  };
  const Case cases[] = {
      {"PACER_TENSOR_PARALLEL", "x", "PACER_TENSOR_PARALLEL: must be an integer, got \"x\""},
      {"PACER_ZERO_STAGE", "4", "PACER_ZERO_STAGE: must be in [0, 3], got \"4\""},
      {"PACER_PRECISION", "bf32", "PACER_PRECISION: must be one of fp32, tf32, fp16, bf16, fp8"},
      {"PACER_BACKEND", "tpu", "PACER_BACKEND: must be one of auto, cpu, gpu"},
      {"PACER_ATTENTION_KERNEL", "flash", "PACER_ATTENTION_KERNEL: must be one of fused, unfused"},
      {"PACER_MODEL_CAUSAL_ATTENTION", "yes",
       "PACER_MODEL_CAUSAL_ATTENTION: must be one of true, false, got \"yes\""},
      {"PACER_MODEL_TIED_EMBEDDINGS", "1",
       "PACER_MODEL_TIED_EMBEDDINGS: must be one of true, false, got \"1\""},
      {"MASTER_PORT", "70000", "MASTER_PORT: must be in [1, 65535]"},
      // Local rank r exports on PACER_METRICS_PORT + r: the last ranks'
      // ports would not exist (they failed after rendezvous and restore).
      {"PACER_METRICS_PORT", "65530", "PACER_METRICS_PORT: 65530 + LOCAL_WORLD_SIZE (8) - 1"},
      {"PACER_SCALE", "2", "PACER_SCALE: must be a number in"},
      {"PACER_GLOBAL_BATCH_SIZE", "65", "PACER_GLOBAL_BATCH_SIZE: must equal micro-batch x"},
      {"WORLD_SIZE", "15", "WORLD_SIZE: must equal NNODES x LOCAL_WORLD_SIZE"},
      {"PACER_MODEL_LAYERS", "30", "PACER_MODEL_LAYERS: must be divisible by pipeline"},
      {"PACER_TENSOR_PARALLEL", "16", "PACER_DATA_PARALLEL: tensor x pipeline x data"},
      // t = 2: sequence parallelism splits each sequence in two.
      {"PACER_SEQUENCE_LENGTH", "4095",
       "PACER_SEQUENCE_LENGTH: must be divisible by tensor parallel (2"},
      // v = 2: 2^19 + 1 accumulation steps are 2^20 + 2 passes.
      {"PACER_GRAD_ACCUM_STEPS", "524289",
       "PACER_GRAD_ACCUM_STEPS: accumulation steps x virtual stages (524289 x 2) must be at most "
       "1048576"},
      // The GPU switches: a misspelt one is refused, not read as off.
      {"PACER_GPU_BF16_ACTIVATIONS", "true",
       "PACER_GPU_BF16_ACTIVATIONS: must be 0 or 1, got \"true\""},
      {"PACER_GPU_OP_TIMES", "yes", "PACER_GPU_OP_TIMES: must be 0 or 1, got \"yes\""},
      {"PACER_CUDNN_ATTENTION", "off", "PACER_CUDNN_ATTENTION: must be 0 or 1, got \"off\""},
      {"PACER_GPU_CAUSAL_TILES", "false", "PACER_GPU_CAUSAL_TILES: must be 0 or 1, got \"false\""},
      {"PACER_STOP_GRACE_SECONDS", "0", "PACER_STOP_GRACE_SECONDS: must be a number in [1, 86400]"},
      {"PACER_STOP_GRACE_SECONDS", "nan", "PACER_STOP_GRACE_SECONDS: must be"},
      // Node 1 of 8 ranks a node starts at global rank 8: RANK 7 is a node
      // that forgot NODE_RANK, whose ranks would collide with node 0's.
      {"RANK", "7", "RANK: must be NODE_RANK x LOCAL_WORLD_SIZE (1 x 8 = 8"},
      {"RANK", "0", "set NODE_RANK for this node"},
  };
  for (const Case& c : cases) {
    auto env = EnvironmentForConfig(ExampleConfig());
    env[c.variable] = c.value;
    if (c.variable == "WORLD_SIZE") env.erase("PET_WORLD_SIZE");
    if (c.variable == "RANK") env.erase("PET_RANK");
    auto parsed = ConfigFromEnvironment(FromMap(env));
    ASSERT_FALSE(parsed.ok()) << c.variable;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(c.expect), std::string::npos)
        << parsed.status().message();
  }
}

// The fractional variables take the text the integer ones take: decimal
// only, all of it. strtod read PACER_TIMEOUT_SECONDS=0x10 as 16 s and " 1"
// as 1 s, where PACER_TOTAL_STEPS refuses both.
TEST(WorkerConfigTest, NumbersWithAFractionAreReadAsStrictlyAsIntegers) {
  for (const char* variable : {"PACER_TIMEOUT_SECONDS", "PACER_PREDICTED_STEP_SECONDS",
                               "PACER_PREDICTED_MEMORY_BYTES", "PACER_SCALE"}) {
    for (const char* text : {"0x10", "0x1p-2", " 1", "1 ", "+1", "1,5", "inf", "nan", "1e"}) {
      auto env = EnvironmentForConfig(ExampleConfig());
      env[variable] = text;
      const auto parsed = ConfigFromEnvironment(FromMap(env));
      ASSERT_FALSE(parsed.ok()) << variable << "=\"" << text << "\"";
      EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(parsed.status().message(),
                std::string(variable) +
                    ": must be a decimal number such as 300, 0.5 or 2e-3 (no spaces, no hex), "
                    "got \"" +
                    text + "\"");
      env = EnvironmentForConfig(ExampleConfig());
      env["PACER_TOTAL_STEPS"] = text;
      EXPECT_FALSE(ConfigFromEnvironment(FromMap(env)).ok()) << "the integers refuse it too";
    }
  }
  // Decimal text, exponents included, is read as before.
  auto env = EnvironmentForConfig(ExampleConfig());
  env["PACER_TIMEOUT_SECONDS"] = "1.5e2";
  env["PACER_PREDICTED_STEP_SECONDS"] = ".25";
  env["PACER_PREDICTED_MEMORY_BYTES"] = "8e10";
  env["PACER_SCALE"] = "0.5";
  const auto parsed = ConfigFromEnvironment(FromMap(env));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_DOUBLE_EQ(parsed->timeout_seconds, 150);
  EXPECT_DOUBLE_EQ(*parsed->predicted_step_seconds, 0.25);
  EXPECT_DOUBLE_EQ(*parsed->predicted_memory_bytes, 8e10);
  EXPECT_DOUBLE_EQ(parsed->scale, 0.5);
  // A number beyond a double, or the range, names the range as it is written.
  for (const char* text : {"1e999", "86401"}) {
    env["PACER_TIMEOUT_SECONDS"] = text;
    const auto refused = ConfigFromEnvironment(FromMap(env));
    ASSERT_FALSE(refused.ok()) << text;
    EXPECT_EQ(refused.status().message(), std::string("PACER_TIMEOUT_SECONDS: must be a number in "
                                                      "[1, 86400], got \"") +
                                              text + "\"");
  }
}

// The GPU device's switches: defaults when unset, 0 and 1 each way, and
// written out by EnvironmentForConfig when not the default.
TEST(WorkerConfigTest, GpuSwitchesReadZeroOrOneAndRoundTrip) {
  auto env = EnvironmentForConfig(ExampleConfig());
  const StatusOr<WorkerConfig> defaults = ConfigFromEnvironment(FromMap(env));
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_FALSE(defaults->gpu.bf16_activations);
  EXPECT_FALSE(defaults->gpu.op_times);
  EXPECT_TRUE(defaults->gpu.cudnn_attention);
  EXPECT_TRUE(defaults->gpu.causal_tiles);
  EXPECT_EQ(env.count("PACER_CUDNN_ATTENTION"), 0u);  // defaults are not written out

  env["PACER_GPU_BF16_ACTIVATIONS"] = "1";
  env["PACER_GPU_OP_TIMES"] = "1";
  env["PACER_CUDNN_ATTENTION"] = "0";
  env["PACER_GPU_CAUSAL_TILES"] = "0";
  const StatusOr<WorkerConfig> flipped = ConfigFromEnvironment(FromMap(env));
  ASSERT_TRUE(flipped.ok()) << flipped.status().ToString();
  EXPECT_TRUE(flipped->gpu.bf16_activations);
  EXPECT_TRUE(flipped->gpu.op_times);
  EXPECT_FALSE(flipped->gpu.cudnn_attention);
  EXPECT_FALSE(flipped->gpu.causal_tiles);
  const auto again = EnvironmentForConfig(*flipped);
  EXPECT_EQ(again.at("PACER_CUDNN_ATTENTION"), "0");
  EXPECT_EQ(again.at("PACER_GPU_BF16_ACTIVATIONS"), "1");
  const StatusOr<WorkerConfig> round_trip = ConfigFromEnvironment(FromMap(again));
  ASSERT_TRUE(round_trip.ok());
  EXPECT_EQ(round_trip->gpu, flipped->gpu);

  // The smoke's reader alone: the same answers.
  const StatusOr<GpuSwitches> alone = GpuSwitchesFromEnvironment(FromMap(env));
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ(*alone, flipped->gpu);
}

TEST(WorkerConfigTest, ScaleShrinksTheModelAndKeepsThePlanValid) {
  WorkerConfig c = ExampleConfig();
  c.scale = 1.0 / 64;
  ASSERT_TRUE(ApplyScale(&c).ok());
  EXPECT_EQ(c.model.hidden_size, 64);        // 4096 / 64, a multiple of 32 heads
  EXPECT_EQ(c.model.attention_heads, 32);
  EXPECT_EQ(c.model.sequence_length, 64);
  EXPECT_EQ(c.model.ffn_hidden_size, 172);   // 11008 / 64, a multiple of t = 2
  EXPECT_EQ(c.model.layers, 4);              // 32 / 8, a multiple of p x v = 4
  EXPECT_EQ(c.model.vocab_size, 500);
  EXPECT_TRUE(ValidateConfig(c).ok());
  WorkerConfig full = ExampleConfig();
  full.scale = 1.0;
  ASSERT_TRUE(ApplyScale(&full).ok());
  EXPECT_EQ(full.model.hidden_size, 4096);
}

// pacer-worker applies its flags after reading the environment and then
// calls ApplyScale: at scale 1 the flags' values were not validated, so a
// NaN --timeout (which CLI11's range lets through) or a --metrics-port that
// puts a local rank past 65535 ran.
TEST(WorkerConfigTest, ValuesSetAfterTheEnvironmentAreValidatedToo) {
  WorkerConfig c = ExampleConfig();
  c.scale = 1.0;
  ASSERT_TRUE(ApplyScale(&c).ok());
  for (double timeout : {std::nan(""), 0.5, 1e9}) {
    WorkerConfig bad = c;
    bad.timeout_seconds = timeout;
    const Status status = ApplyScale(&bad);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << timeout;
    EXPECT_NE(status.message().find("PACER_TIMEOUT_SECONDS"), std::string::npos)
        << status.message();
  }
  WorkerConfig port = c;
  port.metrics_port = 65530;  // 8 local ranks: the last one would export on 65537
  EXPECT_EQ(ApplyScale(&port).code(), StatusCode::kInvalidArgument);
}

// An absurd plan that every per-variable range accepts: 64 virtual stages of
// 10^8 accumulation steps. Building its schedule asked for 2 x 6.4 x 10^9
// pipeline actions (std::bad_alloc, exit 1, after the rendezvous); it is an
// invalid configuration (exit 2) naming the variable, at parse time.
TEST(WorkerConfigTest, AStepOfAbsurdlyManyMicroBatchPassesIsRefusedByName) {
  const std::map<std::string, std::string> env = {{"PACER_VIRTUAL_STAGES", "64"},
                                                  {"PACER_MODEL_LAYERS", "64"},
                                                  {"PACER_GRAD_ACCUM_STEPS", "100000000"},
                                                  {"PACER_GLOBAL_BATCH_SIZE", "100000000"}};
  const auto parsed = ConfigFromEnvironment(FromMap(env));
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status().message().rfind("PACER_GRAD_ACCUM_STEPS: ", 0), 0u)
      << parsed.status().message();
  EXPECT_NE(parsed.status().message().find("100000000 x 64"), std::string::npos)
      << parsed.status().message();

  // The largest step allowed still parses: the bound is on the product.
  std::map<std::string, std::string> largest = env;
  largest["PACER_GRAD_ACCUM_STEPS"] = std::to_string(kMaxMicroBatchPassesPerStep / 64);
  largest["PACER_GLOBAL_BATCH_SIZE"] = std::to_string(kMaxMicroBatchPassesPerStep / 64);
  const auto ok = ConfigFromEnvironment(FromMap(largest));
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();

  // A config built in code (flags over the environment) is held to it too,
  // with no overflow on the way.
  WorkerConfig built = ExampleConfig();
  built.gradient_accumulation_steps = int64_t{1} << 62;
  const Status refused = ValidateConfig(built);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message().rfind("PACER_GRAD_ACCUM_STEPS: ", 0), 0u) << refused.message();
}

// A sequence that tensor parallelism cannot split failed only after the
// rendezvous, in the step executor, with a message that named no variable.
TEST(WorkerConfigTest, ASequenceTensorParallelismCannotSplitIsRefusedByName) {
  const std::map<std::string, std::string> env = {{"WORLD_SIZE", "2"},
                                                  {"LOCAL_WORLD_SIZE", "2"},
                                                  {"PACER_TENSOR_PARALLEL", "2"},
                                                  {"PACER_SEQUENCE_LENGTH", "7"}};
  const auto parsed = ConfigFromEnvironment(FromMap(env));
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status().message().rfind("PACER_SEQUENCE_LENGTH: must be divisible by tensor "
                                            "parallel (2",
                                            0),
            0u)
      << parsed.status().message();
  EXPECT_NE(parsed.status().message().find("got 7"), std::string::npos);
  std::map<std::string, std::string> even = env;
  even["PACER_SEQUENCE_LENGTH"] = "8";
  EXPECT_TRUE(ConfigFromEnvironment(FromMap(even)).ok());
}

}  // namespace
}  // namespace pacer::worker
