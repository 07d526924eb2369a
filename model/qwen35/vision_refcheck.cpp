#include "model/qwen35/vision_refcheck.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "model/qwen35/multimodal.h"
#include "model/qwen35/refcheck.h"
#include "model/qwen35/refcheck_pools.h"
#include "model/vision/decode.h"
#include "model/vision/video_decode.h"
#include "model/vision/video_processor.h"

namespace ds::qwen35 {
namespace {

struct CaseRef {
  std::string name;
  std::vector<std::string> images;
  std::vector<std::string> videos;  // a video case (video_reference.json) has one, and no images
  std::vector<int64_t> frames;      // HF's sampled frame indices, when the manifest says
  vision::PixelBounds bounds;
  vision::VideoSampling sampling;
  std::vector<int32_t> ids, greedy, grids, positions;
  int64_t delta = 0;
};

std::vector<uint8_t> read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error(p.string() + ": cannot open");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<float> host(kernels::Backend& be, const kernels::Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  be.copy_to_host(t, v);
  return v;
}

std::vector<float> all_rows(const RefMatrix& m) {
  std::vector<float> v(static_cast<size_t>(m.rows() * m.cols()));
  for (int64_t r = 0; r < m.rows(); ++r) m.row(r, std::span<float>(v).subspan(static_cast<size_t>(r * m.cols()), static_cast<size_t>(m.cols())));
  return v;
}

}  // namespace

VisionRefcheckReport run_vision_refcheck(Model& model, VisionEncoder& encoder, const ReferenceFile& ref,
                                         const std::filesystem::path& dir, const VisionRefcheckOptions& opt,
                                         const std::function<void(const VisionCaseCheck&)>& on_case) {
  const int64_t vocab = model.config().vocab_size;
  const VisionConfig& vc = encoder.config();
  const int64_t m = vc.spatial_merge_size;
  auto& be = model.backend();
  // reference.safetensors goes with reference.json, video_reference.safetensors with
  // video_reference.json.
  const auto manifest_path = dir / (ref.path().stem().string() + ".json");
  const nlohmann::json manifest = nlohmann::json::parse(std::ifstream(manifest_path));
  if (!manifest.contains("cases") || static_cast<int>(manifest["cases"].size()) != ref.num_cases())
    throw std::runtime_error(manifest_path.string() + ": its cases do not match the reference file's");

  std::vector<CaseRef> cases;
  std::optional<vision::VideoProcessorConfig> video_config;
  int64_t longest = 0;
  for (int i = 0; i < ref.num_cases(); ++i) {
    const auto& mc = manifest["cases"][static_cast<size_t>(i)];
    CaseRef c;
    c.name = mc.value("name", "c" + std::to_string(i));
    if (mc.contains("images"))
      for (const auto& f : mc["images"]) c.images.push_back(f.get<std::string>());
    if (mc.contains("videos"))
      for (const auto& f : mc["videos"]) c.videos.push_back(f.get<std::string>());
    if (mc.contains("frames_indices"))
      for (const auto& f : mc["frames_indices"]) c.frames.push_back(f.get<int64_t>());
    if (!c.videos.empty() && (c.videos.size() > 1 || !c.images.empty()))
      throw std::runtime_error(manifest_path.string() + ": case " + c.name + ": a video case holds one video and no image");
    if (mc.contains("mm_processor_kwargs")) {
      const auto& kw = mc["mm_processor_kwargs"];
      if (kw.contains("min_pixels")) c.bounds.min_pixels = kw["min_pixels"].get<int64_t>();
      if (kw.contains("max_pixels")) c.bounds.max_pixels = kw["max_pixels"].get<int64_t>();
      if (kw.contains("fps")) c.sampling.fps = kw["fps"].get<double>();
      if (kw.contains("max_frames")) c.sampling.max_frames = kw["max_frames"].get<int64_t>();
    }
    const std::string p = "c" + std::to_string(i) + ".";
    c.ids = ref.ints(p + "input_ids");
    c.greedy = ref.ints(p + "greedy_tokens");
    c.grids = ref.ints(p + "image_grid_thw");
    c.positions = ref.ints(p + "position_ids");
    c.delta = ref.ints(p + "rope_delta").at(0);
    for (int32_t t : c.ids)
      if (t < 0 || t >= vocab) throw std::runtime_error(ref.path().string() + ": case " + c.name + " token outside the vocabulary");
    if (c.videos.empty() && c.grids.size() != 3 * c.images.size()) throw std::runtime_error(ref.path().string() + ": case " + c.name + ": grids and images disagree");
    longest = std::max<int64_t>(longest, static_cast<int64_t>(c.ids.size() + c.greedy.size()));
    cases.push_back(std::move(c));
  }
  const int32_t bs = opt.block_size;
  const kvcache::PoolSizes sizes = RefcheckPools::sizes(longest, bs);
  model.allocate_cache(sizes);

  std::mt19937_64 rng(opt.seed);
  VisionRefcheckReport report;
  report.min_agreement = opt.min_agreement;
  std::vector<float> row(static_cast<size_t>(vocab)), want(static_cast<size_t>(vocab));
  for (int i = 0; i < ref.num_cases(); ++i) {
    const CaseRef& c = cases[static_cast<size_t>(i)];
    const std::string p = "c" + std::to_string(i) + ".";
    VisionCaseCheck cc;
    cc.index = i;
    cc.name = c.name;
    cc.prompt_len = static_cast<int64_t>(c.ids.size());
    cc.greedy_total = static_cast<int64_t>(c.greedy.size());

    // 1. The image processor: the images, or the video's temporal patches (its grids in
    // the reference are HF's get_rope_index split, (1, h, w) per temporal patch; its patch rows
    // hold both frames, temporal = temporal_patch_size).
    std::vector<vision::ProcessedImage> images;
    std::vector<VisionGrid> grids;
    cc.grids_equal = true;
    for (size_t k = 0; k < c.images.size(); ++k) {
      const vision::RgbImage rgb = vision::decode_image(read_bytes(dir / "images" / c.images[k]));
      images.push_back(vision::preprocess(rgb, encoder.processor(), c.bounds));
    }
    if (!c.videos.empty()) {
      if (!video_config) video_config = vision::VideoProcessorConfig::load(dir);
      const auto chooser = vision::frame_chooser(*video_config, c.sampling);
      const auto clip = dir / "videos" / c.videos[0];
      vision::DecodedVideo v;
      if (vision::video_decoder_status().empty() || !std::filesystem::exists(clip.string() + ".rgb")) {
        v = vision::decode_video(read_bytes(clip), {}, chooser);
      } else {
        const auto& mc = manifest.at("clip");
        vision::VideoStreamInfo info;
        info.width = mc.at("width").get<int64_t>();
        info.height = mc.at("height").get<int64_t>();
        info.total_frames = mc.at("frames").get<int64_t>();
        info.fps = mc.at("fps").get<double>();
        v = vision::decode_rgb24(read_bytes(clip.string() + ".rgb"), info, chooser);
        report.frames_from_rgb = true;
      }
      cc.grids_equal = c.frames.empty() || v.indices == c.frames;
      for (auto& patch : vision::preprocess_video(v, *video_config).patches) images.push_back(std::move(patch));
    }
    const int64_t temporal = c.videos.empty() ? 1 : vc.temporal_patch_size;
    cc.grids_equal = cc.grids_equal && c.grids.size() == 3 * images.size();
    for (size_t k = 0; k < images.size(); ++k) {
      const auto& im = images[k];
      grids.push_back({im.grid_t, im.grid_h, im.grid_w});
      cc.grids_equal = cc.grids_equal && 3 * k + 2 < c.grids.size() && im.grid_t == c.grids[3 * k] &&
                       im.grid_h == c.grids[3 * k + 1] && im.grid_w == c.grids[3 * k + 2];
    }
    const std::vector<float> hf_patches = all_rows(ref.matrix(p + "patches"));
    std::vector<float> ours;
    for (const auto& im : images) {
      std::vector<float> one(static_cast<size_t>(im.num_patches() * vc.patch_values() * temporal));
      vision::write_patches(im, encoder.processor(), temporal, one);
      ours.insert(ours.end(), one.begin(), one.end());
    }
    if (ours.size() != hf_patches.size()) {
      cc.pixel_max_abs = INFINITY;
    } else {
      for (size_t k = 0; k < ours.size(); ++k) cc.pixel_max_abs = std::max<double>(cc.pixel_max_abs, std::abs(ours[k] - hf_patches[k]));
    }

    // 2. The encoder, on our patches and on HF's.
    std::vector<const vision::ProcessedImage*> ptrs;
    for (const auto& im : images) ptrs.push_back(&im);
    const kernels::Tensor embeds = encoder.encode(ptrs);
    const std::vector<float> hf_embeds = all_rows(ref.matrix(p + "image_embeds"));
    const std::vector<float> got = host(be, embeds);
    cc.embeds_rel = got.size() == hf_embeds.size() ? relative_error(got, hf_embeds) : INFINITY;
    std::vector<VisionGrid> hf_grids;
    for (size_t k = 0; k + 2 < c.grids.size(); k += 3) hf_grids.push_back({c.grids[k], c.grids[k + 1], c.grids[k + 2]});
    const std::vector<float> from_hf = host(be, encoder.encode_patches(hf_patches, hf_grids, temporal));
    cc.embeds_rel_hf_input = from_hf.size() == hf_embeds.size() ? relative_error(from_hf, hf_embeds) : INFINITY;

    // 3. M-RoPE: the image spans are the runs of image (or video) pads, in order.
    std::vector<PromptImageSpan> spans;
    for (size_t t = 0; t < c.ids.size();) {
      const int32_t pad = c.ids[t];
      if (pad != vc.image_token_id && pad != vc.video_token_id) {
        ++t;
        continue;
      }
      size_t e = t;
      while (e < c.ids.size() && c.ids[e] == pad) ++e;
      const size_t k = spans.size();
      if (k >= grids.size()) throw std::runtime_error("case " + c.name + ": more pad runs than images");
      spans.push_back({static_cast<int64_t>(t), grids[k].t, grids[k].h / m, grids[k].w / m});
      if (spans.back().tokens() != static_cast<int64_t>(e - t))
        throw std::runtime_error("case " + c.name + ": a pad run does not hold its image's tokens");
      t = e;
    }
    const MultimodalPrompt mm = MultimodalPrompt::make(cc.prompt_len, spans);
    cc.positions_equal = mm.mrope.delta == c.delta;
    for (int64_t t = 0; t < cc.prompt_len && cc.positions_equal; ++t)
      for (int64_t a = 0; a < 3; ++a) {
        const int64_t mine = t < mm.mrope.end ? mm.mrope.positions[static_cast<size_t>(3 * t + a)] : t + mm.mrope.delta;
        if (mine != c.positions[static_cast<size_t>(a * cc.prompt_len + t)]) cc.positions_equal = false;
      }
    std::vector<kernels::Tensor> per_image;
    int64_t at = 0;
    for (const auto& s : spans) {
      per_image.push_back(embeds.rows(at, s.tokens()));
      at += s.tokens();
    }

    // 4. The language model.
    const RefMatrix prefill = ref.matrix(p + "prefill_logits"), greedy_logits = ref.matrix(p + "greedy_logits");
    RefcheckPools pools(sizes, model, rng);
    const kvcache::SlotId slot_a = pools.slot_a(), slot_b = pools.slot_b();
    kvcache::BlockTable ta(bs), tb(bs);
    const int64_t L = cc.prompt_len, G = cc.greedy_total;
    std::vector<int32_t> generated;
    for (int64_t pos = 0; pos < L;) {
      const int64_t n = opt.chunk > 0 ? std::min(opt.chunk, L - pos) : L - pos;
      const bool last = pos + n == L;
      pools.grow(ta, n);
      pools.grow(tb, n);
      const std::span<const int32_t> chunk(c.ids.data() + pos, static_cast<size_t>(n));
      std::vector<EmbeddingRows> rows;
      mm.chunk_embeddings(pos, n, per_image, rows);
      const auto positions = mm.chunk_positions(pos, n);
      ForwardBatch batch;
      batch.seqs.push_back({chunk, pos, ta.block_ids(), slot_a, static_cast<int32_t>(n), {}, {}, positions, mm.mrope.delta});
      batch.seqs.push_back({chunk, pos, tb.block_ids(), slot_b, last ? 1 : 0, {}, {}, positions, mm.mrope.delta});
      batch.embeddings.assign(2, rows);
      const Logits& logits = model.forward(batch);
      for (int64_t t = 0; t < n; ++t) {
        logits.copy_row(t, row);
        prefill.row(pos + t, want);
        cc.prefill_max_rel = std::max(cc.prefill_max_rel, relative_error(row, want));
      }
      if (last) {
        logits.copy_row(n - 1, row);
        greedy_logits.row(0, want);
        cc.decode_max_rel = std::max(cc.decode_max_rel, relative_error(row, want));
        cc.agree += argmax(row) == c.greedy[0];
        logits.copy_row(n, row);
        generated.push_back(argmax(row));
      }
      ta.append_tokens(n);
      tb.append_tokens(n);
      pos += n;
    }
    for (int64_t s = 1; s < G; ++s) {
      pools.grow(ta, 1);
      pools.grow(tb, 1);
      ForwardBatch batch;
      batch.seqs.push_back({std::span<const int32_t>(&c.greedy[static_cast<size_t>(s - 1)], 1), ta.num_tokens(),
                            ta.block_ids(), slot_a, 1, {}, {}, {}, mm.mrope.delta});
      batch.seqs.push_back({std::span<const int32_t>(&generated[static_cast<size_t>(s - 1)], 1), tb.num_tokens(),
                            tb.block_ids(), slot_b, 1, {}, {}, {}, mm.mrope.delta});
      const Logits& logits = model.forward(batch);
      logits.copy_row(0, row);
      greedy_logits.row(s, want);
      cc.decode_max_rel = std::max(cc.decode_max_rel, relative_error(row, want));
      cc.agree += argmax(row) == c.greedy[static_cast<size_t>(s)];
      logits.copy_row(1, row);
      generated.push_back(argmax(row));
      ta.append_tokens(1);
      tb.append_tokens(1);
    }
    while (cc.greedy_matched < G &&
           generated[static_cast<size_t>(cc.greedy_matched)] == c.greedy[static_cast<size_t>(cc.greedy_matched)])
      ++cc.greedy_matched;
    cc.pass = cc.grids_equal && cc.positions_equal && cc.pixel_max_abs <= opt.pixel_tolerance &&
              cc.embeds_rel <= opt.tolerance && cc.prefill_max_rel <= opt.tolerance &&
              cc.decode_max_rel <= opt.tolerance && (cc.greedy_matched == G || opt.min_agreement < 1.0);
    report.agree += cc.agree;
    report.steps += G;
    report.max_rel = std::max({report.max_rel, cc.embeds_rel, cc.prefill_max_rel, cc.decode_max_rel});
    report.passed += cc.pass;
    report.video = report.video || !c.videos.empty();
    report.cases.push_back(cc);
    if (on_case) on_case(cc);
  }
  return report;
}

std::string format_case(const VisionCaseCheck& c) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "c%d %s: %lld tokens, patches max abs err %.3g, grids %s, embeddings rel err %.3g (from HF's patches "
                "%.3g), M-RoPE positions %s, prefill max rel err %.3g, decode max rel err %.3g, greedy %lld/%lld, "
                "teacher-forced argmax %lld/%lld, %s",
                c.index, c.name.c_str(), static_cast<long long>(c.prompt_len), c.pixel_max_abs,
                c.grids_equal ? "equal" : "DIFFER", c.embeds_rel, c.embeds_rel_hf_input,
                c.positions_equal ? "equal" : "DIFFER", c.prefill_max_rel, c.decode_max_rel,
                static_cast<long long>(c.greedy_matched), static_cast<long long>(c.greedy_total),
                static_cast<long long>(c.agree), static_cast<long long>(c.greedy_total), c.pass ? "PASS" : "FAIL");
  return buf;
}

std::string format_summary(const VisionRefcheckReport& r) {
  char buf[220];
  std::snprintf(buf, sizeof buf, "teacher-forced argmax %lld/%lld\nrefcheck: %s %d/%zu %s cases, max rel err %.3g",
                static_cast<long long>(r.agree), static_cast<long long>(r.steps), r.pass() ? "PASS" : "FAIL", r.passed,
                r.cases.size(), r.video ? "video" : "image", r.max_rel);
  return r.frames_from_rgb ? std::string("video frames: the clip's RGB24 decoding (no FFmpeg here)\n") + buf : buf;
}

}  // namespace ds::qwen35
