// GlooComms: the CPU backend's communicators. One Gloo context per parallel
// group this rank belongs to (tensor-parallel: the t consecutive ranks;
// data-parallel: the d ranks with the same tensor and pipeline rank;
// pipeline: the p ranks with the same tensor and data rank), each met
// through its own PrefixStore over the job's TCP store ("cpu/<group>/<n>"),
// so the groups rendezvous separately. Groups of one rank get no context and
// their collectives are no-ops.
//
// Collectives run on fp32 buffers: all-reduce (Gloo's ring), all-gather
// (Gloo's allgatherv), reduce-scatter (a ring over unbound buffers; this
// Gloo has no new-style reduce-scatter), and pipeline send / receive. Sends
// are asynchronous (copied, then waited for in FlushSends) because 1F1B's
// steady state sends an activation forward before it receives a gradient
// back; blocking sends would deadlock two neighbouring stages.
//
// Errors: Gloo throws on a peer failure or a timeout; every call catches and
// returns Unavailable (a peer closed the connection) or DeadlineExceeded (a
// wait ran past the context timeout), naming the group, the operation, the
// peers' global ranks and which peers did not fail alongside (each failing
// rank leaves "cpu/failed/<rank>" = step in the store and waits briefly for
// its group's marks: a peer without one is dead, hung or elsewhere). Steps
// never touch the store, so it stays off the step loop. After a failure the
// contexts are closed (Abort), so peers waiting on this rank fail fast
// instead of hanging.
//
// Units: element counts (floats) and milliseconds.
// Thread-safety: one rank's thread; not thread-safe. Distinct instances
// (ranks) may run concurrently in one process.
#ifndef PACER_WORKER_CPU_GLOO_COMMS_H_
#define PACER_WORKER_CPU_GLOO_COMMS_H_

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/gloo_store.h"
#include "core/step_schedule.h"
#include "core/tcp_store.h"
#include "core/worker_config.h"
#include "pacer/status.h"

namespace gloo {
class Context;
namespace transport {
class Device;
class UnboundBuffer;
}  // namespace transport
}  // namespace gloo

namespace pacer::worker::cpu {

// Pipeline streams: activations travel forward, gradients backward.
enum class Stream { kForward = 0, kBackward = 1 };

class GlooComms {
 public:
  // Connects this rank's tensor, data and pipeline groups (in that order on
  // every rank, so overlapping groups cannot deadlock). `store` is borrowed.
  static StatusOr<std::unique_ptr<GlooComms>> Connect(const WorkerConfig& config, int global_rank,
                                                      TcpStoreClient* store,
                                                      std::chrono::milliseconds timeout);
  ~GlooComms();
  GlooComms(const GlooComms&) = delete;
  GlooComms& operator=(const GlooComms&) = delete;

  int size(Group g) const { return groups_[Index(g)].size; }
  int rank(Group g) const { return groups_[Index(g)].index; }
  // The global rank of member `index` of this rank's group `g`.
  int GlobalRank(Group g, int index) const { return groups_[Index(g)].members[index]; }

  // Sums `n` floats in place over the group.
  Status AllReduce(Group g, float* data, size_t n, const std::string& what);
  // out (sum of counts) = the members' inputs in rank order; `in` has
  // counts[rank(g)] floats.
  Status AllGather(Group g, const float* in, float* out, const std::vector<size_t>& counts,
                   const std::string& what);
  // `data` (sum of counts, consumed as scratch) summed over the group; this
  // rank's chunk lands in `out` (counts[rank(g)] floats).
  Status ReduceScatter(Group g, float* data, float* out, const std::vector<size_t>& counts,
                       const std::string& what);
  // Pipeline point-to-point with the member `peer` (pipeline-group index).
  // Send copies `data` and returns at once; FlushSends waits for them all.
  Status Send(int peer, Stream stream, const float* data, size_t n, const std::string& what);
  Status Recv(int peer, Stream stream, float* data, size_t n, const std::string& what);
  Status FlushSends();

  // The step later failures belong to (error messages only; no I/O).
  void SetStep(int64_t step) { step_ = step; }
  // Closes every context: pending operations on peers fail promptly.
  void Abort();

 private:
  struct GroupComm {
    Group group = Group::kTensor;
    int size = 1;
    int index = 0;
    std::vector<int> members;  // global ranks, by index
    std::shared_ptr<gloo::Context> context;
  };
  struct PendingSend {
    std::vector<float> data;
    std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
    int peer = 0;
    std::string what;
  };

  GlooComms(int global_rank, TcpStoreClient* store, std::chrono::milliseconds timeout);
  static size_t Index(Group g) { return static_cast<size_t>(g); }
  // The Status for a Gloo exception during `op` on group `g`.
  Status Failure(const GroupComm& g, const std::string& op, const std::string& what,
                 const std::string& error, bool timed_out);
  // Who in `g` did not also report a failure (see the header comment).
  std::string SilentPeers(const GroupComm& g);

  const int global_rank_;
  TcpStoreClient* store_;
  const std::chrono::milliseconds timeout_;
  std::unique_ptr<GlooStore> gloo_store_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::array<GroupComm, 3> groups_;
  std::vector<PendingSend> pending_sends_;
  // Per peer and stream: how many messages went out / came in; the nth send
  // of a stream matches the nth receive, so the count names the slot.
  std::vector<std::array<uint64_t, 2>> sent_, received_;
  std::array<uint64_t, 3> reduce_scatter_calls_{};  // per group: names the slots
  int64_t step_ = -1;
  bool aborted_ = false;
};

}  // namespace pacer::worker::cpu

#endif  // PACER_WORKER_CPU_GLOO_COMMS_H_
