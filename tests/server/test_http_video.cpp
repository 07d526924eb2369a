// Videos through the chat API on the vision-language fixture (tests/data/tiny-qwen35-vl, CPU
// backend), with the fixture clip (10 frames of 64 x 48 at 4 fps): video_url parts as data:
// URLs and files; the prompt holds HF's expansion (one "<t seconds>" and one
// <|vision_start|>...<|vision_end|> run per temporal patch, its pads one per merged patch),
// checked against the same text sent with the expansion written out here from HF's rules;
// a repeated clip is encoded once; per-request fps / max_frames; every bad input is a 400
// naming its field, Anthropic and Responses have no video part, and the pools are free
// afterwards. Against HF's own numbers: the refcheck of test_video_fixture.cpp.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "server/server_options.h"
#include "tests/server/http_test_util.h"
#include "tests/server/media_test_util.h"
#include "tests/server/server_fixture.h"

using namespace ds;
using namespace ds::test;
using server::Json;

namespace {

const std::filesystem::path kDir = data_path("tiny-qwen35-vl");

std::string clip_url(const std::string& file = "clip64x48_4fps.mp4", const std::string& type = "video/mp4") {
  return file_data_url(kDir / "videos" / file, type);
}

Json video_part(const std::string& url) { return Json{{"type", "video_url"}, {"video_url", {{"url", url}}}}; }
Json text_part(const std::string& t) { return Json{{"type", "text"}, {"text", t}}; }

Json ask(const Json& content) {
  return {{"messages", Json::array({Json{{"role", "user"}, {"content", content}}})},
          {"max_tokens", 4},
          {"temperature", 0},
          {"ignore_eos", true}};
}

TestServerConfig config() {
  TestServerConfig c;
  c.model = "tiny-qwen35-vl";
  c.media.allowed_local_path = kDir / "videos";
  c.media.max_bytes = 1 << 20;
  return c;
}

const std::string kRun = "<|vision_start|><|video_pad|><|vision_end|>";

}  // namespace

TEST_CASE("video http: a clip's prompt is HF's expansion with timestamps, encoded once", "[video]") {
  TestServer srv(config());
  // The fixture clip under the fixture's video processor (fps 2, min 4 frames): frames
  // 0, 2, 4, 7, 9 (5 = int(10 / 4 * 2)), paired (0, 2) (4, 7) (9, 9); times 0.25, 1.375, 2.25 s;
  // 64 x 64 after video smart_resize: 4 x 4 patches, 4 tokens a temporal patch.
  const std::string expanded = "<0.2 seconds>" + kRun + "<1.4 seconds>" + kRun + "<2.2 seconds>" + kRun;
  const auto text = srv.post("/v1/chat/completions", ask(expanded + "What happens?"));
  REQUIRE(text.status == 200);
  const int64_t text_tokens = text.body["usage"]["prompt_tokens"];
  auto r = srv.post("/v1/chat/completions", ask(Json::array({video_part(clip_url()), text_part("What happens?")})));
  INFO(r.text);
  REQUIRE(r.status == 200);
  CHECK(r.body["usage"]["prompt_tokens"] == text_tokens + 3 * (4 - 1));  // each pad -> 4
  CHECK(metric(srv, "deltaserve:images_encoded_total") == 3);  // one per temporal patch
  // The same clip again: every temporal patch from the encoder cache.
  const Json first = r.body["choices"][0]["message"];
  r = srv.post("/v1/chat/completions", ask(Json::array({video_part(clip_url()), text_part("What happens?")})));
  REQUIRE(r.status == 200);
  CHECK(r.body["choices"][0]["message"] == first);
  CHECK(metric(srv, "deltaserve:images_encoded_total") == 3);
  CHECK(metric(srv, "deltaserve:encoder_cache_hits_total") >= 3);
  // As a file under --allowed-local-media-path, and the WebM / VP9 encoding of the same source.
  r = srv.post("/v1/chat/completions",
               ask(Json::array({video_part("file://" + (kDir / "videos" / "clip64x48_4fps.mp4").string()),
                                text_part("What happens?")})));
  REQUIRE(r.status == 200);
  CHECK(r.body["choices"][0]["message"] == first);
  r = srv.post("/v1/chat/completions",
               ask(Json::array({video_part(clip_url("clip64x48_4fps.webm", "video/webm")), text_part("What happens?")})));
  REQUIRE(r.status == 200);
  CHECK(r.body["usage"]["prompt_tokens"] == text_tokens + 9);
  // An image before the video (square96.png: 96 x 96, 3 x 3 merged patches): its placeholder
  // (3 tokens, the pad becoming 9) joins the prompt, and the video's pairs follow it.
  const std::string png = file_bytes(kDir / "images" / "square96.png");
  r = srv.post("/v1/chat/completions",
               ask(Json::array({Json{{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64," + base64(png)}}}},
                                video_part(clip_url()), text_part("What happens?")})));
  INFO(r.text);
  REQUIRE(r.status == 200);
  CHECK(r.body["usage"]["prompt_tokens"] == text_tokens + 9 + 2 + 9);
  // Per-request sampling: max_frames 2 keeps frames 0 and 9 (one
  // temporal patch at (0 + 2.25) / 2 = 1.125 s).
  Json two = ask(Json::array({video_part(clip_url()), text_part("What happens?")}));
  two["mm_processor_kwargs"] = {{"max_frames", 2}};
  r = srv.post("/v1/chat/completions", two);
  REQUIRE(r.status == 200);
  const auto one_text = srv.post("/v1/chat/completions", ask("<1.1 seconds>" + kRun + "What happens?"));
  REQUIRE(one_text.status == 200);
  CHECK(r.body["usage"]["prompt_tokens"] == one_text.body["usage"]["prompt_tokens"].get<int64_t>() + 3);
  CHECK(srv.wait_pools_free());
}

TEST_CASE("video http: a prefill cut into chunks of 7 (inside the pairs' pad runs) answers as one", "[video]") {
  const Json body = ask(Json::array({video_part(clip_url()), text_part("What happens?")}));
  Json whole;
  {
    TestServer srv(config());
    const auto r = srv.post("/v1/chat/completions", body);
    REQUIRE(r.status == 200);
    whole = r.body["choices"][0]["message"];
  }
  TestServerConfig c = config();
  c.engine.scheduler.max_num_batched_tokens = 7;  // also the encoder's budget: one pair a step
  TestServer srv(c);
  const auto r = srv.post("/v1/chat/completions", body);
  INFO(r.text);
  REQUIRE(r.status == 200);
  CHECK(r.body["choices"][0]["message"] == whole);
  CHECK(metric(srv, "deltaserve:images_encoded_total") == 3);
  CHECK(srv.wait_pools_free());
}

TEST_CASE("video http: every bad video input is a 400 naming its field; nothing leaks", "[video]") {
  TestServer srv(config());
  auto with = [&](const Json& part) { return ask(Json::array({part, text_part("Hi")})); };
  const std::string clip = file_bytes(kDir / "videos" / "clip64x48_4fps.mp4");
  const std::vector<std::pair<Json, std::string>> bad = {
      {with(video_part("data:video/mp4;base64," + base64("not a video, only text"))), "not a video"},
      {with(video_part("data:video/mp4;base64," + base64(clip.substr(0, 3000)))), "truncated or damaged"},
      {with(video_part("data:image/png;base64," + base64(clip))), "not a video type"},
      {with(video_part("file://" + (kDir / "images" / "square96.png").string())), "outside"},
      {with(video_part("http://example.com/a.mp4")), "video URLs are not fetched"},
      {with(Json{{"type", "video_url"}, {"video_url", 3}}), "video_url"},
      // A PNG where a video should be: the bytes decide, not the declared type.
      {with(video_part("data:video/mp4;base64," + base64(file_bytes(kDir / "images" / "square96.png")))), "not a video"},
  };
  for (const auto& [body, why] : bad) {
    const auto r = srv.post("/v1/chat/completions", body);
    INFO(why << ": " << r.text);
    CHECK(r.status == 400);
    CHECK_THAT(r.text, Catch::Contains(why));
    CHECK(r.body["error"]["param"].get<std::string>().rfind("messages[0].content[0]", 0) == 0);
  }
  // Two videos past --limit-mm-per-prompt's 1, bad mm_processor_kwargs, a pad in the text.
  auto r = srv.post("/v1/chat/completions", ask(Json::array({video_part(clip_url()), video_part(clip_url())})));
  CHECK(r.status == 400);
  CHECK_THAT(r.text, Catch::Contains("at most 1"));
  Json kw = with(video_part(clip_url()));
  for (const Json& v : {Json{{"fps", 0}}, Json{{"fps", 61}}, Json{{"max_frames", 1}}, Json{{"max_frames", "8"}},
                        Json{{"max_frames", 1000}}, Json{{"num_frames", 8}}}) {
    kw["mm_processor_kwargs"] = v;
    r = srv.post("/v1/chat/completions", kw);
    INFO(v.dump() << ": " << r.text);
    CHECK(r.status == 400);
    CHECK_THAT(r.body["error"]["param"].get<std::string>(), Catch::StartsWith("mm_processor_kwargs."));
  }
  r = srv.post("/v1/chat/completions", ask(Json::array({video_part(clip_url()), text_part("and " + kRun)})));
  CHECK(r.status == 400);
  CHECK_THAT(r.text, Catch::Contains("video placeholders"));
  // Anthropic and Responses have no video part.
  Json msg = {{"max_tokens", 4}, {"messages", Json::array({Json{{"role", "user"}, {"content", Json::array({
      Json{{"type", "video"}, {"source", {{"type", "base64"}, {"media_type", "video/mp4"}, {"data", base64(clip)}}}}})}}})}};
  r = srv.post("/v1/messages", msg);
  CHECK(r.status == 400);
  CHECK_THAT(r.text, Catch::Contains("'video'"));
  Json resp = {{"input", Json::array({Json{{"role", "user"}, {"content", Json::array({
      Json{{"type", "input_text"}, {"text", "Hi"}}, Json{{"type", "input_video"}, {"video_url", clip_url()}}})}}})}};
  r = srv.post("/v1/responses", resp);
  CHECK(r.status == 400);
  CHECK_THAT(r.text, Catch::Contains("input_video"));
  CHECK(srv.wait_pools_free());
  CHECK(srv.engine().stats().requests_submitted_total == 0);
}

TEST_CASE("video http: a model without a vision tower refuses videos with a 400", "[video]") {
  TestServer srv;
  const auto r = srv.post("/v1/chat/completions", ask(Json::array({video_part(clip_url())})));
  CHECK(r.status == 400);
  CHECK_THAT(r.text, Catch::Contains("does not take videos"));
}

TEST_CASE("video http: --limit-mm-per-prompt takes image and video counts", "[video]") {
  const server::MmLimits both = server::parse_limit_mm_per_prompt(R"({"image": 2, "video": 3})");
  CHECK(both.images == 2);
  CHECK(both.videos == 3);
  const server::MmLimits off = server::parse_limit_mm_per_prompt(R"({"video": 0, "audio": 0})");
  CHECK(off.images == 8);
  CHECK(off.videos == 0);
  CHECK_THROWS_AS(server::parse_limit_mm_per_prompt(R"({"audio": 1})"), std::invalid_argument);
  CHECK_THROWS_AS(server::parse_limit_mm_per_prompt(R"({"video": -1})"), std::invalid_argument);
  CHECK_THROWS_AS(server::parse_limit_mm_per_prompt(R"({"video": 1025})"), std::invalid_argument);
  CHECK_THROWS_AS(server::parse_limit_mm_per_prompt("[1]"), std::invalid_argument);
  // A server taking no video refuses one by the limit's name.
  TestServerConfig c = config();
  c.max_videos = 0;
  TestServer srv(c);
  const auto r = srv.post("/v1/chat/completions", ask(Json::array({video_part(clip_url())})));
  CHECK(r.status == 400);
  CHECK_THAT(r.text, Catch::Contains("at most 0"));
}
