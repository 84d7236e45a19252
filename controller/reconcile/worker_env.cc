#include "reconcile/worker_env.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace pacer::controller {
namespace {

// Shortest round-trip form of a double, as the worker's parser reads it.
std::string Number(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.17g", value);
  return buffer;
}

}  // namespace

int64_t TotalSteps(const planner::JobSpec& job) {
  const double samples =
      job.data.samples
          ? *job.data.samples
          : std::ceil(job.data.tokens.value_or(0) / std::max(1, job.model.sequence_length));
  const double per_epoch = std::ceil(
      samples / static_cast<double>(std::max<int64_t>(1, job.training.global_batch_size)));
  return std::max<int64_t>(1, static_cast<int64_t>(per_epoch) * std::max(1, job.data.epochs));
}

std::string WorkerSpecHash(const planner::JobSpec& job) {
  const planner::ModelSpec& m = job.model;
  const planner::TrainingSpec& t = job.training;
  std::string canonical;
  auto add = [&canonical](const std::string& field) {
    canonical += field;
    canonical += '\x1f';  // unit separator: no field can fake a boundary
  };
  add(std::to_string(TotalSteps(job)));
  add(std::to_string(t.global_batch_size));
  add(planner::PrecisionName(t.precision));
  add(planner::OptimizerName(t.optimizer));
  add(planner::AttentionKernelName(t.stack.attention));
  for (int value : {m.layers, m.hidden_size, m.attention_heads, m.kv_heads, m.ffn_hidden_size,
                    m.vocab_size, m.sequence_length}) {
    add(std::to_string(value));
  }
  add(planner::FfnKindName(m.ffn_kind));
  add(m.causal_attention ? "causal" : "full");
  add(m.tied_embeddings ? "tied" : "untied");
  add(job.worker.image);
  add(std::to_string(job.worker.command.size()));
  for (const std::string& argument : job.worker.command) add(argument);
  add(std::to_string(job.worker.env.size()));
  for (const planner::EnvVar& var : job.worker.env) {
    add(var.name);
    add(var.value);
  }
  add(job.checkpoint.volume_claim_name);
  uint64_t hash = 14695981039346656037ULL;  // FNV-1a 64 offset basis
  for (const unsigned char c : canonical) {
    hash ^= c;
    hash *= 1099511628211ULL;  // FNV-1a 64 prime
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

int64_t CheckpointIntervalSteps(const planner::Evaluation& plan) {
  const double interval = plan.total.checkpoint_interval_seconds;
  if (!(interval > 0) || !(plan.step.step_seconds > 0)) return 0;
  return std::max<int64_t>(1, static_cast<int64_t>(interval / plan.step.step_seconds));
}

int64_t WorkerStopGraceSeconds(int64_t termination_grace_seconds) {
  const int64_t margin = std::max<int64_t>(5, termination_grace_seconds / 10);
  return std::max<int64_t>(1, termination_grace_seconds - margin);
}

std::map<std::string, std::string> WorkerEnvironment(const LaunchSpec& launch, int node_rank,
                                                     const WorkerEnvOptions& options) {
  const planner::Layout& l = launch.plan.layout;
  const planner::ModelSpec& m = launch.spec.model;
  std::map<std::string, std::string> env;
  auto set_torchrun = [&env](const std::string& name, const std::string& value) {
    env[name] = value;
    env["PET_" + name] = value;  // torchrun's spelling, read by elastic agents
  };
  set_torchrun("RANK", std::to_string(node_rank * l.gpus_per_node));
  set_torchrun("WORLD_SIZE", std::to_string(l.gpus()));
  set_torchrun("LOCAL_RANK", "0");
  set_torchrun("LOCAL_WORLD_SIZE", std::to_string(l.gpus_per_node));
  set_torchrun("NODE_RANK", std::to_string(node_rank));
  set_torchrun("NNODES", std::to_string(l.nodes));
  set_torchrun("MASTER_ADDR", options.master_addr);
  set_torchrun("MASTER_PORT", std::to_string(options.master_port));
  env["PET_NPROC_PER_NODE"] = std::to_string(l.gpus_per_node);

  env["PACER_TENSOR_PARALLEL"] = std::to_string(l.tensor_parallel);
  env["PACER_PIPELINE_PARALLEL"] = std::to_string(l.pipeline_parallel);
  env["PACER_DATA_PARALLEL"] = std::to_string(l.data_parallel);
  env["PACER_VIRTUAL_STAGES"] = std::to_string(l.virtual_stages);
  env["PACER_ZERO_STAGE"] = std::to_string(l.zero_stage);
  env["PACER_MICRO_BATCH_SIZE"] = std::to_string(l.micro_batch_size);
  env["PACER_GRAD_ACCUM_STEPS"] = std::to_string(l.gradient_accumulation_steps);
  env["PACER_GLOBAL_BATCH_SIZE"] = std::to_string(launch.spec.training.global_batch_size);
  env["PACER_TOTAL_STEPS"] = std::to_string(launch.total_steps);
  env["PACER_PRECISION"] = planner::PrecisionName(launch.spec.training.precision);
  env["PACER_OPTIMIZER"] = planner::OptimizerName(launch.spec.training.optimizer);
  env["PACER_ACTIVATION_CHECKPOINTING"] = planner::RecomputeName(l.recompute);
  env["PACER_ATTENTION_KERNEL"] =
      planner::AttentionKernelName(launch.spec.training.stack.attention);
  env["PACER_MODEL_LAYERS"] = std::to_string(m.layers);
  env["PACER_MODEL_HIDDEN_SIZE"] = std::to_string(m.hidden_size);
  env["PACER_MODEL_ATTENTION_HEADS"] = std::to_string(m.attention_heads);
  env["PACER_MODEL_KV_HEADS"] = std::to_string(m.kv_heads > 0 ? m.kv_heads : m.attention_heads);
  env["PACER_MODEL_FFN_HIDDEN_SIZE"] = std::to_string(m.ffn_hidden_size);
  env["PACER_MODEL_FFN_KIND"] = planner::FfnKindName(m.ffn_kind);
  env["PACER_MODEL_VOCAB_SIZE"] = std::to_string(m.vocab_size);
  env["PACER_MODEL_CAUSAL_ATTENTION"] = m.causal_attention ? "true" : "false";
  env["PACER_MODEL_TIED_EMBEDDINGS"] = m.tied_embeddings ? "true" : "false";
  env["PACER_SEQUENCE_LENGTH"] = std::to_string(m.sequence_length);
  if (!options.checkpoint_dir.empty()) env["PACER_CHECKPOINT_DIR"] = options.checkpoint_dir;
  env["PACER_CHECKPOINT_INTERVAL_STEPS"] = std::to_string(launch.checkpoint_interval_steps);
  env["PACER_METRICS_PORT"] = std::to_string(options.metrics_port);
  env["PACER_JOB_NAME"] = launch.job.name;
  env["PACER_JOB_NAMESPACE"] = launch.job.namespace_name;
  env["PACER_GPU_TYPE"] = l.gpu_type;
  env["PACER_ATTEMPT"] = std::to_string(launch.attempt);
  if (!options.backend.empty()) env["PACER_BACKEND"] = options.backend;
  if (options.scale < 1.0) env["PACER_SCALE"] = Number(options.scale);
  if (options.stop_grace_seconds > 0) {
    env["PACER_STOP_GRACE_SECONDS"] = std::to_string(options.stop_grace_seconds);
  }
  env["PACER_PREDICTED_STEP_SECONDS"] = Number(launch.plan.step.step_seconds);
  env["PACER_PREDICTED_MEMORY_BYTES"] = Number(launch.plan.memory.total_bytes());
  return env;
}

}  // namespace pacer::controller
