#include "programs/bench_serve/openai_client.h"

#include <regex>
#include <stdexcept>

#include <httplib.h>

#include "programs/bench_serve/bench_json.h"
#include "programs/bench_serve/sse_parser.h"
#include "programs/bench_serve/stream_reader.h"

namespace ds::bench {

namespace {

// httplib names its errors in one word ("Connection", "Read"); say what happened.
std::string describe(httplib::Error e, const std::string& origin) {
  switch (e) {
    case httplib::Error::Connection: return "could not connect to " + origin;
    case httplib::Error::ConnectionTimeout: return "connecting to " + origin + " timed out";
    case httplib::Error::Read: return "reading the reply failed (the server closed the connection, or --request-timeout passed)";
    case httplib::Error::Write: return "sending the request failed (the server closed the connection)";
    default: return httplib::to_string(e);
  }
}

}  // namespace

ServerAddress parse_base_url(const std::string& url) {
  static const std::regex re(R"(^(https?://[^/\s]+)(/[^\s]*)?$)");
  std::smatch m;
  if (!std::regex_match(url, m, re))
    throw std::invalid_argument("--base-url must look like http://HOST:PORT[/PREFIX] (got '" + url + "')");
  std::string prefix = m[2].str();
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  return ServerAddress{m[1].str(), prefix};
}

OpenAiClient::OpenAiClient(const ServerAddress& address, const std::string& api_key, double timeout_s)
    : http_(std::make_unique<httplib::Client>(address.origin)), origin_(address.origin), prefix_(address.prefix) {
  const auto whole = static_cast<time_t>(timeout_s);
  const auto micros = static_cast<time_t>((timeout_s - static_cast<double>(whole)) * 1e6);
  http_->set_connection_timeout(30, 0);
  http_->set_read_timeout(whole, micros);
  http_->set_write_timeout(whole, micros);
  http_->set_keep_alive(true);
  // httplib writes the head and the body in separate sends; with Nagle's algorithm on, the
  // body's last segment waits for the server's (delayed, ~40 ms) ACK of the head, which every
  // TTFT would then include. vLLM's client (aiohttp) and the OpenAI SDKs send without delay.
  http_->set_tcp_nodelay(true);
  if (!api_key.empty()) http_->set_bearer_token_auth(api_key);
}

OpenAiClient::~OpenAiClient() = default;

std::vector<std::string> OpenAiClient::list_models() {
  auto res = http_->Get(prefix_ + "/v1/models");
  if (!res) throw std::runtime_error("GET /v1/models: " + describe(res.error(), origin_));
  if (res->status != 200)
    throw std::runtime_error("GET /v1/models: HTTP " + std::to_string(res->status) + ": " + error_message(res->body));
  const Json j = Json::parse(res->body, nullptr, false);
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array())
    throw std::runtime_error("GET /v1/models: not a model list: " + error_message(res->body));
  std::vector<std::string> ids;
  for (const auto& m : j["data"])
    if (m.is_object() && m.contains("id") && m["id"].is_string()) ids.push_back(m["id"].get<std::string>());
  return ids;
}

RequestResult OpenAiClient::stream(const std::string& route, const std::string& body, bool chat) {
  using Clock = StreamReader::Clock;
  httplib::Request req;
  req.method = "POST";
  req.path = prefix_ + route;
  req.body = body;
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");

  int status = 0;
  std::string error_body;
  const auto sent = Clock::now();
  StreamReader reader(chat, sent);
  SseParser sse([&](std::string_view data) { reader.on_event(data, Clock::now()); });
  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    return true;
  };
  // httplib hands every body to the receiver, error bodies too: keep those for the message.
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (status == 200)
      sse.feed(std::string_view(data, n));
    else if (error_body.size() < 64 * 1024)
      error_body.append(data, n);
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool ok = http_->send(req, res, err);
  if (status == 200) sse.finish();
  if (status == 0) status = res.status > 0 ? res.status : 0;
  const std::string transport = ok ? std::string() : describe(err, origin_);
  return reader.finish(Clock::now(), status, error_body, transport);
}

}  // namespace ds::bench
