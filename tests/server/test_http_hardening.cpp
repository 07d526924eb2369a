// The HTTP front end against hostile or careless clients (issue 17's probe, as regression
// tests): a body nested 100,000 levels deep, bursts of connections, kept-alive latency,
// chunked and header bombs, trickling clients, Range headers, bodies without a JSON type.
// Each runs against the real HttpServer in-process (tests/server/server_fixture.h).
#include <catch2/catch.hpp>

#include <poll.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <thread>

#include "tests/server/server_fixture.h"

using namespace ds::test;
using ds::server::dump_json;

namespace {

int64_t resident_bytes() {
  std::ifstream in("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

// A raw connection that can send arbitrary bytes and read whatever comes back.
class Wire {
 public:
  explicit Wire(int port) : raw_(port) {}
  bool ok() const { return raw_.ok(); }
  RawClient& raw() { return raw_; }
  // Sends, without blocking for longer than `ms`; false once the server closed or refused.
  bool send(const std::string& bytes, int ms = 2000) { return raw_.send_bytes(bytes, ms); }
  // The status code of the first response read within the timeout, or 0.
  int status(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    const std::string got = raw_.read_until("\r\n\r\n", timeout);
    if (got.rfind("HTTP/1.", 0) != 0 || got.size() < 12) return 0;
    return std::stoi(got.substr(9, 3));
  }

 private:
  RawClient raw_;
};

std::string deep_body(const std::string& fields) {
  return "{\"x\":" + std::string(100000, '[') + std::string(100000, ']') + "," + fields + "}";
}

}  // namespace

TEST_CASE("hardening: a body nested 100,000 levels deep is a 400 on every JSON route", "[hardening]") {
  TestServer srv;
  const std::pair<const char*, const char*> routes[] = {
      {"/v1/chat/completions", R"("messages":[{"role":"user","content":"hi"}],"max_tokens":4)"},
      {"/v1/completions", R"("prompt":"hi","max_tokens":4)"},
      {"/tokenize", R"("prompt":"hi")"},
      {"/detokenize", R"("tokens":[1,2])"},
  };
  for (const auto& [path, fields] : routes) {
    INFO(path);
    const auto r = srv.post_raw(path, deep_body(fields));
    CHECK(r.status == 400);
    CHECK(r.body["error"]["message"].get<std::string>().find("deeper than") != std::string::npos);
  }
  CHECK(srv.get("/health").status == 200);
}

TEST_CASE("hardening: 200 concurrent connections get only 200s and 429s, never a reset", "[hardening]") {
  TestServerConfig cfg;
  cfg.scripted = true;
  cfg.script = encode("abcdefgh");
  cfg.step_delay_ms = 5;
  cfg.engine.scheduler.max_num_seqs = 2;
  cfg.engine.max_queue = 4;
  TestServer srv(cfg);
  constexpr int kClients = 200;
  std::vector<int> status(kClients, 0);
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i)
    threads.emplace_back([&, i] {
      RawClient c(srv.port());  // connect first, all at once, then send together
      ++ready;
      while (!go.load()) std::this_thread::yield();
      if (!c.ok() || !c.send_post("/v1/completions", R"({"prompt":"x","max_tokens":8,"ignore_eos":true})")) return;
      const std::string got = c.read_until("\r\n\r\n", std::chrono::seconds(60));
      if (got.rfind("HTTP/1.1 ", 0) == 0) status[static_cast<size_t>(i)] = std::stoi(got.substr(9, 3));
    });
  while (ready.load() < kClients) std::this_thread::yield();
  go = true;
  for (auto& t : threads) t.join();
  const auto count = [&](int s) { return std::count(status.begin(), status.end(), s); };
  INFO("200: " << count(200) << ", 429: " << count(429) << ", no response: " << count(0));
  CHECK(count(200) >= 2);
  CHECK(count(429) >= 1);
  CHECK(count(200) + count(429) == kClients);
  CHECK(srv.wait_pools_free());
}

TEST_CASE("hardening: kept-alive requests are answered without a Nagle / delayed-ACK stall", "[hardening]") {
  TestServer srv;
  auto c = srv.client();
  c.set_keep_alive(true);
  std::vector<double> ms;
  for (int i = 0; i < 40; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = c.Get("/health");
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    REQUIRE(r);
    CHECK(r->status == 200);
    auto p = c.Post("/tokenize", R"({"prompt":"hello there"})", "application/json");
    REQUIRE(p);
    CHECK(p->status == 200);
  }
  std::sort(ms.begin(), ms.end());
  INFO("median /health on one connection: " << ms[ms.size() / 2] << " ms");
  CHECK(ms[ms.size() / 2] < 5.0);
}

TEST_CASE("hardening: chunked and header bombs are refused early with bounded memory", "[hardening]") {
  TestServer srv;  // body limit 8 MiB (server_fixture.h)
  const int64_t rss0 = resident_bytes();

  // 300 MB announced in 1 MiB chunks: 413 once the limit is crossed; the rest is never kept.
  Wire chunked(srv.port());
  REQUIRE(chunked.ok());
  REQUIRE(chunked.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"));
  const std::string chunk = "100000\r\n" + std::string(1 << 20, 'a') + "\r\n";
  int sent = 0;
  while (sent < 300 && chunked.send(chunk, 200)) ++sent;
  CHECK(sent < 300);
  CHECK(chunked.status() == 413);

  // 200 MB of headers: 431 within the head limit.
  Wire headers(srv.port());
  REQUIRE(headers.ok());
  REQUIRE(headers.send("GET /health HTTP/1.1\r\nHost: x\r\n"));
  const std::string line = "X-Filler: " + std::string(1000, 'h') + "\r\n";
  std::string block;
  for (int i = 0; i < 1000; ++i) block += line;
  int blocks = 0;
  while (blocks < 200 && headers.send(block, 200)) ++blocks;
  CHECK(blocks < 200);
  CHECK(headers.status() == 431);

  // A Content-Length over the limit: 413 from the head alone.
  Wire length(srv.port());
  REQUIRE(length.send("POST /v1/completions HTTP/1.1\r\nContent-Length: 300000000\r\n\r\n"));
  CHECK(length.status() == 413);

  const int64_t grown = resident_bytes() - rss0;
  INFO("resident growth: " << grown / (1 << 20) << " MiB");
  CHECK(grown < (64 << 20));
  CHECK(srv.get("/health").status == 200);
}

TEST_CASE("hardening: trickling clients hold no thread; slow heads time out with 408", "[hardening]") {
  TestServerConfig cfg;
  cfg.transport.max_threads = 4;
  cfg.transport.head_timeout = std::chrono::milliseconds(1500);
  TestServer srv(cfg);
  std::vector<std::unique_ptr<Wire>> slow;
  for (int i = 0; i < 80; ++i) {
    slow.push_back(std::make_unique<Wire>(srv.port()));
    REQUIRE(slow.back()->send("GET /health HTTP/1.1\r\nX-Slow: "));
  }
  // Meanwhile, with only 4 handler threads, /health answers at once, over and over.
  for (int i = 0; i < 20; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(srv.get("/health").status == 200);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1));
    for (auto& w : slow) w->send("a");
  }
  // A head that keeps trickling past head_timeout is answered 408 and closed.
  CHECK(slow.front()->status(std::chrono::seconds(5)) == 408);
}

TEST_CASE("hardening: connections beyond the cap evict idle ones, else get 503", "[hardening]") {
  TestServerConfig cfg;
  cfg.transport.max_connections = 8;
  TestServer srv(cfg);
  // Eight connections that have sent half a request: no idle one to close, the ninth is refused.
  std::vector<std::unique_ptr<Wire>> busy;
  for (int i = 0; i < 8; ++i) {
    busy.push_back(std::make_unique<Wire>(srv.port()));
    REQUIRE(busy.back()->send("GET /health HTTP/1.1\r\n"));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  Wire ninth(srv.port());
  ninth.send("GET /health HTTP/1.1\r\n\r\n");
  CHECK(ninth.status() == 503);
  // Finished requests leave idle kept-alive connections; a newcomer evicts the oldest of them.
  for (auto& w : busy) {
    REQUIRE(w->send("\r\n"));
    CHECK(w->status() == 200);
  }
  CHECK(srv.get("/health").status == 200);
}

TEST_CASE("hardening: Range is ignored, any Content-Type carries JSON, 405 for a wrong method", "[hardening]") {
  TestServer srv;
  auto c = srv.client();
  auto full = c.Get("/v1/models");
  REQUIRE(full);
  auto ranged = c.Get("/v1/models", httplib::Headers{{"Range", "bytes=0-1,0-1,0-1"}});
  REQUIRE(ranged);
  CHECK(ranged->status == 200);
  CHECK(ranged->body == full->body);
  CHECK_FALSE(ranged->has_header("Content-Range"));

  // curl -d sends application/x-www-form-urlencoded; a large JSON body is read all the same.
  const std::string big = R"({"prompt":")" + std::string(20000, 'a') + R"("})";
  auto form = c.Post("/tokenize", big, "application/x-www-form-urlencoded");
  REQUIRE(form);
  CHECK(form->status == 200);

  auto wrong = c.Get("/v1/chat/completions");
  REQUIRE(wrong);
  CHECK(wrong->status == 405);
  CHECK(Json::parse(wrong->body)["error"]["code"] == "method_not_allowed");
}
