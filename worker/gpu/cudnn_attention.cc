#include "gpu/cudnn_attention.h"

#include <cudnn.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "gpu/cuda_check.h"
#include "gpu/sdpa_layout.h"

namespace pacer::worker::gpu {
namespace {

// The SDPA forward operation came with cuDNN 9.13, the backward with 9.17:
// the attribute names do not exist in older headers, so the code that uses
// them compiles only against new enough ones (the device then says why it
// runs the tiled path instead of failing to build).
constexpr size_t kForwardVersion = 91300;
constexpr size_t kBackwardVersion = 91700;
#define PACER_CUDNN_HAS_SDPA_FWD (CUDNN_VERSION >= 91300)
#define PACER_CUDNN_HAS_SDPA_BWD (CUDNN_VERSION >= 91700)

Status CudnnFailure(cudnnStatus_t status, const char* call, const char* file, int line) {
  char last[512] = {0};
  cudnnGetLastErrorString(last, sizeof(last));
  std::string message = GpuErrorWhere(file, line) + ": cuDNN error: " + cudnnGetErrorString(status);
  if (last[0] != '\0') message += std::string(" (") + last + ")";
  return Status(StatusCode::kInternal, message + " in " + call);
}

#define CUDNNCHECK(cmd)                                                \
  do {                                                                 \
    cudnnStatus_t pacer_cudnn_err_ = (cmd);                            \
    if (pacer_cudnn_err_ != CUDNN_STATUS_SUCCESS) {                    \
      return CudnnFailure(pacer_cudnn_err_, #cmd, __FILE__, __LINE__); \
    }                                                                  \
  } while (0)

// Tensor ids of the variant packs.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kScale, kDO, kDQ, kDK, kDV };

using Dims = std::array<int64_t, 4>;

}  // namespace

// Every descriptor the plans use, destroyed with them (in reverse order of
// creation: an operation before its tensors, a plan before its graph).
struct CudnnAttention::Plans {
  cudnnHandle_t handle = nullptr;
  std::vector<cudnnBackendDescriptor_t> owned;
  cudnnBackendDescriptor_t forward = nullptr, backward = nullptr;  // execution plans
  std::string backward_refusal;                                    // why `backward` is null
  int64_t forward_workspace = 0, backward_workspace = 0;
  float scale = 1.0f;  // by value: read from the host at each execution

  Plans() = default;
  Plans(const Plans&) = delete;
  Plans& operator=(const Plans&) = delete;
  ~Plans() {
    for (auto it = owned.rbegin(); it != owned.rend(); ++it)
      (void)cudnnBackendDestroyDescriptor(*it);
    if (handle != nullptr) (void)cudnnDestroy(handle);
  }

  StatusOr<cudnnBackendDescriptor_t> Make(cudnnBackendDescriptorType_t type) {
    cudnnBackendDescriptor_t d = nullptr;
    CUDNNCHECK(cudnnBackendCreateDescriptor(type, &d));
    owned.push_back(d);
    return d;
  }

  static Status Set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                    cudnnBackendAttributeType_t type, int64_t count, const void* value) {
    CUDNNCHECK(cudnnBackendSetAttribute(d, name, type, count, value));
    return Status::Ok();
  }
  static Status SetDesc(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                        cudnnBackendDescriptor_t value) {
    return Set(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value);
  }

  // A bf16 tensor of the executor's buffers (sdpa_layout.h).
  StatusOr<cudnnBackendDescriptor_t> Bf16Tensor(int64_t uid, const SdpaTensorLayout& t) {
    return Tensor(uid, CUDNN_DATA_BFLOAT16, t.dims, t.strides);
  }
  StatusOr<cudnnBackendDescriptor_t> Tensor(int64_t uid, cudnnDataType_t type, const Dims& dims,
                                            const Dims& strides, bool by_value = false) {
    ASSIGN_OR_RETURN(cudnnBackendDescriptor_t t, Make(CUDNN_BACKEND_TENSOR_DESCRIPTOR));
    const int64_t alignment = by_value ? 4 : 16;
    RETURN_IF_ERROR(Set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
    RETURN_IF_ERROR(Set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
    RETURN_IF_ERROR(Set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment));
    RETURN_IF_ERROR(Set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data()));
    RETURN_IF_ERROR(Set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data()));
    if (by_value) {
      const bool yes = true;
      RETURN_IF_ERROR(Set(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &yes));
    }
    CUDNNCHECK(cudnnBackendFinalize(t));
    return t;
  }

  // A finalized operation of `type` with its tensor attributes.
  StatusOr<cudnnBackendDescriptor_t> Operation(
      cudnnBackendDescriptorType_t type,
      std::initializer_list<std::pair<cudnnBackendAttributeName_t, cudnnBackendDescriptor_t>>
          tensors) {
    ASSIGN_OR_RETURN(cudnnBackendDescriptor_t op, Make(type));
    for (const auto& [name, tensor] : tensors) RETURN_IF_ERROR(SetDesc(op, name, tensor));
    CUDNNCHECK(cudnnBackendFinalize(op));
    return op;
  }

  // The first engine configuration cuDNN's heuristics rank for the one
  // operation `op` that finalizes into an execution plan.
  Status Plan(cudnnBackendDescriptor_t op, const char* what, cudnnBackendDescriptor_t* plan,
              int64_t* workspace) {
    ASSIGN_OR_RETURN(cudnnBackendDescriptor_t graph, Make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
    RETURN_IF_ERROR(Set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle));
    RETURN_IF_ERROR(
        Set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op));
    CUDNNCHECK(cudnnBackendFinalize(graph));
    ASSIGN_OR_RETURN(cudnnBackendDescriptor_t heuristics,
                     Make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR));
    RETURN_IF_ERROR(SetDesc(heuristics, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph));
    const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    RETURN_IF_ERROR(Set(heuristics, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode));
    CUDNNCHECK(cudnnBackendFinalize(heuristics));
    int64_t count = 0;
    CUDNNCHECK(cudnnBackendGetAttribute(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                        CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr));
    std::vector<cudnnBackendDescriptor_t> configs;
    for (int64_t i = 0; i < count; ++i) {
      ASSIGN_OR_RETURN(cudnnBackendDescriptor_t c, Make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
      configs.push_back(c);
    }
    int64_t returned = 0;
    if (count > 0) {
      CUDNNCHECK(cudnnBackendGetAttribute(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                          CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &returned,
                                          configs.data()));
    }
    for (int64_t i = 0; i < returned; ++i) {
      ASSIGN_OR_RETURN(cudnnBackendDescriptor_t p, Make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR));
      RETURN_IF_ERROR(Set(p, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle));
      RETURN_IF_ERROR(
          SetDesc(p, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, configs[static_cast<size_t>(i)]));
      if (cudnnBackendFinalize(p) != CUDNN_STATUS_SUCCESS) continue;
      int64_t n = 0;
      CUDNNCHECK(cudnnBackendGetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                          CUDNN_TYPE_INT64, 1, &n, workspace));
      *plan = p;
      return Status::Ok();
    }
    return FailedPreconditionError(std::string("cuDNN has no engine for the SDPA ") + what +
                                   " pass of this shape on this GPU (" + std::to_string(returned) +
                                   " configurations tried)");
  }

  Status Execute(cudnnBackendDescriptor_t plan, const std::vector<int64_t>& uids,
                 const std::vector<void*>& pointers, void* workspace) {
    cudnnBackendDescriptor_t pack = nullptr;
    CUDNNCHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack));
    const auto n = static_cast<int64_t>(uids.size());
    Status s = Set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids.data());
    if (s.ok()) {
      s = Set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, pointers.data());
    }
    if (s.ok())
      s = Set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
    if (s.ok()) {
      const cudnnStatus_t f = cudnnBackendFinalize(pack);
      if (f != CUDNN_STATUS_SUCCESS)
        s = CudnnFailure(f, "cudnnBackendFinalize(variant pack)", __FILE__, __LINE__);
    }
    if (s.ok()) {
      const cudnnStatus_t e = cudnnBackendExecute(handle, plan, pack);
      if (e != CUDNN_STATUS_SUCCESS) s = CudnnFailure(e, "cudnnBackendExecute", __FILE__, __LINE__);
    }
    (void)cudnnBackendDestroyDescriptor(pack);
    return s;
  }
};

namespace {

// Builds the forward plan and, where cuDNN has an engine for it, the
// backward one (the layout of cudnn_attention.h).
Status Build(const AttentionShape& s, const SdpaLayout& layout, cudaStream_t stream,
             CudnnAttention::Plans* p);
#if PACER_CUDNN_HAS_SDPA_FWD
Status BuildBackward(const SdpaLayout& layout, cudnnBackendDescriptor_t q,
                     cudnnBackendDescriptor_t k, cudnnBackendDescriptor_t v,
                     cudnnBackendDescriptor_t o, cudnnBackendDescriptor_t stats,
                     cudnnBackendDescriptor_t scale, CudnnAttention::Plans* p);

#endif

}  // namespace

std::string CudnnAttention::LibraryVersion() {
  const size_t v = cudnnGetVersion();
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

StatusOr<std::unique_ptr<CudnnAttention>> CudnnAttention::Create(const AttentionShape& s,
                                                                 cudaStream_t stream) {
  if (static_cast<size_t>(CUDNN_VERSION) < kForwardVersion || cudnnGetVersion() < kForwardVersion) {
    return FailedPreconditionError("cuDNN " + LibraryVersion() + " (built against " +
                                   std::to_string(CUDNN_VERSION) +
                                   ") predates the SDPA forward operation of cuDNN 9.13");
  }
  // K and V start head_dim bf16 values apart in each row: a head
  // dimension that is not a multiple of 8 breaks the 16-byte alignment the
  // descriptors promise (cuDNN's own support check refuses it too).
  if (s.head_dim % 8 != 0) {
    return FailedPreconditionError("cuDNN's SDPA needs a head dimension divisible by 8, not " +
                                   std::to_string(s.head_dim));
  }
  ASSIGN_OR_RETURN(const SdpaLayout layout, SdpaLayoutFor(s));
  auto plans = std::make_unique<Plans>();
  const Status built = Build(s, layout, stream, plans.get());
  if (!built.ok()) {
    return FailedPreconditionError("cuDNN " + LibraryVersion() + " cannot run this attention (" +
                                   std::to_string(s.pairs()) + " pairs, sequence " +
                                   std::to_string(s.seq) + ", head dim " +
                                   std::to_string(s.head_dim) + "): " + built.message());
  }
  return std::unique_ptr<CudnnAttention>(new CudnnAttention(std::move(plans)));
}

CudnnAttention::CudnnAttention(std::unique_ptr<Plans> plans) : plans_(std::move(plans)) {}
CudnnAttention::~CudnnAttention() = default;

bool CudnnAttention::has_backward() const { return plans_->backward != nullptr; }
const std::string& CudnnAttention::backward_refusal() const { return plans_->backward_refusal; }

size_t CudnnAttention::workspace_bytes() const {
  return static_cast<size_t>(std::max(plans_->forward_workspace, plans_->backward_workspace));
}

Status CudnnAttention::Forward(const void* q, const void* k, const void* v, void* o, float* lse,
                               void* workspace) {
  return plans_->Execute(
      plans_->forward, {kQ, kK, kV, kO, kStats, kScale},
      {const_cast<void*>(q), const_cast<void*>(k), const_cast<void*>(v), o, lse, &plans_->scale},
      workspace);
}

Status CudnnAttention::Backward(const void* q, const void* k, const void* v, const void* o,
                                const void* d_o, const float* lse, void* dq, void* dk, void* dv,
                                void* workspace) {
  if (plans_->backward == nullptr) {
    return FailedPreconditionError("cuDNN's SDPA backward is not available: " +
                                   plans_->backward_refusal);
  }
  // cuDNN's variant pack takes void*; the inputs are only read.
  return plans_->Execute(
      plans_->backward, {kQ, kK, kV, kO, kDO, kStats, kScale, kDQ, kDK, kDV},
      {const_cast<void*>(q), const_cast<void*>(k), const_cast<void*>(v), const_cast<void*>(o),
       const_cast<void*>(d_o), const_cast<float*>(lse), &plans_->scale, dq, dk, dv},
      workspace);
}

namespace {

Status Build(const AttentionShape& s, const SdpaLayout& layout, cudaStream_t stream,
             CudnnAttention::Plans* p) {
#if PACER_CUDNN_HAS_SDPA_FWD
  CUDNNCHECK(cudnnCreate(&p->handle));
  CUDNNCHECK(cudnnSetStream(p->handle, stream));
  p->scale = s.SoftmaxScale();
  const Dims one{1, 1, 1, 1};
  ASSIGN_OR_RETURN(cudnnBackendDescriptor_t q, p->Bf16Tensor(kQ, layout.query));
  ASSIGN_OR_RETURN(cudnnBackendDescriptor_t k, p->Bf16Tensor(kK, layout.key_value));
  ASSIGN_OR_RETURN(cudnnBackendDescriptor_t v, p->Bf16Tensor(kV, layout.key_value));
  ASSIGN_OR_RETURN(cudnnBackendDescriptor_t o, p->Bf16Tensor(kO, layout.output));
  ASSIGN_OR_RETURN(cudnnBackendDescriptor_t stats,
                   p->Tensor(kStats, CUDNN_DATA_FLOAT, layout.stats.dims, layout.stats.strides));
  ASSIGN_OR_RETURN(cudnnBackendDescriptor_t scale,
                   p->Tensor(kScale, CUDNN_DATA_FLOAT, one, one, /*by_value=*/true));
  ASSIGN_OR_RETURN(cudnnBackendDescriptor_t fwd,
                   p->Operation(CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR,
                                {{CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, q},
                                 {CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, k},
                                 {CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, v},
                                 {CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, o},
                                 {CUDNN_ATTR_OPERATION_SDPA_FWD_STATSDESC, stats},
                                 {CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, scale}}));
  RETURN_IF_ERROR(p->Plan(fwd, "forward", &p->forward, &p->forward_workspace));
  // The backward is optional: without it the device runs cuDNN's forward
  // and its own backward on recomputed probabilities (which needs only
  // what the forward kept: Q, K, V and the logsumexp).
  // Every failure of BuildBackward carries its reason; success leaves "".
  p->backward_refusal = BuildBackward(layout, q, k, v, o, stats, scale, p).message();
  return Status::Ok();
#else
  (void)s, (void)layout, (void)stream, (void)p;
  return FailedPreconditionError("built against cuDNN " + std::to_string(CUDNN_VERSION) +
                                 ", which has no SDPA operations (9.13 and newer have)");
#endif
}

#if PACER_CUDNN_HAS_SDPA_FWD
Status BuildBackward(const SdpaLayout& layout, cudnnBackendDescriptor_t q,
                     cudnnBackendDescriptor_t k, cudnnBackendDescriptor_t v,
                     cudnnBackendDescriptor_t o, cudnnBackendDescriptor_t stats,
                     cudnnBackendDescriptor_t scale, CudnnAttention::Plans* p) {
#if PACER_CUDNN_HAS_SDPA_BWD
  if (cudnnGetVersion() < kBackwardVersion) {
    return FailedPreconditionError("the loaded cuDNN " + CudnnAttention::LibraryVersion() +
                                   " predates the SDPA backward operation of cuDNN 9.17");
  }
  ASSIGN_OR_RETURN(cudnnBackendDescriptor_t d_o, p->Bf16Tensor(kDO, layout.output));
  ASSIGN_OR_RETURN(cudnnBackendDescriptor_t dq, p->Bf16Tensor(kDQ, layout.query));
  ASSIGN_OR_RETURN(cudnnBackendDescriptor_t dk, p->Bf16Tensor(kDK, layout.key_value));
  ASSIGN_OR_RETURN(cudnnBackendDescriptor_t dv, p->Bf16Tensor(kDV, layout.key_value));
  ASSIGN_OR_RETURN(cudnnBackendDescriptor_t bwd,
                   p->Operation(CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR,
                                {{CUDNN_ATTR_OPERATION_SDPA_BWD_QDESC, q},
                                 {CUDNN_ATTR_OPERATION_SDPA_BWD_KDESC, k},
                                 {CUDNN_ATTR_OPERATION_SDPA_BWD_VDESC, v},
                                 {CUDNN_ATTR_OPERATION_SDPA_BWD_ODESC, o},
                                 {CUDNN_ATTR_OPERATION_SDPA_BWD_DODDESC, d_o},
                                 {CUDNN_ATTR_OPERATION_SDPA_BWD_STATSDESC, stats},
                                 {CUDNN_ATTR_OPERATION_SDPA_BWD_SCALEDESC, scale},
                                 {CUDNN_ATTR_OPERATION_SDPA_BWD_DQDESC, dq},
                                 {CUDNN_ATTR_OPERATION_SDPA_BWD_DKDESC, dk},
                                 {CUDNN_ATTR_OPERATION_SDPA_BWD_DVDESC, dv}}));
  cudnnBackendDescriptor_t plan = nullptr;
  RETURN_IF_ERROR(p->Plan(bwd, "backward", &plan, &p->backward_workspace));
  p->backward = plan;
  return Status::Ok();
#else
  (void)layout, (void)q, (void)k, (void)v, (void)o, (void)stats, (void)scale, (void)p;
  return FailedPreconditionError("built against cuDNN " + std::to_string(CUDNN_VERSION) +
                                 ", which predates the SDPA backward operation of cuDNN 9.17");
#endif
}
#endif

}  // namespace
}  // namespace pacer::worker::gpu
