#include "gpu/nccl_comms.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "gpu/cuda_check.h"

namespace pacer::worker {
namespace {

ncclDataType_t NcclType(DType t) {
  switch (t) {
    case DType::kFp32: return ncclFloat32;
    case DType::kFp16: return ncclFloat16;
    case DType::kBf16: return ncclBfloat16;
  }
  return ncclFloat32;
}

// Short sleeps: a collective of a few microseconds should not wait a
// millisecond, a hung one should not spin a core flat out.
void Backoff(int* iteration) {
  ++*iteration;
  if (*iteration < 100) return;
  std::this_thread::sleep_for(std::chrono::microseconds(*iteration < 1000 ? 10 : 200));
}

std::string Where(const char* what) {
  return GpuErrorWhere(__FILE__, __LINE__) + ": " + what;
}

}  // namespace

NcclCommunicators::~NcclCommunicators() {
  for (ncclComm_t& c : comms_) {
    if (c == nullptr) continue;
    if (aborted_) {
      (void)ncclCommAbort(c);
    } else {
      // Nonblocking finalize then destroy; a failure here only leaks.
      ncclResult_t state = ncclCommFinalize(c);
      const Deadline deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (state == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
        (void)ncclCommGetAsyncError(c, &state);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      if (state == ncclSuccess) {
        (void)ncclCommDestroy(c);
      } else {
        (void)ncclCommAbort(c);
      }
    }
    c = nullptr;
  }
}

Status NcclCommunicators::Fail(Status status) {
  AbortAll();
  return status;
}

void NcclCommunicators::AbortAll() {
  if (aborted_) return;
  aborted_ = true;
  for (ncclComm_t c : comms_) {
    if (c != nullptr) (void)ncclCommAbort(c);
  }
  // The handles are gone; the destructor must not touch them again.
  comms_.fill(nullptr);
}

Status NcclCommunicators::Connect(const WorkerConfig& config, RankCoordinates coordinates,
                                  TcpStoreClient* store, std::chrono::milliseconds timeout) {
  const Deadline deadline = std::chrono::steady_clock::now() + timeout;
  for (Group g : {Group::kTensor, Group::kData, Group::kPipeline}) {
    CommunicatorGroup group = CommunicatorGroupOf(config, coordinates, g);
    groups_[Index(g)] = group;
    if (group.size == 1) continue;
    if (store == nullptr) {
      return FailedPreconditionError("GPU backend: a " + std::string(GroupName(g)) +
                                     " group of " + std::to_string(group.size) +
                                     " ranks needs the rendezvous store");
    }
    ncclUniqueId id;
    const std::string key = group.StoreKey();
    if (group.rank == 0) {
      NCCLCHECK(ncclGetUniqueId(&id));
      RETURN_IF_ERROR(store->Set(key, std::string_view(id.internal, sizeof(id.internal))));
    } else {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      auto value = store->Get(key, std::max(left, std::chrono::milliseconds(1)));
      if (!value.ok()) return Fail(value.status().WithContext("NCCL id " + key));
      if (value->size() != sizeof(id.internal)) {
        return InternalError("NCCL id " + key + " has " + std::to_string(value->size()) +
                             " bytes, expected " + std::to_string(sizeof(id.internal)));
      }
      std::memcpy(id.internal, value->data(), sizeof(id.internal));
    }
    ncclConfig_t nccl_config = NCCL_CONFIG_INITIALIZER;
    nccl_config.blocking = 0;  // so that init, too, can be timed out and aborted
    ncclComm_t comm = nullptr;
    NCCLCHECK(ncclCommInitRankConfig(&comm, group.size, id, group.rank, &nccl_config));
    comms_[Index(g)] = comm;
    RETURN_IF_ERROR(Settle(comm, deadline, (std::string("init of ") + key).c_str()));
  }
  return Status::Ok();
}

Status NcclCommunicators::Settle(ncclComm_t comm, Deadline deadline, const char* what) {
  if (aborted_) return UnavailableError(Where(what) + ": communicators were aborted");
  int iteration = 0;
  while (true) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) state = r;
    if (state == ncclSuccess) return Status::Ok();
    if (state != ncclInProgress) {
      return Fail(UnavailableError(Where(what) + ": NCCL error: " + ncclGetErrorString(state) +
                                   "; communicators aborted"));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return Fail(Status(StatusCode::kDeadlineExceeded,
                         Where(what) + ": NCCL did not finish in time (a peer may have died); "
                                       "communicators aborted"));
    }
    Backoff(&iteration);
  }
}

Status NcclCommunicators::PollErrors(const char* what) {
  for (ncclComm_t c : comms_) {
    if (c == nullptr) continue;
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(c, &state);
    if (r != ncclSuccess) state = r;
    if (state != ncclSuccess && state != ncclInProgress) {
      return Fail(UnavailableError(Where(what) + ": NCCL asynchronous error: " +
                                   ncclGetErrorString(state) + "; communicators aborted"));
    }
  }
  return Status::Ok();
}

Status NcclCommunicators::WaitForStream(cudaStream_t stream, Deadline deadline,
                                        const char* what) {
  if (aborted_) return UnavailableError(Where(what) + ": communicators were aborted");
  int iteration = 0;
  while (true) {
    const cudaError_t q = cudaStreamQuery(stream);
    if (q == cudaSuccess) return Status::Ok();
    if (q != cudaErrorNotReady) {
      AbortAll();
      CUDACHECK(q);
    }
    RETURN_IF_ERROR(PollErrors(what));
    if (std::chrono::steady_clock::now() > deadline) {
      return Fail(Status(StatusCode::kDeadlineExceeded,
                         Where(what) + ": the GPU did not finish in time (a collective may be "
                                       "waiting for a dead peer); communicators aborted"));
    }
    Backoff(&iteration);
  }
}

Status NcclCommunicators::AllReduce(Group g, void* buffer, int64_t count, DType type,
                                    cudaStream_t stream, Deadline deadline) {
  ncclComm_t c = comm(g);
  if (c == nullptr) return Status::Ok();
  NCCLCHECK(ncclAllReduce(buffer, buffer, static_cast<size_t>(count), NcclType(type), ncclSum, c,
                          stream));
  return Settle(c, deadline, "all-reduce");
}

Status NcclCommunicators::ReduceScatter(Group g, const void* send, void* recv, int64_t recv_count,
                                        DType type, cudaStream_t stream, Deadline deadline) {
  ncclComm_t c = comm(g);
  if (c == nullptr) return Status::Ok();
  NCCLCHECK(ncclReduceScatter(send, recv, static_cast<size_t>(recv_count), NcclType(type), ncclSum,
                              c, stream));
  return Settle(c, deadline, "reduce-scatter");
}

Status NcclCommunicators::AllGather(Group g, const void* send, void* recv, int64_t send_count,
                                    DType type, cudaStream_t stream, Deadline deadline) {
  ncclComm_t c = comm(g);
  if (c == nullptr) return Status::Ok();
  NCCLCHECK(ncclAllGather(send, recv, static_cast<size_t>(send_count), NcclType(type), c, stream));
  return Settle(c, deadline, "all-gather");
}

Status NcclCommunicators::SendRecv(const void* send, int send_peer, void* recv, int recv_peer,
                                   int64_t count, DType type, cudaStream_t stream,
                                   Deadline deadline) {
  ncclComm_t c = comm(Group::kPipeline);
  if (c == nullptr || (send_peer < 0 && recv_peer < 0)) return Status::Ok();
  NCCLCHECK(ncclGroupStart());
  if (send_peer >= 0) {
    NCCLCHECK(ncclSend(send, static_cast<size_t>(count), NcclType(type), send_peer, c, stream));
  }
  if (recv_peer >= 0) {
    NCCLCHECK(ncclRecv(recv, static_cast<size_t>(count), NcclType(type), recv_peer, c, stream));
  }
  NCCLCHECK(ncclGroupEnd());
  return Settle(c, deadline, "pipeline send/recv");
}

}  // namespace pacer::worker
