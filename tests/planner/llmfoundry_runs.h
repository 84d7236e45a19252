// Published H100 runs the cost model is checked against out of sample:
// MosaicML llm-foundry's MPT throughput tables (70 runs on H100-SXM with
// PyTorch FSDP, exact micro-batch, accumulation and GPUs). The table and its
// provenance are in tests/testdata/calibration/llmfoundry-h100 (SOURCE.md).
// Shared by the accuracy test and the model_accuracy program.
//
// Units: seconds, sequences, tokens; mfu is a fraction (0.4125 = 41.25%).
// Thread-safety: LoadLlmFoundryRuns reads a file; the rest are pure.
#ifndef PACER_TESTS_PLANNER_LLMFOUNDRY_RUNS_H_
#define PACER_TESTS_PLANNER_LLMFOUNDRY_RUNS_H_

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "pacer/planner/cost_model.h"
#include "pacer/planner/gpu_catalog.h"
#include "pacer/planner/inventory.h"

namespace pacer::planner::testing {

struct LlmFoundryRun {
  std::string name;   // "70b-s2048-g512-b4096"
  std::string model;  // "70b": the leave-one-group-out group
  int hidden = 0, heads = 0, layers = 0, ffn = 0, vocab = 0, seq = 0;
  int gpus = 0, micro = 0, grad_accum = 0, gbs = 0, zero = 0;
  bool full_recompute = false;
  double num_params = 0;  // the row's NumParams (embeddings and biases included)
  double mfu = 0;         // published, by llm-foundry's formula (below)
};

inline std::string LlmFoundryRunsPath() {
  return std::string(PACER_SOURCE_DIR) + "/tests/testdata/calibration/llmfoundry-h100/runs.tsv";
}

// Reads runs.tsv (tab-separated, a header row naming the columns). Throws
// std::runtime_error on a missing file or column: test data, not user input.
inline std::vector<LlmFoundryRun> LoadLlmFoundryRuns(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::string line;
  std::getline(in, line);
  std::map<std::string, size_t> column;
  {
    std::stringstream header(line);
    std::string name;
    for (size_t i = 0; std::getline(header, name, '\t'); ++i) column[name] = i;
  }
  auto index = [&](const std::string& name) {
    auto it = column.find(name);
    if (it == column.end()) throw std::runtime_error(path + ": no column " + name);
    return it->second;
  };
  std::vector<LlmFoundryRun> runs;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::vector<std::string> f;
    std::stringstream row(line);
    for (std::string cell; std::getline(row, cell, '\t');) f.push_back(cell);
    auto get = [&](const std::string& name) { return f.at(index(name)); };
    auto num = [&](const std::string& name) { return std::atoi(get(name).c_str()); };
    LlmFoundryRun r;
    r.name = get("name");
    r.model = get("model");
    r.hidden = num("hidden");
    r.heads = num("heads");
    r.layers = num("layers");
    r.ffn = num("ffn");
    r.vocab = num("vocab");
    r.seq = num("seq");
    r.gpus = num("gpus");
    r.micro = num("micro");
    r.grad_accum = num("gradaccum");
    r.gbs = num("gbs");
    r.zero = num("zero");
    r.full_recompute = get("recompute") == "full";
    r.num_params = std::atof(get("num_params").c_str());
    r.mfu = std::atof(get("mfu_pct").c_str()) / 100.0;
    runs.push_back(r);
  }
  return runs;
}

struct LlmFoundrySetup {
  JobSpec job;
  Layout layout;
  NodePool pool;
};

// The TrainJob, layout and pool of one run, mapped as SOURCE.md states: t =
// p = 1, ZeRO 3 (FULL_SHARD) or 2 (SHARD_GRAD_OP), AdamW, bf16, a fused
// (FlashAttention) kernel, 8 GPUs per node with 8 x 400 Gb/s.
inline LlmFoundrySetup SetUpLlmFoundryRun(const LlmFoundryRun& r) {
  LlmFoundrySetup s;
  ModelSpec& m = s.job.model;
  m.layers = r.layers;
  m.hidden_size = r.hidden;
  m.attention_heads = r.heads;
  m.kv_heads = r.heads;
  m.ffn_hidden_size = r.ffn;
  m.ffn_kind = FfnKind::kGelu;
  m.vocab_size = r.vocab;
  m.sequence_length = r.seq;
  m.tied_embeddings = true;  // MPT ties the output projection to the embedding
  s.job.data.samples = 1e6;
  s.job.training.global_batch_size = r.gbs;
  s.job.training.precision = Precision::kBf16;
  s.job.training.optimizer = Optimizer::kAdamW;
  s.job.training.stack.attention = AttentionKernel::kFused;
  s.job.training.stack.tensor_parallel_overlap = false;  // FSDP: no TP at all
  // FSDP's PURE mixed precision (the MPT yamls' fsdp_config): gradients
  // reduced in bf16 (SOURCE.md).
  s.job.training.stack.fp32_gradients = false;
  Layout& l = s.layout;
  l.gpu_type = "H100-SXM";
  l.pool = "h100";
  l.gpus_per_node = r.gpus < 8 ? r.gpus : 8;
  l.nodes = r.gpus / l.gpus_per_node;
  l.data_parallel = r.gpus;
  l.micro_batch_size = r.micro;
  l.gradient_accumulation_steps = r.grad_accum;
  l.zero_stage = r.zero;
  l.recompute = r.full_recompute ? Recompute::kFull : Recompute::kSelective;
  s.pool.name = "h100";
  s.pool.gpu_type = "H100-SXM";
  s.pool.nodes = l.nodes;
  s.pool.gpus_per_node = l.gpus_per_node;
  s.pool.free_gpus = r.gpus;
  s.pool.network_gbps_per_node = 8 * 400;
  s.pool.nvlink_gbps = 900;
  return s;
}

// llm-foundry's MFU (collect_results.py): (6 N + 12 L h s) tokens/s over
// GPUs x 989.5 TFLOP/s, N the row's NumParams, from a step time in seconds.
inline double LlmFoundryMfu(const LlmFoundryRun& r, double step_seconds) {
  const double tokens_per_second = static_cast<double>(r.gbs) * r.seq / step_seconds;
  const double flops_per_token = 6.0 * r.num_params + 12.0 * r.layers * r.hidden * r.seq;
  return flops_per_token * tokens_per_second / (r.gpus * 989.5e12);
}

}  // namespace pacer::planner::testing

#endif  // PACER_TESTS_PLANNER_LLMFOUNDRY_RUNS_H_
