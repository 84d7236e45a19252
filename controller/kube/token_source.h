// BearerTokenSource: the bearer token a KubeClient sends, re-read from its
// file as it rotates. Bound service-account tokens (and kubeconfig
// tokenFile tokens written by a credential refresher) are replaced on disk
// long before the process ends; a token read once expires (about an hour
// for a projected service-account token) and every request then gets 401.
// Like client-go's cached file token source, the file is read again when
// the cached copy is older than `refresh_period` (client-go: one minute) and
// at once after a 401, so the one request that met the old token is retried
// with the new one.
//
// A token given inline (kubeconfig `token:`) has no file and never changes.
// A file that cannot be read keeps the last good token (and says so once
// per failure in the log, never printing a token).
//
// Units: refresh_period is std::chrono::milliseconds of steady time.
// Thread-safety: every method is safe to call from several threads at once.
#ifndef PACER_CONTROLLER_KUBE_TOKEN_SOURCE_H_
#define PACER_CONTROLLER_KUBE_TOKEN_SOURCE_H_

#include <chrono>
#include <mutex>
#include <string>
#include <string_view>

#include "kube/kube_config.h"

namespace pacer::controller {

class BearerTokenSource {
 public:
  // `token` as read at start; `token_file` "" for an inline token.
  BearerTokenSource(std::string token, std::string token_file,
                    std::chrono::milliseconds refresh_period, ReadFileFn read_file = ReadWholeFile);

  // The token to send now (re-read first when the cached copy is stale).
  std::string Token();
  // After a 401 to a request that carried `sent`: re-reads the file now.
  // True when the token to send now is not `sent` (the request is worth
  // retrying once), also when another request's Token() read the rotated
  // file between this request's sending and its 401.
  bool RefreshAfterUnauthorized(std::string_view sent);

 private:
  // Requires mu_. Reads the file; true when the token changed.
  bool ReloadLocked();

  const std::string token_file_;
  const std::chrono::milliseconds refresh_period_;
  const ReadFileFn read_file_;
  std::mutex mu_;
  std::string token_;                              // guarded by mu_
  std::chrono::steady_clock::time_point read_at_;  // guarded by mu_
};

// The token in a file's text: surrounding line breaks and spaces removed.
std::string TrimToken(std::string text);

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_KUBE_TOKEN_SOURCE_H_
