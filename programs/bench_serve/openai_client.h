// OpenAiClient: one client connection to an OpenAI-compatible server (ours, vLLM, SGLang,
// llama-server), through cpp-httplib. Each load-generator worker owns one, so requests of
// different workers never wait for each other's connection; the connection is kept alive
// between a worker's requests, as the HTTP client pools of vllm bench serve do.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "programs/bench_serve/request_result.h"

namespace httplib {
class Client;
}

namespace ds::bench {

// --base-url split into what httplib connects to and the path prefix put before every route.
struct ServerAddress {
  std::string origin;  // scheme://host[:port]
  std::string prefix;  // "" or "/some/prefix" (no trailing slash)
};

// Throws std::invalid_argument for a URL that is not http(s)://host[:port][/prefix].
ServerAddress parse_base_url(const std::string& url);

class OpenAiClient {
 public:
  OpenAiClient(const ServerAddress& address, const std::string& api_key, double timeout_s);
  ~OpenAiClient();
  OpenAiClient(const OpenAiClient&) = delete;
  OpenAiClient& operator=(const OpenAiClient&) = delete;

  // The ids of GET /v1/models, in order. Throws std::runtime_error with the HTTP status and
  // the server's message.
  std::vector<std::string> list_models();

  // POSTs a streaming request body to `route` (/v1/completions or /v1/chat/completions) and
  // reads the stream to its end. Never throws: every failure is in the result.
  RequestResult stream(const std::string& route, const std::string& body, bool chat);

 private:
  std::unique_ptr<httplib::Client> http_;
  std::string origin_;
  std::string prefix_;
};

}  // namespace ds::bench
