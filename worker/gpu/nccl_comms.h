// NcclCommunicators: the tensor- and data-parallel NCCL communicators of one
// rank and two pipeline communicators (one per direction of point-to-point
// traffic), and the only way the GPU device waits on the GPU, so that no
// wait can hang.
//
// Creation: for each group with more than one member (device_layout.h's
// CommunicatorGroupOf), the group's rank 0 creates an ncclUniqueId and Sets it
// in the rendezvous store under "gpu/nccl/<group>/<index>" (the backward
// pipeline communicator under ".../backward"); the others Get it.
// Communicators are nonblocking (ncclConfig_t.blocking = 0): init and every
// enqueue return at once, and Settle() polls ncclCommGetAsyncError until the
// operation is in place.
//
// Why two pipeline communicators: NCCL runs the operations of one
// communicator in the order they were issued. With one communicator a
// stage's send of the next activations could queue in front of its receive
// of the gradients its neighbour is already sending, and both would wait
// for each other; with one communicator per direction (and sends on their
// own streams, gpu_device.cu), forward traffic never waits for backward
// traffic.
//
// Errors: every NCCL failure aborts all communicators (ncclCommAbort, so no
// peer waits for this rank) before it returns. A system, remote or internal
// error is Unavailable with ncclGetLastError's text and the file:line of the
// call; invalid usage is Internal (a bug, not the node's fault), as
// cuda_check.h says, here and in the asynchronous errors the waits poll.
//
// Waiting: WaitForStream() polls cudaStreamQuery and ncclCommGetAsyncError on
// every communicator until the stream drains, an asynchronous NCCL error
// appears (Unavailable) or the deadline passes (DeadlineExceeded). On either
// failure every communicator is aborted, which also unblocks kernels stuck
// waiting for a dead peer, so the rank exits instead of hanging and its
// peers see their own errors (nccl-tests' pattern).
//
// Units: element counts (fp32) for collectives; deadlines are steady_clock
// points. Thread-safety: not thread-safe; one per rank, used from its thread.
#ifndef PACER_WORKER_GPU_NCCL_COMMS_H_
#define PACER_WORKER_GPU_NCCL_COMMS_H_

#include <cuda_runtime.h>
#include <nccl.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/device_layout.h"
#include "core/step_schedule.h"
#include "core/tcp_store.h"
#include "core/worker_config.h"
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
  // (store Get or NCCL init), Unavailable on an NCCL error, Aborted (all
  // communicators aborted) when the store's interrupt reports the rank
  // stopping while it waits (tcp_store.h, "Interrupts").
  Status Connect(const WorkerConfig& config, RankCoordinates coordinates, TcpStoreClient* store,
                 std::chrono::milliseconds timeout);

  int size(Group g) const { return groups_[static_cast<size_t>(g)].size; }
  int rank(Group g) const { return groups_[static_cast<size_t>(g)].rank; }

  // Enqueue on `stream` (fp32 sums); each settles its nonblocking enqueue
  // before returning but does not wait for the data. A group of one does
  // nothing (the caller copies). `what` names the operation in errors.
  Status AllReduce(Group g, float* data, size_t n, cudaStream_t stream, Deadline deadline,
                   const std::string& what);
  // out (sum of counts) = every member's `in` (counts[rank] elements), in
  // rank order. Equal counts: ncclAllGather; unequal: one grouped
  // ncclBroadcast per member (an all-gather-v).
  Status AllGather(Group g, const float* in, float* out, const std::vector<size_t>& counts,
                   cudaStream_t stream, Deadline deadline, const std::string& what);
  // out (counts[rank]) = the sum over members of their data's rank-th part.
  // Equal counts: ncclReduceScatter; unequal: one grouped ncclReduce per
  // member (a reduce-scatter-v).
  Status ReduceScatter(Group g, const float* data, float* out, const std::vector<size_t>& counts,
                       cudaStream_t stream, Deadline deadline, const std::string& what);
  // Point-to-point with pipeline-group member `peer` on the communicator of
  // `direction`.
  Status Send(PipeDirection direction, int peer, const float* data, size_t n, cudaStream_t stream,
              Deadline deadline, const std::string& what);
  Status Recv(PipeDirection direction, int peer, float* data, size_t n, cudaStream_t stream,
              Deadline deadline, const std::string& what);

  // Polls until `stream` has drained; see the header comment.
  Status WaitForStream(cudaStream_t stream, Deadline deadline, const std::string& what);

  // Aborts every communicator (idempotent). Later calls fail with Unavailable.
  void AbortAll();
  bool aborted() const { return aborted_; }

 private:
  // tensor, data, pipeline forward, pipeline backward.
  static constexpr size_t kComms = 4;
  static size_t Index(Group g) { return static_cast<size_t>(g); }
  static size_t Index(PipeDirection d) {
    return d == PipeDirection::kForward ? Index(Group::kPipeline) : 3;
  }
  // Creates communicator `slot` of `group` under the store key `key`.
  Status Create(const CommunicatorGroup& group, size_t slot, const std::string& key,
                TcpStoreClient* store, Deadline deadline);
  // Waits while `comm`'s state is ncclInProgress; aborts all on error/timeout,
  // and, with `interruptible` (an init, which waits for peers that may never
  // come), once its interrupt reports the rank stopping.
  Status Settle(ncclComm_t comm, Deadline deadline, const std::string& what,
                const TcpStoreClient* interruptible = nullptr);
  // Checks every communicator for an asynchronous error.
  Status PollErrors(const std::string& what);
  Status Fail(Status status);
  Status Usable(const std::string& what) const;

  std::array<ncclComm_t, kComms> comms_{nullptr, nullptr, nullptr, nullptr};
  std::array<CommunicatorGroup, 3> groups_{};
  bool aborted_ = false;
};

}  // namespace pacer::worker

#endif  // PACER_WORKER_GPU_NCCL_COMMS_H_
