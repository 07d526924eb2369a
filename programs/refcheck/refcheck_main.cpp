// refcheck --model DIR [--reference FILE] [--backend cpu|cuda|cuda-f32] [--chunk N]
//          [--tolerance X] [--min-agreement F] [--kv-cache-dtype bf16|f16|q8_0|q4_0 (cuda)]
//          [--quantization none|fp8|gptq|awq] [--hf-overrides JSON | --hf-overrides-file FILE]
//
// A reference with image cases (the vision-language fixture, vision_refcheck.h) runs the
// vision refcheck instead: one line per case, then "refcheck: PASS|FAIL <k>/<n> image cases".
//
// Checks a checkpoint against its reference file (default DIR/reference.safetensors): prefill
// logits at every prompt position, teacher-forced decode logits, and greedy tokens (see
// refcheck.h). One line per prompt, a line "teacher-forced argmax <a>/<b>", and last
// "refcheck: PASS|FAIL <k>/<n> prompts, max rel err <x>". Exit status 0 only on PASS, 1 on
// FAIL, 2 when the check could not run.
//
// Defaults per backend: cpu (float32) 1e-4 per row and exact free-running greedy tokens;
// cuda (bf16 weights and GEMM inputs) 3e-2 per row and teacher-forced argmax agreement on 95%
// of the steps; cuda-f32 (the CUDA backend in its f32-weight reference mode; its K/V cache
// and prefill attention probabilities are still bf16) 3e-3 and 98% agreement.
// --quantization fp8 loads the checkpoint as serve --quantization fp8 does (weights.h); its
// error against a bf16 model's reference is FP8's, so give --tolerance and --min-agreement.
// --hf-overrides merges a JSON object into config.json as serve's flag does (config.h): the
// YaRN fixture (tests/data/tiny-qwen35-yarn) is tiny-qwen35's checkpoint under its
// hf_overrides.json, checked against its own reference.
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <exception>
#include <fstream>
#include <sstream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "kernels/cpu/cpu_backend.h"
#ifdef DELTASERVE_HAS_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif
#include "model/qwen35/model.h"
#include "model/qwen35/refcheck.h"
#include "model/qwen35/vision_refcheck.h"

int main(int argc, char** argv) {
  CLI::App app{"Compare the engine's logits and greedy tokens with a reference file."};
  std::string model_dir, reference, backend = "cpu", kv_dtype = "bf16", quantization = "none", state_dtype = "f32";
  std::string overrides, overrides_file;
  int64_t chunk = 0;
  double tolerance = 0, min_agreement = 0;
  app.add_option("--model", model_dir, "checkpoint directory (config.json, *.safetensors)")->required();
  app.add_option("--reference", reference, "reference file (default: MODEL/reference.safetensors)");
  app.add_option("--backend", backend, "cpu, cuda or cuda-f32")->check(CLI::IsMember({"cpu", "cuda", "cuda-f32"}));
  app.add_option("--kv-cache-dtype", kv_dtype, "cuda: K/V cache type, bf16 (default), f16, q8_0 or q4_0")
      ->check(CLI::IsMember({"bf16", "f16", "q8_0", "q4_0"}));
  app.add_option("--mamba-ssm-cache-dtype", state_dtype, "the DeltaNet recurrent state's type: f32 (default) or bf16")
      ->check(CLI::IsMember({"f32", "float32", "bf16", "bfloat16"}));
  app.add_option("--chunk", chunk, "prefill chunk size in tokens (default: whole prompt)")
      ->check(CLI::PositiveNumber);
  app.add_option("--tolerance", tolerance, "max relative error per logits row (default: see above)")
      ->check(CLI::PositiveNumber);
  app.add_option("--min-agreement", min_agreement,
                 "fraction of teacher-forced steps whose argmax must match (default 1 = exact greedy; cuda 0.95)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--quantization", quantization,
                 "none; fp8: block-wise e4m3 of the linear weights at load; gptq or awq: the checkpoint must be one")
      ->check(CLI::IsMember({"none", "fp8", "gptq", "awq"}));
  auto* ov = app.add_option("--hf-overrides", overrides, "JSON object merged into config.json (serve's --hf-overrides)");
  app.add_option("--hf-overrides-file", overrides_file, "the same, read from a file")
      ->check(CLI::ExistingFile)
      ->excludes(ov);
  CLI11_PARSE(app, argc, argv);

  try {
    if (reference.empty()) reference = model_dir + "/reference.safetensors";
    std::unique_ptr<ds::kernels::Backend> be;
    double default_tolerance = 1e-4, default_agreement = 1.0;
    if (backend == "cpu") {
      be = ds::kernels::cpu::make_cpu_backend({.recurrent_state_dtype = ds::parse_dtype(state_dtype)});
    } else {
#ifdef DELTASERVE_HAS_CUDA
      ds::cuda::CudaBackendOptions o;
      o.f32_weights = backend == "cuda-f32";
      o.kv_dtype = ds::parse_dtype(kv_dtype);
      o.recurrent_state_dtype = ds::parse_dtype(state_dtype);
      be = ds::cuda::make_cuda_backend(o);
      default_tolerance = o.f32_weights ? 3e-3 : 3e-2;
      default_agreement = o.f32_weights ? 0.98 : 0.95;
#else
      std::fprintf(stderr, "refcheck: this build has no CUDA backend (configure with DELTASERVE_CUDA=ON)\n");
      return 2;
#endif
    }
    ds::qwen35::LoadOptions load_options;
    load_options.quantization = ds::qwen35::parse_quantization(quantization);
    if (!overrides_file.empty()) {
      std::ifstream in(overrides_file);
      std::stringstream text;
      text << in.rdbuf();
      overrides = text.str();
    }
    load_options.config_overrides = overrides;
    auto model = ds::qwen35::Model::load(*be, model_dir, load_options);
    const ds::qwen35::ReferenceFile ref(reference);
    if (ref.num_cases() > 0) {
      // A vision-language fixture (vision_refcheck.h): its images next to the reference.
      if (!model->config().vision)
        throw std::runtime_error("the reference has image cases but the model has no usable vision tower: " +
                                 model->config().vision_unusable);
      const ds::qwen35::Checkpoint ckpt(model_dir);
      auto encoder = ds::qwen35::VisionEncoder::load(*be, model_dir, ckpt, *model->config().vision);
      ds::qwen35::VisionRefcheckOptions vo;
      vo.chunk = chunk;
      vo.tolerance = tolerance > 0 ? tolerance : default_tolerance;
      vo.min_agreement = min_agreement > 0 ? min_agreement : default_agreement;
      if (backend != "cpu") vo.pixel_tolerance = 1e-6;  // preprocessing runs on the host either way
      const auto report = ds::qwen35::run_vision_refcheck(
          *model, *encoder, ref, std::filesystem::path(reference).parent_path(), vo,
          [](const ds::qwen35::VisionCaseCheck& c) {
            std::printf("%s\n", ds::qwen35::format_case(c).c_str());
            std::fflush(stdout);
          });
      std::printf("%s\n", ds::qwen35::format_summary(report).c_str());
      return report.pass() ? 0 : 1;
    }
    ds::qwen35::RefcheckOptions options;
    options.chunk = chunk;
    options.tolerance = tolerance > 0 ? tolerance : default_tolerance;
    options.min_agreement = min_agreement > 0 ? min_agreement : default_agreement;
    const auto report = ds::qwen35::run_refcheck(*model, ref, options, [](const ds::qwen35::PromptCheck& p) {
      std::printf("%s\n", ds::qwen35::format_prompt(p).c_str());
      std::fflush(stdout);
    });
    std::printf("%s\n", ds::qwen35::format_summary(report).c_str());
    return report.pass() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "refcheck: error: %s\n", e.what());
    return 2;
  }
}
