#include "gpu/nccl_comms.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>

#include "gpu/cuda_check.h"

namespace pacer::worker {
namespace {

// Short sleeps: a collective of a few microseconds should not wait a
// millisecond, a hung one should not spin a core flat out.
void Backoff(int* iteration) {
  ++*iteration;
  if (*iteration < 100) return;
  std::this_thread::sleep_for(std::chrono::microseconds(*iteration < 1000 ? 10 : 200));
}

std::string Where(const char* file, int line, const std::string& what) {
  return GpuErrorWhere(file, line) + ": " + what;
}

// What NCCL says went wrong on `comm` (empty when it says nothing).
std::string LastError(ncclComm_t comm) {
  const char* last = ncclGetLastError(comm);
  return last != nullptr && last[0] != '\0' ? std::string(" (") + last + ")" : std::string();
}

bool Even(const std::vector<size_t>& counts) {
  return std::all_of(counts.begin(), counts.end(), [&](size_t c) { return c == counts[0]; });
}

// One count per member, or a bug in the caller.
Status CheckCounts(const char* op, const std::string& what, const std::vector<size_t>& counts,
                   int group_size) {
  if (counts.size() == static_cast<size_t>(group_size)) return Status::Ok();
  return InternalError(std::string(op) + " " + what + ": " + std::to_string(counts.size()) +
                       " counts for a group of " + std::to_string(group_size));
}

}  // namespace

// An NCCL call that, on failure, aborts every communicator (after reading
// NCCL's error text) and returns the mapped Status (cuda_check.h).
#define PACER_NCCL_OR_ABORT(cmd)                                                       \
  do {                                                                                 \
    ncclResult_t pacer_nccl_r_ = (cmd);                                                \
    if (pacer_nccl_r_ != ncclSuccess && pacer_nccl_r_ != ncclInProgress) {             \
      return Fail(::pacer::worker::NcclError(pacer_nccl_r_, __FILE__, __LINE__, #cmd)); \
    }                                                                                  \
  } while (0)

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
  if (status.code() == StatusCode::kInternal) return status;
  return Status(status.code(), status.message() + "; communicators aborted");
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

Status NcclCommunicators::Usable(const std::string& what) const {
  if (!aborted_) return Status::Ok();
  return UnavailableError(what + ": the NCCL communicators were aborted after an earlier failure");
}

Status NcclCommunicators::Connect(const WorkerConfig& config, RankCoordinates coordinates,
                                  TcpStoreClient* store, std::chrono::milliseconds timeout) {
  const Deadline deadline = std::chrono::steady_clock::now() + timeout;
  for (Group g : {Group::kTensor, Group::kData, Group::kPipeline}) {
    const CommunicatorGroup group = CommunicatorGroupOf(config, coordinates, g);
    groups_[Index(g)] = group;
    if (group.size == 1) continue;
    if (store == nullptr) {
      return FailedPreconditionError("GPU device: a " + std::string(GroupName(g)) + " group of " +
                                     std::to_string(group.size) +
                                     " ranks needs the rendezvous store");
    }
    // Every member creates the communicators of its groups in this same
    // order (tensor, data, pipeline forward, pipeline backward).
    RETURN_IF_ERROR(Create(group, Index(g), group.StoreKey(), store, deadline));
    if (g == Group::kPipeline) {
      RETURN_IF_ERROR(Create(group, Index(PipeDirection::kBackward), group.StoreKey() + "/backward",
                             store, deadline));
    }
  }
  return Status::Ok();
}

Status NcclCommunicators::Create(const CommunicatorGroup& group, size_t slot,
                                 const std::string& key, TcpStoreClient* store,
                                 Deadline deadline) {
  ncclUniqueId id;
  if (group.rank == 0) {
    PACER_NCCL_OR_ABORT(ncclGetUniqueId(&id));
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
  PACER_NCCL_OR_ABORT(ncclCommInitRankConfig(&comm, group.size, id, group.rank, &nccl_config));
  comms_[slot] = comm;
  return Settle(comm, deadline, "init of " + key, store);
}

Status NcclCommunicators::Settle(ncclComm_t comm, Deadline deadline, const std::string& what,
                                 const TcpStoreClient* interruptible) {
  RETURN_IF_ERROR(Usable(what));
  int iteration = 0;
  while (true) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) state = r;
    if (state == ncclSuccess) return Status::Ok();
    if (state != ncclInProgress) {
      return Fail(NcclError(state, __FILE__, __LINE__, what.c_str()));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return Fail(Status(StatusCode::kDeadlineExceeded,
                         Where(__FILE__, __LINE__, what) +
                             ": NCCL did not finish in time (a peer may have died)"));
    }
    // The group's rank 0 waits here for members that may never come (the
    // others waited for its id in the store, which is interruptible too):
    // aborting the communicator is how an NCCL init is cancelled.
    if (interruptible != nullptr && interruptible->Interrupted()) {
      return Fail(Status(StatusCode::kAborted,
                         Where(__FILE__, __LINE__, what) +
                             ": gave up waiting for the group's other ranks: the rank is "
                             "stopping"));
    }
    Backoff(&iteration);
  }
}

Status NcclCommunicators::PollErrors(const std::string& what) {
  for (ncclComm_t c : comms_) {
    if (c == nullptr) continue;
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(c, &state);
    if (r != ncclSuccess) state = r;
    if (state != ncclSuccess && state != ncclInProgress) {
      const std::string last = LastError(c);
      const std::string message = Where(__FILE__, __LINE__, what) +
                                  ": NCCL asynchronous error: " + ncclGetErrorString(state) + last;
      // Classified as NcclError does (cuda_check.h): invalid usage is a bug,
      // not a failure of this node (Unavailable is exit 4, a strike against
      // it); a failed CUDA allocation is out of memory.
      const StatusCode code = NcclErrorStatusCode(state, last);
      if (code == StatusCode::kInternal) {
        return Fail(InternalError(message + "; invalid use of NCCL is a bug in pacer-worker "
                                            "(please report it)"));
      }
      return Fail(Status(code, message));
    }
  }
  return Status::Ok();
}

Status NcclCommunicators::WaitForStream(cudaStream_t stream, Deadline deadline,
                                        const std::string& what) {
  RETURN_IF_ERROR(Usable(what));
  int iteration = 0;
  while (true) {
    const cudaError_t q = cudaStreamQuery(stream);
    if (q == cudaSuccess) return Status::Ok();
    if (q != cudaErrorNotReady) {
      AbortAll();
      // A fault of any kernel queued before this wait surfaces here; `what`
      // names the operation and step, which CUDACHECK(q) alone lost.
      return Status(CudaErrorStatusCode(q), Where(__FILE__, __LINE__, what) +
                                                ": CUDA error: " + cudaGetErrorString(q) +
                                                " (a kernel queued before this wait failed)");
    }
    RETURN_IF_ERROR(PollErrors(what));
    if (std::chrono::steady_clock::now() > deadline) {
      return Fail(Status(StatusCode::kDeadlineExceeded,
                         Where(__FILE__, __LINE__, what) +
                             ": the GPU did not finish in time (a collective may be waiting for "
                             "a dead peer)"));
    }
    Backoff(&iteration);
  }
}

Status NcclCommunicators::AllReduce(Group g, float* data, size_t n, cudaStream_t stream,
                                    Deadline deadline, const std::string& what) {
  ncclComm_t c = comms_[Index(g)];
  if (size(g) == 1 || n == 0) return Status::Ok();
  RETURN_IF_ERROR(Usable(what));
  PACER_NCCL_OR_ABORT(ncclAllReduce(data, data, n, ncclFloat32, ncclSum, c, stream));
  return Settle(c, deadline, "all-reduce " + what);
}

Status NcclCommunicators::AllGather(Group g, const float* in, float* out,
                                    const std::vector<size_t>& counts, cudaStream_t stream,
                                    Deadline deadline, const std::string& what) {
  ncclComm_t c = comms_[Index(g)];
  if (size(g) == 1) return Status::Ok();
  RETURN_IF_ERROR(Usable(what));
  RETURN_IF_ERROR(CheckCounts("all-gather", what, counts, size(g)));
  if (Even(counts)) {
    PACER_NCCL_OR_ABORT(ncclAllGather(in, out, counts[0], ncclFloat32, c, stream));
  } else {
    PACER_NCCL_OR_ABORT(ncclGroupStart());
    size_t offset = 0;
    for (int root = 0; root < size(g); ++root) {
      const size_t n = counts[static_cast<size_t>(root)];
      if (n > 0) {
        PACER_NCCL_OR_ABORT(ncclBroadcast(in, out + offset, n, ncclFloat32, root, c, stream));
      }
      offset += n;
    }
    PACER_NCCL_OR_ABORT(ncclGroupEnd());
  }
  return Settle(c, deadline, "all-gather " + what);
}

Status NcclCommunicators::ReduceScatter(Group g, const float* data, float* out,
                                        const std::vector<size_t>& counts, cudaStream_t stream,
                                        Deadline deadline, const std::string& what) {
  ncclComm_t c = comms_[Index(g)];
  if (size(g) == 1) return Status::Ok();
  RETURN_IF_ERROR(Usable(what));
  RETURN_IF_ERROR(CheckCounts("reduce-scatter", what, counts, size(g)));
  if (Even(counts)) {
    PACER_NCCL_OR_ABORT(ncclReduceScatter(data, out, counts[0], ncclFloat32, ncclSum, c, stream));
  } else {
    PACER_NCCL_OR_ABORT(ncclGroupStart());
    size_t offset = 0;
    for (int root = 0; root < size(g); ++root) {
      const size_t n = counts[static_cast<size_t>(root)];
      // Only the root's receive buffer is written; the others pass theirs
      // (NCCL ignores it) so no pointer is ever null.
      if (n > 0) {
        PACER_NCCL_OR_ABORT(
            ncclReduce(data + offset, out, n, ncclFloat32, ncclSum, root, c, stream));
      }
      offset += n;
    }
    PACER_NCCL_OR_ABORT(ncclGroupEnd());
  }
  return Settle(c, deadline, "reduce-scatter " + what);
}

Status NcclCommunicators::Send(PipeDirection direction, int peer, const float* data, size_t n,
                               cudaStream_t stream, Deadline deadline, const std::string& what) {
  ncclComm_t c = comms_[Index(direction)];
  if (size(Group::kPipeline) == 1 || n == 0) return Status::Ok();
  RETURN_IF_ERROR(Usable(what));
  PACER_NCCL_OR_ABORT(ncclSend(data, n, ncclFloat32, peer, c, stream));
  return Settle(c, deadline, "send of " + what + " to pipeline rank " + std::to_string(peer));
}

Status NcclCommunicators::Recv(PipeDirection direction, int peer, float* data, size_t n,
                               cudaStream_t stream, Deadline deadline, const std::string& what) {
  ncclComm_t c = comms_[Index(direction)];
  if (size(Group::kPipeline) == 1 || n == 0) return Status::Ok();
  RETURN_IF_ERROR(Usable(what));
  PACER_NCCL_OR_ABORT(ncclRecv(data, n, ncclFloat32, peer, c, stream));
  return Settle(c, deadline,
                "receive of " + what + " from pipeline rank " + std::to_string(peer));
}

}  // namespace pacer::worker
