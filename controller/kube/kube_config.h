// Where the Kubernetes API server is and how to authenticate to it: from
// inside a pod (the service-account token, CA and namespace mounted at
// /var/run/secrets/kubernetes.io/serviceaccount, and KUBERNETES_SERVICE_HOST /
// KUBERNETES_SERVICE_PORT), or from a kubeconfig file (clusters, users,
// contexts; bearer token, client certificate and key, CA as a file or
// base64 data), as kubectl reads them.
//
// Security: TLS is always verified against the cluster CA (a kubeconfig
// with insecure-skip-tls-verify is refused); the token and the private key
// are never printed: ToString() redacts them.
// Thread-safety: plain values and pure functions (files and environment
// are read through the arguments).
#ifndef PACER_CONTROLLER_KUBE_KUBE_CONFIG_H_
#define PACER_CONTROLLER_KUBE_KUBE_CONFIG_H_

#include <functional>
#include <string>

#include "pacer/status.h"

namespace pacer::controller {

struct KubeConfig {
  std::string server;        // "https://10.0.0.1:443"
  std::string ca_pem;        // the cluster CA bundle, PEM
  std::string bearer_token;  // empty when a client certificate is used
  // Where bearer_token was read from ("" for an inline token): the client
  // re-reads it as it rotates (kube/token_source.h).
  std::string token_file;
  std::string client_cert_pem;  // empty when a token is used
  std::string client_key_pem;
  std::string namespace_name = "default";  // the context's (or the pod's) namespace
  std::string context;                     // kubeconfig context name; "in-cluster" inside a pod

  // For logs: server, namespace, context and which credential kind, never
  // the secrets themselves.
  std::string ToString() const;
};

// Reads files for the loaders (tests substitute a fake file system).
using ReadFileFn = std::function<StatusOr<std::string>(const std::string& path)>;
using GetEnvFn = std::function<const char*(const char* name)>;

// Reads a file of at most 1 MiB (a kubeconfig, a token, a certificate);
// ResourceExhausted past that, after reading one byte more, never the whole.
StatusOr<std::string> ReadWholeFile(const std::string& path);

// OK when `token` can go in an Authorization header (printable ASCII, no
// spaces); else InvalidArgument naming `where` and the offending byte's
// position, never the token.
Status CheckBearerToken(const std::string& token, const std::string& where);

// The in-cluster configuration. `secrets_dir` is normally
// /var/run/secrets/kubernetes.io/serviceaccount. FailedPrecondition when not
// in a pod (no KUBERNETES_SERVICE_HOST), naming what is missing.
StatusOr<KubeConfig> InClusterConfig(const GetEnvFn& getenv, const ReadFileFn& read_file,
                                     const std::string& secrets_dir);

// The kubeconfig at `path` (relative certificate paths resolve against its
// directory), using `context` or, when empty, its current-context.
// InvalidArgument naming the field for a malformed file.
StatusOr<KubeConfig> KubeconfigFile(const std::string& path, const std::string& context,
                                    const ReadFileFn& read_file);

inline constexpr const char* kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

// The configuration kubectl would use, in kubectl's order; the one place
// pacer-controller and `pacer inventory` find the API server:
//   1. `kubeconfig_flag` (--kubeconfig) when not empty;
//   2. $KUBECONFIG: the first of its colon-separated files that can be read
//      (kubectl merges them all; Pacer reads one);
//   3. $HOME/.kube/config when it can be read;
//   4. the in-cluster service account (InClusterConfig).
// `context` picks a kubeconfig context (empty: its current-context).
// Errors: the chosen kubeconfig's (InvalidArgument for a malformed file,
// NotFound for an unreadable --kubeconfig); FailedPrecondition naming every
// place tried when none applies.
StatusOr<KubeConfig> ResolveKubeConfig(const std::string& kubeconfig_flag,
                                       const std::string& context, const GetEnvFn& getenv,
                                       const ReadFileFn& read_file,
                                       const std::string& secrets_dir = kServiceAccountDir);

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_KUBE_KUBE_CONFIG_H_
