// refcheck --model DIR [--reference FILE] [--backend cpu|cuda] [--chunk N] [--tolerance X]
//
// Checks a checkpoint against its reference file (default DIR/reference.safetensors): prefill
// logits at every prompt position, teacher-forced decode logits, and free-running greedy
// tokens (see refcheck.h). One line per prompt, then
// "refcheck: PASS|FAIL <k>/<n> prompts, max rel err <x>". Exit status 0 only on PASS,
// 1 on FAIL, 2 when the check could not run.
#include <cstdio>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>

#include "kernels/cpu/cpu_backend.h"
#include "model/qwen35/model.h"
#include "model/qwen35/refcheck.h"

int main(int argc, char** argv) {
  CLI::App app{"Compare the engine's logits and greedy tokens with a reference file."};
  std::string model_dir, reference, backend = "cpu";
  int64_t chunk = 0;
  double tolerance = 0;
  app.add_option("--model", model_dir, "checkpoint directory (config.json, *.safetensors)")->required();
  app.add_option("--reference", reference, "reference file (default: MODEL/reference.safetensors)");
  app.add_option("--backend", backend, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--chunk", chunk, "prefill chunk size in tokens (default: whole prompt)")
      ->check(CLI::PositiveNumber);
  app.add_option("--tolerance", tolerance, "max relative error per logits row (default 1e-4 on cpu)")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  if (backend == "cuda") {
    std::fprintf(stderr, "refcheck: the CUDA backend is not built yet; use --backend cpu\n");
    return 2;
  }
  try {
    if (reference.empty()) reference = model_dir + "/reference.safetensors";
    auto be = ds::kernels::cpu::make_cpu_backend();
    auto model = ds::qwen35::Model::load(*be, model_dir);
    const ds::qwen35::ReferenceFile ref(reference);
    ds::qwen35::RefcheckOptions options;
    options.chunk = chunk;
    options.tolerance = tolerance > 0 ? tolerance : 1e-4;
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
