#include "pacer/planner/collectives.h"

#include <algorithm>
#include <cmath>

namespace pacer::planner {
namespace {

// The slowest link a ring crosses sets its bus bandwidth: NVLink inside a
// node, the group's NIC share between nodes.
double RingBusbw(const CollectiveGroup& g) {
  if (g.nodes() <= 1) return g.intra_node_busbw_bytes_per_second;
  return std::min(g.intra_node_busbw_bytes_per_second, g.inter_node_busbw_bytes_per_second);
}

// Hops around a ring of n ranks on m nodes: n - m inside nodes, m between.
double RingHopSeconds(const CollectiveGroup& g) {
  const int m = g.nodes();
  const int n = g.ranks;
  if (m <= 1) return (n - 1) * g.intra_node_hop_seconds;
  return (n - m) * g.intra_node_hop_seconds + m * g.inter_node_hop_seconds;
}

}  // namespace

const char* CollectiveAlgorithmName(CollectiveAlgorithm a) {
  switch (a) {
    case CollectiveAlgorithm::kNone:
      return "none";
    case CollectiveAlgorithm::kRing:
      return "ring";
    case CollectiveAlgorithm::kTree:
      return "tree";
  }
  return "unknown";
}

CollectiveTime AllReduceTime(double bytes, const CollectiveGroup& g) {
  CollectiveTime out;
  if (g.ranks <= 1 || bytes <= 0) return out;
  const double n = g.ranks;
  const double busbw = RingBusbw(g);
  const double volume = 2.0 * (n - 1) / n * bytes;
  // Ring: reduce-scatter then all-gather around the ring, 2 (n-1) steps.
  const double ring_latency = g.base_seconds + 2.0 * RingHopSeconds(g);
  const double ring = ring_latency + volume / busbw;
  out = {ring, CollectiveAlgorithm::kRing, busbw, ring_latency};
  const int m = g.nodes();
  if (m > 1) {
    // Tree: up and down a double binary tree of nodes (depth log2 m), each
    // node reducing along a chain of its r ranks; pipelined, so at large
    // sizes its bandwidth is the ring's.
    const double tree_latency =
        g.base_seconds +
        2.0 * (std::ceil(std::log2(static_cast<double>(m))) * g.inter_node_hop_seconds +
               (g.ranks_per_node - 1) * g.intra_node_hop_seconds);
    const double tree = tree_latency + volume / busbw;
    if (tree < ring) out = {tree, CollectiveAlgorithm::kTree, busbw, tree_latency};
  }
  return out;
}

CollectiveTime ReduceScatterTime(double bytes, const CollectiveGroup& g) {
  CollectiveTime out;
  if (g.ranks <= 1 || bytes <= 0) return out;
  const double n = g.ranks;
  const double busbw = RingBusbw(g);
  const double latency = g.base_seconds + RingHopSeconds(g);
  out = {latency + (n - 1) / n * bytes / busbw, CollectiveAlgorithm::kRing, busbw, latency};
  return out;
}

CollectiveTime AllGatherTime(double bytes, const CollectiveGroup& g) {
  return ReduceScatterTime(bytes, g);
}

}  // namespace pacer::planner
