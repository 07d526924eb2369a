// The engine with a video, on the vision-language fixture (tests/data/tiny-qwen35-vl) and its
// clip (videos/clip64x48_4fps.mp4: 3 temporal patches of 4 tokens under the fixture's video
// processor): each pair is one of the request's images, encoded as a pair (both frames) and
// placed at its own pad run; whole and in steps too small for a pair (chunks end inside pad
// runs, one pair encoded a step) give the same tokens; a repeated clip is encoded once; every
// pool is free afterwards. With the fixture's video reference (video_reference.*, the study
// video_fixture) the prompts are HF's and the tokens must be HF's greedy ones; without it the
// HF check is skipped (WARN) and the prompt is a synthetic one around the same pairs.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "engine_checks.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/qwen35/model.h"
#include "model/qwen35/reference_file.h"
#include "model/qwen35/vision_encoder.h"
#include "model/vision/video_decode.h"
#include "model/vision/video_processor.h"
#include "nlohmann/json.hpp"
#include "scheduler/engine.h"
#include "scheduler/qwen35_forward_model.h"
#include "tests/test_backend.h"
#include "tests/test_paths.h"

using namespace ds;
using namespace ds::scheduler;

namespace {

struct TinyVideo {
  std::filesystem::path dir = test::data_path("tiny-qwen35-vl");
  std::unique_ptr<kernels::Backend> backend = test::make_test_backend();
  std::unique_ptr<qwen35::Model> model = qwen35::Model::load(*backend, dir);
  qwen35::Checkpoint ckpt{dir};
  std::unique_ptr<qwen35::VisionEncoder> encoder =
      qwen35::VisionEncoder::load(*backend, dir, ckpt, *model->config().vision);
  Qwen35ForwardModel forward{*model, false, encoder.get()};
  vision::VideoProcessorConfig video = vision::VideoProcessorConfig::load(dir);

  // The clip decoded by FFmpeg, or, on a machine without it (the GPU machine), its committed CLI
  // decoding (.rgb: the fixture clip's 10 frames of 64 x 48 at 4 fps), which test_video.cpp
  // checks the decoder against.
  std::vector<vision::ProcessedImage> pairs(const std::string& file, const vision::VideoSampling& s = {}) {
    const bool raw = !vision::video_decoder_status().empty();
    std::ifstream in(dir / "videos" / (raw ? file + ".rgb" : file), std::ios::binary);
    const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const auto choose = vision::frame_chooser(video, s);
    const auto resize = vision::frame_resizer(video);
    if (raw) REQUIRE(file == "clip64x48_4fps.mp4");
    return vision::preprocess_video(raw ? vision::decode_rgb24(bytes, {64, 48, 10, 4.0}, choose, resize)
                                        : vision::decode_video(bytes, {}, choose, resize),
                                    video)
        .patches;
  }

  // ids with one run of video pads per pair (any other token is text); each pair its own image.
  // tag: names the clip and its sampling in the pairs' encoder-cache keys.
  Request request(const std::vector<int32_t>& ids, const std::vector<vision::ProcessedImage>& ps,
                  const std::string& tag = "clip") {
    const int32_t pad = model->config().vision->video_token_id;
    auto mm = std::make_shared<MultimodalInput>();
    std::vector<qwen35::PromptImageSpan> spans;
    size_t k = 0;
    for (size_t t = 0; t < ids.size(); ++t) {
      if (ids[t] != pad || (t > 0 && ids[t - 1] == pad)) continue;
      REQUIRE(k < ps.size());
      auto px = std::make_shared<vision::ProcessedImage>(ps[k]);
      spans.push_back({static_cast<int64_t>(t), 1, px->grid_h / 2, px->grid_w / 2});
      mm->images.push_back({px, tag + "/pair" + std::to_string(k)});
      ++k;
    }
    REQUIRE(k == ps.size());
    mm->layout = qwen35::MultimodalPrompt::make(static_cast<int64_t>(ids.size()), spans);
    Request r(ids);
    r.max_tokens = 16;
    r.ignore_eos = true;
    r.sampling.temperature = 0;
    r.multimodal = mm;
    return r;
  }

  // A prompt around the pairs as HF lays it out: text, then per pair a timestamp's tokens (any
  // text ids), <|vision_start|>, its pads, <|vision_end|>; then text.
  std::vector<int32_t> synthetic_ids(const std::vector<vision::ProcessedImage>& ps) {
    const auto& vc = *model->config().vision;
    std::vector<int32_t> ids{10, 11, 12};
    for (size_t k = 0; k < ps.size(); ++k) {
      ids.insert(ids.end(), {static_cast<int32_t>(40 + k), 41, vc.vision_start_token_id});
      ids.insert(ids.end(), static_cast<size_t>(ps[k].num_tokens(2)), vc.video_token_id);
      ids.push_back(vc.vision_end_token_id);
    }
    ids.insert(ids.end(), {20, 21, 22});
    return ids;
  }
};

TinyVideo& tv() {
  static TinyVideo t;
  return t;
}

EngineConfig config(int64_t budget) {
  EngineConfig c;
  c.scheduler.max_num_seqs = 8;
  c.scheduler.max_num_batched_tokens = budget;
  c.scheduler.max_encoder_tokens = 4;  // one pair a step
  c.block_size = 16;
  c.num_blocks = 64;
  c.max_ctx = 512;
  c.check_invariants = true;
  return c;
}

}  // namespace

TEST_CASE("engine with a video: pairs as images, whole and in small steps, encoded once", "[vision]") {
  TinyVideo& t = tv();
  const auto ps = t.pairs("clip64x48_4fps.mp4");
  REQUIRE(ps.size() == 3);
  const std::vector<int32_t> ids = t.synthetic_ids(ps);
  std::vector<int32_t> whole;
  for (int64_t budget : {int64_t{256}, int64_t{7}}) {
    Engine engine(t.forward, config(budget), kernels::cpu::make_cpu_sampler());
    const auto out = test::run_together(engine, {t.request(ids, ps), t.request(ids, ps)});
    INFO("budget " << budget);
    REQUIRE(out[0].tokens.size() == 16);
    if (whole.empty()) whole = out[0].tokens;
    if (!test::test_backend_is_bf16()) {
      CHECK(out[0].tokens == whole);
      CHECK(out[1].tokens == whole);
    }
    CHECK(engine.stats().images_encoded_total == 3);  // the second request's pairs from the cache
    test::check_pools_free(engine);
  }
}

TEST_CASE("engine with a video: HF's greedy tokens on the fixture's video cases", "[vision]") {
  TinyVideo& t = tv();
  const auto path = t.dir / "video_reference.safetensors";
  if (!std::filesystem::exists(path)) {
    WARN("skipped: " << path.string() << " is absent (the study video_fixture writes it on the GPU machine)");
    return;
  }
  const qwen35::ReferenceFile ref(path);
  const auto manifest = nlohmann::json::parse(std::ifstream(t.dir / "video_reference.json"));
  for (int64_t budget : {int64_t{256}, int64_t{7}}) {
    Engine engine(t.forward, config(budget), kernels::cpu::make_cpu_sampler());
    std::vector<Request> reqs;
    for (int i = 0; i < ref.num_cases(); ++i) {
      const auto& c = manifest["cases"][static_cast<size_t>(i)];
      vision::VideoSampling s;
      if (c["mm_processor_kwargs"].contains("fps")) s.fps = c["mm_processor_kwargs"]["fps"].get<double>();
      if (c["mm_processor_kwargs"].contains("max_frames")) s.max_frames = c["mm_processor_kwargs"]["max_frames"].get<int64_t>();
      reqs.push_back(t.request(ref.ints("c" + std::to_string(i) + ".input_ids"),
                               t.pairs(c["videos"][0].get<std::string>(), s), "case" + std::to_string(i)));
    }
    const auto out = test::run_together(engine, reqs);
    for (int i = 0; i < ref.num_cases(); ++i) {
      INFO("case " << i << " budget " << budget);
      const auto want = ref.ints("c" + std::to_string(i) + ".greedy_tokens");
      if (test::test_backend_name() == "cpu") CHECK(out[static_cast<size_t>(i)].tokens == want);
      else CHECK(out[static_cast<size_t>(i)].tokens[0] == want[0]);  // bf16: the first token (near-ties later)
    }
    test::check_pools_free(engine);
  }
}
