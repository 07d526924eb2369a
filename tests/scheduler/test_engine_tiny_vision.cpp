// The engine with images, on the vision-language fixture (tests/data/tiny-qwen35-vl): the five
// image prompts together reproduce HF's greedy tokens, also in steps too small for a whole
// image (chunks end inside pad runs); a repeated image is encoded once (the encoder cache);
// with prefix caching, prompts that differ only in their image share no block past it; a model
// without a vision tower refuses images; every pool is free afterwards; on a backend that
// records steps, the decode steps of image prompts are recorded.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "engine_checks.h"
#include "greedy_match.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/qwen35/model.h"
#include "model/qwen35/reference_file.h"
#include "model/qwen35/vision_encoder.h"
#include "model/vision/decode.h"
#include "nlohmann/json.hpp"
#include "scheduler/engine.h"
#include "scheduler/qwen35_forward_model.h"
#include "tests/test_backend.h"
#include "tests/test_paths.h"

using namespace ds;
using namespace ds::scheduler;

namespace {

struct TinyVl {
  std::filesystem::path dir = test::data_path("tiny-qwen35-vl");
  std::unique_ptr<kernels::Backend> backend = test::make_test_backend();
  std::unique_ptr<qwen35::Model> model = qwen35::Model::load(*backend, dir);
  qwen35::Checkpoint ckpt{dir};
  std::unique_ptr<qwen35::VisionEncoder> encoder =
      qwen35::VisionEncoder::load(*backend, dir, ckpt, *model->config().vision);
  Qwen35ForwardModel forward{*model, false, encoder.get()};
  qwen35::ReferenceFile ref{dir / "reference.safetensors"};
  nlohmann::json manifest = nlohmann::json::parse(std::ifstream(dir / "reference.json"));

  std::shared_ptr<const vision::ProcessedImage> image(const std::string& file, vision::PixelBounds b = {},
                                                      bool mirror = false) {
    std::ifstream in(dir / "images" / file, std::ios::binary);
    const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    vision::RgbImage rgb = vision::decode_image(bytes);
    if (mirror) std::reverse(rgb.rgb.begin(), rgb.rgb.end());
    return std::make_shared<vision::ProcessedImage>(vision::preprocess(rgb, encoder->processor(), b));
  }

  // Case i as an engine request; `swap` replaces its first image (same grid) with a mirrored one.
  Request request(int i, bool mirror_first = false) {
    const auto& c = manifest["cases"][static_cast<size_t>(i)];
    const std::vector<int32_t> ids = ref.ints("c" + std::to_string(i) + ".input_ids");
    vision::PixelBounds b;
    if (c["mm_processor_kwargs"].contains("min_pixels")) b.min_pixels = c["mm_processor_kwargs"]["min_pixels"];
    if (c["mm_processor_kwargs"].contains("max_pixels")) b.max_pixels = c["mm_processor_kwargs"]["max_pixels"];
    auto mm = std::make_shared<MultimodalInput>();
    std::vector<qwen35::PromptImageSpan> spans;
    size_t k = 0;
    for (const auto& f : c["images"]) {
      const bool mirror = mirror_first && k == 0;
      auto px = image(f.get<std::string>(), b, mirror);
      mm->images.push_back({px, f.get<std::string>() + (mirror ? "/mirrored" : "") + std::to_string(b.max_pixels.value_or(0))});
      ++k;
    }
    for (size_t t = 0, n = 0; t < ids.size(); ++t) {
      if (ids[t] != model->config().vision->image_token_id || (t > 0 && ids[t - 1] == ids[t])) continue;
      const auto& px = *mm->images[n++].pixels;
      spans.push_back({static_cast<int64_t>(t), 1, px.grid_h / 2, px.grid_w / 2});
    }
    mm->layout = qwen35::MultimodalPrompt::make(static_cast<int64_t>(ids.size()), spans);
    Request r(ids);
    r.max_tokens = 16;
    r.ignore_eos = true;
    r.sampling.temperature = 0;
    r.multimodal = mm;
    r.cache_points = {static_cast<int64_t>(ids.size()) - 1};  // as the server names a chat prompt's end
    return r;
  }
  std::vector<int32_t> greedy(int i) { return ref.ints("c" + std::to_string(i) + ".greedy_tokens"); }

  // Case i's greedy tokens (greedy_match.h).
  bool matches_greedy(const std::vector<int32_t>& tokens, int i) {
    return test::follows_greedy(tokens, greedy(i), ref, "c" + std::to_string(i) + ".greedy_logits", "case " + std::to_string(i));
  }
  static bool same_run(const std::vector<int32_t>& a, const std::vector<int32_t>& b) { return test::same_greedy_run(a, b); }
};

TinyVl& vl() {
  static TinyVl t;
  return t;
}

EngineConfig config(int64_t budget, bool prefix = false) {
  EngineConfig c;
  c.scheduler.max_num_seqs = 8;
  c.scheduler.max_num_batched_tokens = budget;
  c.scheduler.max_encoder_tokens = 16;
  c.block_size = 16;
  c.num_blocks = 64;
  c.max_ctx = 512;
  c.prefix_caching = prefix;
  c.num_snapshots = prefix ? 8 : 0;
  c.check_invariants = true;
  return c;
}

}  // namespace

TEST_CASE("engine with images: the fixture's prompts give HF's greedy tokens, whole and in small steps", "[vision]") {
  TinyVl& t = vl();
  for (int64_t budget : {int64_t{256}, int64_t{7}}) {
    Engine engine(t.forward, config(budget), kernels::cpu::make_cpu_sampler());
    std::vector<Request> reqs;
    for (int i = 0; i < 5; ++i) reqs.push_back(t.request(i));
    const auto out = test::run_together(engine, reqs);
    for (int i = 0; i < 5; ++i) {
      INFO("case " << i << " budget " << budget);
      CHECK(t.matches_greedy(out[static_cast<size_t>(i)].tokens, i));
    }
    const EngineStats s = engine.stats();
    CHECK(s.images_encoded_total == 6);  // two_images has two; no image twice
    test::check_pools_free(engine);
  }
}

TEST_CASE("engine with images: a repeated image is encoded once", "[vision]") {
  TinyVl& t = vl();
  Engine engine(t.forward, config(256), kernels::cpu::make_cpu_sampler());
  const auto first = test::run_together(engine, {t.request(0)});
  const auto again = test::run_together(engine, {t.request(0), t.request(0)});
  CHECK(t.matches_greedy(first[0].tokens, 0));
  CHECK(t.matches_greedy(again[0].tokens, 0));
  CHECK(t.matches_greedy(again[1].tokens, 0));
  const EngineStats s = engine.stats();
  CHECK(s.images_encoded_total == 1);
  CHECK(s.encoder_cache_hits_total >= 2);
  CHECK(s.encoder_cache_entries == 1);
  test::check_pools_free(engine);
}

TEST_CASE("engine with images: prefix caching never shares blocks past a different image", "[vision]") {
  TinyVl& t = vl();
  // The oracle: the mirrored-image prompt alone on an engine without a cache.
  std::vector<int32_t> cold;
  {
    Engine engine(t.forward, config(256), kernels::cpu::make_cpu_sampler());
    cold = test::run_together(engine, {t.request(0, true)})[0].tokens;
    test::check_pools_free(engine);
  }
  Engine engine(t.forward, config(256, true), kernels::cpu::make_cpu_sampler());
  const auto a = test::run_together(engine, {t.request(0)});
  const auto b = test::run_together(engine, {t.request(0, true)});
  CHECK(t.matches_greedy(a[0].tokens, 0));
  CHECK(TinyVl::same_run(b[0].tokens, cold));
  CHECK(b[0].tokens != a[0].tokens);
  // The image starts at token 3: no full block of the second prompt matches the first's.
  CHECK(b[0].last.metrics.cached_tokens == 0);
  const auto c = test::run_together(engine, {t.request(0, true)});
  CHECK(TinyVl::same_run(c[0].tokens, cold));
  CHECK(c[0].last.metrics.cached_tokens == 32);  // the same image again: its prefix is cached
  REQUIRE(test::wait_stats(engine, [](const EngineStats& s) { return s.running == 0 && s.waiting == 0; }));
  CHECK(engine.stats().blocks_used == engine.stats().prefix_cache_blocks);  // only the cache holds blocks
  CHECK(engine.stats().invariant_violations == 0);
}

TEST_CASE("engine with images: refused without a vision tower or beyond the encoder budget", "[vision]") {
  TinyVl& t = vl();
  Qwen35ForwardModel text_only(*t.model);
  Engine engine(text_only, config(256), kernels::cpu::make_cpu_sampler());
  auto r = engine.submit(t.request(0));
  CHECK(r.status == SubmitStatus::invalid_request);
  CHECK_THAT(r.message, Catch::Contains("no images"));
  EngineConfig small = config(256);
  small.scheduler.max_encoder_tokens = 4;
  Engine e2(t.forward, small, kernels::cpu::make_cpu_sampler());
  auto r2 = e2.submit(t.request(0));
  CHECK(r2.status == SubmitStatus::invalid_request);
  CHECK_THAT(r2.message, Catch::Contains("per-step budget"));
}


// The decode steps of image prompts carry only a rope_delta, which shifts the positions RoPE
// reads: they are recorded and replayed like text steps (kernels/batch_plan.h). Needs a
// backend that records steps (DELTASERVE_TEST_BACKEND=cuda: test_engine_tiny_graphs_gpu).
TEST_CASE("engine with images: decode steps of image prompts are recorded and replayed", "[vision][graphs]") {
  TinyVl& t = vl();
  if (!t.backend->can_record_steps()) {
    WARN("the " << t.backend->name() << " backend records no steps: run with DELTASERVE_TEST_BACKEND=cuda");
    return;
  }
  std::vector<Request> reqs;
  for (int i = 0; i < 5; ++i) reqs.push_back(t.request(i));
  std::vector<std::vector<test::Outcome>> runs;
  for (bool graphs : {true, false}) {
    EngineConfig cfg = config(256);
    cfg.step_graphs = graphs;
    Engine engine(t.forward, cfg, kernels::cpu::make_cpu_sampler());
    // Read after the engine is made: an engine without step graphs drops the model's (and
    // their counts).
    const qwen35::Model::StepGraphStats before = t.model->step_graph_stats();
    runs.push_back(test::run_together(engine, reqs));
    test::check_pools_free(engine);
    const qwen35::Model::StepGraphStats s = t.model->step_graph_stats();
    INFO("graphs " << graphs << ": replayed " << s.replayed - before.replayed << ", recorded "
                   << s.recorded - before.recorded);
    CHECK(s.failed == before.failed);
    if (graphs) {
      CHECK(s.recorded > before.recorded);
      CHECK(s.replayed - before.replayed > s.recorded - before.recorded);
    } else {
      CHECK(s.replayed == before.replayed);
    }
  }
  // bf16 rounding may part a greedy run at a near-tie; anywhere else the runs agree.
  int identical = 0;
  for (size_t i = 0; i < reqs.size(); ++i) identical += runs[0][i].tokens == runs[1][i].tokens;
  WARN(identical << " of " << reqs.size() << " image requests token-identical with graphs on and off");
  CHECK(identical >= static_cast<int>(reqs.size()) - 1);
}
