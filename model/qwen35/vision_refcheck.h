// Vision refcheck: a vision-language checkpoint against its HF reference (the image cases
// c{i}.* of reference.safetensors, their images and messages in reference.json; made by
// scripts/make_vl_fixture.py; or the video cases of video_reference.safetensors and
// video_reference.json, their clips in videos/, made by bench/tools/make_video_fixture.py: a
// video's temporal patches are checked as images, with both frames in each patch row), each
// layer of the path checked on its own and then end to end:
//  1. the image processor: each case's image files decoded and preprocessed here, against
//     HF's patches (max abs error) and grids (equal);
//  2. the encoder: on our patches, against HF's image embeddings (relative L2), and on HF's
//     patches too, so a preprocessing difference and an encoder difference read apart;
//  3. the M-RoPE positions and delta: equal to get_rope_index's;
//  4. the language model, as refcheck.h runs it: two sequences per case through shuffled
//     paged blocks, prefilled whole or in chunks (which may cut an image's pad run) with the
//     image rows fed the encoder output, A teacher-forced (logits at every position against
//     prefill_logits and greedy_logits) and B free-running (its tokens against greedy_tokens).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "model/qwen35/model.h"
#include "model/qwen35/reference_file.h"
#include "model/qwen35/vision_encoder.h"

namespace ds::qwen35 {

struct VisionRefcheckOptions {
  int64_t chunk = 0;            // prefill chunk size; 0 = the whole prompt in one step
  double tolerance = 1e-4;      // max relative L2 error per logits row and of the embeddings
  double pixel_tolerance = 1e-6;  // max abs error of a patch value (HF's and ours are f32)
  int32_t block_size = 8;
  uint64_t seed = 1;
  double min_agreement = 1.0;   // as RefcheckOptions
};

struct VisionCaseCheck {
  int index = 0;
  std::string name;
  int64_t prompt_len = 0;
  double pixel_max_abs = 0;     // our patches vs HF's
  bool grids_equal = false;
  double embeds_rel = 0;        // encoder on our patches vs HF's embeddings
  double embeds_rel_hf_input = 0;  // encoder on HF's patches
  bool positions_equal = false;
  double prefill_max_rel = 0, decode_max_rel = 0;
  int64_t greedy_matched = 0, greedy_total = 0, agree = 0;
  bool pass = false;
};

struct VisionRefcheckReport {
  std::vector<VisionCaseCheck> cases;
  double max_rel = 0;
  int passed = 0;
  int64_t agree = 0, steps = 0;
  double min_agreement = 1.0;
  bool video = false;  // video cases (video_reference.*)
  // The clip's frames came from its committed CLI decoding (videos/<clip>.rgb, the manifest's
  // "clip" entry saying their size) because FFmpeg is not installed here (decode_rgb24).
  bool frames_from_rgb = false;
  bool pass() const {
    return !cases.empty() && passed == static_cast<int>(cases.size()) &&
           static_cast<double>(agree) >= min_agreement * static_cast<double>(steps);
  }
};

// fixture_dir holds the manifest (the reference file's name with .json) and images/ or videos/. Throws std::runtime_error when the reference
// does not fit the model.
VisionRefcheckReport run_vision_refcheck(Model& model, VisionEncoder& encoder, const ReferenceFile& ref,
                                         const std::filesystem::path& fixture_dir, const VisionRefcheckOptions& options,
                                         const std::function<void(const VisionCaseCheck&)>& on_case = {});

std::string format_case(const VisionCaseCheck& c);
std::string format_summary(const VisionRefcheckReport& r);

}  // namespace ds::qwen35
