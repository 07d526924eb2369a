// bench_vision [--geometry 27b|9b|0.8b|4b] [--images 448x448,1024x1024] [--batch N] [--iters N]
//              [--backend cuda|cuda-f32|cpu] [--json FILE] [--profile]
//
// The vision tower alone (model/qwen35/vision_encoder.h) on random weights of a released
// geometry: for each image size, N images of it encoded per step, the median wall time of a
// step (patches already made; the host's patch making timed apart), images and patches per
// second, and the achieved TFLOP/s against the GPU's measured bf16 GEMM rate (the FLOP floor:
// the time the encoder's FLOPs take at that rate). --json FILE: the result file
// (programs/bench_result), a row "vision GEOMETRY WxH xBATCH" in images/s per size. Its peer
// is bench/peers/vision_torch.py (HF transformers' tower with SDPA on the same sizes, the same
// rows); the study `vision` runs both in one call.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/op_profiler.h"
#include "model/qwen35/vision_encoder.h"
#include "programs/bench_cuda_model/device_ceilings.h"
#include "programs/bench_result/result_file.h"

using namespace ds;

namespace {

qwen35::VisionConfig geometry(const std::string& name) {
  qwen35::VisionConfig c;
  c.patch_size = 16;
  c.temporal_patch_size = 2;
  c.spatial_merge_size = 2;
  c.num_position_embeddings = 2304;
  if (name == "0.8b") {
    c.depth = 12, c.hidden_size = 768, c.num_heads = 12, c.intermediate_size = 3072, c.out_hidden_size = 1024;
  } else if (name == "4b") {
    c.depth = 24, c.hidden_size = 1024, c.num_heads = 16, c.intermediate_size = 4096, c.out_hidden_size = 2560;
  } else if (name == "9b") {
    c.depth = 27, c.hidden_size = 1152, c.num_heads = 16, c.intermediate_size = 4304, c.out_hidden_size = 4096;
  } else if (name == "27b") {
    c.depth = 27, c.hidden_size = 1152, c.num_heads = 16, c.intermediate_size = 4304, c.out_hidden_size = 5120;
  } else {
    throw std::invalid_argument("unknown geometry " + name + " (0.8b, 4b, 9b, 27b)");
  }
  return c;
}

// Random weights at a trained model's scale, uploaded as bf16 checkpoint bytes would be.
qwen35::VisionWeights random_weights(kernels::Backend& be, const qwen35::VisionConfig& c) {
  std::mt19937 rng(7);
  auto upload = [&](std::vector<int64_t> shape, float mean, float sd) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::normal_distribution<float> dist(mean, sd);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = dist(rng);
    const kernels::Shape s = shape.size() == 1 ? kernels::Shape{shape[0]} : kernels::Shape{shape[0], shape[1]};
    return be.upload(kernels::HostTensor{DType::f32, s, v.data()});
  };
  auto mat = [&](int64_t out, int64_t in) { return upload({out, in}, 0, 1.0f / std::sqrt(static_cast<float>(in))); };
  auto vec = [&](int64_t n, float mean = 0) { return upload({n}, mean, 0.1f); };
  const int64_t C = c.hidden_size, I = c.intermediate_size, M = c.merged_hidden();
  qwen35::VisionWeights w;
  w.patch_w = mat(C, c.patch_values());
  w.patch_w_video = mat(C, c.patch_values() * c.temporal_patch_size);
  w.patch_b = vec(C);
  w.pos_embed = upload({c.num_position_embeddings, C}, 0, 0.5f);
  for (int64_t i = 0; i < c.depth; ++i) {
    qwen35::VisionBlockWeights b;
    b.norm1_w = vec(C, 1), b.norm1_b = vec(C), b.qkv_w = mat(3 * C, C), b.qkv_b = vec(3 * C);
    b.proj_w = mat(C, C), b.proj_b = vec(C), b.norm2_w = vec(C, 1), b.norm2_b = vec(C);
    b.fc1_w = mat(I, C), b.fc1_b = vec(I), b.fc2_w = mat(C, I), b.fc2_b = vec(C);
    w.blocks.push_back(std::move(b));
  }
  w.merger_norm_w = vec(C, 1), w.merger_norm_b = vec(C);
  w.merger_fc1_w = mat(M, M), w.merger_fc1_b = vec(M);
  w.merger_fc2_w = mat(c.out_hidden_size, M), w.merger_fc2_b = vec(c.out_hidden_size);
  return w;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The vision tower's throughput on random weights of a released geometry."};
  std::string geom = "27b", images = "448x448,1024x1024", backend = "cuda", json_path;
  int batch = 1, iters = 10;
  bool profile = false;
  app.add_option("--geometry", geom, "0.8b, 4b, 9b or 27b (the 9B and 27B towers differ only in out_hidden_size)");
  app.add_option("--images", images, "image sizes WxH, comma-separated");
  app.add_option("--batch", batch, "images of each size per encoder step")->check(CLI::PositiveNumber);
  app.add_option("--iters", iters, "timed steps per size (median)")->check(CLI::PositiveNumber);
  app.add_option("--backend", backend, "cuda, cuda-f32 or cpu")->check(CLI::IsMember({"cuda", "cuda-f32", "cpu"}));
  app.add_option("--json", json_path, "write the result file here (programs/bench_result)");
  app.add_flag("--profile", profile, "per-op GPU times of the last step (cuda)");
  CLI11_PARSE(app, argc, argv);
  try {
    const qwen35::VisionConfig c = geometry(geom);
    std::unique_ptr<kernels::Backend> inner;
    if (backend == "cpu") {
      inner = kernels::cpu::make_cpu_backend();
    } else {
      cuda::CudaBackendOptions o;
      o.f32_weights = backend == "cuda-f32";
      inner = cuda::make_cuda_backend(o);
    }
    std::unique_ptr<cuda::OpProfiler> prof;
    if (profile && backend != "cpu") prof = std::make_unique<cuda::OpProfiler>(*inner);
    kernels::Backend& be = prof ? static_cast<kernels::Backend&>(*prof) : *inner;
    double bf16_rate = 0;
    std::string gpu = "cpu";
    if (backend != "cpu") {
      const auto ceil = cuda::measure_device_ceilings();
      bf16_rate = ceil.bf16_flops;
      gpu = ceil.gpu;
    }
    vision::ImageProcessorConfig proc;
    proc.patch_size = 16, proc.merge_size = 2, proc.temporal_patch_size = 2;
    proc.min_pixels = 65536, proc.max_pixels = 16777216, proc.mean = {0.5f, 0.5f, 0.5f}, proc.std = {0.5f, 0.5f, 0.5f};
    qwen35::VisionEncoder enc(be, c, proc, random_weights(be, c));
    bench::ResultFile result("bench_vision", argc, argv);
    result.set("gpu", gpu);
    result.set("geometry", geom);
    result.set("backend", backend);
    result.set("batch", batch);
    result.set("bf16_gemm_tflops", bf16_rate / 1e12);
    std::printf("vision tower %s (depth %lld, hidden %lld, %lld heads of %lld) on %s (%s), %d image(s) per step\n",
                geom.c_str(), static_cast<long long>(c.depth), static_cast<long long>(c.hidden_size),
                static_cast<long long>(c.num_heads), static_cast<long long>(c.head_dim()), backend.c_str(), gpu.c_str(),
                batch);
    std::stringstream ss(images);
    for (std::string item; std::getline(ss, item, ',');) {
      const auto x = item.find('x');
      const int64_t w = std::stoll(item.substr(0, x)), h = std::stoll(item.substr(x + 1));
      vision::RgbImage rgb(w, h);
      std::mt19937 rng(3);
      for (auto& v : rgb.rgb) v = static_cast<uint8_t>(rng());
      const auto t_pre = std::chrono::steady_clock::now();
      const vision::ProcessedImage im = vision::preprocess(rgb, proc);
      std::vector<float> one(static_cast<size_t>(im.num_patches() * c.patch_values()));
      vision::write_patches(im, proc, 1, one);
      const double pre_s = seconds_since(t_pre);
      std::vector<float> patches;
      std::vector<qwen35::VisionGrid> grids;
      for (int i = 0; i < batch; ++i) {
        patches.insert(patches.end(), one.begin(), one.end());
        grids.push_back({1, im.grid_h, im.grid_w});
      }
      enc.encode_patches(patches, grids);  // warm-up (workspace, cuBLAS heuristics)
      be.synchronize();
      if (prof) prof->set_enabled(false);
      std::vector<double> t;
      for (int i = 0; i < iters; ++i) {
        if (prof && i == iters - 1) prof->set_enabled(true);
        const auto t0 = std::chrono::steady_clock::now();
        enc.encode_patches(patches, grids);
        be.synchronize();
        t.push_back(seconds_since(t0));
      }
      std::sort(t.begin(), t.end());
      const double step = t[t.size() / 2];
      const double flops = enc.flops(grids);
      const double floor_s = bf16_rate > 0 ? flops / bf16_rate : 0;
      const std::string resized = std::to_string(im.grid_w * 16) + "x" + std::to_string(im.grid_h * 16);
      bench::ResultRow more = {{"image", item}, {"resized", resized}, {"patches_per_image", im.num_patches()},
                               {"tokens_per_image", im.num_tokens(2)}, {"batch", batch}, {"step_ms", step * 1e3},
                               {"patches_per_s", static_cast<double>(batch * im.num_patches()) / step},
                               {"tflops", flops / step / 1e12}, {"gflop_per_step", flops / 1e9},
                               {"host_preprocess_ms", pre_s * 1e3}};
      if (floor_s > 0) {
        more.emplace_back("floor", "FLOPs at the measured bf16 GEMM rate");
        more.emplace_back("flop_floor_ms", floor_s * 1e3);
        more.emplace_back("of_floor", floor_s / step);
      }
      result.add("vision " + geom + " " + item + " x" + std::to_string(batch), batch / step, "images/s", std::move(more));
      std::printf("%s -> %s: %lld patches, %lld tokens; step %.2f ms (%.1f images/s), %.1f TFLOP/s, floor %.2f ms "
                  "(%.0f%% of it), host preprocessing %.2f ms an image\n",
                  item.c_str(), resized.c_str(), static_cast<long long>(im.num_patches()),
                  static_cast<long long>(im.num_tokens(2)), step * 1e3, batch / step, flops / step / 1e12, floor_s * 1e3,
                  floor_s > 0 ? 100 * floor_s / step : 0.0, pre_s * 1e3);
      if (prof) std::printf("%s\n", prof->report().c_str());
    }
    result.write(json_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_vision: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
