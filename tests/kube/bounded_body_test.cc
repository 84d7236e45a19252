// Answer bodies the controller reads from servers it does not control are
// bounded while they are read: a chunked answer (no Content-Length) over the
// limit is refused after about the limit, not buffered whole first. The
// server counts what the client took before it hung up.
#include "http/bounded_body.h"

// cpprestsdk's U() macro would break GoogleTest's templates.
#define _TURN_OFF_PLATFORM_STRING
#include <cpprest/http_client.h>
#include <gtest/gtest.h>

#include <atomic>

#include "bulk_http_server.h"
#include "kube/kube_client.h"
#include "promql/prometheus_client.h"
#include "tls_certs.h"

namespace pacer::controller {
namespace {

using testing::BulkHttpServer;

constexpr std::size_t kMiB = 1u << 20;

// GETs "/" from `server` with `limit` set on the request.
web::http::http_response Send(const BulkHttpServer& server, const AnswerLimit& limit,
                              pplx::cancellation_token_source& cancel) {
  web::http::client::http_client client(server.url());
  web::http::http_request request(web::http::methods::GET);
  limit.StopReadingPast(request);
  return client.request(request, cancel.get_token()).get();
}

// GETs "/" from `server` and reads the body with ReadBoundedBody.
StatusOr<std::string> Get(const BulkHttpServer& server, std::size_t max_bytes) {
  pplx::cancellation_token_source cancel;
  const AnswerLimit limit(max_bytes);
  web::http::http_response response = Send(server, limit, cancel);
  return ReadBoundedBody(response, limit, "GET /", "; a remedy");
}

TEST(BoundedBodyTest, AChunkedAnswerWithinTheLimitIsReadWhole) {
  const std::size_t size = kMiB + 17;  // more than one chunk, not a multiple
  BulkHttpServer server(size, BulkHttpServer::Framing::kChunked);
  StatusOr<std::string> body = Get(server, 2 * kMiB);
  ASSERT_TRUE(body.ok()) << body.status().message();
  EXPECT_EQ(body->size(), size);
  EXPECT_EQ(body->find_first_not_of('x'), std::string::npos);
  EXPECT_EQ(server.WaitForBodyBytesSent(), size);
}

TEST(BoundedBodyTest, AChunkedAnswerOverTheLimitIsRefusedWhileItIsRead) {
  BulkHttpServer server(256 * kMiB, BulkHttpServer::Framing::kChunked);
  StatusOr<std::string> body = Get(server, kMiB);
  ASSERT_EQ(body.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(body.status().message(), "GET /: the answer is over 1048576 bytes; a remedy");
  // The limit plus what the sockets' buffers held, far from the whole.
  EXPECT_LT(server.WaitForBodyBytesSent(), 64 * kMiB);
}

// cpprestsdk reads an answer into the response's buffer whether or not
// anyone takes it out. The limit set on the request stops cpprestsdk itself:
// a reader that is slow (a busy controller) or has not begun holds no more
// than the limit. Here nothing is read until the server is done.
TEST(BoundedBodyTest, TheLimitStopsTheReadBeforeTheReaderTakesAnything) {
  for (const auto framing :
       {BulkHttpServer::Framing::kChunked, BulkHttpServer::Framing::kContentLength}) {
    BulkHttpServer server(256 * kMiB, framing);
    pplx::cancellation_token_source cancel;
    const AnswerLimit limit(kMiB);
    web::http::http_response response = Send(server, limit, cancel);
    EXPECT_LT(server.WaitForBodyBytesSent(), 64 * kMiB);
    EXPECT_TRUE(limit.passed());
    StatusOr<std::string> body = ReadBoundedBody(response, limit, "GET /", "");
    EXPECT_EQ(body.status().code(), StatusCode::kResourceExhausted);
  }
}

TEST(BoundedBodyTest, AContentLengthOverTheLimitIsRefusedBeforeReading) {
  BulkHttpServer server(256 * kMiB, BulkHttpServer::Framing::kContentLength);
  StatusOr<std::string> body = Get(server, kMiB);
  ASSERT_EQ(body.status().code(), StatusCode::kResourceExhausted);
  EXPECT_LT(server.WaitForBodyBytesSent(), 64 * kMiB);
}

// Prometheus (or whatever answers at --prometheus-url) sending an endless
// chunked answer costs the controller at most kMaxResponseBytes.
TEST(BoundedBodyTest, APrometheusAnswerOverTheLimitIsRefusedWhileItIsRead) {
  BulkHttpServer server(32 * PrometheusClient::kMaxResponseBytes,
                        BulkHttpServer::Framing::kChunked);
  {
    PrometheusClient prometheus(server.url(), std::chrono::seconds(60));
    StatusOr<std::vector<PromSample>> answer = prometheus.Query("up");
    ASSERT_EQ(answer.status().code(), StatusCode::kResourceExhausted);
    EXPECT_NE(answer.status().message().find("query up: the answer is over 16777216 bytes"),
              std::string::npos)
        << answer.status().message();
  }
  EXPECT_LT(server.WaitForBodyBytesSent(), 4 * PrometheusClient::kMaxResponseBytes);
}

// A watch answered with an error and an endless body (a proxy's error page,
// a broken API server): the limit counted only what the reader took, and
// cpprestsdk read the rest behind it, whole. A watch's request cannot carry
// the limit from the start (a 200's stream has no end): it is armed when the
// status is an error, and stops cpprestsdk from there.
TEST(BoundedBodyTest, AWatchAnsweredWithAnEndlessErrorIsRefusedWhileItIsRead) {
  StatusOr<testing::TlsMaterial> tls = testing::GenerateTlsMaterial("");
  ASSERT_TRUE(tls.ok()) << tls.status().ToString();
  BulkHttpServer::Options options;
  options.status_code = 500;
  options.tls_cert_pem = tls->cert_pem;
  options.tls_key_pem = tls->key_pem;
  BulkHttpServer server(256 * kMiB, BulkHttpServer::Framing::kChunked, options);
  {
    KubeConfig config;
    config.server = server.url();
    config.ca_pem = tls->ca_pem;
    config.bearer_token = "token";
    KubeClientOptions client_options;
    client_options.max_response_bytes = kMiB;
    StatusOr<std::unique_ptr<KubeClient>> client = KubeClient::Create(config, client_options);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    const std::atomic<bool> cancel{false};
    const Status watched = (*client)->Watch(
        kTrainJobs, "default", WatchOptions{}, [](const WatchEvent&) {}, cancel);
    EXPECT_EQ(watched.code(), StatusCode::kResourceExhausted) << watched.ToString();
    EXPECT_NE(watched.message().find("the answer is over 1048576 bytes"), std::string::npos)
        << watched.message();
  }
  EXPECT_LT(server.WaitForBodyBytesSent(), 64 * kMiB);
}

// A redirect is not followed: cpprestsdk's redirected request drops the
// answer limit (and the Kubernetes client's would carry its token along).
// Before, the client followed it to the address named (here nothing
// listens, so the query read as "unreachable").
TEST(BoundedBodyTest, APrometheusRedirectIsNotFollowedAndSaysWhere) {
  BulkHttpServer server(16, BulkHttpServer::Framing::kContentLength, "http://127.0.0.1:1/x");
  PrometheusClient prometheus(server.url(), std::chrono::seconds(60));
  StatusOr<std::vector<PromSample>> answer = prometheus.Query("up");
  ASSERT_EQ(answer.status().code(), StatusCode::kFailedPrecondition) << answer.status().ToString();
  EXPECT_NE(answer.status().message().find("HTTP 307, a redirect to http://127.0.0.1:1/x"),
            std::string::npos)
      << answer.status().message();
  EXPECT_NE(answer.status().message().find("--prometheus-url"), std::string::npos);
}

}  // namespace
}  // namespace pacer::controller
