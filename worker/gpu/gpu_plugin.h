// The GPU backend as a plugin: pacer-worker loads libpacer_worker_gpu.so with
// dlopen only in a rank that runs on a GPU, instead of linking CUDA at start.
//
// Why: libraries linked at start place their thread-local storage in every
// thread's stack. cuBLASLt's is ~94 KiB, more than the small stacks the
// metrics server (civetweb, under prometheus-cpp) gives its threads, so with
// cuBLAS linked at start the /metrics server cannot start a thread. A
// library loaded with dlopen gets its TLS allocated on demand instead. It
// also lets one pacer-worker binary run on nodes without CUDA libraries.
//
// Thread-safety: the table is immutable; its functions follow gpu_backend.h
// and calibrate_gpu.h.
#ifndef PACER_WORKER_GPU_GPU_PLUGIN_H_
#define PACER_WORKER_GPU_GPU_PLUGIN_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "core/step_backend.h"
#include "core/tcp_store.h"
#include "core/worker_config.h"
#include "gpu/calibrate_gpu.h"
#include "pacer/status.h"

namespace pacer::worker {

// The plugin interface's version: the GpuPlugin table below and what its
// functions mean. Bump it when either changes; layout changes of the types
// the calls pass are caught by kGpuPluginLayout without a bump.
// 2: the table carries `layout`.
inline constexpr int kGpuPluginVersion = 2;
inline constexpr char kGpuPluginSymbol[] = "PacerGpuPlugin";
inline constexpr char kGpuPluginFile[] = "libpacer_worker_gpu.so";

namespace gpu_plugin_internal {

// FNV-1a over each value's 8 bytes.
constexpr uint64_t FoldLayout(std::initializer_list<std::size_t> values) {
  uint64_t hash = 14695981039346656037ull;
  for (std::size_t value : values) {
    for (int byte = 0; byte < 8; ++byte) {
      hash ^= (static_cast<uint64_t>(value) >> (8 * byte)) & 0xffu;
      hash *= 1099511628211ull;
    }
  }
  return hash;
}

}  // namespace gpu_plugin_internal

// The layout of what crosses between pacer-worker and the plugin: the
// plugin's backend reads the executable's WorkerConfig (and the ModelSpec
// and GpuSwitches inside it), BackendContext, StepSchedule and
// TcpStoreClient objects, and returns StepTiming, Status and calibration
// reports, each compiled on its own side. A plugin from another build whose
// WorkerConfig gained, lost or moved a field would read the plan at the
// wrong offsets, silently; kGpuPluginVersion stayed 1 through several such
// changes. Both sides compile this value from their own headers and
// LoadGpuPlugin refuses a plugin whose value differs. Every field of
// WorkerConfig, ModelSpec, GpuSwitches and BackendContext is listed by
// offset (GpuPluginTest.EveryFieldOfTheSharedStructsIsInTheLayout checks
// that the list names them all: add a new field here too); the other types
// by size. What it cannot see: a field that changes meaning or an enum that
// gains a value without a change of layout (bump kGpuPluginVersion).
inline constexpr uint64_t kGpuPluginLayout = gpu_plugin_internal::FoldLayout({
    // WorkerConfig.
    sizeof(WorkerConfig),
    alignof(WorkerConfig),
    offsetof(WorkerConfig, rank),
    offsetof(WorkerConfig, world_size),
    offsetof(WorkerConfig, local_rank),
    offsetof(WorkerConfig, local_world_size),
    offsetof(WorkerConfig, node_rank),
    offsetof(WorkerConfig, nnodes),
    offsetof(WorkerConfig, master_addr),
    offsetof(WorkerConfig, master_port),
    offsetof(WorkerConfig, tensor_parallel),
    offsetof(WorkerConfig, pipeline_parallel),
    offsetof(WorkerConfig, data_parallel),
    offsetof(WorkerConfig, virtual_stages),
    offsetof(WorkerConfig, zero_stage),
    offsetof(WorkerConfig, micro_batch_size),
    offsetof(WorkerConfig, gradient_accumulation_steps),
    offsetof(WorkerConfig, global_batch_size),
    offsetof(WorkerConfig, total_steps),
    offsetof(WorkerConfig, precision),
    offsetof(WorkerConfig, optimizer),
    offsetof(WorkerConfig, recompute),
    offsetof(WorkerConfig, attention),
    offsetof(WorkerConfig, model),
    offsetof(WorkerConfig, checkpoint_dir),
    offsetof(WorkerConfig, checkpoint_interval_steps),
    offsetof(WorkerConfig, metrics_port),
    offsetof(WorkerConfig, job_name),
    offsetof(WorkerConfig, job_namespace),
    offsetof(WorkerConfig, gpu_type),
    offsetof(WorkerConfig, attempt),
    offsetof(WorkerConfig, backend),
    offsetof(WorkerConfig, scale),
    offsetof(WorkerConfig, timeout_seconds),
    offsetof(WorkerConfig, stop_grace_seconds),
    offsetof(WorkerConfig, parent_pid),
    offsetof(WorkerConfig, predicted_step_seconds),
    offsetof(WorkerConfig, predicted_memory_bytes),
    offsetof(WorkerConfig, gpu),
    // planner::ModelSpec (WorkerConfig::model).
    sizeof(planner::ModelSpec),
    offsetof(planner::ModelSpec, parameters),
    offsetof(planner::ModelSpec, layers),
    offsetof(planner::ModelSpec, hidden_size),
    offsetof(planner::ModelSpec, attention_heads),
    offsetof(planner::ModelSpec, kv_heads),
    offsetof(planner::ModelSpec, ffn_hidden_size),
    offsetof(planner::ModelSpec, ffn_kind),
    offsetof(planner::ModelSpec, vocab_size),
    offsetof(planner::ModelSpec, sequence_length),
    offsetof(planner::ModelSpec, tied_embeddings),
    offsetof(planner::ModelSpec, dropout),
    offsetof(planner::ModelSpec, causal_attention),
    offsetof(planner::ModelSpec, architecture_inferred),
    // GpuSwitches (WorkerConfig::gpu).
    sizeof(GpuSwitches),
    offsetof(GpuSwitches, bf16_activations),
    offsetof(GpuSwitches, op_times),
    offsetof(GpuSwitches, cudnn_attention),
    offsetof(GpuSwitches, causal_tiles),
    // BackendContext.
    sizeof(BackendContext),
    offsetof(BackendContext, config),
    offsetof(BackendContext, schedule),
    offsetof(BackendContext, global_rank),
    offsetof(BackendContext, local_rank),
    offsetof(BackendContext, store),
    offsetof(BackendContext, timeout),
    // The rest by size.
    sizeof(StepSchedule),
    sizeof(LayerWork),
    sizeof(PipelineAction),
    sizeof(Collective),
    sizeof(planner::GemmShape),
    sizeof(StepTiming),
    sizeof(TcpStoreClient),
    sizeof(Status),
    sizeof(std::string),
    sizeof(GpuCalibrationOptions),
    sizeof(GpuCalibrationReport),
    sizeof(GemmMeasurement),
    sizeof(AllReduceMeasurement),
});

// `version` first, at the same offset in every version of the table, so
// that any two builds can tell whether they can read the rest.
struct GpuPlugin {
  int version = kGpuPluginVersion;
  uint64_t layout = kGpuPluginLayout;  // the plugin's kGpuPluginLayout
  std::unique_ptr<StepBackend> (*make_backend)() = nullptr;
  StatusOr<GpuCalibrationReport> (*calibrate)(const GpuCalibrationOptions&) = nullptr;
};

}  // namespace pacer::worker

// Exported by the plugin (C linkage so dlsym finds it by name).
extern "C" const pacer::worker::GpuPlugin* PacerGpuPlugin();

#endif  // PACER_WORKER_GPU_GPU_PLUGIN_H_
