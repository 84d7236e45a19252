#include "cpu/gloo_comms.h"

#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/attr.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <numeric>
#include <utility>

#include "core/device_layout.h"
#include "cpu/cpu_kernels.h"

namespace pacer::worker::cpu {
namespace {

// Slot prefixes above Gloo's own (which are small), so our point-to-point
// and reduce-scatter messages never match one of Gloo's algorithms.
constexpr uint64_t kReduceScatterSlot = uint64_t{0x70} << 56;
constexpr uint64_t kPipelineSlot = uint64_t{0x71} << 56;

// Gloo's PrefixStore waits up to Gloo's 30 s default when no timeout is
// given; in Pacer every wait is bounded by the job's timeout.
class BoundedPrefixStore : public gloo::rendezvous::PrefixStore {
 public:
  BoundedPrefixStore(const std::string& prefix, gloo::rendezvous::Store& store,
                     std::chrono::milliseconds timeout)
      : PrefixStore(prefix, store), timeout_(timeout) {}
  void wait(const std::vector<std::string>& keys) override { PrefixStore::wait(keys, timeout_); }
  using PrefixStore::wait;

 private:
  const std::chrono::milliseconds timeout_;
};

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

const char* GroupLabel(Group g) {
  switch (g) {
    case Group::kTensor:
      return "tensor-parallel";
    case Group::kData:
      return "data-parallel";
    case Group::kPipeline:
      return "pipeline";
  }
  return "unknown";
}

bool LooksTimedOut(const std::string& message) {
  return message.find("Timed out") != std::string::npos ||
         message.find("timed out") != std::string::npos ||
         message.find("DEADLINE_EXCEEDED") != std::string::npos;
}

std::string JoinRanks(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) out += ",";
    out += std::to_string(ranks[i]);
  }
  return out;
}

}  // namespace

GlooComms::GlooComms(int global_rank, TcpStoreClient* store, std::chrono::milliseconds timeout)
    : global_rank_(global_rank), store_(store), timeout_(timeout) {}

GlooComms::~GlooComms() { Abort(); }

StatusOr<std::unique_ptr<GlooComms>> GlooComms::Connect(const WorkerConfig& config, int global_rank,
                                                        TcpStoreClient* store,
                                                        std::chrono::milliseconds timeout) {
  if (store == nullptr) return InvalidArgumentError("the CPU backend needs the rendezvous store");
  std::unique_ptr<GlooComms> comms(new GlooComms(global_rank, store, timeout));
  comms->gloo_store_ = std::make_unique<GlooStore>(*store, timeout);

  const RankCoordinates me = CoordinatesOf(config, global_rank);
  const int p = config.pipeline_parallel;
  for (Group g : {Group::kTensor, Group::kData, Group::kPipeline}) {
    CommunicatorGroup group = CommunicatorGroupOf(config, me, g);
    comms->groups_[Index(g)] = {g, group.size, group.rank, std::move(group.members), nullptr};
  }
  comms->sent_.assign(static_cast<size_t>(p), {0, 0});
  comms->received_.assign(static_cast<size_t>(p), {0, 0});

  try {
    gloo::transport::tcp::attr attr;
    const char* iface = std::getenv("GLOO_SOCKET_IFNAME");
    if (IsLoopback(config.master_addr)) {
      attr.hostname = "127.0.0.1";  // a local run: keep it off the network
    } else if (iface != nullptr && *iface != '\0') {
      attr.iface = iface;
    } else {
      char host[256] = {};
      if (gethostname(host, sizeof(host) - 1) == 0) attr.hostname = host;
    }
    comms->device_ = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    return UnavailableError(std::string("rank ") + std::to_string(global_rank) +
                            ": cannot open a Gloo TCP device: " + e.what());
  }

  for (GroupComm& g : comms->groups_) {
    if (g.size == 1) continue;
    // The group's instance is named by its lowest member's global rank.
    const std::string prefix =
        std::string("cpu/") + GroupName(g.group) + "/" + std::to_string(g.members.front());
    try {
      auto context = std::make_shared<gloo::rendezvous::Context>(g.index, g.size);
      context->setTimeout(timeout);
      BoundedPrefixStore prefixed(prefix, *comms->gloo_store_, timeout);
      context->connectFullMesh(prefixed, comms->device_);
      g.context = std::move(context);
    } catch (const std::exception& e) {
      const std::string message = e.what();
      Status s = comms->Failure(g, "rendezvous", prefix, message, LooksTimedOut(message));
      return s;
    }
  }
  return comms;
}

std::string GlooComms::SilentPeers(const GroupComm& g) {
  // Only on the failure path: this rank says where it failed, then gives
  // each peer a short wait to say the same. Peers that failed too answer
  // within milliseconds; one that is dead, hung or in another operation
  // does not, and is named.
  (void)store_->Set("cpu/failed/" + std::to_string(global_rank_), std::to_string(step_));
  std::string silent;
  for (int member : g.members) {
    if (member == global_rank_) continue;
    StatusOr<std::string> mark =
        store_->Get("cpu/failed/" + std::to_string(member), std::chrono::milliseconds(500));
    std::string where;
    if (!mark.ok()) {
      where = "did not report the failure (dead, hung, or in another operation)";
    } else if (std::strtoll(mark->c_str(), nullptr, 10) < step_) {
      where = "failed earlier, at step " + *mark;
    } else {
      continue;
    }
    if (!silent.empty()) silent += "; ";
    silent += "global rank " + std::to_string(member) + " " + where;
  }
  return silent;
}

Status GlooComms::Failure(const GroupComm& g, const std::string& op, const std::string& what,
                          const std::string& error, bool timed_out) {
  std::string message = std::string(GroupLabel(g.group)) + " " + op + " '" + what +
                        "' failed on global rank " + std::to_string(global_rank_) + " (group of " +
                        std::to_string(g.size) + ": global ranks " + JoinRanks(g.members) + ")";
  if (step_ >= 0) message += " at step " + std::to_string(step_);
  const std::string lagging = SilentPeers(g);
  if (!lagging.empty()) message += "; " + lagging;
  message += ": " + error;
  Abort();
  return timed_out ? Status(StatusCode::kDeadlineExceeded, message) : UnavailableError(message);
}

void GlooComms::Abort() {
  if (aborted_) return;
  aborted_ = true;
  // Buffers first: they hold their context.
  pending_sends_.clear();
  for (GroupComm& g : groups_) g.context.reset();
}

Status GlooComms::AllReduce(Group group, float* data, size_t n, const std::string& what) {
  GroupComm& g = groups_[Index(group)];
  if (g.size == 1 || n == 0) return Status::Ok();
  if (aborted_) return UnavailableError("communicators were closed after an earlier failure");
  try {
    gloo::AllreduceOptions opts(g.context);
    opts.setOutput(data, n);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    opts.setTimeout(timeout_);
    gloo::allreduce(opts);
  } catch (const std::exception& e) {
    return Failure(g, "all-reduce", what, e.what(), LooksTimedOut(e.what()));
  }
  return Status::Ok();
}

Status GlooComms::AllGather(Group group, const float* in, float* out,
                            const std::vector<size_t>& counts, const std::string& what) {
  GroupComm& g = groups_[Index(group)];
  const size_t mine = counts[static_cast<size_t>(g.index)];
  if (g.size == 1) {
    std::memmove(out, in, mine * sizeof(float));
    return Status::Ok();
  }
  if (aborted_) return UnavailableError("communicators were closed after an earlier failure");
  try {
    gloo::AllgathervOptions opts(g.context);
    // Gloo copies the input into its slot of the output; it must not alias.
    std::vector<float> input(in, in + mine);
    opts.setInput(input.data(), mine);
    opts.setOutput(out, counts);
    opts.setTimeout(timeout_);
    gloo::allgatherv(opts);
  } catch (const std::exception& e) {
    return Failure(g, "all-gather", what, e.what(), LooksTimedOut(e.what()));
  }
  return Status::Ok();
}

Status GlooComms::ReduceScatter(Group group, float* data, float* out,
                                const std::vector<size_t>& counts, const std::string& what) {
  GroupComm& g = groups_[Index(group)];
  const int n = g.size, r = g.index;
  std::vector<size_t> offsets(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) offsets[i] = offsets[i - 1] + counts[i - 1];
  const size_t total = offsets.back() + counts.back();
  if (n == 1) {
    std::memmove(out, data, counts[0] * sizeof(float));
    return Status::Ok();
  }
  if (aborted_) return UnavailableError("communicators were closed after an earlier failure");
  // Ring: at step s rank r sends its partial sum of chunk r-s-1 to r+1 and
  // adds the partial of chunk r-s-2 from r-1; after n-1 steps chunk r holds
  // all n contributions. Each rank moves (n-1)/n of the buffer.
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  const size_t largest = *std::max_element(counts.begin(), counts.end());
  std::vector<float> incoming(largest);
  uint64_t& calls = reduce_scatter_calls_[Index(group)];
  int peer = right;
  try {
    auto send_buf = g.context->createUnboundBuffer(data, total * sizeof(float));
    auto recv_buf = g.context->createUnboundBuffer(incoming.data(), largest * sizeof(float));
    for (int s = 0; s < n - 1; ++s) {
      const uint64_t slot =
          kReduceScatterSlot | (calls * static_cast<uint64_t>(n) + static_cast<uint64_t>(s));
      const size_t send_chunk = static_cast<size_t>((r - s - 1 + 2 * n) % n);
      const size_t recv_chunk = static_cast<size_t>((r - s - 2 + 2 * n) % n);
      recv_buf->recv(left, slot, 0, counts[recv_chunk] * sizeof(float));
      if (counts[send_chunk] > 0) {
        send_buf->send(right, slot, offsets[send_chunk] * sizeof(float),
                       counts[send_chunk] * sizeof(float));
      }
      peer = left;
      if (!recv_buf->waitRecv(timeout_)) throw gloo::IoException("receive aborted");
      peer = right;
      if (counts[send_chunk] > 0 && !send_buf->waitSend(timeout_)) {
        throw gloo::IoException("send aborted");
      }
      AddInPlace(data + offsets[recv_chunk], incoming.data(), counts[recv_chunk]);
    }
  } catch (const std::exception& e) {
    return Failure(g, "reduce-scatter", what,
                   "waiting for global rank " + std::to_string(g.members[peer]) + ": " + e.what(),
                   LooksTimedOut(e.what()));
  }
  ++calls;
  std::memcpy(out, data + offsets[static_cast<size_t>(r)],
              counts[static_cast<size_t>(r)] * sizeof(float));
  return Status::Ok();
}

Status GlooComms::Send(int peer, Stream stream, const float* data, size_t n,
                       const std::string& what) {
  GroupComm& g = groups_[Index(Group::kPipeline)];
  if (aborted_) return UnavailableError("communicators were closed after an earlier failure");
  const size_t st = static_cast<size_t>(stream);
  uint64_t& count = sent_[static_cast<size_t>(peer)][st];
  const uint64_t slot = kPipelineSlot | (uint64_t{st} << 48) | count;
  try {
    PendingSend pending;
    pending.data.assign(data, data + n);
    pending.buffer = g.context->createUnboundBuffer(pending.data.data(), n * sizeof(float));
    pending.buffer->send(peer, slot);
    pending.peer = peer;
    pending.what = what;
    pending_sends_.push_back(std::move(pending));
  } catch (const std::exception& e) {
    return Failure(g, "send", what,
                   "to global rank " + std::to_string(g.members[peer]) + ": " + e.what(),
                   LooksTimedOut(e.what()));
  }
  ++count;
  return Status::Ok();
}

Status GlooComms::Recv(int peer, Stream stream, float* data, size_t n, const std::string& what) {
  GroupComm& g = groups_[Index(Group::kPipeline)];
  if (aborted_) return UnavailableError("communicators were closed after an earlier failure");
  const size_t st = static_cast<size_t>(stream);
  uint64_t& count = received_[static_cast<size_t>(peer)][st];
  const uint64_t slot = kPipelineSlot | (uint64_t{st} << 48) | count;
  try {
    auto buffer = g.context->createUnboundBuffer(data, n * sizeof(float));
    buffer->recv(peer, slot);
    if (!buffer->waitRecv(timeout_)) throw gloo::IoException("receive aborted");
  } catch (const std::exception& e) {
    return Failure(g, "receive", what,
                   "from global rank " + std::to_string(g.members[peer]) + ": " + e.what(),
                   LooksTimedOut(e.what()));
  }
  ++count;
  return Status::Ok();
}

Status GlooComms::FlushSends() {
  GroupComm& g = groups_[Index(Group::kPipeline)];
  for (PendingSend& pending : pending_sends_) {
    try {
      if (!pending.buffer->waitSend(timeout_)) throw gloo::IoException("send aborted");
    } catch (const std::exception& e) {
      const std::string to = std::to_string(g.members[pending.peer]);
      const std::string what = pending.what;
      return Failure(g, "send", what, "to global rank " + to + ": " + e.what(),
                     LooksTimedOut(e.what()));
    }
  }
  pending_sends_.clear();
  return Status::Ok();
}

}  // namespace pacer::worker::cpu
