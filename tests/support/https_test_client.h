// A small blocking HTTPS client for apiserver_tests: one connection per
// request (Beast + OpenSSL, verifying the server against a given CA and host
// name), and a watch stream reader that returns one event per line.
//
// Every socket has a receive timeout (20 s by default) so a test that waits
// for an event which never comes fails instead of hanging.
// Thread-safety: a client may be used from several threads (it keeps no
// connection); a WatchStream belongs to one thread.
#ifndef PACER_TESTS_SUPPORT_HTTPS_TEST_CLIENT_H_
#define PACER_TESTS_SUPPORT_HTTPS_TEST_CLIENT_H_

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "pacer/status.h"

namespace pacer::testing {

struct HttpResponse {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;
  nlohmann::json Json() const { return nlohmann::json::parse(body, nullptr, false); }
};

class WatchStream;

class HttpsTestClient {
 public:
  // `url`: "https://127.0.0.1:PORT"; an empty token sends no Authorization.
  HttpsTestClient(std::string url, std::string ca_pem, std::string token);

  StatusOr<HttpResponse> Request(const std::string& method, const std::string& target,
                                 const std::string& body = "",
                                 const std::string& content_type = "application/json",
                                 const std::map<std::string, std::string>& headers = {}) const;
  StatusOr<HttpResponse> Get(const std::string& target) const { return Request("GET", target); }

  // Opens a watch (target includes ?watch=true...).
  StatusOr<std::unique_ptr<WatchStream>> Watch(const std::string& target) const;

 private:
  std::string host_;
  std::string port_;
  std::string ca_pem_;
  std::string token_;
};

class WatchStream {
 public:
  ~WatchStream();
  int status() const;
  // The next event, or nullopt when the stream ended (cleanly or not) or
  // nothing came within the receive timeout.
  std::optional<nlohmann::json> Next();
  // Whether the server ended the stream with the terminating chunk (a
  // clean end) rather than closing the connection.
  bool ended_cleanly() const;

  struct State;
  explicit WatchStream(std::unique_ptr<State> state);

 private:
  std::unique_ptr<State> state_;
};

}  // namespace pacer::testing

#endif  // PACER_TESTS_SUPPORT_HTTPS_TEST_CLIENT_H_
