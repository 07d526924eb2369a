// The CUDA backend's host transfers (kernels/backend.h, "host transfers"; cuda_transfers.h)
// against the CPU backend's: blocks of a pool offloaded to pinned host memory and loaded back
// into other blocks, in the order the host tier relies on -- copies after the compute ops
// issued before them, a load after the offloads before it (it reads their host bytes), and
// compute ops after order_after(ticket) behind the copies -- give the bytes the CPU backend's
// plain memcpys give.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "tests/kernels_cpu/kernel_test_util.h"

using namespace ds;
using kernels::Backend;
using kernels::Shape;
using kernels::Tensor;

namespace {

constexpr int64_t kBlocks = 48, kRows = 16 * 4, kDim = 128;

// Offloads `out` blocks to host slots 0.., zeroes the pool behind the offload, loads the host
// slots into the `in` blocks, and returns the pool and the host bytes as f32.
std::vector<float> round_trip(Backend& be, DType t, const std::vector<float>& data, const std::vector<int64_t>& out,
                              const std::vector<int64_t>& in, std::vector<float>& pool_after) {
  Tensor pool = be.alloc(t, Shape{kBlocks, kRows, kDim});
  be.copy_from_host(data, pool);
  const int64_t block_bytes = pool.rows(0, 1).bytes();
  std::shared_ptr<void> host = be.alloc_host(block_bytes * static_cast<int64_t>(out.size()));
  auto* h = static_cast<char*>(host.get());
  std::vector<Backend::HostCopy> off, on;
  for (size_t i = 0; i < out.size(); ++i) off.push_back({pool.rows(out[i], 1), h + block_bytes * static_cast<int64_t>(i)});
  for (size_t i = 0; i < in.size(); ++i) on.push_back({pool.rows(in[i], 1), h + block_bytes * static_cast<int64_t>(i)});
  const uint64_t t_off = be.transfer(off, true);
  be.order_after(t_off);  // the zeroing below must not overtake the offload
  be.fill_zero(pool);
  const uint64_t t_on = be.transfer(on, false);  // after the zeroing, and after the offload it reads
  while (!be.transfer_done(t_on)) {
  }
  CHECK(be.transfer_done(t_off));
  be.wait_transfer(t_on);
  pool_after.assign(static_cast<size_t>(pool.numel()), 0.0f);
  be.copy_to_host(pool, pool_after);
  // The host bytes, read back through a device tensor (the same type on both backends).
  Tensor staged = be.alloc(t, Shape{static_cast<int64_t>(out.size()), kRows, kDim});
  std::vector<Backend::HostCopy> back;
  for (size_t i = 0; i < out.size(); ++i) back.push_back({staged.rows(static_cast<int64_t>(i), 1), h + block_bytes * static_cast<int64_t>(i)});
  be.wait_transfer(be.transfer(back, false));
  std::vector<float> host_values(static_cast<size_t>(staged.numel()));
  be.copy_to_host(staged, host_values);
  return host_values;
}

}  // namespace

TEST_CASE("cuda transfers: offload and load through pinned memory match the CPU backend's", "[cuda_transfers][gpu]") {
  auto cpu = kernels::cpu::make_cpu_backend({.num_threads = 2});
  auto gpu = cuda::make_cuda_backend({});
  const auto data = test::random_vec(static_cast<size_t>(kBlocks * kRows * kDim), 5, 3.0f);
  // Runs of consecutive blocks (merged into one copy) and scattered ones.
  std::vector<int64_t> out{3, 4, 5, 6, 20, 9, 30, 31, 40};
  std::vector<int64_t> in{10, 11, 12, 13, 0, 47, 1, 2, 44};
  std::vector<float> cpu_pool, gpu_pool;
  // f32 only: the CPU backend stores no bf16 tensors; bf16 pools are checked by their own
  // round trip on the device below.
  const auto cpu_host = round_trip(*cpu, DType::f32, data, out, in, cpu_pool);
  const auto gpu_host = round_trip(*gpu, DType::f32, data, out, in, gpu_pool);
  CHECK(gpu_host == cpu_host);
  CHECK(gpu_pool == cpu_pool);
  // What they should be, independently: the loaded blocks hold the offloaded ones, the rest zero.
  const size_t block = static_cast<size_t>(kRows * kDim);
  for (int64_t b = 0; b < kBlocks; ++b) {
    const auto at = std::find(in.begin(), in.end(), b);
    for (size_t k = 0; k < block; k += 97) {
      const float got = cpu_pool[static_cast<size_t>(b) * block + k];
      const float want = at == in.end() ? 0.0f : data[static_cast<size_t>(out[static_cast<size_t>(at - in.begin())]) * block + k];
      REQUIRE(got == want);
    }
  }
  // bf16 pools: a round trip leaves the bf16 values of the offloaded blocks in the loaded ones.
  std::vector<float> bf16_pool;
  const auto bf16_host = round_trip(*gpu, DType::bf16, data, out, in, bf16_pool);
  for (size_t i = 0; i < in.size(); ++i)
    for (size_t k = 0; k < block; k += 61)
      REQUIRE(bf16_pool[static_cast<size_t>(in[i]) * block + k] == bf16_host[i * block + k]);
}

TEST_CASE("cuda transfers: a large load runs beside compute and completes in order", "[cuda_transfers][gpu]") {
  auto gpu = cuda::make_cuda_backend({});
  // 64 MiB: a load long enough to still be in flight while the compute stream works.
  const int64_t n = 16 << 20;
  Tensor big = gpu->alloc(DType::f32, Shape{n});
  std::shared_ptr<void> host = gpu->alloc_host(n * 4);
  auto* f = static_cast<float*>(host.get());
  std::iota(f, f + n, 0.0f);
  Tensor other = gpu->alloc(DType::f32, Shape{n});
  std::vector<Backend::HostCopy> one{{big, host.get()}};
  const uint64_t first = gpu->transfer(one, false);
  gpu->fill_zero(other);  // compute work issued after the load does not wait for it
  gpu->synchronize();
  const uint64_t second = gpu->transfer(one, false);
  gpu->wait_transfer(second);
  CHECK(gpu->transfer_done(first));  // tickets of one direction complete in order
  std::vector<float> back(static_cast<size_t>(n));
  gpu->copy_to_host(big, back);
  for (int64_t i = 0; i < n; i += 4099) REQUIRE(back[static_cast<size_t>(i)] == static_cast<float>(i));
}
