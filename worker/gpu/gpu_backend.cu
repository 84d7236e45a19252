#include "gpu/gpu_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/device_layout.h"
#include "gpu/cuda_check.h"
#include "gpu/device_info.h"
#include "gpu/gemm_runner.h"
#include "gpu/gpu_buffers.h"
#include "gpu/gpu_kernels.h"
#include "gpu/nccl_comms.h"

namespace pacer::worker {
namespace {

using planner::Recompute;

uint64_t MixSeed(uint64_t a, uint64_t b) {
  uint64_t x = a ^ (b + 0x9E3779B97F4A7C15ull + (a << 6) + (a >> 2));
  x = (x ^ (x >> 31)) * 0x7FB5D329728EA185ull;
  return x ^ (x >> 27);
}

// CUDA events recorded during one step, reused across steps (created on
// first use, so only the first step pays for cudaEventCreate).
class EventTimer {
 public:
  EventTimer() = default;
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  ~EventTimer() {
    for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
  }
  void Reset() { next_ = 0; }
  StatusOr<int> Record(cudaStream_t stream) {
    if (next_ == events_.size()) {
      cudaEvent_t e = nullptr;
      CUDACHECK(cudaEventCreate(&e));
      events_.push_back(e);
    }
    CUDACHECK(cudaEventRecord(events_[next_], stream));
    return static_cast<int>(next_++);
  }
  StatusOr<double> Seconds(int from, int to) const {
    float ms = 0;
    CUDACHECK(cudaEventElapsedTime(&ms, events_[static_cast<size_t>(from)],
                                   events_[static_cast<size_t>(to)]));
    return static_cast<double>(ms) / 1e3;
  }

 private:
  std::vector<cudaEvent_t> events_;
  size_t next_ = 0;
};

// Pointers to what one layer's forward produces (device_layout.h's
// LayerStashLayout, in that order).
struct LayerTensors {
  void* input = nullptr;
  void* attention_norm = nullptr;
  void* qkv = nullptr;
  void* probabilities = nullptr;
  void* context = nullptr;
  void* attention_residual = nullptr;
  void* mlp_norm = nullptr;
  void* mlp_hidden = nullptr;
  void* mlp_activation = nullptr;
};

// A span of the flat parameter vector whose gradient is final once it has
// been through `uses` backward passes per micro-batch.
struct GradientRegion {
  int64_t offset = 0;
  int64_t elements = 0;
  int64_t uses_per_micro_batch = 1;
  int64_t remaining = 0;
};

class GpuBackend final : public StepBackend {
 public:
  GpuBackend() = default;
  ~GpuBackend() override {
    if (compute_ != nullptr) (void)cudaStreamSynchronize(compute_);
    if (comm_ != nullptr) (void)cudaStreamSynchronize(comm_);
    for (cudaEvent_t e : {compute_ready_, comm_done_, staging_free_}) {
      if (e != nullptr) (void)cudaEventDestroy(e);
    }
    if (compute_ != nullptr) (void)cudaStreamDestroy(compute_);
    if (comm_ != nullptr) (void)cudaStreamDestroy(comm_);
  }

  const char* name() const override { return "gpu"; }

  Status Initialize(const BackendContext& context, uint64_t seed) override {
    if (initialized_) return FailedPreconditionError("GPU backend: initialized twice");
    Status s = InitializeImpl(context, seed);
    if (!s.ok()) comms_.AbortAll();
    initialized_ = s.ok();
    return s;
  }

  StatusOr<StepTiming> RunStep(int64_t step) override {
    if (!initialized_) return FailedPreconditionError("GPU backend: RunStep before Initialize");
    StatusOr<StepTiming> timing = RunStepImpl(step);
    // Whatever failed, peers must not wait on this rank forever.
    if (!timing.ok()) comms_.AbortAll();
    UpdateMeasuredPeak();
    return timing;
  }

  double PeakMemoryBytes() const override {
    return std::max(static_cast<double>(allocator_.peak_bytes()), measured_peak_bytes_);
  }

  StatusOr<NamedBuffers> SaveBuffers() override {
    if (!initialized_) return FailedPreconditionError("GPU backend: not initialized");
    RETURN_IF_ERROR(comms_.WaitForStream(compute_, Now() + context_.timeout, "save"));
    RETURN_IF_ERROR(comms_.WaitForStream(comm_, Now() + context_.timeout, "save"));
    NamedBuffers out;
    for (auto [name, pointer, bytes] : CheckpointedBuffers()) {
      std::vector<std::byte> host(bytes);
      CUDACHECK(cudaMemcpyAsync(host.data(), pointer, bytes, cudaMemcpyDeviceToHost, compute_));
      RETURN_IF_ERROR(comms_.WaitForStream(compute_, Now() + context_.timeout, "save"));
      out.emplace_back(name, std::move(host));
    }
    return out;
  }

  Status LoadBuffers(const NamedBuffers& buffers) override {
    if (!initialized_) return FailedPreconditionError("GPU backend: not initialized");
    for (const auto& entry : CheckpointedBuffers()) {
      const std::string& name = std::get<0>(entry);
      void* pointer = std::get<1>(entry);
      const size_t bytes = std::get<2>(entry);
      auto it = std::find_if(buffers.begin(), buffers.end(),
                             [&name](const auto& b) { return b.first == name; });
      if (it == buffers.end()) return NotFoundError("checkpoint has no buffer " + name);
      if (it->second.size() != bytes) {
        return InvalidArgumentError("checkpoint buffer " + name + " has " +
                                    std::to_string(it->second.size()) + " bytes, this plan needs " +
                                    std::to_string(bytes));
      }
      // On the compute stream, after the initialisation kernels queued there
      // (a plain cudaMemcpy runs on the legacy stream, which a non-blocking
      // compute stream does not wait for).
      CUDACHECK(cudaMemcpyAsync(pointer, it->second.data(), bytes, cudaMemcpyHostToDevice,
                                compute_));
    }
    // The host buffers must outlive the copies.
    RETURN_IF_ERROR(comms_.WaitForStream(compute_, Now() + context_.timeout, "restore"));
    // ZeRO 3's staged copy is refreshed by the next forward's gather.
    return Status::Ok();
  }

 private:
  static Deadline Now() { return std::chrono::steady_clock::now(); }

  // --- setup ---------------------------------------------------------------

  Status InitializeImpl(const BackendContext& context, uint64_t seed) {
    if (context.config == nullptr || context.schedule == nullptr) {
      return InvalidArgumentError("GPU backend: the context needs a config and a schedule");
    }
    context_ = context;
    config_ = context.config;
    schedule_ = context.schedule;
    seed_ = seed;
    const WorkerConfig& c = *config_;
    const StepSchedule& s = *schedule_;
    if (c.pipeline_parallel == 1 && c.virtual_stages > 1) {
      return InvalidArgumentError("GPU backend: virtual stages need pipeline parallelism");
    }
    ASSIGN_OR_RETURN(std::vector<DeviceInfo> devices, QueryDevices());
    if (devices.empty()) return FailedPreconditionError("GPU backend: no CUDA device visible");
    // One GPU per local rank: sharing a GPU between ranks would break the
    // plan's memory and time, so fail before touching a device.
    if (static_cast<int>(devices.size()) < c.local_world_size) {
      return InvalidArgumentError(
          "GPU backend: " + std::to_string(c.local_world_size) + " local ranks but only " +
          std::to_string(devices.size()) +
          " CUDA devices visible; set the ranks per node (LOCAL_WORLD_SIZE / the pod's GPU "
          "request) to at most the GPUs, or check CUDA_VISIBLE_DEVICES");
    }
    CUDACHECK(cudaSetDevice(context.local_rank));
    ASSIGN_OR_RETURN(plan_, PlanDeviceMemory(c, s));
    dims_ = plan_.dims;
    dtype_ = StorageTypeFor(c.precision);
    e_ = DTypeBytes(dtype_);
    if (e_ != plan_.element_bytes) return InternalError("element size disagrees with the plan");
    const ParameterLayout& p = plan_.parameters;
    d_ = c.data_parallel;
    d_rank_ = s.coordinates.data_rank;
    t_rank_ = s.coordinates.tensor_rank;
    sharded_ = d_ > 1 && c.zero_stage >= 1;
    staged_grads_ = d_ > 1 && c.zero_stage >= 2;
    zero3_ = d_ > 1 && c.zero_stage >= 3;

    CUDACHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
    CUDACHECK(cudaStreamCreateWithFlags(&comm_, cudaStreamNonBlocking));
    for (cudaEvent_t* e : {&compute_ready_, &comm_done_, &staging_free_}) {
      CUDACHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
    }

    // Allocations, as device_layout.h plans them.
    const int64_t n = p.padded_elements;
    const int64_t weights = zero3_ ? p.shard_elements : n;
    const int64_t grads = staged_grads_ ? p.shard_elements : n;
    const int64_t opt_count = sharded_ ? p.shard_elements : n;
    opt_count_ = opt_count;
    ASSIGN_OR_RETURN(weights_, Alloc("weights", BufferClass::kWeights, weights * e_));
    ASSIGN_OR_RETURN(grads_, Alloc("gradients", BufferClass::kGradients, grads * e_));
    weights_bytes_ = static_cast<size_t>(weights * e_);
    grads_bytes_ = static_cast<size_t>(grads * e_);
    opt_bytes_ = static_cast<size_t>(opt_count) * 4 *
                 static_cast<size_t>(plan_.optimizer_floats_per_parameter);
    if (opt_bytes_ > 0) {
      ASSIGN_OR_RETURN(void* o, allocator_.Allocate("optimizer", BufferClass::kOptimizer,
                                                    opt_bytes_));
      optimizer_ = static_cast<float*>(o);
    }
    const int64_t stashed_layers =
        static_cast<int64_t>(plan_.slots_in_flight) * p.layers_per_chunk;
    ASSIGN_OR_RETURN(stash_, Alloc("activations", BufferClass::kActivations,
                                   plan_.stash.total_elements() * stashed_layers * e_));
    if (s.holds_logits) {
      const int64_t logits = dims_.tokens * dims_.vocab;
      ASSIGN_OR_RETURN(logits_, Alloc("logits", BufferClass::kLogits, logits * e_));
      ASSIGN_OR_RETURN(void* f, Alloc("logits_fp32", BufferClass::kLogits, logits * 4));
      logits_fp32_ = static_cast<float*>(f);
    }
    for (const auto& [name, elements] : plan_.workspace_elements) {
      const BufferClass cls =
          name == "recompute_stash" ? BufferClass::kActivations : BufferClass::kWorkspace;
      ASSIGN_OR_RETURN(void* w, Alloc(name, cls, elements * e_));
      workspace_[name] = w;
    }
    ASSIGN_OR_RETURN(void* cublas_workspace,
                     allocator_.Allocate("cublas_workspace", BufferClass::kWorkspace,
                                         static_cast<size_t>(plan_.cublas_workspace_bytes)));
    RETURN_IF_ERROR(gemm_.Initialize(c.precision, compute_, cublas_workspace,
                                     static_cast<size_t>(plan_.cublas_workspace_bytes)));
    slots_free_.clear();
    for (int i = plan_.slots_in_flight - 1; i >= 0; --i) slots_free_.push_back(i);

    RETURN_IF_ERROR(InitializeWeights());
    SetUpGradientRegions();
    RETURN_IF_ERROR(comms_.Connect(c, s.coordinates, context.store, context.timeout));
    RETURN_IF_ERROR(comms_.WaitForStream(compute_, Now() + context.timeout, "initialize"));
    UpdateMeasuredPeak();
    return Status::Ok();
  }

  StatusOr<void*> Alloc(const std::string& name, BufferClass c, int64_t bytes) {
    return allocator_.Allocate(name, c, static_cast<size_t>(std::max<int64_t>(bytes, 0)));
  }

  void* Elem(void* base, int64_t elements) const {
    return static_cast<char*>(base) + elements * e_;
  }
  void* Ws(const char* name) const {
    auto it = workspace_.find(name);
    return it == workspace_.end() ? nullptr : it->second;
  }
  // Where the compute reads weights and writes gradients: the staging
  // buffers under ZeRO 3 / ZeRO 2 and 3, else the buffers themselves.
  void* W(int64_t offset) const { return Elem(zero3_ ? Ws("weight_staging") : weights_, offset); }
  void* G(int64_t offset) const {
    return Elem(staged_grads_ ? Ws("gradient_staging") : grads_, offset);
  }

  Status InitializeWeights() {
    const ParameterLayout& p = plan_.parameters;
    const StepSchedule& s = *schedule_;
    // Replicas along the data-parallel axis hold the same values; other
    // stages and tensor ranks hold different ones.
    const uint64_t seed = MixSeed(MixSeed(seed_, static_cast<uint64_t>(s.coordinates.pipeline_rank)),
                                  static_cast<uint64_t>(t_rank_));
    void* full = zero3_ ? Ws("weight_staging") : weights_;
    RETURN_IF_ERROR(FillUniform(full, dtype_, p.padded_elements, seed, 0, 0.02f, compute_));
    for (int chunk = 0; chunk < s.chunks; ++chunk) {
      for (int l = 0; l < s.layers_per_chunk; ++l) {
        RETURN_IF_ERROR(FillConstant(Elem(full, p.LayerOffset(chunk, l) + p.layer.norm_offset()),
                                     dtype_, p.layer.norm_elements, 1.0f, compute_));
      }
    }
    if (zero3_) {
      for (int b = 0; b < kGradientBuckets; ++b) {
        CUDACHECK(cudaMemcpyAsync(Elem(weights_, b * p.piece_elements),
                                  Elem(full, b * p.bucket_elements + d_rank_ * p.piece_elements),
                                  static_cast<size_t>(p.piece_elements * e_),
                                  cudaMemcpyDeviceToDevice, compute_));
      }
    }
    if (optimizer_ != nullptr) {
      CUDACHECK(cudaMemsetAsync(optimizer_, 0, opt_bytes_, compute_));
      if (HasMaster()) {
        for (int b = 0; b < (sharded_ ? kGradientBuckets : 1); ++b) {
          const int64_t count = sharded_ ? p.piece_elements : p.padded_elements;
          RETURN_IF_ERROR(ConvertToFloat(ShardWeights(b), dtype_, optimizer_ + b * p.piece_elements,
                                         count, compute_));
        }
      }
    }
    return Status::Ok();
  }

  bool HasMaster() const { return dtype_ != DType::kFp32; }

  // This rank's weights for bucket `b` (the whole vector when not sharded).
  void* ShardWeights(int b) const {
    const ParameterLayout& p = plan_.parameters;
    if (!sharded_) return weights_;
    if (zero3_) return Elem(weights_, b * p.piece_elements);
    return Elem(weights_, b * p.bucket_elements + d_rank_ * p.piece_elements);
  }

  std::vector<std::tuple<std::string, void*, size_t>> CheckpointedBuffers() const {
    std::vector<std::tuple<std::string, void*, size_t>> out;
    out.emplace_back("weights", weights_, weights_bytes_);
    if (optimizer_ != nullptr) out.emplace_back("optimizer", optimizer_, opt_bytes_);
    return out;
  }

  void SetUpGradientRegions() {
    const ParameterLayout& p = plan_.parameters;
    regions_.clear();
    if (p.input_table_offset >= 0) {
      const int64_t uses = p.output_table_offset == p.input_table_offset ? 2 : 1;
      regions_.push_back({p.input_table_offset, p.table_elements, uses, 0});
      input_region_ = 0;
    }
    layer_region_base_ = static_cast<int>(regions_.size());
    for (int i = 0; i < p.layers; ++i) {
      regions_.push_back({p.layers_offset + i * p.layer.total_elements(), p.layer.total_elements(),
                          1, 0});
    }
    output_region_ = -1;
    if (p.output_table_offset >= 0) {
      if (p.output_table_offset == p.input_table_offset) {
        output_region_ = input_region_;
      } else {
        output_region_ = static_cast<int>(regions_.size());
        regions_.push_back({p.output_table_offset, p.table_elements, 1, 0});
      }
    }
  }

  void UpdateMeasuredPeak() {
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
      measured_peak_bytes_ =
          std::max(measured_peak_bytes_, static_cast<double>(total_bytes - free_bytes));
    } else {
      (void)cudaGetLastError();
    }
  }

  // --- collectives with timing ----------------------------------------------

  Status Inline(int start) {
    ASSIGN_OR_RETURN(int end, timer_.Record(compute_));
    inline_spans_.emplace_back(start, end);
    return Status::Ok();
  }

  // Tensor-parallel all-gather of a sequence shard (count elements per rank).
  Status TensorAllGather(const void* send, void* recv, int64_t count) {
    ASSIGN_OR_RETURN(int start, timer_.Record(compute_));
    RETURN_IF_ERROR(comms_.AllGather(Group::kTensor, send, recv, count, dtype_, compute_, deadline_));
    const int t = config_->tensor_parallel;
    bus_bytes_ += static_cast<double>(t - 1) * static_cast<double>(count * e_);
    return Inline(start);
  }
  Status TensorReduceScatter(const void* send, void* recv, int64_t count) {
    ASSIGN_OR_RETURN(int start, timer_.Record(compute_));
    RETURN_IF_ERROR(
        comms_.ReduceScatter(Group::kTensor, send, recv, count, dtype_, compute_, deadline_));
    const int t = config_->tensor_parallel;
    bus_bytes_ += static_cast<double>(t - 1) * static_cast<double>(count * e_);
    return Inline(start);
  }

  // The compute stream waits for `event` (recorded on the collective
  // stream); the stall is exposed communication.
  Status StallOn(cudaEvent_t event) {
    ASSIGN_OR_RETURN(int start, timer_.Record(compute_));
    CUDACHECK(cudaStreamWaitEvent(compute_, event, 0));
    ASSIGN_OR_RETURN(int end, timer_.Record(compute_));
    stall_spans_.emplace_back(start, end);
    return Status::Ok();
  }
  // The collective stream waits until the compute stream reaches this point.
  Status CommAfterCompute() {
    CUDACHECK(cudaEventRecord(compute_ready_, compute_));
    CUDACHECK(cudaStreamWaitEvent(comm_, compute_ready_, 0));
    return Status::Ok();
  }
  Status CommSpan(int start) {
    ASSIGN_OR_RETURN(int end, timer_.Record(comm_));
    comm_spans_.emplace_back(start, end);
    return Status::Ok();
  }

  // --- data parallelism ----------------------------------------------------

  Status MarkRegionDone(int region) {
    if (region < 0) return Status::Ok();
    GradientRegion& r = regions_[static_cast<size_t>(region)];
    if (--r.remaining == 0 && d_ > 1 && config_->zero_stage <= 1) return LaunchReadyBuckets();
    return Status::Ok();
  }

  Status LaunchReadyBuckets() {
    const ParameterLayout& p = plan_.parameters;
    for (int b = 0; b < kGradientBuckets; ++b) {
      if (bucket_launched_[static_cast<size_t>(b)]) continue;
      const int64_t lo = b * p.bucket_elements, hi = lo + p.bucket_elements;
      bool ready = true;
      for (const GradientRegion& r : regions_) {
        if (r.offset < hi && r.offset + r.elements > lo && r.remaining > 0) ready = false;
      }
      if (!ready) continue;
      bucket_launched_[static_cast<size_t>(b)] = true;
      RETURN_IF_ERROR(CommAfterCompute());
      ASSIGN_OR_RETURN(int start, timer_.Record(comm_));
      const double bytes = static_cast<double>(p.bucket_elements * e_);
      if (config_->zero_stage == 0) {
        RETURN_IF_ERROR(comms_.AllReduce(Group::kData, Elem(grads_, lo), p.bucket_elements, dtype_,
                                         comm_, deadline_));
        bus_bytes_ += 2.0 * (d_ - 1) / d_ * bytes;
      } else {
        RETURN_IF_ERROR(comms_.ReduceScatter(Group::kData, Elem(grads_, lo),
                                             Elem(grads_, lo + d_rank_ * p.piece_elements),
                                             p.piece_elements, dtype_, comm_, deadline_));
        bus_bytes_ += static_cast<double>(d_ - 1) / d_ * bytes;
      }
      RETURN_IF_ERROR(CommSpan(start));
    }
    return Status::Ok();
  }

  // ZeRO 2 and 3: after each micro-batch, reduce-scatter the staged
  // gradients into this rank's shard; the staging is cleared before the next
  // backward writes it (WaitForStagingFree).
  Status ReduceScatterMicroBatch() {
    const ParameterLayout& p = plan_.parameters;
    void* staging = Ws("gradient_staging");
    RETURN_IF_ERROR(CommAfterCompute());
    for (int b = 0; b < kGradientBuckets; ++b) {
      ASSIGN_OR_RETURN(int start, timer_.Record(comm_));
      const int64_t lo = b * p.bucket_elements;
      void* mine = Elem(staging, lo + d_rank_ * p.piece_elements);
      RETURN_IF_ERROR(comms_.ReduceScatter(Group::kData, Elem(staging, lo), mine, p.piece_elements,
                                           dtype_, comm_, deadline_));
      bus_bytes_ += static_cast<double>(d_ - 1) / d_ * static_cast<double>(p.bucket_elements * e_);
      RETURN_IF_ERROR(CommSpan(start));
      void* shard = Elem(grads_, b * p.piece_elements);
      RETURN_IF_ERROR(Add(shard, mine, shard, p.piece_elements, dtype_, comm_));
    }
    CUDACHECK(cudaEventRecord(staging_free_, comm_));
    staging_pending_ = true;
    return Status::Ok();
  }

  Status WaitForStagingFree() {
    if (!staging_pending_) return Status::Ok();
    RETURN_IF_ERROR(StallOn(staging_free_));
    CUDACHECK(cudaMemsetAsync(Ws("gradient_staging"), 0,
                              static_cast<size_t>(plan_.parameters.padded_elements * e_), compute_));
    staging_pending_ = false;
    return Status::Ok();
  }

  // ZeRO 3: gather the whole stage's weights from the shards (once before
  // each micro-batch's forward and once before its backward).
  Status GatherWeights() {
    const ParameterLayout& p = plan_.parameters;
    RETURN_IF_ERROR(CommAfterCompute());
    for (int b = 0; b < kGradientBuckets; ++b) {
      ASSIGN_OR_RETURN(int start, timer_.Record(comm_));
      RETURN_IF_ERROR(comms_.AllGather(Group::kData, Elem(weights_, b * p.piece_elements),
                                       Elem(Ws("weight_staging"), b * p.bucket_elements),
                                       p.piece_elements, dtype_, comm_, deadline_));
      bus_bytes_ += static_cast<double>(d_ - 1) / d_ * static_cast<double>(p.bucket_elements * e_);
      RETURN_IF_ERROR(CommSpan(start));
    }
    CUDACHECK(cudaEventRecord(comm_done_, comm_));
    return StallOn(comm_done_);
  }

  // ZeRO 1 and 2: gather the updated weights after the optimizer, in place.
  Status GatherUpdatedWeights() {
    const ParameterLayout& p = plan_.parameters;
    RETURN_IF_ERROR(CommAfterCompute());
    for (int b = 0; b < kGradientBuckets; ++b) {
      ASSIGN_OR_RETURN(int start, timer_.Record(comm_));
      const int64_t lo = b * p.bucket_elements;
      RETURN_IF_ERROR(comms_.AllGather(Group::kData, Elem(weights_, lo + d_rank_ * p.piece_elements),
                                       Elem(weights_, lo), p.piece_elements, dtype_, comm_,
                                       deadline_));
      bus_bytes_ += static_cast<double>(d_ - 1) / d_ * static_cast<double>(p.bucket_elements * e_);
      RETURN_IF_ERROR(CommSpan(start));
    }
    CUDACHECK(cudaEventRecord(comm_done_, comm_));
    return StallOn(comm_done_);
  }

  Status OptimizerStep(int64_t step) {
    const WorkerConfig& c = *config_;
    const ParameterLayout& p = plan_.parameters;
    OptimizerHyper h;
    switch (c.optimizer) {
      case planner::Optimizer::kAdamW: h.kind = OptimizerKind::kAdamW; break;
      case planner::Optimizer::kAdam:
        h.kind = OptimizerKind::kAdamW;
        h.weight_decay = 0;
        break;
      case planner::Optimizer::kSgdMomentum: h.kind = OptimizerKind::kSgdMomentum; break;
      case planner::Optimizer::kSgd:
      case planner::Optimizer::kAdafactor: h.kind = OptimizerKind::kSgd; break;  // no moments kept
    }
    h.step = step + 1;
    h.grad_scale = 1.0f / static_cast<float>(static_cast<double>(c.gradient_accumulation_steps) * d_);
    // fp32 slices: [master (mixed precision)] [moment 1] [moment 2].
    float* next = optimizer_;
    float* master = nullptr;
    if (HasMaster()) {
      master = next;
      next += opt_count_;
    }
    float* m1 = h.kind != OptimizerKind::kSgd ? next : nullptr;
    float* m2 = h.kind == OptimizerKind::kAdamW && m1 != nullptr ? m1 + opt_count_ : nullptr;
    const int parts = sharded_ ? kGradientBuckets : 1;
    for (int b = 0; b < parts; ++b) {
      const int64_t count = sharded_ ? p.piece_elements : p.padded_elements;
      const int64_t shard_offset = sharded_ ? b * p.piece_elements : 0;
      const void* grads =
          !sharded_ ? grads_
          : staged_grads_ ? Elem(grads_, shard_offset)
                          : Elem(grads_, b * p.bucket_elements + d_rank_ * p.piece_elements);
      RETURN_IF_ERROR(OptimizerUpdate(h, grads, ShardWeights(b),
                                      master ? master + shard_offset : nullptr,
                                      m1 ? m1 + shard_offset : nullptr,
                                      m2 ? m2 + shard_offset : nullptr, count, dtype_, compute_));
    }
    return Status::Ok();
  }

  // --- one layer -------------------------------------------------------------

  LayerTensors Carve(void* base, bool with_probabilities) const {
    const LayerDims& d = dims_;
    LayerTensors L;
    char* at = static_cast<char*>(base);
    auto take = [&](int64_t elements) {
      void* p = at;
      at += elements * e_;
      return p;
    };
    L.input = take(d.local_tokens * d.hidden);
    L.attention_norm = take(d.local_tokens * d.hidden);
    L.qkv = take(d.tokens * d.qkv_width);
    if (with_probabilities) L.probabilities = take(d.batch * d.heads * d.sequence * d.sequence);
    L.context = take(d.tokens * d.heads * d.head_dim);
    L.attention_residual = take(d.local_tokens * d.hidden);
    L.mlp_norm = take(d.local_tokens * d.hidden);
    L.mlp_hidden = take(d.tokens * d.mlp_in_width);
    L.mlp_activation = take(d.tokens * d.ffn);
    return L;
  }

  void* SlotLayer(int slot, int layer) const {
    return Elem(stash_, (static_cast<int64_t>(slot) * plan_.parameters.layers_per_chunk + layer) *
                            plan_.stash.total_elements());
  }

  LayerTensors TensorsFor(int slot, int layer) const {
    if (plan_.stash.keeps_everything) {
      LayerTensors L = Carve(SlotLayer(slot, layer), plan_.stash.keeps_probabilities);
      if (!plan_.stash.keeps_probabilities) L.probabilities = Ws("probabilities");
      return L;
    }
    // Full recomputation: only the input is stashed; the layer re-runs into
    // one layer's worth of working activations.
    LayerTensors L = Carve(Ws("recompute_stash"), true);
    L.input = SlotLayer(slot, layer);
    return L;
  }

  struct LayerWeights {
    void *qkv, *projection, *mlp_in, *mlp_out, *norm1, *norm2;
  };
  LayerWeights WeightsOf(int64_t offset, bool gradients) const {
    const LayerParameterLayout& l = plan_.parameters.layer;
    auto at = [&](int64_t o) { return gradients ? G(offset + o) : W(offset + o); };
    return {at(l.qkv_offset()),    at(l.projection_offset()), at(l.mlp_in_offset()),
            at(l.mlp_out_offset()), at(l.norm_offset()),      at(l.norm_offset() + dims_.hidden)};
  }

  // One batched GEMM over (sample, head) with operands described by strides.
  Status AttentionGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                       BatchedOperand a, int64_t lda, BatchedOperand b, int64_t ldb,
                       BatchedOperand c, int64_t ldc) {
    const int64_t items = dims_.batch * dims_.heads;
    auto** pointers = static_cast<const void**>(Ws("attention_pointers"));
    RETURN_IF_ERROR(FillBatchPointers(pointers, a, b, c, dims_.batch, dims_.heads, compute_));
    return gemm_.GemmBatched(ta, tb, m, n, k, alpha, pointers, lda, pointers + items, ldb, 0.0f,
                             const_cast<void* const*>(pointers + 2 * items), ldc, items);
  }

  // Operand descriptions for the attention tensors.
  BatchedOperand Qkv(const void* qkv, int64_t head_offset, int64_t divisor) const {
    const LayerDims& d = dims_;
    return {static_cast<const char*>(qkv) + head_offset * d.head_dim * e_,
            d.sequence * d.qkv_width * e_, d.head_dim * e_, divisor};
  }
  BatchedOperand Scores(const void* p) const {
    const LayerDims& d = dims_;
    return {p, d.heads * d.sequence * d.sequence * e_, d.sequence * d.sequence * e_, 1};
  }
  BatchedOperand Context(const void* p) const {
    const LayerDims& d = dims_;
    return {p, d.sequence * d.heads * d.head_dim * e_, d.head_dim * e_, 1};
  }
  int64_t KvGroupSize() const { return dims_.heads / dims_.kv_heads; }
  float AttentionScale() const { return 1.0f / std::sqrt(static_cast<float>(dims_.head_dim)); }

  Status AttentionScores(const LayerTensors& L) {
    const LayerDims& d = dims_;
    RETURN_IF_ERROR(AttentionGemm(false, true, d.sequence, d.sequence, d.head_dim,
                                  AttentionScale(), Qkv(L.qkv, 0, 1), d.qkv_width,
                                  Qkv(L.qkv, d.heads, KvGroupSize()), d.qkv_width,
                                  Scores(L.probabilities), d.sequence));
    return CausalSoftmax(L.probabilities, d.batch * d.heads * d.sequence, d.sequence, dtype_,
                         compute_);
  }
  Status AttentionContext(const LayerTensors& L) {
    const LayerDims& d = dims_;
    return AttentionGemm(false, false, d.sequence, d.head_dim, d.sequence, 1.0f,
                         Scores(L.probabilities), d.sequence,
                         Qkv(L.qkv, d.heads + d.kv_heads, KvGroupSize()), d.qkv_width,
                         Context(L.context), d.heads * d.head_dim);
  }

  // out = residual + (partial summed over the tensor group, this rank's
  // sequence shard).
  Status ReduceAddResidual(void* partial, const void* residual, void* out) {
    const int64_t n = dims_.local_tokens * dims_.hidden;
    if (config_->tensor_parallel == 1) return Add(residual, partial, out, n, dtype_, compute_);
    RETURN_IF_ERROR(TensorReduceScatter(partial, Ws("grad_local"), n));
    return Add(residual, Ws("grad_local"), out, n, dtype_, compute_);
  }

  // The sequence-parallel gather of `shard` (this rank's T/t rows) into
  // `gathered`; with t = 1 the shard is the whole sequence.
  StatusOr<void*> Gathered(void* shard, void* gathered) {
    if (config_->tensor_parallel == 1) return shard;
    RETURN_IF_ERROR(TensorAllGather(shard, gathered, dims_.local_tokens * dims_.hidden));
    return gathered;
  }

  Status LayerForward(int64_t weights_offset, const void* x, void* out, const LayerTensors& L) {
    const LayerDims& d = dims_;
    const LayerWeights w = WeightsOf(weights_offset, false);
    const bool full = config_->recompute == Recompute::kFull;
    const int64_t hd = d.heads * d.head_dim;
    RETURN_IF_ERROR(RmsNormForward(x, w.norm1, L.attention_norm, d.local_tokens, d.hidden, dtype_,
                                   compute_));
    ASSIGN_OR_RETURN(void* g1, Gathered(L.attention_norm, Ws("gathered")));
    RETURN_IF_ERROR(gemm_.Gemm(false, false, d.tokens, d.qkv_width, d.hidden, 1.0f, g1, d.hidden,
                               w.qkv, d.qkv_width, 0.0f, L.qkv, d.qkv_width));
    RETURN_IF_ERROR(AttentionScores(L));
    RETURN_IF_ERROR(AttentionContext(L));
    RETURN_IF_ERROR(gemm_.Gemm(false, false, d.tokens, d.hidden, hd, 1.0f, L.context, hd,
                               w.projection, d.hidden, 0.0f, Ws("partial"), d.hidden));
    RETURN_IF_ERROR(ReduceAddResidual(Ws("partial"), x, L.attention_residual));
    RETURN_IF_ERROR(RmsNormForward(L.attention_residual, w.norm2, L.mlp_norm, d.local_tokens,
                                   d.hidden, dtype_, compute_));
    ASSIGN_OR_RETURN(void* g2, Gathered(L.mlp_norm, full ? Ws("gathered_mlp") : Ws("gathered")));
    RETURN_IF_ERROR(gemm_.Gemm(false, false, d.tokens, d.mlp_in_width, d.hidden, 1.0f, g2,
                               d.hidden, w.mlp_in, d.mlp_in_width, 0.0f, L.mlp_hidden,
                               d.mlp_in_width));
    if (d.swiglu) {
      RETURN_IF_ERROR(SwigluForward(L.mlp_hidden, L.mlp_activation, d.tokens, d.ffn, dtype_,
                                    compute_));
    } else {
      RETURN_IF_ERROR(GeluForward(L.mlp_hidden, L.mlp_activation, d.tokens * d.ffn, dtype_,
                                  compute_));
    }
    RETURN_IF_ERROR(gemm_.Gemm(false, false, d.tokens, d.hidden, d.ffn, 1.0f, L.mlp_activation,
                               d.ffn, w.mlp_out, d.hidden, 0.0f, Ws("partial"), d.hidden));
    return ReduceAddResidual(Ws("partial"), L.attention_residual, out);
  }

  // d_in may alias d_out (d_out is last read before d_in is written).
  Status LayerBackward(int chunk, int layer, int slot, const void* d_out, void* d_in) {
    const LayerDims& d = dims_;
    const ParameterLayout& p = plan_.parameters;
    const int64_t offset = p.LayerOffset(chunk, layer);
    const LayerWeights w = WeightsOf(offset, false);
    const LayerWeights gw = WeightsOf(offset, true);
    const LayerTensors L = TensorsFor(slot, layer);
    const Recompute recompute = config_->recompute;
    const bool t1 = config_->tensor_parallel == 1;
    const int64_t hd = d.heads * d.head_dim;
    const int64_t local = d.local_tokens * d.hidden;
    if (recompute == Recompute::kFull) {
      // The output is not needed again: it goes to scratch.
      RETURN_IF_ERROR(LayerForward(offset, L.input, Ws("chunk_output"), L));
    } else if (recompute == Recompute::kSelective) {
      RETURN_IF_ERROR(AttentionScores(L));
      RETURN_IF_ERROR(AttentionContext(L));
    }
    auto* rstd = static_cast<float*>(Ws("norm_rstd"));

    // MLP.
    ASSIGN_OR_RETURN(void* dg, Gathered(const_cast<void*>(d_out), Ws("grad_gathered")));
    RETURN_IF_ERROR(gemm_.Gemm(false, true, d.tokens, d.ffn, d.hidden, 1.0f, dg, d.hidden,
                               w.mlp_out, d.hidden, 0.0f, Ws("grad_mlp_activation"), d.ffn));
    RETURN_IF_ERROR(gemm_.Gemm(true, false, d.ffn, d.hidden, d.tokens, 1.0f, L.mlp_activation,
                               d.ffn, dg, d.hidden, 1.0f, gw.mlp_out, d.hidden));
    if (d.swiglu) {
      RETURN_IF_ERROR(SwigluBackward(Ws("grad_mlp_activation"), L.mlp_hidden,
                                     Ws("grad_mlp_hidden"), d.tokens, d.ffn, dtype_, compute_));
    } else {
      RETURN_IF_ERROR(GeluBackward(Ws("grad_mlp_activation"), L.mlp_hidden, Ws("grad_mlp_hidden"),
                                   d.tokens * d.ffn, dtype_, compute_));
    }
    void* g2 = L.mlp_norm;
    if (!t1) {
      if (recompute == Recompute::kFull) {
        g2 = Ws("gathered_mlp");  // kept by the recomputed forward
      } else {
        ASSIGN_OR_RETURN(g2, Gathered(L.mlp_norm, Ws("gathered")));  // mlp-in-regather
      }
    }
    RETURN_IF_ERROR(gemm_.Gemm(true, false, d.hidden, d.mlp_in_width, d.tokens, 1.0f, g2,
                               d.hidden, Ws("grad_mlp_hidden"), d.mlp_in_width, 1.0f, gw.mlp_in,
                               d.mlp_in_width));
    RETURN_IF_ERROR(gemm_.Gemm(false, true, d.tokens, d.hidden, d.mlp_in_width, 1.0f,
                               Ws("grad_mlp_hidden"), d.mlp_in_width, w.mlp_in, d.mlp_in_width,
                               0.0f, Ws("partial"), d.hidden));
    void* d_norm2 = Ws("partial");
    if (!t1) {
      RETURN_IF_ERROR(TensorReduceScatter(Ws("partial"), Ws("grad_local"), local));
      d_norm2 = Ws("grad_local");
    }
    RETURN_IF_ERROR(RmsNormBackward(d_norm2, L.attention_residual, w.norm2, d_out,
                                    Ws("grad_residual"), gw.norm2, rstd, d.local_tokens, d.hidden,
                                    dtype_, compute_));

    // Attention.
    ASSIGN_OR_RETURN(void* dga, Gathered(Ws("grad_residual"), Ws("grad_gathered")));
    RETURN_IF_ERROR(gemm_.Gemm(false, true, d.tokens, hd, d.hidden, 1.0f, dga, d.hidden,
                               w.projection, d.hidden, 0.0f, Ws("grad_context"), hd));
    RETURN_IF_ERROR(gemm_.Gemm(true, false, hd, d.hidden, d.tokens, 1.0f, L.context, hd, dga,
                               d.hidden, 1.0f, gw.projection, d.hidden));
    RETURN_IF_ERROR(AttentionBackward(L));
    void* g1 = L.attention_norm;
    if (!t1) {
      if (recompute == Recompute::kFull) {
        g1 = Ws("gathered");
      } else {
        ASSIGN_OR_RETURN(g1, Gathered(L.attention_norm, Ws("gathered")));  // attention-in-regather
      }
    }
    RETURN_IF_ERROR(gemm_.Gemm(true, false, d.hidden, d.qkv_width, d.tokens, 1.0f, g1, d.hidden,
                               Ws("grad_qkv"), d.qkv_width, 1.0f, gw.qkv, d.qkv_width));
    RETURN_IF_ERROR(gemm_.Gemm(false, true, d.tokens, d.hidden, d.qkv_width, 1.0f, Ws("grad_qkv"),
                               d.qkv_width, w.qkv, d.qkv_width, 0.0f, Ws("partial"), d.hidden));
    void* d_norm1 = Ws("partial");
    if (!t1) {
      RETURN_IF_ERROR(TensorReduceScatter(Ws("partial"), Ws("grad_local"), local));
      d_norm1 = Ws("grad_local");
    }
    RETURN_IF_ERROR(RmsNormBackward(d_norm1, L.input, w.norm1, Ws("grad_residual"), d_in, gw.norm1,
                                    rstd, d.local_tokens, d.hidden, dtype_, compute_));
    return MarkRegionDone(layer_region_base_ + chunk * p.layers_per_chunk + layer);
  }

  Status AttentionBackward(const LayerTensors& L) {
    const LayerDims& d = dims_;
    const int64_t hd = d.heads * d.head_dim;
    void* dprob = Ws("grad_probabilities");
    void* dk_expanded = Ws("grad_kv_expanded");
    void* dv_expanded = Elem(dk_expanded, d.tokens * hd);
    void* dqkv = Ws("grad_qkv");
    const void* dctx = Ws("grad_context");
    // dP = dC V^T and dV = P^T dC (per query head; summed over groups below).
    RETURN_IF_ERROR(AttentionGemm(false, true, d.sequence, d.sequence, d.head_dim, 1.0f,
                                  Context(dctx), hd, Qkv(L.qkv, d.heads + d.kv_heads, KvGroupSize()),
                                  d.qkv_width, Scores(dprob), d.sequence));
    RETURN_IF_ERROR(AttentionGemm(true, false, d.sequence, d.head_dim, d.sequence, 1.0f,
                                  Scores(L.probabilities), d.sequence, Context(dctx), hd,
                                  Context(dv_expanded), hd));
    RETURN_IF_ERROR(SoftmaxBackward(L.probabilities, dprob, d.batch * d.heads * d.sequence,
                                    d.sequence, dtype_, compute_));
    // dQ = s dS K and dK = s dS^T Q.
    RETURN_IF_ERROR(AttentionGemm(false, false, d.sequence, d.head_dim, d.sequence,
                                  AttentionScale(), Scores(dprob), d.sequence,
                                  Qkv(L.qkv, d.heads, KvGroupSize()), d.qkv_width, Qkv(dqkv, 0, 1),
                                  d.qkv_width));
    RETURN_IF_ERROR(AttentionGemm(true, false, d.sequence, d.head_dim, d.sequence,
                                  AttentionScale(), Scores(dprob), d.sequence, Qkv(L.qkv, 0, 1),
                                  d.qkv_width, Context(dk_expanded), hd));
    return SumKeyValueGroups(dk_expanded, dv_expanded, dqkv, d.tokens, d.heads, d.kv_heads,
                             d.head_dim, dtype_, compute_);
  }

  // --- embedding and logits --------------------------------------------------

  // Data-parallel replicas see different tokens; tensor ranks of one
  // replica the same sequence.
  uint64_t TokenSeed(int micro_batch) const {
    return MixSeed(MixSeed(step_seed_, static_cast<uint64_t>(d_rank_)),
                   static_cast<uint64_t>(micro_batch));
  }
  int64_t TokenOffset() const { return t_rank_ * dims_.local_tokens; }

  // The logits GEMM reads all b s tokens: with t > 1 this rank's sequence
  // shard is copied into its rows of a T x h buffer (the gather Megatron
  // adds here is not in the plan's schedule; the loss is synthetic).
  StatusOr<void*> LogitsInput() {
    if (config_->tensor_parallel == 1) return Ws("chunk_output");
    const int64_t local = dims_.local_tokens * dims_.hidden;
    CUDACHECK(cudaMemcpyAsync(Elem(Ws("gathered"), t_rank_ * local), Ws("chunk_output"),
                              static_cast<size_t>(local * e_), cudaMemcpyDeviceToDevice,
                              compute_));
    return Ws("gathered");
  }

  Status LogitsForward(int micro_batch) {
    const LayerDims& d = dims_;
    ASSIGN_OR_RETURN(void* x, LogitsInput());
    RETURN_IF_ERROR(gemm_.Gemm(false, true, d.tokens, d.vocab, d.hidden, 1.0f, x, d.hidden,
                               W(plan_.parameters.output_table_offset), d.hidden, 0.0f, logits_,
                               d.vocab));
    RETURN_IF_ERROR(CrossEntropyGradient(logits_, logits_fp32_, d.tokens, d.vocab,
                                         TokenSeed(micro_batch) ^ 0x5bd1e995ull, dtype_,
                                         compute_));
    logits_micro_batch_ = micro_batch;
    return Status::Ok();
  }

  // Leaves this rank's share of d(loss)/d(chunk output) in grad_recv.
  Status LogitsBackward(int micro_batch) {
    const LayerDims& d = dims_;
    if (logits_micro_batch_ != micro_batch) {
      return InternalError("GPU backend: the logits of micro-batch " +
                           std::to_string(micro_batch) + " were overwritten before its backward");
    }
    void* x = config_->tensor_parallel == 1 ? Ws("chunk_output") : Ws("gathered");
    const int64_t table = plan_.parameters.output_table_offset;
    RETURN_IF_ERROR(gemm_.Gemm(false, false, d.tokens, d.hidden, d.vocab, 1.0f, logits_, d.vocab,
                               W(table), d.hidden, 0.0f, Ws("partial"), d.hidden));
    RETURN_IF_ERROR(gemm_.Gemm(true, false, d.vocab, d.hidden, d.tokens, 1.0f, logits_, d.vocab, x,
                               d.hidden, 1.0f, G(table), d.hidden));
    RETURN_IF_ERROR(MarkRegionDone(output_region_));
    const int64_t local = d.local_tokens * d.hidden;
    CUDACHECK(cudaMemcpyAsync(Ws("grad_recv"), Elem(Ws("partial"), t_rank_ * local),
                              static_cast<size_t>(local * e_), cudaMemcpyDeviceToDevice,
                              compute_));
    return Status::Ok();
  }

  // --- the pipeline ------------------------------------------------------------

  StatusOr<int> AcquireSlot(const PipelineAction& a) {
    const auto key = std::make_pair(a.micro_batch, a.chunk);
    auto it = slot_of_.find(key);
    if (it != slot_of_.end()) return it->second;
    if (slots_free_.empty()) {
      return InternalError("GPU backend: more micro-batches in flight than the plan's " +
                           std::to_string(plan_.slots_in_flight));
    }
    const int slot = slots_free_.back();
    slots_free_.pop_back();
    slot_of_[key] = slot;
    return slot;
  }
  void ReleaseSlot(const PipelineAction& a) {
    auto it = slot_of_.find(std::make_pair(a.micro_batch, a.chunk));
    if (it == slot_of_.end()) return;
    slots_free_.push_back(it->second);
    slot_of_.erase(it);
  }

  bool FirstChunkOfModel(const PipelineAction& a) const {
    return schedule_->holds_embedding && a.chunk == 0;
  }
  bool LastChunkOfModel(const PipelineAction& a) const {
    return schedule_->holds_logits && a.chunk == schedule_->chunks - 1;
  }
  bool NeedsRecv(const PipelineAction& a) const {
    return a.pass == PassKind::kForward ? !FirstChunkOfModel(a) : !LastChunkOfModel(a);
  }
  bool NeedsSend(const PipelineAction& a) const {
    return a.pass == PassKind::kForward ? !LastChunkOfModel(a) : !FirstChunkOfModel(a);
  }

  // Sends what `sent` produced (if anything) and receives what `next` needs
  // (if anything) in one NCCL group.
  Status Exchange(const PipelineAction* sent, const PipelineAction* next) {
    const int p = config_->pipeline_parallel;
    if (p == 1) return Status::Ok();
    const int stage = schedule_->coordinates.pipeline_rank;
    const int following = (stage + 1) % p, previous = (stage + p - 1) % p;
    const void* send = nullptr;
    int send_peer = -1, recv_peer = -1;
    void* recv = nullptr;
    if (sent != nullptr && NeedsSend(*sent)) {
      const bool forward = sent->pass == PassKind::kForward;
      send = forward ? Ws("chunk_output") : Ws("grad_stream");
      send_peer = forward ? following : previous;
    }
    if (next != nullptr && NeedsRecv(*next)) {
      if (next->pass == PassKind::kForward) {
        ASSIGN_OR_RETURN(int slot, AcquireSlot(*next));
        recv = SlotLayer(slot, 0);
        recv_peer = previous;
      } else {
        recv = Ws("grad_recv");
        recv_peer = following;
      }
    }
    if (send_peer < 0 && recv_peer < 0) return Status::Ok();
    const int64_t count = dims_.local_tokens * dims_.hidden;
    ASSIGN_OR_RETURN(int start, timer_.Record(compute_));
    RETURN_IF_ERROR(comms_.SendRecv(send, send_peer, recv, recv_peer, count, dtype_, compute_,
                                    deadline_));
    if (send_peer >= 0) bus_bytes_ += static_cast<double>(count * e_);
    return Inline(start);
  }

  Status Forward(const PipelineAction& a) {
    const ParameterLayout& p = plan_.parameters;
    const int lpc = p.layers_per_chunk;
    ASSIGN_OR_RETURN(int slot, AcquireSlot(a));
    if (zero3_ && a.chunk == 0) RETURN_IF_ERROR(GatherWeights());  // parameters-forward
    if (FirstChunkOfModel(a)) {
      RETURN_IF_ERROR(EmbeddingForward(W(p.input_table_offset), SlotLayer(slot, 0),
                                       dims_.local_tokens, dims_.hidden, dims_.vocab,
                                       TokenSeed(a.micro_batch), TokenOffset(), dtype_, compute_));
    }
    for (int l = 0; l < lpc; ++l) {
      void* out = l + 1 < lpc ? SlotLayer(slot, l + 1) : Ws("chunk_output");
      const LayerTensors L = TensorsFor(slot, l);
      RETURN_IF_ERROR(LayerForward(p.LayerOffset(a.chunk, l), L.input, out, L));
    }
    if (LastChunkOfModel(a)) RETURN_IF_ERROR(LogitsForward(a.micro_batch));
    return Status::Ok();
  }

  Status Backward(const PipelineAction& a) {
    const ParameterLayout& p = plan_.parameters;
    const int lpc = p.layers_per_chunk;
    auto it = slot_of_.find(std::make_pair(a.micro_batch, a.chunk));
    if (it == slot_of_.end()) return InternalError("GPU backend: backward before forward");
    const int slot = it->second;
    if (zero3_ && a.chunk == schedule_->chunks - 1) {
      RETURN_IF_ERROR(GatherWeights());  // parameters-backward
    }
    RETURN_IF_ERROR(WaitForStagingFree());
    if (LastChunkOfModel(a)) RETURN_IF_ERROR(LogitsBackward(a.micro_batch));
    for (int l = lpc - 1; l >= 0; --l) {
      const void* d_out = l == lpc - 1 ? Ws("grad_recv") : Ws("grad_stream");
      RETURN_IF_ERROR(LayerBackward(a.chunk, l, slot, d_out, Ws("grad_stream")));
    }
    if (FirstChunkOfModel(a)) {
      RETURN_IF_ERROR(EmbeddingBackward(Ws("grad_stream"), G(p.input_table_offset),
                                        dims_.local_tokens, dims_.hidden, dims_.vocab,
                                        TokenSeed(a.micro_batch), TokenOffset(), dtype_, compute_));
      RETURN_IF_ERROR(MarkRegionDone(input_region_));
    }
    ReleaseSlot(a);
    if (staged_grads_ && a.chunk == 0) RETURN_IF_ERROR(ReduceScatterMicroBatch());
    return Status::Ok();
  }

  StatusOr<StepTiming> RunStepImpl(int64_t step) {
    const WorkerConfig& c = *config_;
    const StepSchedule& s = *schedule_;
    deadline_ = Now() + context_.timeout;
    step_seed_ = MixSeed(seed_, static_cast<uint64_t>(step));
    timer_.Reset();
    inline_spans_.clear();
    comm_spans_.clear();
    stall_spans_.clear();
    bus_bytes_ = 0;
    gemm_.ResetFlops();
    logits_micro_batch_ = -1;
    bucket_launched_.fill(false);
    for (GradientRegion& r : regions_) r.remaining = r.uses_per_micro_batch * s.micro_batches;
    slot_of_.clear();
    slots_free_.clear();
    for (int i = plan_.slots_in_flight - 1; i >= 0; --i) slots_free_.push_back(i);

    ASSIGN_OR_RETURN(const int start, timer_.Record(compute_));
    CUDACHECK(cudaMemsetAsync(grads_, 0, grads_bytes_, compute_));
    if (staged_grads_) {
      CUDACHECK(cudaMemsetAsync(Ws("gradient_staging"), 0,
                                static_cast<size_t>(plan_.parameters.padded_elements * e_),
                                compute_));
    }
    staging_pending_ = false;

    const std::vector<PipelineAction>& order = s.pipeline;
    if (!order.empty()) RETURN_IF_ERROR(Exchange(nullptr, &order[0]));
    for (size_t i = 0; i < order.size(); ++i) {
      const PipelineAction& a = order[i];
      RETURN_IF_ERROR(a.pass == PassKind::kForward ? Forward(a) : Backward(a));
      RETURN_IF_ERROR(Exchange(&a, i + 1 < order.size() ? &order[i + 1] : nullptr));
    }

    if (d_ > 1) {
      if (c.zero_stage <= 1) {
        RETURN_IF_ERROR(LaunchReadyBuckets());
        for (bool launched : bucket_launched_) {
          if (!launched) return InternalError("GPU backend: a gradient bucket never became ready");
        }
      }
      // The exposed part of the gradient collectives: what is left of them
      // after the last backward.
      CUDACHECK(cudaEventRecord(comm_done_, comm_));
      RETURN_IF_ERROR(StallOn(comm_done_));
      staging_pending_ = false;
    }
    RETURN_IF_ERROR(OptimizerStep(step));
    if (d_ > 1 && (c.zero_stage == 1 || c.zero_stage == 2)) RETURN_IF_ERROR(GatherUpdatedWeights());
    ASSIGN_OR_RETURN(const int end, timer_.Record(compute_));
    RETURN_IF_ERROR(comms_.WaitForStream(compute_, deadline_, "training step"));
    RETURN_IF_ERROR(comms_.WaitForStream(comm_, deadline_, "training step"));

    StepTiming timing;
    ASSIGN_OR_RETURN(timing.step_seconds, timer_.Seconds(start, end));
    double inline_seconds = 0, comm_seconds = 0, stall_seconds = 0;
    for (auto [a, b] : inline_spans_) {
      ASSIGN_OR_RETURN(double x, timer_.Seconds(a, b));
      inline_seconds += x;
    }
    for (auto [a, b] : comm_spans_) {
      ASSIGN_OR_RETURN(double x, timer_.Seconds(a, b));
      comm_seconds += x;
    }
    for (auto [a, b] : stall_spans_) {
      ASSIGN_OR_RETURN(double x, timer_.Seconds(a, b));
      stall_seconds += x;
    }
    timing.collective_seconds = inline_seconds + comm_seconds;
    timing.exposed_communication_seconds = inline_seconds + stall_seconds;
    timing.compute_seconds = std::max(0.0, timing.step_seconds - timing.exposed_communication_seconds);
    timing.collective_bus_bytes = bus_bytes_;
    timing.gemm_flops = gemm_.flops();
    return timing;
  }

  // --- state -----------------------------------------------------------------

  bool initialized_ = false;
  BackendContext context_;
  const WorkerConfig* config_ = nullptr;
  const StepSchedule* schedule_ = nullptr;
  uint64_t seed_ = 0;
  uint64_t step_seed_ = 0;
  DeviceMemoryPlan plan_;
  LayerDims dims_;
  DType dtype_ = DType::kBf16;
  int64_t e_ = 2;
  int d_ = 1, d_rank_ = 0, t_rank_ = 0;
  bool sharded_ = false, staged_grads_ = false, zero3_ = false;

  cudaStream_t compute_ = nullptr;
  cudaStream_t comm_ = nullptr;
  cudaEvent_t compute_ready_ = nullptr;
  cudaEvent_t comm_done_ = nullptr;
  cudaEvent_t staging_free_ = nullptr;
  bool staging_pending_ = false;

  DeviceAllocator allocator_;
  GemmRunner gemm_;
  NcclCommunicators comms_;
  EventTimer timer_;

  void* weights_ = nullptr;
  void* grads_ = nullptr;
  float* optimizer_ = nullptr;
  int64_t opt_count_ = 0;
  size_t weights_bytes_ = 0, grads_bytes_ = 0, opt_bytes_ = 0;
  void* stash_ = nullptr;
  void* logits_ = nullptr;
  float* logits_fp32_ = nullptr;
  std::map<std::string, void*> workspace_;

  std::map<std::pair<int, int>, int> slot_of_;
  std::vector<int> slots_free_;
  int logits_micro_batch_ = -1;

  std::vector<GradientRegion> regions_;
  int input_region_ = -1, output_region_ = -1, layer_region_base_ = 0;
  std::array<bool, kGradientBuckets> bucket_launched_{};

  Deadline deadline_{};
  std::vector<std::pair<int, int>> inline_spans_, comm_spans_, stall_spans_;
  double bus_bytes_ = 0;
  double measured_peak_bytes_ = 0;
};

}  // namespace

std::unique_ptr<StepBackend> MakeGpuBackend() { return std::make_unique<GpuBackend>(); }

}  // namespace pacer::worker
