// TestServer: the real HTTP server in-process, on a free port, over the bundled tiny
// Qwen3.5 checkpoint (CPU backend: the reference engine) or a ScriptedModel, with the tiny
// model's tokenizer and chat template either way. Plus small client helpers (JSON requests,
// SSE parsing, raw sockets for disconnect tests).
#pragma once

#include <arpa/inet.h>
#include <poll.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/sampler.h"
#include "model/chat/chat_template.h"
#include "model/qwen35/model.h"
#include "model/qwen35/vision_encoder.h"
#include "model/tokenizer/tokenizer.h"
#include "scheduler/engine.h"
#include "scheduler/qwen35_forward_model.h"
#include "server/http_server.h"
#include "server/json.h"
#include "server/image_inputs.h"
#include "server/served_model.h"
#include "tests/server/scripted_model.h"
#include "tests/test_paths.h"

namespace ds::test {

using server::Json;

struct TestServerConfig {
  bool scripted = false;                 // ScriptedModel instead of the tiny checkpoint
  std::vector<int32_t> script;           // for the scripted model
  scheduler::EngineConfig engine;
  std::string api_key;
  server::HttpTransportOptions transport;  // limits, threads, connections, timeouts
  server::GrammarCacheOptions grammar;     // compile pool and limits
  bool ready = true;                     // false: never set_model (503 tests)
  // The checkpoint under tests/data (not scripted); one with a vision tower also takes images
  // under `media` (the fixture's preprocessor settings, at most max_images a prompt).
  std::string model = "tiny-qwen35";
  server::MediaPolicy media;
  int64_t max_images = 8;
  int64_t max_videos = 1;                // videos a prompt (the fixture's video processor settings)
  int step_delay_ms = 0;                 // scripted model only
  std::string chat_template_file;        // instead of the tiny model's template (a data_path name)
  std::optional<int64_t> default_thinking_budget;     // serve's --default-thinking-budget
  std::map<std::string, int64_t> effort_budgets;      // serve's --reasoning-effort-budgets
  // LoRA (serve --enable-lora; the tiny checkpoint only): slots, adapters by name, and the
  // runtime load/unload endpoints.
  int32_t max_loras = 0;
  std::vector<std::pair<std::string, std::string>> lora_modules;
  bool runtime_lora = false;

  TestServerConfig() {
    engine.cache_bytes = 64ll << 20;
    engine.scheduler.max_num_seqs = 8;
    engine.max_ctx = 4096;
    engine.max_queue = 64;
    transport.limits.max_body_bytes = 8u << 20;
    transport.max_threads = 256;
  }
};

class TestServer {
 public:
  explicit TestServer(TestServerConfig cfg = {}) : cfg_(std::move(cfg)), metrics_(cfg_.model) {
    const std::string dir = data_path(cfg_.model);
    tokenizer_ = std::make_unique<tok::Tokenizer>(tok::Tokenizer::load(dir));
    template_ = std::make_unique<chat::ChatTemplate>(
        cfg_.chat_template_file.empty()
            ? chat::ChatTemplate::from_model_dir(dir)
            : chat::ChatTemplate::from_model_dir(dir, data_path(cfg_.chat_template_file)));
    cfg_.engine.on_finish = [this](scheduler::RequestId, scheduler::FinishReason, const scheduler::RequestMetrics& m) {
      metrics_.observe_request(m);
    };
    if (cfg_.scripted) {
      scripted_ = std::make_unique<ScriptedModel>(1024, std::vector<int32_t>{1006, 1004}, cfg_.script);
      scripted_->set_step_delay(std::chrono::milliseconds(cfg_.step_delay_ms));
      engine_ = std::make_unique<scheduler::Engine>(*scripted_, cfg_.engine, kernels::cpu::make_cpu_sampler());
    } else {
      kernels::cpu::CpuBackendOptions bo;
      bo.num_threads = 1;
      backend_ = kernels::cpu::make_cpu_backend(bo);
      model_ = qwen35::Model::load(*backend_, dir);
      if (const auto& vc = model_->config().vision) {
        encoder_ = qwen35::VisionEncoder::load(*backend_, dir, qwen35::Checkpoint(dir), *vc);
        vision_.processor = encoder_->processor();
        vision_.image_token_id = vc->image_token_id;
        vision_.merge_size = vc->spatial_merge_size;
        vision_.max_images = cfg_.max_images;
        vision_.media = cfg_.media;
        vision_.video = vision::VideoProcessorConfig::load(dir);
        vision_.video_token_id = vc->video_token_id;
        vision_.max_videos = cfg_.max_videos;
        served_.vision = &vision_;
      }
      forward_ = std::make_unique<scheduler::Qwen35ForwardModel>(*model_, false, encoder_.get());
      if (cfg_.max_loras > 0) {
        cfg_.engine.scheduler.max_loras = cfg_.max_loras;
        cfg_.engine.max_lora_rank = 16;
        loras_ = std::make_unique<server::LoraRegistry>(model_->config(), qwen35::LoraLimits{.max_rank = 16},
                                                        cfg_.max_loras, cfg_.model);
        for (const auto& [name, path] : cfg_.lora_modules) loras_->add(name, path);
        served_.loras = loras_.get();
        served_.runtime_lora = cfg_.runtime_lora;
      }
      engine_ = std::make_unique<scheduler::Engine>(*forward_, cfg_.engine, kernels::cpu::make_cpu_sampler());
    }
    served_.name = cfg_.model;
    served_.dir = dir;
    served_.tokenizer = tokenizer_.get();
    served_.chat_template = template_.get();
    served_.engine = engine_.get();
    served_.eos_ids = {1006, 1004};
    served_.defaults = server::GenerationDefaults::load(dir);
    served_.created = 1700000000;
    grammars_ =
        std::make_unique<server::GrammarCache>(grammar::TokenVocabulary::from_tokenizer(*tokenizer_, 1024), cfg_.grammar);
    served_.grammars = grammars_.get();
    served_.thinking =
        server::make_thinking_setup(*tokenizer_, template_.get(), cfg_.default_thinking_budget, cfg_.effort_budgets);

    server::HttpServerOptions ho;
    ho.api_key = cfg_.api_key;
    ho.served_name = cfg_.model;
    ho.transport = cfg_.transport;
    ho.transport.host = "127.0.0.1";
    ho.transport.port = 0;
    http_ = std::make_unique<server::HttpServer>(ho, metrics_);
    port_ = http_->bind();
    http_->start();
    if (cfg_.ready) http_->set_model(&served_);
  }
  ~TestServer() {
    http_->stop();
    http_.reset();
    engine_.reset();
  }

  int port() const { return port_; }
  scheduler::Engine& engine() { return *engine_; }
  server::HttpServer& http() { return *http_; }
  server::ServerMetrics& metrics() { return metrics_; }
  const tok::Tokenizer& tokenizer() const { return *tokenizer_; }
  ScriptedModel* scripted() { return scripted_.get(); }
  server::GrammarCache& grammars() { return *grammars_; }

  httplib::Client client(int timeout_s = 300) const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(timeout_s, 0);
    c.set_write_timeout(timeout_s, 0);
    c.set_connection_timeout(10, 0);
    if (!cfg_.api_key.empty()) c.set_bearer_token_auth(cfg_.api_key);
    return c;
  }

  struct Reply {
    int status = 0;
    Json body;
    std::string text;
    httplib::Headers headers;
  };
  Reply post(const std::string& path, const Json& body) const {
    auto c = client();
    auto r = c.Post(path, server::dump_json(body), "application/json");
    return to_reply(r);
  }
  Reply post_raw(const std::string& path, const std::string& body) const {
    auto c = client();
    return to_reply(c.Post(path, body, "application/json"));
  }
  Reply get(const std::string& path) const {
    auto c = client();
    return to_reply(c.Get(path));
  }

  // Polls the engine until its pools are back to free (or the deadline).
  bool wait_pools_free(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto s = engine_->stats();
      if (s.blocks_used == 0 && s.slots_used == 0 && s.running == 0 && s.waiting == 0) return true;
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

 private:
  static Reply to_reply(const httplib::Result& r) {
    Reply out;
    if (!r) return out;
    out.status = r->status;
    out.text = r->body;
    out.headers = r->headers;
    out.body = Json::parse(r->body, nullptr, false);
    return out;
  }

  TestServerConfig cfg_;
  server::ServerMetrics metrics_;
  std::unique_ptr<tok::Tokenizer> tokenizer_;
  std::unique_ptr<chat::ChatTemplate> template_;
  std::unique_ptr<server::GrammarCache> grammars_;
  std::unique_ptr<server::LoraRegistry> loras_;
  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<qwen35::Model> model_;
  std::unique_ptr<qwen35::VisionEncoder> encoder_;
  server::VisionServing vision_;
  std::unique_ptr<scheduler::Qwen35ForwardModel> forward_;
  std::unique_ptr<ScriptedModel> scripted_;
  std::unique_ptr<scheduler::Engine> engine_;
  server::ServedModel served_;
  std::unique_ptr<server::HttpServer> http_;
  int port_ = 0;
};

// The JSON payloads of an SSE body ("data: {...}" lines), and whether it ended with [DONE].
struct SseStream {
  std::vector<Json> events;
  bool done = false;
  bool done_last = false;
};
inline SseStream parse_sse(const std::string& body) {
  SseStream s;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    const std::string ev = body.substr(pos, end - pos);
    pos = end + 2;
    if (ev.rfind("data: ", 0) != 0) continue;
    const std::string data = ev.substr(6);
    if (data == "[DONE]") {
      s.done = true;
      s.done_last = pos >= body.size();
      continue;
    }
    s.events.push_back(Json::parse(data, nullptr, false));
  }
  return s;
}

// The tiny model's HF reference fixture (tests/data/tiny-qwen35/reference.json).
inline Json load_reference() {
  std::ifstream in(data_path("tiny-qwen35/reference.json"));
  std::stringstream ss;
  ss << in.rdbuf();
  return Json::parse(ss.str());
}

// Token ids of `text` in the bundled tokenizer (scripts for the ScriptedModel).
inline std::vector<int32_t> encode(const std::string& text) {
  static const auto tok = tok::Tokenizer::load(data_path("tiny-qwen35"));
  return tok.encode(text);
}

// A raw TCP connection, for clients that send a request and vanish, or send what no
// well-behaved client would.
class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RawClient() { close(); }
  bool ok() const { return fd_ >= 0; }
  bool send_post(const std::string& path, const std::string& body) {
    const std::string req = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
                            "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    return ::send(fd_, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size());
  }
  // Sends all of `bytes` within `ms` milliseconds; false when the server stopped reading,
  // closed or reset the connection.
  bool send_bytes(const std::string& bytes, int ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        off += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLOUT, 0};
      ::poll(&p, 1, static_cast<int>(left.count()));
    }
    return true;
  }
  // Reads until `needle` appears or the timeout passes.
  std::string read_until(const std::string& needle, std::chrono::milliseconds timeout) {
    std::string got;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buf[4096];
    while (got.find(needle) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      timeval tv{0, 20000};
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n > 0) got.append(buf, static_cast<size_t>(n));
      if (n == 0) break;
    }
    return got;
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

}  // namespace ds::test
