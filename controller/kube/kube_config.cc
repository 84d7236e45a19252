#include "kube/kube_config.h"

#include <cpprest/asyncrt_utils.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kube/token_source.h"

namespace pacer::controller {
namespace {

constexpr std::size_t kMaxFileBytes = 1 << 20;

StatusOr<std::string> DecodeBase64(const std::string& field, const std::string& data) {
  try {
    const std::vector<unsigned char> bytes = utility::conversions::from_base64(data);
    return std::string(bytes.begin(), bytes.end());
  } catch (const std::exception&) {
    return InvalidArgumentError(field + ": is not valid base64");
  }
}

// The URL without what may be a secret: the user name and password before
// an '@', and the query and fragment. For messages.
std::string RedactedUrl(const std::string& url) {
  // The user information first, up to the last '@' anywhere: a password may
  // hold '/', '?' or '#' ("https://alice:s3cr?et@host" printed the password
  // up to the '?').
  std::string out = url;
  const std::size_t scheme = out.find("://");
  const std::size_t authority = scheme == std::string::npos ? 0 : scheme + 3;
  const std::size_t at = out.rfind('@');
  if (at != std::string::npos && at >= authority) out.erase(authority, at + 1 - authority);
  return out.substr(0, out.find_first_of("?#", authority));
}

// The API server's URL: https, and no credentials or query in it. Pacer
// writes the server into messages and files (`pacer inventory`'s header);
// a password in the URL would go with it, so it is refused, and the
// message shows the URL without it.
Status CheckServerUrl(const std::string& server, const std::string& where) {
  if (server.rfind("https://", 0) != 0) {
    return InvalidArgumentError(where + ": must be an https:// URL, got \"" + RedactedUrl(server) +
                                "\"");
  }
  // Any '@' at all: one after a '/' is still user information to a parser
  // that reads "https://alice:pa/ss@host" leniently, and no API server URL
  // needs one.
  if (server.find('@', 8) != std::string::npos) {
    return InvalidArgumentError(where + ": \"" + RedactedUrl(server) +
                                "\" with a user name or password (user:password@) is not "
                                "supported; give the credential in the user entry (token, "
                                "tokenFile or client-certificate) instead");
  }
  if (server.find_first_of("?#") != std::string::npos) {
    return InvalidArgumentError(where + ": \"" + RedactedUrl(server) +
                                "\" with a query or fragment (?...) is not supported; the server "
                                "is scheme://host:port[/path]");
  }
  return Status::Ok();
}

// A named entry of a kubeconfig list (clusters, users, contexts).
StatusOr<YAML::Node> FindNamed(const YAML::Node& root, const std::string& list,
                               const std::string& name) {
  const YAML::Node items = root[list];
  if (!items || !items.IsSequence()) {
    return InvalidArgumentError(list + ": missing; a kubeconfig lists " + list);
  }
  for (const YAML::Node& item : items) {
    if (item["name"] && item["name"].as<std::string>() == name) return item;
  }
  return InvalidArgumentError(list + ": no entry named \"" + name + "\"");
}

std::string Scalar(const YAML::Node& n, const char* key) {
  const YAML::Node v = n[key];
  return v && v.IsScalar() ? v.as<std::string>() : std::string();
}

// `data` (base64) wins over a file path, as kubectl does.
StatusOr<std::string> DataOrFile(const YAML::Node& n, const std::string& where,
                                 const char* data_key, const char* file_key,
                                 const std::filesystem::path& base, const ReadFileFn& read_file) {
  if (std::string data = Scalar(n, data_key); !data.empty()) {
    return DecodeBase64(where + "." + data_key, data);
  }
  if (std::string file = Scalar(n, file_key); !file.empty()) {
    std::filesystem::path path(file);
    if (path.is_relative()) path = base / path;
    StatusOr<std::string> content = read_file(path.string());
    if (!content.ok()) return content.status().WithContext(where + "." + file_key);
    return content;
  }
  return std::string();
}

}  // namespace

std::string KubeConfig::ToString() const {
  std::string credential = !bearer_token.empty()      ? "bearer token (redacted)"
                           : !client_cert_pem.empty() ? "client certificate"
                                                      : "none";
  return "server=" + server + " namespace=" + namespace_name + " context=" + context +
         " credential=" + credential + " ca=" + (ca_pem.empty() ? "system" : "cluster");
}

StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return InvalidArgumentError(path + ": cannot be read: is a directory, not a file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(path + ": cannot be read: " + std::strerror(errno));
  // At most one byte past the limit is read: a device such as /dev/zero, or
  // a huge file, is refused without being read whole (it was, and never
  // ended or took gigabytes).
  std::string content(kMaxFileBytes + 1, '\0');
  in.read(content.data(), static_cast<std::streamsize>(content.size()));
  if (in.bad()) return UnavailableError(path + ": cannot be read: I/O error");
  content.resize(static_cast<std::size_t>(in.gcount()));
  if (content.size() > kMaxFileBytes) {
    return ResourceExhaustedError(path + ": larger than " + std::to_string(kMaxFileBytes) +
                                  " bytes; is it the right file?");
  }
  return content;
}

Status CheckBearerToken(const std::string& token, const std::string& where) {
  for (std::size_t i = 0; i < token.size(); ++i) {
    const auto byte = static_cast<unsigned char>(token[i]);
    // Visible ASCII only: the token goes into an Authorization header, where
    // a line break would start a header of the token's choosing. The
    // message gives the position, never the token.
    if (byte < 0x21 || byte > 0x7e) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%02x", byte);
      return InvalidArgumentError(where +
                                  ": the token has a byte that cannot go in an HTTP header (" +
                                  hex + " at offset " + std::to_string(i) +
                                  "); a bearer token is printable ASCII without spaces");
    }
  }
  return Status::Ok();
}

StatusOr<KubeConfig> InClusterConfig(const GetEnvFn& getenv, const ReadFileFn& read_file,
                                     const std::string& secrets_dir) {
  const char* host = getenv("KUBERNETES_SERVICE_HOST");
  const char* port = getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0' || port == nullptr || *port == '\0') {
    return FailedPreconditionError(
        "not running in a pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are unset; "
        "pass --kubeconfig to run outside a cluster");
  }
  KubeConfig c;
  const std::string h = host;
  // IPv6 service addresses need brackets in a URL.
  c.server = "https://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + port;
  c.token_file = secrets_dir + "/token";  // a bound token: rotated by the kubelet
  ASSIGN_OR_RETURN(c.bearer_token, read_file(c.token_file));
  c.bearer_token = TrimToken(std::move(c.bearer_token));  // as the refresher reads it
  RETURN_IF_ERROR(CheckBearerToken(c.bearer_token, c.token_file));
  ASSIGN_OR_RETURN(c.ca_pem, read_file(secrets_dir + "/ca.crt"));
  if (StatusOr<std::string> ns = read_file(secrets_dir + "/namespace"); ns.ok() && !ns->empty()) {
    c.namespace_name = *ns;
    while (!c.namespace_name.empty() && c.namespace_name.back() == '\n')
      c.namespace_name.pop_back();
  }
  c.context = "in-cluster";
  if (c.bearer_token.empty()) {
    return FailedPreconditionError(secrets_dir +
                                   "/token is empty: the pod has no service-account "
                                   "token (automountServiceAccountToken: false?)");
  }
  return c;
}

StatusOr<KubeConfig> KubeconfigFile(const std::string& path, const std::string& context,
                                    const ReadFileFn& read_file) {
  ASSIGN_OR_RETURN(std::string text, read_file(path));
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(path + ": not a kubeconfig: " + e.what());
  }
  if (!root.IsMap()) return InvalidArgumentError(path + ": not a kubeconfig (expected a map)");
  try {
    KubeConfig c;
    c.context = context.empty() ? Scalar(root, "current-context") : context;
    if (c.context.empty()) {
      return InvalidArgumentError(path + ": current-context: not set; pass --context NAME");
    }
    ASSIGN_OR_RETURN(YAML::Node ctx, FindNamed(root, "contexts", c.context));
    const YAML::Node ctx_body = ctx["context"];
    const std::string cluster_name = Scalar(ctx_body, "cluster");
    const std::string user_name = Scalar(ctx_body, "user");
    if (std::string ns = Scalar(ctx_body, "namespace"); !ns.empty()) c.namespace_name = ns;

    ASSIGN_OR_RETURN(YAML::Node cluster, FindNamed(root, "clusters", cluster_name));
    const YAML::Node cl = cluster["cluster"];
    const std::string where = "clusters[" + cluster_name + "].cluster";
    c.server = Scalar(cl, "server");
    RETURN_IF_ERROR(CheckServerUrl(c.server, where + ".server"));
    if (Scalar(cl, "insecure-skip-tls-verify") == "true") {
      return InvalidArgumentError(where +
                                  ".insecure-skip-tls-verify: Pacer always verifies the "
                                  "API server's certificate; give certificate-authority(-data)");
    }
    const std::filesystem::path base = std::filesystem::path(path).parent_path();
    ASSIGN_OR_RETURN(c.ca_pem, DataOrFile(cl, where, "certificate-authority-data",
                                          "certificate-authority", base, read_file));

    ASSIGN_OR_RETURN(YAML::Node user, FindNamed(root, "users", user_name));
    const YAML::Node u = user["user"];
    const std::string user_where = "users[" + user_name + "].user";
    c.bearer_token = Scalar(u, "token");
    if (std::string token_file = Scalar(u, "tokenFile");
        c.bearer_token.empty() && !token_file.empty()) {
      std::filesystem::path token_path(token_file);
      if (token_path.is_relative()) token_path = base / token_path;
      StatusOr<std::string> token = read_file(token_path.string());
      if (!token.ok()) return token.status().WithContext(user_where + ".tokenFile");
      // Trimmed as the refresher trims it (and client-go): a file ending in
      // "\r\n" or a space is a good token.
      c.bearer_token = TrimToken(*token);
      c.token_file = token_path.string();
    }
    RETURN_IF_ERROR(CheckBearerToken(
        c.bearer_token,
        user_where + (c.token_file.empty() ? std::string(".token") : ".tokenFile")));
    ASSIGN_OR_RETURN(c.client_cert_pem, DataOrFile(u, user_where, "client-certificate-data",
                                                   "client-certificate", base, read_file));
    ASSIGN_OR_RETURN(c.client_key_pem,
                     DataOrFile(u, user_where, "client-key-data", "client-key", base, read_file));
    if (c.bearer_token.empty() && c.client_cert_pem.empty()) {
      return InvalidArgumentError(user_where +
                                  ": no credential Pacer supports; give token, "
                                  "tokenFile or client-certificate(-data) and client-key(-data)");
    }
    if (!c.client_cert_pem.empty() && c.client_key_pem.empty()) {
      return InvalidArgumentError(user_where + ".client-key: missing for the client certificate");
    }
    return c;
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(path + ": malformed kubeconfig: " + e.what());
  }
}

StatusOr<KubeConfig> ResolveKubeConfig(const std::string& kubeconfig_flag,
                                       const std::string& context, const GetEnvFn& getenv,
                                       const ReadFileFn& read_file,
                                       const std::string& secrets_dir) {
  if (!kubeconfig_flag.empty()) return KubeconfigFile(kubeconfig_flag, context, read_file);
  // A file that cannot be read is skipped, as kubectl skips missing ones.
  auto readable = [&read_file](const std::string& path) { return read_file(path).ok(); };
  const char* list = getenv("KUBECONFIG");
  std::string tried;
  if (list != nullptr && *list != '\0') {
    const std::string paths = list;
    std::size_t start = 0;
    while (start <= paths.size()) {
      std::size_t end = paths.find(':', start);
      if (end == std::string::npos) end = paths.size();
      const std::string path = paths.substr(start, end - start);
      if (!path.empty() && readable(path)) return KubeconfigFile(path, context, read_file);
      start = end + 1;
    }
    tried += "$KUBECONFIG (" + paths + ") names no readable file; ";
  } else {
    tried += "$KUBECONFIG is unset; ";
  }
  const char* home = getenv("HOME");
  if (home != nullptr && *home != '\0') {
    const std::string path = std::string(home) + "/.kube/config";
    if (readable(path)) return KubeconfigFile(path, context, read_file);
    tried += path + " cannot be read; ";
  } else {
    tried += "$HOME is unset; ";
  }
  StatusOr<KubeConfig> in_cluster = InClusterConfig(getenv, read_file, secrets_dir);
  if (in_cluster.ok() || in_cluster.status().code() != StatusCode::kFailedPrecondition) {
    return in_cluster;
  }
  return FailedPreconditionError("no Kubernetes configuration: " + tried +
                                 "and not in a pod (KUBERNETES_SERVICE_HOST is unset); pass "
                                 "--kubeconfig FILE or set KUBECONFIG");
}

}  // namespace pacer::controller
