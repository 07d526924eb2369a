// LoRA adapters over HTTP: "model" selects an adapter (or the base), unknown names are 404
// (OpenAI-shaped, Anthropic-shaped on /v1/messages), /v1/models lists the adapters with the base
// as their parent, and the runtime load/unload endpoints exist only with --allow-runtime-lora,
// behind the API key; serve refuses that flag without a key. The numerics of adapters are
// checked against merged checkpoints in tests/scheduler/test_engine_tiny_lora.cpp.
#include <catch2/catch.hpp>

#include "server/server_options.h"
#include "tests/model/lora_fixture.h"
#include "tests/server/server_fixture.h"

using namespace ds;
using ds::test::Json;

namespace {

Json completion(const std::string& model) {
  return Json{{"model", model}, {"prompt", "The capital of France is"}, {"max_tokens", 8}, {"temperature", 0}};
}

}  // namespace

TEST_CASE("lora: adapters by name, 404 for unknown ones, listed with their parent", "[lora]") {
  test::TempDir tmp;
  test::LoraSpec a, b;
  b.seed = 5;
  b.targets = {"q_proj", "in_proj_qkv", "down_proj"};
  test::write_random_lora(tmp / "a", a);
  test::write_random_lora(tmp / "b", b);
  test::TestServerConfig cfg;
  cfg.max_loras = 1;
  cfg.lora_modules = {{"ad-a", (tmp / "a").string()}};
  cfg.api_key = "k3y";
  cfg.runtime_lora = true;
  test::TestServer srv(cfg);

  auto models = srv.get("/v1/models");
  REQUIRE(models.status == 200);
  REQUIRE(models.body["data"].size() == 2);
  CHECK(models.body["data"][1]["id"] == "ad-a");
  CHECK(models.body["data"][1]["parent"] == "tiny-qwen35");
  CHECK(models.body["data"][0]["parent"].is_null());
  auto one = srv.get("/v1/models/ad-a");
  CHECK(one.status == 200);
  CHECK(one.body["parent"] == "tiny-qwen35");

  const auto base = srv.post("/v1/completions", completion("tiny-qwen35"));
  const auto with_a = srv.post("/v1/completions", completion("ad-a"));
  REQUIRE(base.status == 200);
  REQUIRE(with_a.status == 200);
  CHECK(base.body["choices"][0]["text"] != with_a.body["choices"][0]["text"]);  // the adapter applies
  CHECK(with_a.body["model"] == "ad-a");  // replies name the adapter, as vLLM's
  CHECK(base.body["model"] == "tiny-qwen35");
  const auto chat = srv.post("/v1/chat/completions",
                             Json{{"model", "ad-a"}, {"max_tokens", 4}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  CHECK(chat.status == 200);
  CHECK(chat.body["model"] == "ad-a");
  const auto msg = srv.post("/v1/messages",
                            Json{{"model", "ad-a"}, {"max_tokens", 4}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  CHECK(msg.status == 200);
  CHECK(msg.body["model"] == "ad-a");

  auto missing = srv.post("/v1/completions", completion("nope"));
  CHECK(missing.status == 404);
  CHECK(missing.body["error"]["code"] == "model_not_found");
  auto missing_msg = srv.post("/v1/messages", Json{{"model", "nope"}, {"max_tokens", 4},
                                                    {"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  CHECK(missing_msg.status == 404);
  CHECK(missing_msg.body["type"] == "error");
  CHECK(missing_msg.body["error"].contains("type"));

  SECTION("load and unload at run time") {
    auto loaded = srv.post("/v1/load_lora_adapter", Json{{"lora_name", "ad-b"}, {"lora_path", (tmp / "b").string()}});
    CHECK(loaded.status == 200);
    CHECK(srv.get("/v1/models").body["data"].size() == 3);
    // One slot for two adapters: requests of both run, one after the other.
    const auto with_b = srv.post("/v1/completions", completion("ad-b"));
    CHECK(with_b.status == 200);
    CHECK(srv.post("/v1/completions", completion("ad-a")).body["choices"][0]["text"] ==
          with_a.body["choices"][0]["text"]);
    CHECK(srv.post("/v1/load_lora_adapter", Json{{"lora_name", "ad-b"}, {"lora_path", (tmp / "b").string()}}).status ==
          400);
    CHECK(srv.post("/v1/load_lora_adapter", Json{{"lora_name", "x"}, {"lora_path", (tmp / "none").string()}}).status ==
          400);
    CHECK(srv.post("/v1/load_lora_adapter", Json{{"lora_name", "x"}, {"lora_path", "https://example.com/a"}}).status ==
          400);
    CHECK(srv.post("/v1/load_lora_adapter", Json{{"lora_name", "tiny-qwen35"}, {"lora_path", (tmp / "b").string()}})
              .status == 400);
    CHECK(srv.post("/v1/load_lora_adapter", Json{{"lora_name", "x"}}).status == 400);
    auto unloaded = srv.post("/v1/unload_lora_adapter", Json{{"lora_name", "ad-b"}});
    CHECK(unloaded.status == 200);
    CHECK(srv.post("/v1/completions", completion("ad-b")).status == 404);
    CHECK(srv.post("/v1/unload_lora_adapter", Json{{"lora_name", "ad-b"}}).status == 404);
    // Reloaded under the same name: a new adapter id, the same output.
    CHECK(srv.post("/v1/load_lora_adapter", Json{{"lora_name", "ad-b"}, {"lora_path", (tmp / "b").string()}}).status ==
          200);
    CHECK(srv.post("/v1/completions", completion("ad-b")).body["choices"][0]["text"] == with_b.body["choices"][0]["text"]);
  }
  SECTION("the endpoints are behind the API key") {
    httplib::Client c("127.0.0.1", srv.port());
    auto r = c.Post("/v1/load_lora_adapter", R"({"lora_name": "z", "lora_path": "some/dir"})", "application/json");
    REQUIRE(r);
    CHECK(r->status == 401);
    r = c.Post("/v1/unload_lora_adapter", R"({"lora_name": "ad-a"})", "application/json");
    REQUIRE(r);
    CHECK(r->status == 401);
    CHECK(srv.get("/v1/models").body["data"].size() == 2);
  }
  REQUIRE(srv.wait_pools_free());
  CHECK(srv.engine().stats().lora_slots_pinned == 0);
  CHECK(srv.engine().stats().invariant_violations == 0);
}

TEST_CASE("lora: without --allow-runtime-lora there are no load/unload endpoints", "[lora]") {
  test::TempDir tmp;
  test::write_random_lora(tmp / "a", {});
  test::TestServerConfig cfg;
  cfg.max_loras = 1;
  cfg.lora_modules = {{"ad-a", (tmp / "a").string()}};
  test::TestServer srv(cfg);
  CHECK(srv.post("/v1/load_lora_adapter", Json{{"lora_name", "z"}, {"lora_path", (tmp / "a").string()}}).status == 404);
  CHECK(srv.post("/v1/unload_lora_adapter", Json{{"lora_name", "ad-a"}}).status == 404);
  CHECK(srv.post("/v1/completions", completion("ad-a")).status == 200);
}

TEST_CASE("lora: serve's flags", "[lora]") {
  server::ServerOptions o;
  o.enable_lora = true;
  o.allow_runtime_lora = true;
  CHECK(server::validate_options(o).find("--api-key") != std::string::npos);
  o.api_key = "k";
  CHECK(server::validate_options(o).empty());
  o.enable_lora = false;
  CHECK(server::validate_options(o).find("--enable-lora") != std::string::npos);
  o.enable_lora = true;
  o.max_cpu_loras = 0;
  CHECK(server::validate_options(o).find("--max-cpu-loras") != std::string::npos);
  CHECK(server::parse_lora_module("sql=/data/sql") == std::pair<std::string, std::string>{"sql", "/data/sql"});
  CHECK(server::parse_lora_module(R"({"name": "sql", "path": "/data/sql"})") ==
        std::pair<std::string, std::string>{"sql", "/data/sql"});
  CHECK_THROWS_AS(server::parse_lora_module("sql"), std::invalid_argument);
  CHECK_THROWS_AS(server::parse_lora_module("=x"), std::invalid_argument);
}
