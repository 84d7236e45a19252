#include "https_test_client.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <functional>

namespace pacer::testing {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

namespace {

constexpr int kReceiveTimeoutSeconds = 20;

struct Connection {
  net::io_context ioc;
  ssl::context ctx{ssl::context::tls_client};
  std::unique_ptr<ssl::stream<tcp::socket>> stream;
};

StatusOr<std::unique_ptr<Connection>> Connect(const std::string& host, const std::string& port,
                                              const std::string& ca_pem) {
  auto conn = std::make_unique<Connection>();
  beast::error_code ec;
  conn->ctx.add_certificate_authority(net::buffer(ca_pem), ec);
  if (ec) return InvalidArgumentError("bad CA PEM: " + ec.message());
  conn->ctx.set_verify_mode(ssl::verify_peer);
  conn->stream = std::make_unique<ssl::stream<tcp::socket>>(conn->ioc, conn->ctx);
  tcp::resolver resolver(conn->ioc);
  auto endpoints = resolver.resolve(host, port, ec);
  if (ec) return UnavailableError("resolve " + host + ": " + ec.message());
  net::connect(conn->stream->next_layer(), endpoints, ec);
  if (ec) return UnavailableError("connect " + host + ":" + port + ": " + ec.message());
  timeval tv{kReceiveTimeoutSeconds, 0};
  ::setsockopt(conn->stream->next_layer().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv,
               sizeof(tv));
  conn->stream->set_verify_callback(ssl::host_name_verification(host));
  // SSL_set_tlsext_host_name() is a macro with a C cast.
  SSL_ctrl(conn->stream->native_handle(), SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
           const_cast<char*>(host.c_str()));
  conn->stream->handshake(ssl::stream_base::client, ec);
  if (ec) return UnavailableError("TLS handshake: " + ec.message());
  return conn;
}

http::request<http::string_body> MakeRequest(const std::string& method, const std::string& target,
                                             const std::string& host, const std::string& token,
                                             const std::string& body,
                                             const std::string& content_type,
                                             const std::map<std::string, std::string>& headers) {
  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  req.set(http::field::host, host);
  if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
  req.set(http::field::accept, "application/json");
  if (!body.empty()) req.set(http::field::content_type, content_type);
  for (const auto& [k, v] : headers) req.set(k, v);
  req.body() = body;
  req.prepare_payload();
  return req;
}

}  // namespace

HttpsTestClient::HttpsTestClient(std::string url, std::string ca_pem, std::string token)
    : ca_pem_(std::move(ca_pem)), token_(std::move(token)) {
  std::string rest = url.substr(url.find("://") + 3);
  size_t colon = rest.rfind(':');
  host_ = rest.substr(0, colon);
  port_ = rest.substr(colon + 1);
}

StatusOr<HttpResponse> HttpsTestClient::Request(
    const std::string& method, const std::string& target, const std::string& body,
    const std::string& content_type, const std::map<std::string, std::string>& headers) const {
  ASSIGN_OR_RETURN(std::unique_ptr<Connection> conn, Connect(host_, port_, ca_pem_));
  beast::error_code ec;
  auto req = MakeRequest(method, target, host_, token_, body, content_type, headers);
  req.keep_alive(false);
  http::write(*conn->stream, req, ec);
  if (ec) return UnavailableError("write: " + ec.message());
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 * 1024 * 1024);
  http::read(*conn->stream, buffer, parser, ec);
  if (ec) return UnavailableError("read: " + ec.message());
  HttpResponse out;
  out.status = static_cast<int>(parser.get().result_int());
  out.body = parser.get().body();
  for (const auto& field : parser.get()) {
    out.headers[std::string(field.name_string())] = std::string(field.value());
  }
  return out;
}

struct WatchStream::State {
  std::unique_ptr<Connection> conn;
  beast::flat_buffer buffer;
  // The parser keeps a reference to its chunk callback: it lives here.
  std::function<size_t(std::uint64_t, beast::string_view, beast::error_code&)> on_chunk;
  http::response_parser<http::empty_body> parser;
  std::string pending;
  bool failed = false;
};

WatchStream::WatchStream(std::unique_ptr<State> state) : state_(std::move(state)) {}
WatchStream::~WatchStream() = default;

int WatchStream::status() const { return static_cast<int>(state_->parser.get().result_int()); }

bool WatchStream::ended_cleanly() const { return state_->parser.is_done() && !state_->failed; }

std::optional<nlohmann::json> WatchStream::Next() {
  for (;;) {
    size_t newline = state_->pending.find('\n');
    if (newline != std::string::npos) {
      std::string line = state_->pending.substr(0, newline);
      state_->pending.erase(0, newline + 1);
      return nlohmann::json::parse(line, nullptr, false);
    }
    if (state_->failed || state_->parser.is_done()) return std::nullopt;
    beast::error_code ec;
    http::read_some(*state_->conn->stream, state_->buffer, state_->parser, ec);
    if (ec) {
      state_->failed = true;
      return std::nullopt;
    }
  }
}

StatusOr<std::unique_ptr<WatchStream>> HttpsTestClient::Watch(const std::string& target) const {
  auto state = std::make_unique<WatchStream::State>();
  ASSIGN_OR_RETURN(state->conn, Connect(host_, port_, ca_pem_));
  beast::error_code ec;
  auto req = MakeRequest("GET", target, host_, token_, "", "", {});
  http::write(*state->conn->stream, req, ec);
  if (ec) return UnavailableError("write: " + ec.message());
  WatchStream::State* raw = state.get();
  raw->on_chunk = [raw](std::uint64_t, beast::string_view body, beast::error_code&) {
    raw->pending.append(body.data(), body.size());
    return body.size();
  };
  raw->parser.on_chunk_body(raw->on_chunk);
  http::read_header(*state->conn->stream, state->buffer, state->parser, ec);
  if (ec) return UnavailableError("read header: " + ec.message());
  return std::make_unique<WatchStream>(std::move(state));
}

}  // namespace pacer::testing
