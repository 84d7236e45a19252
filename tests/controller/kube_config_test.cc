// Kubernetes client configuration: in-cluster and kubeconfig, as kubectl
// reads them; TLS verification cannot be turned off; secrets never printed.
#include "kube/kube_config.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "kube/token_source.h"

namespace pacer::controller {
namespace {

// An in-memory file system for the loaders.
ReadFileFn Files(std::map<std::string, std::string> files) {
  return [files](const std::string& path) -> StatusOr<std::string> {
    auto it = files.find(path);
    if (it == files.end()) return NotFoundError(path + ": cannot be read");
    return it->second;
  };
}

constexpr char kKubeconfig[] = R"(apiVersion: v1
kind: Config
current-context: dev
clusters:
  - name: prod
    cluster:
      server: https://prod.example:6443
      certificate-authority-data: UFJPRENB
  - name: dev
    cluster:
      server: https://127.0.0.1:6443
      certificate-authority: certs/ca.pem
contexts:
  - name: dev
    context: {cluster: dev, user: alice, namespace: research}
  - name: prod
    context: {cluster: prod, user: robot}
users:
  - name: alice
    user:
      client-certificate: certs/alice.crt
      client-key-data: S0VZ
  - name: robot
    user:
      token: s3cr3t-token
)";

TEST(KubeConfigTest, CurrentContextWithClientCertificateAndRelativeCaFile) {
  auto c = KubeconfigFile("/home/u/.kube/config", "",
                          Files({{"/home/u/.kube/config", kKubeconfig},
                                 {"/home/u/.kube/certs/ca.pem", "DEVCA"},
                                 {"/home/u/.kube/certs/alice.crt", "CERT"}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://127.0.0.1:6443");
  EXPECT_EQ(c->ca_pem, "DEVCA");
  EXPECT_EQ(c->client_cert_pem, "CERT");
  EXPECT_EQ(c->client_key_pem, "KEY");  // base64 "S0VZ"
  EXPECT_EQ(c->namespace_name, "research");
  EXPECT_TRUE(c->bearer_token.empty());
}

TEST(KubeConfigTest, NamedContextWithTokenAndCaDataIsRedactedInLogs) {
  auto c = KubeconfigFile("/k", "prod", Files({{"/k", kKubeconfig}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->ca_pem, "PRODCA");
  EXPECT_EQ(c->bearer_token, "s3cr3t-token");
  EXPECT_EQ(c->namespace_name, "default");
  EXPECT_EQ(c->ToString().find("s3cr3t"), std::string::npos);
  EXPECT_NE(c->ToString().find("redacted"), std::string::npos);
}

TEST(KubeConfigTest, ErrorsNameTheField) {
  struct Case {
    std::string kubeconfig, context, expect;
  };
  std::string insecure = kKubeconfig;
  insecure.replace(insecure.find("certificate-authority-data: UFJPRENB"),
                   std::string("certificate-authority-data: UFJPRENB").size(),
                   "insecure-skip-tls-verify: true");
  std::string http = kKubeconfig;
  http.replace(http.find("https://prod"), 12, "http://prod");
  const Case cases[] = {
      {kKubeconfig, "staging", "contexts: no entry named \"staging\""},
      {insecure, "prod", "insecure-skip-tls-verify: Pacer always verifies"},
      {http, "prod", "server: must be an https:// URL"},
      {"[not, a, map]", "", "not a kubeconfig"},
      {"clusters: [", "", "not a kubeconfig"},
  };
  for (const Case& c : cases) {
    auto r = KubeconfigFile("/k", c.context, Files({{"/k", c.kubeconfig}}));
    ASSERT_FALSE(r.ok()) << c.expect;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().message();
  }
  auto missing_ca =
      KubeconfigFile("/home/u/.kube/config", "", Files({{"/home/u/.kube/config", kKubeconfig}}));
  ASSERT_FALSE(missing_ca.ok());
  EXPECT_NE(missing_ca.status().message().find("certificate-authority"), std::string::npos);
}

// Pacer writes the server into messages and into `pacer inventory`'s output:
// credentials or a query in the URL are refused, and the message leaves
// them out.
TEST(KubeConfigTest, AServerUrlWithCredentialsIsRefusedWithoutShowingThem) {
  for (const char* server :
       {"https://user:PASSWORD99@prod.example:6443", "https://prod.example:6443/?token=QSECRET",
        "http://admin:PASSWORD99@prod.example:6443", "https://alice:PASSWORD99?x@prod.example:6443",
        "https://alice:PASS/WORD99@prod.example:6443"}) {
    std::string kubeconfig = kKubeconfig;
    kubeconfig.replace(kubeconfig.find("https://prod.example:6443"),
                       std::string("https://prod.example:6443").size(), server);
    auto r = KubeconfigFile("/k", "prod", Files({{"/k", kubeconfig}}));
    ASSERT_FALSE(r.ok()) << server;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << server;
    const std::string message = r.status().message();
    EXPECT_NE(message.find("clusters[prod].cluster.server"), std::string::npos) << message;
    EXPECT_NE(message.find("prod.example:6443"), std::string::npos) << message;
    EXPECT_EQ(message.find("PASSWORD99"), std::string::npos) << message;
    EXPECT_EQ(message.find("WORD99"), std::string::npos) << message;
    EXPECT_EQ(message.find("QSECRET"), std::string::npos) << message;
  }
}

// A token goes into an Authorization header: a line break in it would add
// a header of the token's choosing. Refused, without printing the token.
TEST(KubeConfigTest, ATokenThatCannotGoInAHeaderIsRefused) {
  for (const char* token : {"\"SUPER\\r\\nX-Injected: 1\"", "\"two words\"", "\"caf\\u00e9\""}) {
    std::string kubeconfig = kKubeconfig;
    kubeconfig.replace(kubeconfig.find("s3cr3t-token"), std::string("s3cr3t-token").size(), token);
    auto r = KubeconfigFile("/k", "prod", Files({{"/k", kubeconfig}}));
    ASSERT_FALSE(r.ok()) << token;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << token;
    EXPECT_NE(r.status().message().find("users[robot].user.token"), std::string::npos)
        << r.status().message();
    EXPECT_EQ(r.status().message().find("SUPER"), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().message().find("words"), std::string::npos) << r.status().message();
  }
  EXPECT_TRUE(CheckBearerToken("eyJhbGciOi.J9-_~+/=", "t").ok()) << "JWT and token68 characters";
}

// A kubeconfig (or a token or certificate file) is read up to its 1 MiB
// limit and no further: /dev/zero was read without end.
TEST(KubeConfigTest, AFileIsReadOnlyUpToItsLimit) {
  StatusOr<std::string> zero = ReadWholeFile("/dev/zero");
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(zero.status().message().find("larger than 1048576 bytes"), std::string::npos)
      << zero.status().message();
  StatusOr<std::string> directory = ReadWholeFile("/tmp");
  ASSERT_FALSE(directory.ok());
  EXPECT_NE(directory.status().message().find("is a directory"), std::string::npos)
      << directory.status().message();
  StatusOr<std::string> missing = ReadWholeFile("/nonexistent/kubeconfig");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("No such file"), std::string::npos)
      << missing.status().message();
}

// A rotated token file is read again; one that holds a token that cannot go
// in a header (a line break) is not used: the last good token stays.
TEST(KubeConfigTest, ARotatedTokenThatCannotGoInAHeaderIsNotUsed) {
  auto text = std::make_shared<std::string>("good-token\n");
  BearerTokenSource source("good-token", "/token", std::chrono::milliseconds(0),
                           [text](const std::string&) -> StatusOr<std::string> { return *text; });
  *text = "next-token\r\nX-Injected: 1\n";
  EXPECT_FALSE(source.RefreshAfterUnauthorized("good-token"));
  EXPECT_EQ(source.Token(), "good-token");
  *text = "next-token\n";
  EXPECT_TRUE(source.RefreshAfterUnauthorized("good-token"));
  EXPECT_EQ(source.Token(), "next-token");
}

// A request sent with the old token gets its 401 after another request's
// Token() already read the rotated file: the file then matches the cached
// token, but the request is still worth its one retry (it failed
// Unauthenticated, as did every request in flight at the rotation).
TEST(KubeConfigTest, A401ToTheOldTokenIsRetriedAfterAnotherRequestReadTheNewOne) {
  auto text = std::make_shared<std::string>("old-token\n");
  BearerTokenSource source("old-token", "/token", std::chrono::milliseconds(0),
                           [text](const std::string&) -> StatusOr<std::string> { return *text; });
  const std::string sent = source.Token();
  *text = "new-token\n";
  EXPECT_EQ(source.Token(), "new-token") << "another request, after the rotation";
  EXPECT_TRUE(source.RefreshAfterUnauthorized(sent));
  EXPECT_FALSE(source.RefreshAfterUnauthorized("new-token")) << "the new token itself refused";
}

// A token file ends as editors and tools leave it ("\r\n", a space): the
// token is what is left, as the refresher and kubectl read it.
TEST(KubeConfigTest, ATokenFilesTrailingLineBreakAndSpacesAreNotPartOfTheToken) {
  std::string kubeconfig = kKubeconfig;
  kubeconfig.replace(kubeconfig.find("token: s3cr3t-token"),
                     std::string("token: s3cr3t-token").size(), "tokenFile: /t");
  for (const char* file : {"abc.def\r\n", "abc.def \n", "abc.def\t"}) {
    auto r = KubeconfigFile("/k", "prod", Files({{"/k", kubeconfig}, {"/t", file}}));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->bearer_token, "abc.def");
  }
}

TEST(KubeConfigTest, InClusterReadsTheServiceAccount) {
  const std::string dir = "/var/run/secrets/kubernetes.io/serviceaccount";
  auto env = [](const char* name) -> const char* {
    if (std::string(name) == "KUBERNETES_SERVICE_HOST") return "fd00::1";
    if (std::string(name) == "KUBERNETES_SERVICE_PORT") return "443";
    return nullptr;
  };
  auto c = InClusterConfig(env,
                           Files({{dir + "/token", "tok\n"},
                                  {dir + "/ca.crt", "CA"},
                                  {dir + "/namespace", "pacer-system"}}),
                           dir);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://[fd00::1]:443");
  EXPECT_EQ(c->bearer_token, "tok");
  EXPECT_EQ(c->namespace_name, "pacer-system");
  auto outside =
      InClusterConfig([](const char*) -> const char* { return nullptr; }, Files({}), dir);
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(outside.status().message().find("--kubeconfig"), std::string::npos);
}

// kubectl's order: --kubeconfig, then the first readable file of
// $KUBECONFIG, then ~/.kube/config, then the pod's service account. A
// kubeconfig with one context "prod" and a token, distinguishable by server.
std::string TokenKubeconfig(const std::string& server) {
  return "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n  - name: k\n    cluster:\n"
         "      server: " +
         server +
         "\n      certificate-authority-data: UFJPRENB\ncontexts:\n  - name: c\n"
         "    context: {cluster: k, user: u}\nusers:\n  - name: u\n    user: {token: t}\n";
}

GetEnvFn Env(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

TEST(ResolveKubeConfigTest, FollowsKubectlsOrder) {
  const std::string sa = "/sa";
  const std::map<std::string, std::string> files = {
      {"/flag", TokenKubeconfig("https://flag:6443")},
      {"/env-b", TokenKubeconfig("https://env:6443")},
      {"/home/u/.kube/config", TokenKubeconfig("https://home:6443")},
      {sa + "/token", "pod-token"},
      {sa + "/ca.crt", "CA"}};
  const std::map<std::string, std::string> pod = {{"KUBERNETES_SERVICE_HOST", "10.0.0.1"},
                                                  {"KUBERNETES_SERVICE_PORT", "443"}};
  auto with = [&](std::map<std::string, std::string> env) {
    env.insert(pod.begin(), pod.end());
    return Env(env);
  };
  auto server = [](const StatusOr<KubeConfig>& c) {
    return c.ok() ? c->server : "error: " + c.status().ToString();
  };
  // The flag wins over everything.
  EXPECT_EQ(server(ResolveKubeConfig("/flag", "", with({{"KUBECONFIG", "/env-b"}, {"HOME", "/home/u"}}),
                                     Files(files), sa)),
            "https://flag:6443");
  // $KUBECONFIG: the first readable file of the list, over ~/.kube/config.
  EXPECT_EQ(server(ResolveKubeConfig(
                "", "", with({{"KUBECONFIG", "/env-a:/env-b"}, {"HOME", "/home/u"}}), Files(files),
                sa)),
            "https://env:6443");
  // Then ~/.kube/config, over the service account.
  EXPECT_EQ(server(ResolveKubeConfig("", "", with({{"HOME", "/home/u"}}), Files(files), sa)),
            "https://home:6443");
  EXPECT_EQ(server(ResolveKubeConfig("", "", with({{"KUBECONFIG", "/env-a"}, {"HOME", "/home/u"}}),
                                     Files(files), sa)),
            "https://home:6443");
  // Then the pod's service account.
  auto in_pod = ResolveKubeConfig("", "", with({{"HOME", "/nobody"}}), Files(files), sa);
  ASSERT_TRUE(in_pod.ok()) << in_pod.status().ToString();
  EXPECT_EQ(in_pod->server, "https://10.0.0.1:443");
  EXPECT_EQ(in_pod->context, "in-cluster");
}

TEST(ResolveKubeConfigTest, NothingToUseNamesEveryPlaceTried) {
  auto none = ResolveKubeConfig("", "", Env({{"KUBECONFIG", "/a:/b"}, {"HOME", "/home/u"}}),
                                Files({}), "/sa");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
  for (const char* part : {"$KUBECONFIG (/a:/b)", "/home/u/.kube/config", "not in a pod",
                           "--kubeconfig"}) {
    EXPECT_NE(none.status().message().find(part), std::string::npos)
        << part << " in " << none.status().message();
  }
  // An unreadable --kubeconfig is an error, not a fall-through.
  auto flag = ResolveKubeConfig("/missing", "", Env({{"HOME", "/home/u"}}),
                                Files({{"/home/u/.kube/config", TokenKubeconfig("https://h:1")}}),
                                "/sa");
  ASSERT_FALSE(flag.ok());
  EXPECT_NE(flag.status().message().find("/missing"), std::string::npos);
}

}  // namespace
}  // namespace pacer::controller
