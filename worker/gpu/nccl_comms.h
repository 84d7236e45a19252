// NcclCommunicators: the tensor-, data- and pipeline-parallel NCCL
// communicators of one rank, and the only way the GPU backend waits on the
// device, so that no wait can hang.
//
// Creation: for each group with more than one member (device_layout.h's
// CommunicatorGroupOf), the group's rank 0 creates an ncclUniqueId and Sets it
// in the rendezvous store under "gpu/nccl/<group>/<index>"; the others Get it.
// Communicators are nonblocking (ncclConfig_t.blocking = 0): init and every
// enqueue return at once, and Settle() polls ncclCommGetAsyncError until the
// operation is in place.
//
// Waiting: WaitForStream() polls cudaStreamQuery and ncclCommGetAsyncError on
// every communicator until the stream drains, an asynchronous NCCL error
// appears (Unavailable) or the deadline passes (DeadlineExceeded). On either
// failure every communicator is aborted (ncclCommAbort), which also unblocks
// kernels stuck waiting for a dead peer, so the rank exits instead of hanging
// and its peers see their own errors (nccl-tests' pattern).
//
// Units: element counts for collectives; deadlines are steady_clock points.
// Thread-safety: not thread-safe; one per rank, used from its thread.
#ifndef PACER_WORKER_GPU_NCCL_COMMS_H_
#define PACER_WORKER_GPU_NCCL_COMMS_H_

#include <cuda_runtime.h>
#include <nccl.h>

#include <array>
#include <chrono>
#include <cstdint>

#include "core/device_layout.h"
#include "core/step_schedule.h"
#include "core/tcp_store.h"
#include "core/worker_config.h"
#include "gpu/gpu_kernels.h"
#include "pacer/status.h"

namespace pacer::worker {

using Deadline = std::chrono::steady_clock::time_point;

class NcclCommunicators {
 public:
  NcclCommunicators() = default;
  NcclCommunicators(const NcclCommunicators&) = delete;
  NcclCommunicators& operator=(const NcclCommunicators&) = delete;
  // Destroys healthy communicators, aborts broken ones.
  ~NcclCommunicators();

  // Creates the communicators of `coordinates` under `config` on the current
  // device. DeadlineExceeded when a peer does not show up within `timeout`
  // (store Get or NCCL init), Unavailable on an NCCL error.
  Status Connect(const WorkerConfig& config, RankCoordinates coordinates, TcpStoreClient* store,
                 std::chrono::milliseconds timeout);

  // nullptr for a group of one (nothing to communicate).
  ncclComm_t comm(Group g) const { return comms_[Index(g)]; }
  int size(Group g) const { return groups_[Index(g)].size; }
  int rank(Group g) const { return groups_[Index(g)].rank; }

  // Enqueue on `stream`; each settles its nonblocking enqueue before
  // returning. Counts are elements of `type`; the reduction is a sum.
  Status AllReduce(Group g, void* buffer, int64_t count, DType type, cudaStream_t stream,
                   Deadline deadline);
  // recv[count] = sum over ranks of send[rank * count ...]; in place when
  // recv == send + rank * count.
  Status ReduceScatter(Group g, const void* send, void* recv, int64_t recv_count, DType type,
                       cudaStream_t stream, Deadline deadline);
  // recv[size * count] gathers every rank's send[count]; in place when
  // send == recv + rank * count.
  Status AllGather(Group g, const void* send, void* recv, int64_t send_count, DType type,
                   cudaStream_t stream, Deadline deadline);
  // One ncclGroupStart/End with an optional send and an optional receive on
  // the pipeline communicator (Megatron's batched isend/irecv): pairing each
  // send with the next receive keeps neighbouring stages from deadlocking.
  // A peer of -1 skips that half.
  Status SendRecv(const void* send, int send_peer, void* recv, int recv_peer, int64_t count,
                  DType type, cudaStream_t stream, Deadline deadline);

  // Polls until `stream` has drained; see the header comment.
  Status WaitForStream(cudaStream_t stream, Deadline deadline, const char* what);

  // Aborts every communicator (idempotent). Later calls fail with Unavailable.
  void AbortAll();
  bool aborted() const { return aborted_; }

 private:
  static int Index(Group g) { return static_cast<int>(g); }
  // Waits while `comm`'s state is ncclInProgress; aborts all on error/timeout.
  Status Settle(ncclComm_t comm, Deadline deadline, const char* what);
  // Checks every communicator for an asynchronous error.
  Status PollErrors(const char* what);
  Status Fail(Status status);

  std::array<ncclComm_t, 3> comms_{nullptr, nullptr, nullptr};
  std::array<CommunicatorGroup, 3> groups_{};
  bool aborted_ = false;
};

}  // namespace pacer::worker

#endif  // PACER_WORKER_GPU_NCCL_COMMS_H_
