// bench_host_tier: what the prefix cache's host tier buys one long prefix (issue 51).
//
//   bench_host_tier --model DIR [--backend cuda|cpu] [--prefix 32768] [--chunk 2048] [--reps 3] [--json FILE]
//
// A prompt of --prefix tokens then one more: recompute = the prefix prefilled in --chunk-token
// steps (serve's step budget, --max-num-batched-tokens) plus the last token's step; host hit =
// the prefix's K/V blocks and DeltaNet state loaded back from the host tier
// (qwen35::Model::transfer_host, the engine's path) into other blocks and another slot, plus
// the same last step. The two last steps' logits must be equal (the loaded bytes are the
// offloaded ones). Bandwidth: the offload and the load of those blocks and state, and one
// contiguous host-to-device copy of as many bytes through the same transfer call (the link's
// rate, the floor a block-by-block load is compared with). Timings are medians of --reps.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kvcache/block_pool.h"
#include "model/qwen35/model.h"
#include "programs/bench_result/result_file.h"
#ifdef DELTASERVE_HAS_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

using namespace ds;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The prefix cache's host tier on one long prefix: recompute against load, and copy bandwidth."};
  std::string model_dir, backend_name = "cuda", json;
  int64_t prefix = 32768, chunk = 2048;
  int reps = 3;
  app.add_option("--model", model_dir, "checkpoint directory")->required();
  app.add_option("--backend", backend_name, "cuda or cpu")->check(CLI::IsMember({"cuda", "cpu"}));
  app.add_option("--prefix", prefix, "prefix tokens")->check(CLI::Range(int64_t{16}, int64_t{1} << 22));
  app.add_option("--chunk", chunk, "tokens per prefill step of the recompute")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--reps", reps, "repetitions (median)")->check(CLI::Range(1, 100));
  app.add_option("--json", json, "write the result file");
  CLI11_PARSE(app, argc, argv);
  bench::ResultFile result("bench_host_tier", argc, argv);
  try {
    std::unique_ptr<kernels::Backend> be;
    if (backend_name == "cpu") {
      be = kernels::cpu::make_cpu_backend({});
    } else {
#ifdef DELTASERVE_HAS_CUDA
      be = cuda::make_cuda_backend({});
#else
      std::fprintf(stderr, "bench_host_tier: this build has no CUDA backend\n");
      return 2;
#endif
    }
    auto model = qwen35::Model::load(*be, model_dir);
    const int32_t bs = 16;
    const int32_t n = static_cast<int32_t>((prefix + bs - 1) / bs);
    prefix = int64_t{n} * bs;  // whole blocks: the host tier keeps whole blocks
    kvcache::PoolSizes sizes;
    sizes.block_size = bs;
    sizes.num_blocks = 2 * (n + 1);
    sizes.num_slots = 2;
    model->allocate_cache(sizes);
    // A host tier just large enough for the prefix's blocks and one snapshot.
    auto tier = model->allocate_host_cache(1);
    int64_t bytes = (int64_t{n} * tier.block_bytes + tier.state_bytes) * 8 / 7 + 2 * tier.state_bytes;
    tier = model->allocate_host_cache(bytes);
    while (tier.sizes.blocks < n) tier = model->allocate_host_cache(bytes += bytes / 8);
    const double moved = static_cast<double>(int64_t{n} * tier.block_bytes + tier.state_bytes);
    std::printf("%s on %s: prefix %lld tokens = %d blocks of %.2f MiB + a %.1f MiB state: %.2f GiB to move\n",
                model_dir.c_str(), std::string(be->name()).c_str(), static_cast<long long>(prefix), n,
                static_cast<double>(tier.block_bytes) / (1 << 20), static_cast<double>(tier.state_bytes) / (1 << 20),
                moved / (1 << 30));

    std::mt19937 rng(3);
    std::vector<int32_t> tokens(static_cast<size_t>(prefix + 1));
    for (auto& t : tokens) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(std::min<int64_t>(model->config().vocab_size, 100000)));
    std::vector<kvcache::BlockId> a(static_cast<size_t>(n + 1)), b(static_cast<size_t>(n + 1));
    for (int32_t i = 0; i <= n; ++i) {
      a[static_cast<size_t>(i)] = i;
      b[static_cast<size_t>(i)] = n + 1 + i;
    }
    std::vector<kvcache::BlockTransfer> out, in;
    for (int32_t i = 0; i < n; ++i) {
      out.push_back({a[static_cast<size_t>(i)], i});
      in.push_back({b[static_cast<size_t>(i)], i});
    }
    const std::vector<kvcache::StateTransfer> state_out{{0, 0}}, state_in{{1, 0}};
    auto last_step = [&](const std::vector<kvcache::BlockId>& table, kvcache::SlotId slot) {
      qwen35::ForwardBatch batch;
      batch.seqs.push_back({std::span<const int32_t>(tokens).subspan(static_cast<size_t>(prefix), 1), prefix, table, slot, 1});
      return model->forward(batch).to_host();
    };

    std::vector<double> recompute, offload, load, hit, link;
    std::vector<float> cold_logits, hit_logits;
    double max_diff = 0;  // the last step's logits after the load against after the recompute
    for (int r = 0; r < reps; ++r) {
      model->zero_state_slot(0);
      be->synchronize();
      auto t0 = Clock::now();
      for (int64_t at = 0; at < prefix; at += chunk) {
        const int64_t len = std::min(chunk, prefix - at);
        qwen35::ForwardBatch batch;
        batch.seqs.push_back({std::span<const int32_t>(tokens).subspan(static_cast<size_t>(at), static_cast<size_t>(len)),
                              at, a, 0, 0});
        model->forward(batch);
      }
      be->synchronize();
      const double prefill_s = std::chrono::duration<double>(Clock::now() - t0).count();
      t0 = Clock::now();
      be->wait_transfer(model->transfer_host(out, state_out, true));
      offload.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      t0 = Clock::now();
      cold_logits = last_step(a, 0);
      recompute.push_back(prefill_s + std::chrono::duration<double>(Clock::now() - t0).count());

      be->synchronize();
      t0 = Clock::now();
      be->wait_transfer(model->transfer_host(in, state_in, false));
      load.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      hit_logits = last_step(b, 1);
      hit.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      for (size_t i = 0; i < hit_logits.size(); ++i)
        max_diff = std::max(max_diff, static_cast<double>(std::fabs(hit_logits[i] - cold_logits[i])));

      // The link: one contiguous copy of as many bytes through the same call.
      kernels::Tensor flat = be->alloc(DType::f32, kernels::Shape{static_cast<int64_t>(moved) / 4});
      std::shared_ptr<void> host = be->alloc_host(flat.bytes());
      const std::vector<kernels::Backend::HostCopy> one{{flat, host.get()}};
      be->wait_transfer(be->transfer(one, false));  // first touch of the pages, untimed
      t0 = Clock::now();
      be->wait_transfer(be->transfer(one, false));
      link.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    const double rc = median(recompute), hh = median(hit), ld = median(load), off = median(offload), ln = median(link);
    std::printf("last step's logits after the load vs the recompute: max difference %g\n", max_diff);
    if (max_diff > 1e-3) throw std::runtime_error("the host hit's logits differ from the recompute's");
    std::printf("recompute %.1f ms, host hit %.1f ms (load %.1f ms): %.1fx\n", rc * 1e3, hh * 1e3, ld * 1e3, rc / hh);
    std::printf("load %.1f GB/s, offload %.1f GB/s, one contiguous copy %.1f GB/s: load at %.0f%% of it\n",
                moved / ld / 1e9, moved / off / 1e9, moved / ln / 1e9, 100.0 * ln / ld);
    const std::string p = std::to_string(prefix);
    result.set("model", model_dir);
    result.set("backend", std::string(be->name()));
    result.add("recompute " + p, rc * 1e3, "ms", {{"chunk", chunk}});
    result.add("host hit " + p, hh * 1e3, "ms", {{"load_ms", ld * 1e3}});
    result.add("host hit speedup " + p, rc / hh, "x");
    result.add("host load bandwidth", moved / ld / 1e9, "GB/s", {{"bytes", moved}});
    result.add("host offload bandwidth", moved / off / 1e9, "GB/s", {{"bytes", moved}});
    result.add("host link bandwidth", moved / ln / 1e9, "GB/s", {{"bytes", moved}});
    result.add("host load of link", 100.0 * ln / ld, "%");
    result.add("host hit logits max diff", max_diff, "");
    result.write(json);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_host_tier: %s\n", e.what());
    return 1;
  }
  return 0;
}
