// TcpStore: the small key-value store through which the ranks of one job meet.
//
// Rank 0 hosts a TcpStoreServer at MASTER_ADDR:MASTER_PORT; every rank
// (rank 0 included) talks to it through a TcpStoreClient. It hands out the
// NCCL unique id, backs Gloo's rendezvous Store (gloo_store.h) and implements
// barriers. It is a rendezvous service, not a database: values live in the
// server's memory for the life of the job, nothing is ever deleted.
//
// Units: keys and values are arbitrary bytes (std::string is the container);
// sizes are bytes; timeouts are std::chrono::milliseconds and every blocking
// call takes one, so no rank can wait forever for a peer that died.
//
// Limits: a key is at most kMaxKeyBytes (1 KiB), a value at most
// kMaxValueBytes (64 MiB), a Wait names at most kMaxWaitKeys keys, and the
// server holds at most max_connections open connections (one thread each):
// one more is closed as soon as it is accepted, so whatever can reach the
// port cannot exhaust the rank's threads (a thread that cannot be created
// closes its connection too, never the process). The client
// refuses larger requests before sending (ResourceExhausted); the server also
// refuses them, with an error reply, and then closes that connection because
// the rest of the oversized frame is not worth reading.
//
// Wire format (all integers unsigned big-endian unless noted; one request,
// then one response, strictly in turn on each connection):
//
//   request  := op:u8 timeout_ms:u32 key_count:u32 key* value_len:u64 value
//   key      := key_len:u32 key_bytes            (key_len <= 1024)
//   response := status:u8 value_len:u64 value
//
//   op       key_count   value (request)          value (OK response)
//   1 SET    1           the value (<= 64 MiB)    empty
//   2 GET    1           empty                    the value
//   3 ADD    1           delta: i64 (8 bytes)     the new total: i64 (8 bytes)
//   4 WAIT   1..1024     empty                    empty
//   5 HELLO  1           empty                    "pacer-store/1"
//
//   status 0 OK; 1 TIMEOUT (GET/WAIT: value is the first missing key);
//          2 TOO_LARGE and 3 BAD_REQUEST (value is a message; the server
//          closes the connection after sending either).
//
// Connect sends HELLO (key "pacer-store") on every new connection and takes
// only the exact answer: whatever else listens at MASTER_ADDR:MASTER_PORT (an
// HTTP server, a stale address, a listener that never answers) is a failed
// attempt, retried until the timeout like a refused connection, and the
// DeadlineExceeded names what it sent ("answers, but not as a pacer-worker
// store: it sent "HTTP/1.1 400 ...""). Before, such a peer failed the first
// request as a lost connection (the worker's exit 4, blamed on the node), or
// held it for twice the timeout.
//
// GET and WAIT block in the server, up to timeout_ms, until every key exists.
// ADD treats a missing key as 0 and stores the total as 8 big-endian bytes, so
// a GET of a counter returns those bytes. A frame the server cannot parse
// (unknown op, a zero or oversized key count, an ADD value that is not 8
// bytes) closes that connection; the server keeps serving everyone else.
//
// Errors (pacer::Status): a socket failure or a lost connection is
// Unavailable; a wait that ran out is DeadlineExceeded and names the rank,
// the key(s) and HOST:PORT; an oversized key or value is ResourceExhausted;
// an empty key list or a bad argument is InvalidArgument.
//
// Thread-safety: TcpStoreServer is safe for concurrent use by any number of
// clients (one thread per connection); its destructor stops it and joins
// every thread. A TcpStoreClient is safe for concurrent use from several
// threads: one mutex serializes the requests on its single connection, so a
// blocking Get/Wait holds up the client's other callers; give a thread that
// must wait independently its own client. A client does not reconnect: after
// a socket error every later call fails with Unavailable.
//
// Interrupts: a client may carry a predicate (Connect's `interrupt`, or
// SetInterrupt) that says the rank is stopping. While one is set, a call that
// would block — Connect retrying, a Get, Wait or Barrier whose keys are still
// missing — asks the server to wait at most kInterruptCheckInterval at a
// time, checks the predicate between those slices, and once it returns true
// gives up with Aborted ("... the rank is stopping"). A call that finds what
// it needs at once is never cut short, and the connection stays usable after
// an interrupted wait (every slice got its answer). Without a predicate a
// wait is one request for its whole timeout, as before. The runner sets it
// to the stop signal during start-up only (runner.h): a SIGTERM while a rank
// waits for peers that may never come must end in a clean stop before the
// supervisor's grace period, not in a SIGKILL.
#ifndef PACER_WORKER_CORE_TCP_STORE_H_
#define PACER_WORKER_CORE_TCP_STORE_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "pacer/status.h"

namespace pacer::worker {

inline constexpr std::size_t kMaxKeyBytes = 1024;
inline constexpr std::size_t kMaxValueBytes = std::size_t{64} << 20;
inline constexpr std::size_t kMaxWaitKeys = 1024;
// How long an interruptible wait goes between checks of its predicate: a
// stop is noticed within about this long, far inside the supervisor's 25 s
// grace period, at the cost of one short request per slice to rank 0's
// store while a rank waits (two a second per waiting rank, start-up only).
inline constexpr std::chrono::milliseconds kInterruptCheckInterval{500};

// Serves the store on one TCP address until destroyed.
class TcpStoreServer {
 public:
  // A job's ranks hold one connection each; the default leaves room for
  // single-machine uses (calibrate, the GPU smoke test) and tests.
  static constexpr std::size_t kDefaultMaxConnections = 1024;

  // Listens on host:port ("0.0.0.0" for all interfaces; port 0 picks a free
  // port, see port()). Unavailable when the address cannot be bound.
  static StatusOr<std::unique_ptr<TcpStoreServer>> Start(
      const std::string& host, int port, std::size_t max_connections = kDefaultMaxConnections);

  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  // Stops accepting, wakes blocked GET/WAITs (their clients see the
  // connection close), closes every connection and joins every thread.
  ~TcpStoreServer();

  // The port actually bound (useful after Start(host, 0)).
  int port() const { return port_; }

 private:
  struct Connection {
    int fd = -1;
    std::thread thread;
    bool done = false;  // guarded by connections_mu_; set when the thread is about to return
  };

  TcpStoreServer(int listen_fd, int port, int wake_read_fd, int wake_write_fd,
                 std::size_t max_connections);

  void AcceptLoop();
  void Serve(Connection* connection);
  void ReapFinishedConnections();

  // The request handlers; each returns false when the connection must close.
  bool HandleSet(int fd, const std::string& key, std::string value);
  bool HandleGet(int fd, const std::string& key, std::chrono::milliseconds timeout);
  bool HandleAdd(int fd, const std::string& key, const std::string& delta_bytes);
  bool HandleWait(int fd, const std::vector<std::string>& keys, std::chrono::milliseconds timeout);

  // Blocks until every key exists, the timeout passes, the server stops or
  // the client hangs up. Returns the first missing key ("" when all exist)
  // and sets *abandon when the server is stopping or the client is gone.
  std::string WaitForKeys(int fd, const std::vector<std::string>& keys,
                          std::chrono::milliseconds timeout, bool* abandon);

  const int listen_fd_;
  const int port_;
  const std::size_t max_connections_;
  std::size_t refused_connections_ = 0;  // accept loop only: the first refusal is logged
  const int wake_read_fd_;  // the accept loop polls this to learn it must stop
  const int wake_write_fd_;

  std::mutex data_mu_;
  std::condition_variable data_cv_;                       // notified on every SET/ADD and on stop
  std::map<std::string, std::string, std::less<>> data_;  // guarded by data_mu_
  bool stopping_ = false;                                 // guarded by data_mu_

  std::mutex connections_mu_;
  std::list<Connection> connections_;  // guarded by connections_mu_

  std::thread accept_thread_;
};

// One connection to a TcpStoreServer, on behalf of one rank.
class TcpStoreClient {
 public:
  // Whether the rank is stopping (see "Interrupts" above). Called from the
  // thread that waits; it must be cheap and must not call into this client.
  using Interrupt = std::function<bool()>;

  // Connects to host:port, retrying (with backoff) while the server is not
  // up yet or the name does not resolve yet, until `timeout` passes; then
  // DeadlineExceeded: "rank R waited N s for the store at HOST:PORT: <last
  // error>". `rank` only names this process in messages. `timeout` also
  // bounds how long Set/Add wait for the server's answer. With `interrupt`
  // set, the retries end with Aborted once it returns true, and the client
  // keeps it (SetInterrupt).
  static StatusOr<std::unique_ptr<TcpStoreClient>> Connect(const std::string& host, int port,
                                                           int rank,
                                                           std::chrono::milliseconds timeout,
                                                           Interrupt interrupt = nullptr);

  TcpStoreClient(const TcpStoreClient&) = delete;
  TcpStoreClient& operator=(const TcpStoreClient&) = delete;
  ~TcpStoreClient();

  // Stores `value` under `key`, replacing any earlier value; wakes waiters.
  Status Set(std::string_view key, std::string_view value);

  // The value of `key`, waiting up to `timeout` for some rank to set it.
  StatusOr<std::string> Get(std::string_view key, std::chrono::milliseconds timeout);

  // Atomically adds `delta` to the counter `key` (missing = 0) and returns
  // the new total. Add(key, 0) reads a counter.
  StatusOr<int64_t> Add(std::string_view key, int64_t delta);

  // Waits up to `timeout` until every key exists.
  Status Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);

  // Returns once `world_size` ranks have called Barrier with this `name`, or
  // DeadlineExceeded naming how many arrived. Each name is single-use (it is
  // a counter that only grows): use a fresh name per barrier, e.g. "step/120".
  Status Barrier(std::string_view name, int world_size, std::chrono::milliseconds timeout);

  // Sets (or, with nullptr, clears) the predicate that cuts blocking waits
  // short; see "Interrupts" above. Takes effect from the next call.
  void SetInterrupt(Interrupt interrupt);
  // Whether a predicate is set and says the rank is stopping now: for waits
  // outside the store that belong to the same rendezvous (NCCL's init).
  bool Interrupted() const;

  int rank() const { return rank_; }
  // "HOST:PORT", as given to Connect.
  const std::string& address() const { return address_; }

 private:
  TcpStoreClient(int fd, int rank, std::string address, std::chrono::milliseconds io_timeout,
                 Interrupt interrupt);

  // How long the server may block for the next slice of a wait that ends at
  // `deadline`: all of it without a predicate, else at most
  // kInterruptCheckInterval.
  std::chrono::milliseconds NextWaitSlice(std::chrono::steady_clock::time_point deadline) const;
  // The Aborted status of a wait for `what` that the predicate cut short.
  Status InterruptedWait(const std::string& what) const;

  struct Reply {
    uint8_t status = 0;
    std::string value;
  };

  // Sends one request and reads its reply; the server may take up to
  // `server_wait` before answering. Needs mu_ held.
  StatusOr<Reply> RoundTripLocked(uint8_t op, const std::vector<std::string_view>& keys,
                                  std::string_view value, std::chrono::milliseconds server_wait);
  // The Status for a reply that is neither OK nor TIMEOUT. Needs mu_ held.
  Status ReplyErrorLocked(const Reply& reply);
  Status CheckKey(std::string_view key) const;
  Status Broken(const std::string& what);  // marks the connection unusable; needs mu_ held

  const int rank_;
  const std::string address_;
  const std::chrono::milliseconds io_timeout_;

  std::mutex mu_;
  int fd_;              // guarded by mu_; -1 once the connection broke
  std::string broken_;  // guarded by mu_; why the connection is unusable

  // Its own lock, not mu_: Interrupted() is asked while no request is in
  // flight, or from another thread while one is.
  mutable std::mutex interrupt_mu_;
  Interrupt interrupt_;  // guarded by interrupt_mu_; empty = waits are not interruptible
};

}  // namespace pacer::worker

#endif  // PACER_WORKER_CORE_TCP_STORE_H_
