// NCCL's collectives as the cost model times them: ring and tree algorithms,
// a latency term per hop plus bytes over bus bandwidth, inside a node over
// NVLink and across nodes over all of a node's NICs.
//
// Bus bandwidth follows nccl-tests (doc/PERFORMANCE.md): all-reduce moves
// 2 (n-1)/n x S bytes per rank, reduce-scatter and all-gather (n-1)/n x S
// (S the full buffer). A ring that spans nodes crosses each node once per
// channel, and NCCL runs one channel per NIC, so a group with every GPU of
// its nodes sees the node's whole network bandwidth as bus bandwidth; a group
// with r of a node's G GPUs (the other G - r run their own groups at the same
// time, e.g. the data-parallel groups of different tensor-parallel ranks)
// gets r / G of it.
//
// Units: bytes, seconds, bytes per second. Thread-safety: pure functions.
#ifndef PACER_PLANNER_COLLECTIVES_H_
#define PACER_PLANNER_COLLECTIVES_H_

namespace pacer::planner {

enum class CollectiveAlgorithm { kNone, kRing, kTree };
const char* CollectiveAlgorithmName(CollectiveAlgorithm a);  // "ring", "tree", "none"

// One communicator: `ranks` GPUs, `ranks_per_node` of them on each node.
struct CollectiveGroup {
  int ranks = 1;
  int ranks_per_node = 1;
  // Achieved bus bandwidth of large messages inside a node (NVLink or PCIe).
  double intra_node_busbw_bytes_per_second = 0;
  // Achieved bandwidth of the group's share of the node's NICs, all of them
  // together (the caller applies the r / G share and efficiency).
  double inter_node_busbw_bytes_per_second = 0;
  // Per-hop latency of the low-latency protocol, and the fixed cost of one
  // collective kernel (launch and synchronisation).
  double intra_node_hop_seconds = 0;
  double inter_node_hop_seconds = 0;
  double base_seconds = 0;

  int nodes() const { return (ranks + ranks_per_node - 1) / ranks_per_node; }
};

struct CollectiveTime {
  double seconds = 0;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::kNone;
  double busbw_bytes_per_second = 0;  // the bandwidth term's bus bandwidth
  double latency_seconds = 0;         // the part that does not shrink with bytes
};

// All-reduce of `bytes` (the buffer each rank holds): the faster of a ring
// (latency 2 (n-1) hops) and NCCL's double binary tree across nodes (latency
// 2 log2(nodes) inter-node hops plus a chain inside each node, same bus
// bandwidth at large sizes). One rank, or no bytes: zero.
CollectiveTime AllReduceTime(double bytes, const CollectiveGroup& group);
// Reduce-scatter or all-gather of a `bytes` buffer (ring only in NCCL):
// (n-1)/n x bytes over bus bandwidth plus (n-1) hops.
CollectiveTime ReduceScatterTime(double bytes, const CollectiveGroup& group);
CollectiveTime AllGatherTime(double bytes, const CollectiveGroup& group);

}  // namespace pacer::planner

#endif  // PACER_PLANNER_COLLECTIVES_H_
