// Video in (model/vision/video_decode.h, video_processor.h) against independent oracles:
//  * the fixture clips (tests/data/tiny-qwen35-vl/videos, made by FFmpeg's testsrc: 10 frames
//    of 64 x 48 at 4 fps, H.264 in MP4 and VP9 in WebM): frame count, rate and size as ffprobe
//    reports them, and the MP4's frames against the ffmpeg CLI's own RGB24 decoding
//    (clip64x48_4fps.mp4.rgb: `ffmpeg -i clip.mp4 -sws_flags bilinear -pix_fmt rgb24`);
//  * the sampling, resize-target and timestamp arithmetic against values worked out from HF's
//    rules (Qwen3VLVideoProcessor.sample_frames, its smart_resize, Qwen3VLProcessor's
//    _calculate_timestamps and f"<{t:.1f} seconds>") in Python;
//  * refusals: not a video, truncated, damaged, and each limit;
//  * FFmpeg opened at run time (ffmpeg_library.h): every function found in the installed
//    libraries, and a missing library named in the error;
//  * the tower's video path: a temporal patch of two equal frames encodes as the still image
//    does (the unsummed Conv3d kernel against the summed one).
// Against HF's own video processor and model: [video-fixture] in test_video_fixture.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "model/qwen35/checkpoint.h"
#include "model/qwen35/config.h"
#include "model/qwen35/vision_encoder.h"
#include "model/vision/ffmpeg_library.h"
#include "model/vision/video_decode.h"
#include "model/vision/video_processor.h"
#include "tests/test_paths.h"

#include <nlohmann/json.hpp>

using namespace ds::vision;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

const fs::path kVideos = fs::path(ds::test::data_path("tiny-qwen35-vl")) / "videos";

std::vector<uint8_t> bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

FrameChooser all_frames() {
  return [](const VideoStreamInfo& i) {
    std::vector<int64_t> v;
    for (int64_t k = 0; k < i.total_frames; ++k) v.push_back(k);
    return v;
  };
}

std::string refusal(const std::vector<uint8_t>& data, const VideoLimits& lim = {}) {
  try {
    decode_video(data, lim, all_frames());
  } catch (const ImageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("video decode: the MP4 / H.264 clip as ffprobe and the ffmpeg CLI see it", "[video]") {
  const DecodedVideo v = decode_video(bytes(kVideos / "clip64x48_4fps.mp4"), {}, all_frames());
  CHECK(v.info.width == 64);
  CHECK(v.info.height == 48);
  CHECK(v.info.total_frames == 10);  // ffprobe -count_frames: nb_read_frames=10
  CHECK(v.info.fps == 4.0);          // avg_frame_rate=4/1
  REQUIRE(v.frames.size() == 10);
  const std::vector<uint8_t> cli = bytes(kVideos / "clip64x48_4fps.mp4.rgb");
  REQUIRE(cli.size() == 10u * 64 * 48 * 3);
  int max_diff = 0;
  for (size_t f = 0; f < 10; ++f)
    for (size_t i = 0; i < 64 * 48 * 3; ++i)
      max_diff = std::max(max_diff, std::abs(int(v.frames[f].rgb[i]) - int(cli[f * 64 * 48 * 3 + i])));
  CHECK(max_diff == 0);
  // testsrc moves: frames differ.
  CHECK(v.frames[0].rgb != v.frames[9].rgb);
}

TEST_CASE("video decode: WebM / VP9 and other containers", "[video]") {
  const DecodedVideo v = decode_video(bytes(kVideos / "clip64x48_4fps.webm"), {}, all_frames());
  CHECK(v.info.total_frames == 10);
  CHECK(v.info.fps == 4.0);
  CHECK(v.info.width == 64);
  REQUIRE(v.frames.size() == 10);
  // The same test source, encoded lossily by another codec: close to the MP4's frames.
  const DecodedVideo m = decode_video(bytes(kVideos / "clip64x48_4fps.mp4"), {}, all_frames());
  double sum = 0;
  for (size_t f = 0; f < 10; ++f)
    for (size_t i = 0; i < v.frames[f].rgb.size(); ++i) sum += std::abs(int(v.frames[f].rgb[i]) - int(m.frames[f].rgb[i]));
  CHECK(sum / (10.0 * 64 * 48 * 3) < 20);
  const fs::path corpus = fs::path(ds::test::source_dir()) / "tests/fuzz/corpus/video_decode";
  const DecodedVideo avi = decode_video(bytes(corpus / "avi_mpeg4_48x32"), {}, all_frames());
  CHECK(avi.info.total_frames == 5);
  CHECK(avi.info.width == 48);
  const DecodedVideo vp8 = decode_video(bytes(corpus / "webm_vp8_40x40"), {}, all_frames());
  CHECK(vp8.info.total_frames == 5);
  // An MP4 whose edit list cuts its last frame (15 packets, ffprobe: nb_frames 15,
  // nb_read_frames 14): 14 frames, as the decoder shows them, and no "truncated" refusal.
  const DecodedVideo cut = decode_video(bytes(corpus / "mp4_edit_list_cuts_a_frame"), {}, all_frames());
  CHECK(cut.info.total_frames == 14);
  CHECK(cut.frames.size() == 14);
}

TEST_CASE("video decode: only the chosen frames are kept, in order", "[video]") {
  VideoProcessorConfig c;
  const DecodedVideo all = decode_video(bytes(kVideos / "clip64x48_4fps.mp4"), {}, all_frames());
  const DecodedVideo v = decode_video(bytes(kVideos / "clip64x48_4fps.mp4"), {}, frame_chooser(c, {}));
  REQUIRE(v.indices == std::vector<int64_t>{0, 2, 4, 7, 9});
  REQUIRE(v.frames.size() == 5);
  for (size_t k = 0; k < 5; ++k) CHECK(v.frames[k].rgb == all.frames[static_cast<size_t>(v.indices[k])].rgb);
}

TEST_CASE("video decode: bad input and every limit are clear refusals", "[video]") {
  const std::vector<uint8_t> clip = bytes(kVideos / "clip64x48_4fps.mp4");
  CHECK_THAT(refusal({}), Contains("empty"));
  CHECK_THAT(refusal({'n', 'o', 't', ' ', 'a', ' ', 'v', 'i', 'd', 'e', 'o'}), Contains("not a video"));
  // A PNG is an image, not a video (the image2 demuxers are not listed).
  CHECK_THAT(refusal(bytes(fs::path(ds::test::data_path("tiny-qwen35-vl")) / "images" / "square96.png")),
             Contains("not a video"));
  CHECK_THAT(refusal(std::vector<uint8_t>(clip.begin(), clip.begin() + 3000)), Contains("truncated or damaged"));
  // Damage the decoder detects (NAL sizes past the packet; a macroblock predicted from outside
  // the picture) is refused, not concealed. Damage no decoder can tell from content decodes.
  std::vector<uint8_t> damaged = clip, zeroed = clip;
  for (size_t i = 1500; i < 3500; ++i) damaged[i] ^= 0x5a;
  for (size_t i = 2000; i < 2400; ++i) zeroed[i] = 0;
  CHECK_THAT(refusal(damaged), Contains("damaged"));
  CHECK_THAT(refusal(zeroed), Contains("damaged"));
  VideoLimits lim;
  lim.max_bytes = 1000;
  CHECK_THAT(refusal(clip, lim), Contains("at most 1000 are allowed"));
  lim = {};
  lim.max_frames = 9;
  CHECK_THAT(refusal(clip, lim), Contains("more than 9 frames"));
  lim = {};
  lim.max_seconds = 2;  // the clip is 2.5 s
  CHECK_THAT(refusal(clip, lim), Contains("at most 2 s"));
  lim = {};
  lim.max_pixels = 64 * 47;
  CHECK_THAT(refusal(clip, lim), Contains("pixels a frame"));
  lim = {};
  lim.max_side = 63;
  CHECK_THAT(refusal(clip, lim), Contains("each side may be at most 63"));
  lim = {};
  lim.max_time = std::chrono::milliseconds(0);
  CHECK_THAT(refusal(clip, lim), Contains("longer than 0 ms"));
}

TEST_CASE("video sampling: HF's frame count and numpy's linspace rounding", "[video]") {
  // (total, video fps, fps, min, max) -> indices, from Qwen3VLVideoProcessor.sample_frames.
  CHECK(sample_frame_indices(10, 4, 2, 4, 768) == std::vector<int64_t>{0, 2, 4, 7, 9});  // 4.5 -> 4
  CHECK(sample_frame_indices(300, 30, 2, 4, 768) ==
        std::vector<int64_t>{0, 16, 31, 47, 63, 79, 94, 110, 126, 142, 157, 173, 189, 205, 220, 236, 252, 268, 283, 299});
  CHECK(sample_frame_indices(10, 30, 2, 4, 768) == std::vector<int64_t>{0, 3, 6, 9});  // min_frames
  CHECK(sample_frame_indices(3, 30, 2, 4, 768) == std::vector<int64_t>{0, 1, 2});      // capped by the total
  CHECK(sample_frame_indices(1000, 10, 2, 4, 8) == std::vector<int64_t>{0, 143, 285, 428, 571, 714, 856, 999});
  CHECK(sample_frame_indices(48, 0, 2, 4, 768) == std::vector<int64_t>{0, 16, 31, 47});  // no rate: 24 fps
  // int(899 / 29.97 * 2) = int(59.993...) = 59: truncation, an odd count.
  const auto ntsc = sample_frame_indices(899, 29.97, 2, 4, 768);
  CHECK(ntsc.size() == 59);
  CHECK(ntsc[1] == 15);
  CHECK(ntsc[30] == 464);
  CHECK(ntsc.back() == 898);
  CHECK(sample_frame_indices(900, 30, 2, 4, 768).size() == 60);
  CHECK(sample_frame_indices(1, 30, 2, 4, 768) == std::vector<int64_t>{0});
}

TEST_CASE("video smart_resize: the frames count in the pixel budget", "[video]") {
  auto sr = [](int64_t t, int64_t h, int64_t w, int64_t lo, int64_t hi) {
    const ResizeTarget r = video_smart_resize(t, h, w, 2, 32, lo, hi);
    return std::make_pair(r.height, r.width);
  };
  CHECK(sr(5, 48, 64, 4096, 16384) == std::make_pair(int64_t{64}, int64_t{64}));  // the fixture clip
  // A 30 s 720p clip at 2 fps under Qwen3-VL's video config (4096 .. 768 x 32 x 32 x 32).
  CHECK(sr(60, 720, 1280, 4096, 25165824) == std::make_pair(int64_t{480}, int64_t{832}));
  // HF's class defaults (128 .. 768 x 32 x 32): the minimum scales a small clip up.
  CHECK(sr(4, 48, 64, 131072, 786432) == std::make_pair(int64_t{160}, int64_t{224}));
  CHECK(sr(3, 100, 40, 4096, 16384) == std::make_pair(int64_t{96}, int64_t{32}));  // t' = round(1.5) * 2 = 4
  CHECK(sr(8, 1080, 1920, 4096, 25165824) == std::make_pair(int64_t{1088}, int64_t{1920}));
  CHECK_THROWS_AS(video_smart_resize(1, 64, 64, 2, 32, 4096, 16384), ImageError);  // fewer frames than 2
  CHECK_THROWS_AS(video_smart_resize(4, 31, 64, 2, 32, 4096, 16384), ImageError);  // a side under 32
  CHECK_THROWS_AS(video_smart_resize(4, 32, 6500, 2, 32, 1, 1 << 30), ImageError);  // aspect above 200
}

TEST_CASE("video timestamps: mean time of each temporal patch, Python's .1f", "[video]") {
  const auto ts = video_timestamps({0, 2, 4, 7, 9}, 4, 2);  // the last index repeated: (9, 9)
  REQUIRE(ts.size() == 3);
  CHECK(ts[0] == 0.25);
  CHECK(ts[1] == 1.375);
  CHECK(ts[2] == 2.25);
  CHECK(timestamp_text(ts[0]) == "<0.2 seconds>");  // 0.25 is exact: half to even
  CHECK(timestamp_text(ts[1]) == "<1.4 seconds>");
  CHECK(timestamp_text(ts[2]) == "<2.2 seconds>");
  CHECK(timestamp_text(0.15) == "<0.1 seconds>");  // 0.15 is 0.1499999... in binary
  CHECK(video_timestamps({0, 16, 31, 47}, 0, 2) == std::vector<double>{(0 + 16 / 24.0) / 2, (31 / 24.0 + 47 / 24.0) / 2});
}

TEST_CASE("video preprocess: temporal patches of resized frames, the last repeated", "[video]") {
  VideoProcessorConfig c = VideoProcessorConfig::load(ds::test::data_path("tiny-qwen35-vl"));
  CHECK(c.image.min_pixels == 4096);
  CHECK(c.image.max_pixels == 16384);
  CHECK(c.fps == 2);
  CHECK(c.min_frames == 4);
  CHECK(c.max_frames == 768);
  const DecodedVideo v = decode_video(bytes(kVideos / "clip64x48_4fps.mp4"), {}, frame_chooser(c, {}));
  const ProcessedVideo p = preprocess_video(v, c);
  REQUIRE(p.patches.size() == 3);
  REQUIRE(p.timestamps.size() == 3);
  for (const ProcessedImage& im : p.patches) {
    CHECK(im.grid_t == 1);
    CHECK(im.grid_h == 4);
    CHECK(im.grid_w == 4);
    REQUIRE(im.later.size() == 1);
    CHECK(im.resized.width == 64);
    CHECK(im.resized.height == 64);
  }
  CHECK(p.patches[2].later[0].rgb == p.patches[2].resized.rgb);  // frame 9 twice
  CHECK(p.patches[0].later[0].rgb != p.patches[0].resized.rgb);
  // Rows with temporal 2: time step 1 reads the second frame.
  std::vector<float> rows(static_cast<size_t>(16 * 3 * 2 * 16 * 16));
  write_patches(p.patches[0], c.image, 2, rows);
  ProcessedImage second;
  second.resized = p.patches[0].later[0];
  second.grid_h = second.grid_w = 4;
  std::vector<float> still(static_cast<size_t>(16 * 3 * 2 * 16 * 16));
  write_patches(second, c.image, 2, still);
  // Row 0, channel 0: [t0 256 values][t1 256 values]; the still image's t1 is the second frame.
  for (size_t i = 0; i < 256; ++i) CHECK(rows[256 + i] == still[256 + i]);
  std::vector<float> one_copy(16 * 3 * 256);
  CHECK_THROWS(write_patches(p.patches[0], c.image, 1, one_copy));  // a pair needs both frames
  // fps and max_frames per request.
  VideoSampling faster, fewer;
  faster.fps = 4.0;
  fewer.max_frames = 2;
  CHECK(decode_video(bytes(kVideos / "clip64x48_4fps.mp4"), {}, frame_chooser(c, faster)).indices.size() == 10);
  CHECK(decode_video(bytes(kVideos / "clip64x48_4fps.mp4"), {}, frame_chooser(c, fewer)).indices ==
        std::vector<int64_t>{0, 9});
}

TEST_CASE("video encoder: a temporal patch of equal frames encodes as the still image", "[video]") {
  const fs::path dir = ds::test::data_path("tiny-qwen35-vl");
  auto be = ds::kernels::cpu::make_cpu_backend({.num_threads = 1});
  const auto config = ds::qwen35::ModelConfig::load(dir);
  auto enc = ds::qwen35::VisionEncoder::load(*be, dir, ds::qwen35::Checkpoint(dir), *config.vision);
  const DecodedVideo v = decode_video(bytes(kVideos / "clip64x48_4fps.mp4"), {}, all_frames());
  const ProcessedImage still = preprocess(v.frames[3], enc->processor());
  ProcessedImage twice = still;
  twice.later = {still.resized};
  const ProcessedImage* a[] = {&still};
  const ProcessedImage* b[] = {&twice};
  const ds::kernels::Tensor ea = enc->encode(a), eb = enc->encode(b);
  REQUIRE(ea.numel() == eb.numel());
  const float* pa = ea.data_as<const float>();
  const float* pb = eb.data_as<const float>();
  double num = 0, den = 0;
  for (int64_t i = 0; i < ea.numel(); ++i) {
    num += (double(pa[i]) - pb[i]) * (double(pa[i]) - pb[i]);
    den += double(pa[i]) * pa[i];
  }
  CHECK(std::sqrt(num / den) < 1e-5);
  // Two different frames do not.
  ProcessedImage moving = still;
  moving.later = {preprocess(v.frames[8], enc->processor()).resized};
  const ProcessedImage* c[] = {&moving};
  const ds::kernels::Tensor ec = enc->encode(c);
  const float* pc = ec.data_as<const float>();
  double diff = 0;
  for (int64_t i = 0; i < ea.numel(); ++i) diff = std::max(diff, std::abs(double(pa[i]) - pc[i]));
  CHECK(diff > 1e-2);
}

TEST_CASE("video fixture: our sampling and timestamp text against HF's (video_reference.json)", "[video]") {
  const fs::path manifest = fs::path(ds::test::data_path("tiny-qwen35-vl")) / "video_reference.json";
  if (!fs::exists(manifest)) {
    WARN("skipped: " << manifest.string() << " is absent (the study video_fixture writes it on the GPU machine)");
    return;
  }
  const auto m = nlohmann::json::parse(std::ifstream(manifest));
  const VideoProcessorConfig c = VideoProcessorConfig::load(ds::test::data_path("tiny-qwen35-vl"));
  for (const auto& cs : m["cases"]) {
    VideoSampling s;
    if (cs["mm_processor_kwargs"].contains("fps")) s.fps = cs["mm_processor_kwargs"]["fps"].get<double>();
    if (cs["mm_processor_kwargs"].contains("max_frames")) s.max_frames = cs["mm_processor_kwargs"]["max_frames"].get<int64_t>();
    const DecodedVideo v = decode_video(bytes(kVideos / cs["videos"][0].get<std::string>()), {}, frame_chooser(c, s));
    INFO(cs["name"].get<std::string>());
    CHECK(v.indices == cs["frames_indices"].get<std::vector<int64_t>>());
    const ProcessedVideo p = preprocess_video(v, c);
    std::string expanded;
    for (double t : p.timestamps) expanded += timestamp_text(t) + "<|vision_start|><|video_pad|><|vision_end|>";
    CHECK(cs["expanded"].get<std::string>().find(expanded) != std::string::npos);
  }
}

TEST_CASE("video decode: frames resized as they are decoded equal the processor's resize", "[video]") {
  const VideoProcessorConfig c = VideoProcessorConfig::load(ds::test::data_path("tiny-qwen35-vl"));
  const auto clip = bytes(kVideos / "clip64x48_4fps.mp4");
  const DecodedVideo native = decode_video(clip, {}, frame_chooser(c, {}));
  const DecodedVideo early = decode_video(clip, {}, frame_chooser(c, {}), frame_resizer(c));
  REQUIRE(early.frames.size() == 5);
  CHECK(early.frames[0].width == 64);
  CHECK(early.frames[0].height == 64);  // 48 -> 64: smart_resize's target, held instead of the source
  const ProcessedVideo a = preprocess_video(native, c), b = preprocess_video(early, c);
  REQUIRE(a.patches.size() == b.patches.size());
  for (size_t k = 0; k < a.patches.size(); ++k) {
    CHECK(a.patches[k].resized.rgb == b.patches[k].resized.rgb);
    CHECK(a.patches[k].later[0].rgb == b.patches[k].later[0].rgb);
  }
}

TEST_CASE("video processor config: HF's class defaults, the file's keys, refusals", "[video]") {
  const fs::path dir = fs::temp_directory_path() / "ds_video_cfg_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "preprocessor_config.json") << R"({"patch_size": 16, "merge_size": 2, "temporal_patch_size": 2})";
  // No video file: Qwen3VLVideoProcessor's defaults with the image file's patch settings.
  VideoProcessorConfig c = VideoProcessorConfig::load(dir);
  CHECK(c.image.min_pixels == 128 * 32 * 32);
  CHECK(c.image.max_pixels == 768 * 32 * 32);
  CHECK(c.image.patch_size == 16);
  CHECK(c.image.mean[0] == 0.5f);
  CHECK(c.fps == 2);
  CHECK(c.min_frames == 4);
  CHECK(c.max_frames == 768);
  std::ofstream(dir / "video_preprocessor_config.json")
      << R"({"size": {"shortest_edge": 4096, "longest_edge": 25165824}, "patch_size": 16, "fps": 1.5, "max_frames": 64})";
  c = VideoProcessorConfig::load(dir);
  CHECK(c.image.min_pixels == 4096);
  CHECK(c.image.max_pixels == 25165824);
  CHECK(c.fps == 1.5);
  CHECK(c.max_frames == 64);
  std::ofstream(dir / "video_preprocessor_config.json") << R"({"fps": 0})";
  CHECK_THROWS_WITH(VideoProcessorConfig::load(dir), Contains("fps"));
  std::ofstream(dir / "video_preprocessor_config.json") << R"({"num_frames": 16})";
  CHECK_THROWS_WITH(VideoProcessorConfig::load(dir), Contains("num_frames"));
  std::ofstream(dir / "video_preprocessor_config.json") << R"({"max_frames": 0})";
  CHECK_THROWS_WITH(VideoProcessorConfig::load(dir), Contains("max_frames"));
  fs::remove_all(dir);
}

TEST_CASE("decode_rgb24: the CLI's frames of the clip give what decode_video gives, chooser and transform included",
          "[video]") {
  const std::vector<uint8_t> mp4 = bytes(kVideos / "clip64x48_4fps.mp4");
  const std::vector<uint8_t> raw = bytes(kVideos / "clip64x48_4fps.mp4.rgb");
  const FrameChooser pick = [](const VideoStreamInfo& i) { return std::vector<int64_t>{0, 3, 3, i.total_frames - 1}; };
  const FrameTransform half = [](RgbImage&& f, const VideoStreamInfo&, int64_t kept) {
    CHECK(kept == 4);
    RgbImage h(f.width / 2, f.height);
    for (int64_t y = 0; y < f.height; ++y) std::copy_n(f.row(y), h.width * 3, h.row(y));
    return h;
  };
  const DecodedVideo d = decode_video(mp4, {}, pick, half);
  const DecodedVideo r = decode_rgb24(raw, d.info, pick, half);
  CHECK(r.indices == d.indices);
  REQUIRE(r.frames.size() == 4);
  for (size_t k = 0; k < 4; ++k) {
    CHECK(r.frames[k].width == 32);
    CHECK(r.frames[k].rgb == d.frames[k].rgb);
  }
  VideoStreamInfo wrong = d.info;
  wrong.total_frames = 11;
  CHECK_THROWS_WITH(decode_rgb24(raw, wrong, pick), Contains("are not 11 frames of 64x48"));
}

TEST_CASE("ffmpeg: every function of the table is found in the installed libraries", "[video]") {
  CHECK(video_decoder_status().empty());
  const FFmpeg& f = ffmpeg();
  CHECK(f.avformat_open_input != nullptr);
  CHECK(f.sws_scale != nullptr);
  CHECK(f.av_strerror != nullptr);
}

TEST_CASE("ffmpeg: a library that is not installed is named in the error, and nothing is half-loaded", "[video]") {
  const std::string real = ffmpeg_sonames();
  REQUIRE_THAT(real, Contains("libavcodec.so."));
  // The first one opened: the error cannot depend on which FFmpeg this machine has.
  const std::string missing[4] = {"libavutil-deltaserve-missing.so.1", "libavcodec.so.0", "libavformat.so.0",
                                  "libswscale.so.0"};
  FFmpeg t;
  const std::string why = load_ffmpeg(missing, t);
  CHECK_THAT(why, Contains("libavutil-deltaserve-missing.so.1"));
  CHECK_THAT(why, Contains("video needs FFmpeg's shared libraries"));
  CHECK(t.avformat_open_input == nullptr);
}
