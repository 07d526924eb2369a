// Images through the HTTP APIs on the vision-language fixture (tests/data/tiny-qwen35-vl, CPU
// backend): OpenAI chat image_url parts (data:, file://, http(s)://), Anthropic image blocks
// and Responses input_image give HF's greedy text with usage counting the image tokens; a
// repeated image is encoded once (/metrics); every bad input is a 400 naming its field, and
// the pools are free afterwards.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "tests/server/http_test_util.h"
#include "tests/server/media_test_util.h"
#include "tests/server/server_fixture.h"

using namespace ds;
using namespace ds::test;
using server::Json;

namespace {

const std::filesystem::path kDir = data_path("tiny-qwen35-vl");

std::string data_url(const std::string& file, const std::string& type) {
  return file_data_url(kDir / "images" / file, type);
}

Json manifest() { return Json::parse(std::ifstream(kDir / "reference.json")); }

Json image_part(const std::string& url) { return Json{{"type", "image_url"}, {"image_url", {{"url", url}}}}; }

Json greedy(Json body) {
  body["max_tokens"] = 16;
  body["temperature"] = 0;
  body["ignore_eos"] = true;
  return body;
}

TestServerConfig vl_config() {
  TestServerConfig c;
  c.model = "tiny-qwen35-vl";
  c.media.allowed_local_path = kDir / "images";
  c.media.allowed_domains = {"127.0.0.1"};
  c.media.max_bytes = 1 << 20;
  c.media.timeout = std::chrono::milliseconds(3000);
  return c;
}

}  // namespace

TEST_CASE("vision http: chat, Anthropic and Responses requests give HF's greedy text", "[vision]") {
  TestServer srv(vl_config());
  const Json m = manifest();
  const auto& c0 = m["cases"][0];
  const std::string text = c0["greedy_text"];
  // OpenAI chat, the image as a data: URL (case 0: a square PNG).
  Json chat = greedy({{"messages", Json::array({Json{{"role", "user"}, {"content", Json::array({image_part(
                                                           data_url("square96.png", "image/png")),
                                                       Json{{"type", "text"}, {"text", "What is in this image?"}}})}}})}});
  auto r = srv.post("/v1/chat/completions", chat);
  REQUIRE(r.status == 200);
  CHECK(r.body["usage"]["prompt_tokens"] == c0["prompt_len"]);
  CHECK(r.body["choices"][0]["message"]["reasoning_content"] == text);
  // The same image as a file under --allowed-local-media-path.
  chat["messages"][0]["content"][0] = image_part("file://" + (kDir / "images" / "square96.png").string());
  r = srv.post("/v1/chat/completions", chat);
  REQUIRE(r.status == 200);
  CHECK(r.body["choices"][0]["message"]["reasoning_content"] == text);
  // Anthropic Messages: a base64 image block. Without extended thinking its prompt closes the
  // <think> block, so it answers as a chat request with enable_thinking false does.
  Json nothink = chat;
  nothink["messages"][0]["content"][0] = image_part(data_url("square96.png", "image/png"));
  nothink["chat_template_kwargs"] = {{"enable_thinking", false}};
  const auto want = srv.post("/v1/chat/completions", nothink);
  REQUIRE(want.status == 200);
  Json msg = {{"model", "tiny-qwen35-vl"}, {"max_tokens", 16}, {"temperature", 0}, {"ignore_eos", true},
              {"messages", Json::array({Json{{"role", "user"}, {"content", Json::array({
                  Json{{"type", "image"}, {"source", {{"type", "base64"}, {"media_type", "image/png"},
                                                      {"data", base64(file_bytes(kDir / "images" / "square96.png"))}}}},
                  Json{{"type", "text"}, {"text", "What is in this image?"}}})}}})}};
  r = srv.post("/v1/messages", msg);
  REQUIRE(r.status == 200);
  CHECK(r.body["usage"]["input_tokens"] == want.body["usage"]["prompt_tokens"]);
  CHECK(r.body["content"][0]["text"] == want.body["choices"][0]["message"]["content"]);
  // OpenAI Responses: input_image.
  Json resp = {{"model", "tiny-qwen35-vl"}, {"max_output_tokens", 16}, {"temperature", 0}, {"ignore_eos", true},
               {"input", Json::array({Json{{"role", "user"}, {"content", Json::array({
                   Json{{"type", "input_image"}, {"image_url", data_url("square96.png", "image/png")}},
                   Json{{"type", "input_text"}, {"text", "What is in this image?"}}})}}})}};
  r = srv.post("/v1/responses", resp);
  REQUIRE(r.status == 200);
  CHECK(r.body["usage"]["input_tokens"] == c0["prompt_len"]);  // reasoning on, as chat's default
  // Anthropic: an image inside a tool_result (an agent's screenshot) reaches the template as
  // an image of the tool message, the same prompt as the OpenAI tool message with image_url.
  const Json shot = Json{{"type", "image"}, {"source", {{"type", "base64"}, {"media_type", "image/png"},
                                                        {"data", base64(file_bytes(kDir / "images" / "square96.png"))}}}};
  Json tool_msg = {{"model", "tiny-qwen35-vl"}, {"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true},
                   {"tools", Json::array({Json{{"name", "screenshot"}, {"input_schema", {{"type", "object"}}}}})},
                   {"messages", Json::array({
                       Json{{"role", "user"}, {"content", "Take a screenshot."}},
                       Json{{"role", "assistant"}, {"content", Json::array({Json{{"type", "tool_use"}, {"id", "t1"},
                                                                                 {"name", "screenshot"}, {"input", Json::object()}}})}},
                       Json{{"role", "user"}, {"content", Json::array({Json{{"type", "tool_result"}, {"tool_use_id", "t1"},
                                                                            {"content", Json::array({Json{{"type", "text"}, {"text", "here"}}, shot})}}})}}})}};
  r = srv.post("/v1/messages", tool_msg);
  INFO(r.text);
  REQUIRE(r.status == 200);
  Json tool_chat = {{"model", "tiny-qwen35-vl"}, {"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true},
                    {"chat_template_kwargs", {{"enable_thinking", false}}},
                    {"tools", Json::array({Json{{"type", "function"}, {"function", {{"name", "screenshot"}, {"parameters", {{"type", "object"}}}}}}})},
                    {"messages", Json::array({
                        Json{{"role", "user"}, {"content", "Take a screenshot."}},
                        Json{{"role", "assistant"}, {"content", ""}, {"tool_calls", Json::array({Json{{"id", "t1"}, {"type", "function"},
                             {"function", {{"name", "screenshot"}, {"arguments", "{}"}}}}})}},
                        Json{{"role", "tool"}, {"tool_call_id", "t1"}, {"content", Json::array({Json{{"type", "text"}, {"text", "here"}},
                             image_part(data_url("square96.png", "image/png"))})}}})}};
  const auto want_tool = srv.post("/v1/chat/completions", tool_chat);
  INFO(want_tool.text);
  REQUIRE(want_tool.status == 200);
  CHECK(r.body["usage"]["input_tokens"].get<int64_t>() + r.body["usage"]["cache_read_input_tokens"].get<int64_t>() ==
        want_tool.body["usage"]["prompt_tokens"].get<int64_t>());
  CHECK(want_tool.body["usage"]["prompt_tokens"].get<int64_t>() > 20);  // the image's tokens are in
  // Two images in one prompt, and per-request pixel bounds (cases 2 and 4), as their messages say.
  for (int i : {2, 4}) {
    const auto& c = m["cases"][static_cast<size_t>(i)];
    Json msgs = c["messages"];
    for (auto& mm : msgs)
      if (mm["content"].is_array())
        for (auto& p : mm["content"])
          if (p["type"] == "image_url")
            p["image_url"]["url"] = "file://" + (kDir / p["image_url"]["url"].get<std::string>()).string();
    Json body = greedy({{"messages", msgs}, {"skip_special_tokens", false}});
    if (!c["mm_processor_kwargs"].empty()) body["mm_processor_kwargs"] = c["mm_processor_kwargs"];
    r = srv.post("/v1/chat/completions", body);
    INFO("case " << i << ": " << r.text);
    REQUIRE(r.status == 200);
    CHECK(r.body["usage"]["prompt_tokens"] == c["prompt_len"]);
    CHECK(r.body["choices"][0]["message"]["reasoning_content"] == c["greedy_text"]);
  }
  CHECK(srv.wait_pools_free());
}

TEST_CASE("vision http: a repeated image is encoded once and counted in /metrics", "[vision]") {
  TestServer srv(vl_config());
  Json chat = greedy({{"n", 2}, {"messages", Json::array({Json{{"role", "user"}, {"content", Json::array({
      image_part(data_url("small40x24.gif", "image/gif")), Json{{"type", "text"}, {"text", "Hi"}}})}}})}});
  REQUIRE(srv.post("/v1/chat/completions", chat).status == 200);
  REQUIRE(srv.post("/v1/chat/completions", chat).status == 200);
  CHECK(metric(srv, "deltaserve:images_encoded_total") == 1);
  CHECK(metric(srv, "deltaserve:encoder_cache_hits_total") >= 2);
  CHECK(srv.wait_pools_free());
}

TEST_CASE("vision http: image URLs over http from allowed hosts only, within limits", "[vision]") {
  httplib::Server media;
  const std::string png = file_bytes(kDir / "images" / "square96.png");
  media.Get("/a.png", [&](const httplib::Request&, httplib::Response& res) { res.set_content(png, "image/png"); });
  media.Get("/same", [](const httplib::Request&, httplib::Response& res) { res.set_redirect("/a.png"); });
  media.Get("/away", [](const httplib::Request&, httplib::Response& res) { res.set_redirect("http://localhost:1/a.png"); });
  media.Get("/big", [](const httplib::Request&, httplib::Response& res) { res.set_content(std::string(2 << 20, 'x'), "image/png"); });
  const int port = media.bind_to_any_port("127.0.0.1");
  std::thread t([&] { media.listen_after_bind(); });
  TestServer srv(vl_config());
  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  auto ask = [&](const std::string& url) {
    return srv.post("/v1/chat/completions", greedy({{"messages", Json::array({Json{{"role", "user"}, {"content",
                                                       Json::array({image_part(url)})}}})}}));
  };
  CHECK(ask(base + "/a.png").status == 200);
  CHECK(ask(base + "/same").status == 200);
  auto r = ask(base + "/away");
  CHECK(r.status == 400);
  CHECK_THAT(r.text, Catch::Contains("another host"));
  r = ask(base + "/big");
  CHECK(r.status == 400);
  CHECK_THAT(r.text, Catch::Contains("larger than"));
  r = ask(base + "/missing");
  CHECK(r.status == 400);
  CHECK_THAT(r.text, Catch::Contains("HTTP 404"));
  r = ask("http://localhost:" + std::to_string(port) + "/a.png");
  CHECK(r.status == 400);
  CHECK_THAT(r.text, Catch::Contains("not in --allowed-media-domains"));
  media.stop();
  t.join();
  CHECK(srv.wait_pools_free());
}

TEST_CASE("vision http: a client that leaves while its image is fetched ends the fetch", "[vision]") {
  // A media host that takes the request and never answers: the fetch would wait for its 10 s
  // deadline; the client's leaving must shut the connection at once.
  const int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(lfd, 4) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  const int port = ntohs(a.sin_port);
  std::atomic<bool> asked{false}, shut{false};
  std::thread host([&] {
    pollfd p{lfd, POLLIN, 0};
    if (::poll(&p, 1, 10000) <= 0) return;
    const int c = ::accept(lfd, nullptr, nullptr);
    char buf[4096];
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(12);
    while (std::chrono::steady_clock::now() < until) {
      pollfd q{c, POLLIN, 0};
      if (::poll(&q, 1, 20) <= 0) continue;
      const ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) {
        shut = true;  // the fetcher closed its end
        break;
      }
      asked = true;
    }
    ::close(c);
  });
  TestServerConfig cfg = vl_config();
  cfg.media.timeout = std::chrono::milliseconds(10000);
  TestServer srv(cfg);
  const std::string body = server::dump_json(greedy({{"messages", Json::array({Json{
      {"role", "user"}, {"content", Json::array({image_part("http://127.0.0.1:" + std::to_string(port) + "/slow.png")})}}})}}));
  RawClient c(srv.port());
  REQUIRE(c.send_post("/v1/chat/completions", body));
  const auto t0 = std::chrono::steady_clock::now();
  while (!asked && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(asked);
  c.close();
  const auto t1 = std::chrono::steady_clock::now();
  while (!shut && std::chrono::steady_clock::now() - t1 < std::chrono::seconds(8))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(shut);
  CHECK(std::chrono::steady_clock::now() - t1 < std::chrono::seconds(2));  // not the 10 s deadline
  host.join();
  ::close(lfd);
  CHECK(srv.get("/health").status == 200);
  CHECK(srv.wait_pools_free());
}

TEST_CASE("vision http: every bad image input is a 400 naming its field; nothing leaks", "[vision]") {
  TestServer srv(vl_config());
  const std::string ok = data_url("square96.png", "image/png");
  auto with = [&](const Json& part) {
    return greedy({{"messages", Json::array({Json{{"role", "user"}, {"content", Json::array({part})}}})}});
  };
  const std::vector<std::pair<Json, std::string>> bad = {
      {with(image_part("data:image/png;base64,AAAA")), "unsupported image format"},
      {with(image_part("data:image/png;base64,@@@@")), "malformed"},
      {with(image_part("data:text/plain;base64,AAAA")), "not an image type"},
      {with(image_part("ftp://x/y.png")), "data:, http(s):// or file://"},
      {with(image_part("file:///etc/passwd")), "outside --allowed-local-media-path"},
      {with(image_part("file://" + (kDir / "images" / "..").string() + "/config.json")), "outside"},
      {with(Json{{"type", "image_url"}, {"image_url", 7}}), "image_url"},
      {with(Json{{"type", "input_audio"}}), "input_audio"},
  };
  for (const auto& [body, why] : bad) {
    const auto r = srv.post("/v1/chat/completions", body);
    INFO(why << ": " << r.text);
    CHECK(r.status == 400);
    CHECK_THAT(r.text, Catch::Contains(why));
    CHECK(r.body["error"]["param"].get<std::string>().rfind("messages[0].content[0]", 0) == 0);
  }
  // A truncated image, a huge one and one with an absurd aspect ratio.
  std::string png = file_bytes(kDir / "images" / "square96.png");
  auto r = srv.post("/v1/chat/completions", with(image_part("data:image/png;base64," + base64(png.substr(0, png.size() / 2)))));
  CHECK(r.status == 400);
  CHECK_THAT(r.text, Catch::Contains("corrupt PNG"));
  // Too many images, bad mm_processor_kwargs, an image pad typed into the text.
  Json many = greedy({{"messages", Json::array({Json{{"role", "user"}, {"content", Json::array()}}})}});
  for (int i = 0; i < 9; ++i) many["messages"][0]["content"].push_back(image_part(ok));
  r = srv.post("/v1/chat/completions", many);
  CHECK(r.status == 400);
  CHECK_THAT(r.text, Catch::Contains("at most 8"));
  Json kw = with(image_part(ok));
  kw["mm_processor_kwargs"] = {{"max_pixels", 0}};
  CHECK(srv.post("/v1/chat/completions", kw).status == 400);
  kw["mm_processor_kwargs"] = {{"min_pixels", 1000}, {"max_pixels", 900}};
  r = srv.post("/v1/chat/completions", kw);
  CHECK(r.status == 400);
  CHECK_THAT(r.text, Catch::Contains("min_pixels"));
  // Bounds past the checkpoint's max_pixels (128 x 128) would let a request enlarge any image.
  for (const char* key : {"min_pixels", "max_pixels"}) {
    kw["mm_processor_kwargs"] = {{key, 16385}};
    r = srv.post("/v1/chat/completions", kw);
    INFO(r.text);
    CHECK(r.status == 400);
    CHECK(r.body["error"]["param"] == std::string("mm_processor_kwargs.") + key);
    CHECK_THAT(r.text, Catch::Contains("at most 16384 pixels"));
  }
  Json pad = greedy({{"messages", Json::array({Json{{"role", "user"}, {"content", Json::array({image_part(ok),
      Json{{"type", "text"}, {"text", "and <|image_pad|>"}}})}}})}});
  r = srv.post("/v1/chat/completions", pad);
  CHECK(r.status == 400);
  CHECK_THAT(r.text, Catch::Contains("placeholders"));
  // Anthropic: an unknown media type; Responses: an image by file id.
  Json msg = {{"max_tokens", 4}, {"messages", Json::array({Json{{"role", "user"}, {"content", Json::array({
      Json{{"type", "image"}, {"source", {{"type", "base64"}, {"media_type", "image/bmp"}, {"data", "AAAA"}}}}})}}})}};
  r = srv.post("/v1/messages", msg);
  CHECK(r.status == 400);
  CHECK_THAT(r.text, Catch::Contains("media_type"));
  // ... and PNG bytes declared as JPEG, as Anthropic's API refuses them.
  msg["messages"][0]["content"][0]["source"] = {{"type", "base64"}, {"media_type", "image/jpeg"}, {"data", base64(png)}};
  r = srv.post("/v1/messages", msg);
  CHECK(r.status == 400);
  CHECK_THAT(r.text, Catch::Contains("PNG data, which does not match media_type image/jpeg"));
  Json resp = {{"input", Json::array({Json{{"role", "user"}, {"content", Json::array({
      Json{{"type", "input_image"}, {"file_id", "file_1"}}})}}})}};
  CHECK(srv.post("/v1/responses", resp).status == 400);
  // An image's error names the field as the Responses client sent it.
  resp["input"][0]["content"][0] = {{"type", "input_image"}, {"image_url", "http://example.com/a.png"}};
  r = srv.post("/v1/responses", resp);
  CHECK(r.status == 400);
  CHECK(r.body["error"]["param"] == "input[0].content[0].image_url");
  CHECK(srv.wait_pools_free());
  CHECK(srv.engine().stats().requests_submitted_total == 0);
}

TEST_CASE("vision http: a model without a vision tower refuses images with a 400", "[vision]") {
  TestServer srv;  // tiny-qwen35: its tower's token ids lie outside its vocabulary
  const auto r = srv.post("/v1/chat/completions", greedy({{"messages", Json::array({Json{{"role", "user"}, {"content",
      Json::array({image_part(data_url("square96.png", "image/png"))})}}})}}));
  CHECK(r.status == 400);
  CHECK_THAT(r.text, Catch::Contains("does not take images"));
}
