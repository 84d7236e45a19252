// GlooStore: Gloo's rendezvous Store interface on top of our TcpStoreClient,
// so that gloo::rendezvous::Context::connectFullMesh (the CPU backend's
// collectives) meets its peers through the same store as everything else.
//
// Gloo's contract is exceptions: a failed set/get/wait throws. This adapter
// turns our Status failures into gloo::IoException (socket errors, timeouts)
// or gloo::Exception (anything else) carrying our message, which names the
// rank, the key and the store's HOST:PORT. Catch them at the call into Gloo
// and turn them back into a Status; they must not travel further.
//
// Timeouts are std::chrono::milliseconds. Gloo's get() and one-argument
// wait() carry no timeout, so they use the `timeout` given at construction;
// a wait() whose timeout is zero (gloo::kNoTimeout, "forever" to Gloo) also
// uses it, because in Pacer no wait is unbounded.
//
// Thread-safety: as safe as the TcpStoreClient it wraps (safe for concurrent
// use, calls serialized). The client is borrowed and must outlive the store.
#ifndef PACER_WORKER_CORE_GLOO_STORE_H_
#define PACER_WORKER_CORE_GLOO_STORE_H_

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/tcp_store.h"

namespace pacer::worker {

class GlooStore : public gloo::rendezvous::Store {
 public:
  GlooStore(TcpStoreClient& client, std::chrono::milliseconds timeout)
      : client_(client), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  TcpStoreClient& client_;
  const std::chrono::milliseconds timeout_;
};

}  // namespace pacer::worker

#endif  // PACER_WORKER_CORE_GLOO_STORE_H_
