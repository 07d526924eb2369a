// K/V writes (the quantising write op) and a pool past 2^32
// elements. Needs a CUDA device (label gpu).
#include <catch2/catch.hpp>

#include <cstdio>

#include "tests/kernels_cuda/decode_scenario.h"

using namespace ds;
using namespace ds::test;
namespace dc = ds::cuda;

TEST_CASE("write_kv stores rows bit-identical to the host encoders", "[gpu][kv_write]") {
  const DType types[] = {DType::bf16, DType::f16, DType::q8_0, DType::q4_0};
  const int n_kv = 4, D = 128, bs = 16;
  const int64_t num_blocks = 6;
  for (DType src : {DType::f32, DType::bf16, DType::f16}) {
    for (DType kt : types) {
      for (DType vt : types) {
        Rng rng(static_cast<uint64_t>(src) * 100 + static_cast<int>(kt) * 10 + static_cast<int>(vt));
        const int n_tok = 9;
        // Distinct slots, one padding token (-1).
        std::vector<int64_t> slots;
        std::vector<int64_t> all(static_cast<size_t>(num_blocks * bs));
        std::iota(all.begin(), all.end(), 0);
        for (int i = 0; i < n_tok; ++i) {
          const size_t j = static_cast<size_t>(rng.below(static_cast<int64_t>(all.size())));
          slots.push_back(all[j]);
          all.erase(all.begin() + static_cast<long>(j));
        }
        slots[4] = -1;
        std::vector<float> kf(static_cast<size_t>(n_tok) * n_kv * D), vf(kf.size());
        for (size_t i = 0; i < kf.size(); ++i) {
          // Mixed magnitudes, exact zeros and sign ties exercise the quantisers' corner cases.
          kf[i] = i % 97 == 0 ? 0.f : rng.uniform(-3.f, 3.f) * (i % 7 == 0 ? 1e-3f : 1.f);
          vf[i] = i % 89 == 0 ? -kf[i] : rng.uniform(-40.f, 40.f);
        }
        // The source rows in src type, and the floats the pools must be encoded from.
        std::vector<uint8_t> ksrc(kf.size() * row_bytes(src, 1)), vsrc(ksrc.size());
        std::vector<float> kx(kf.size()), vx(vf.size());
        for (size_t i = 0; i < kf.size(); ++i) {
          double t = 0;
          encode_row(src, &kf[i], &ksrc[i * row_bytes(src, 1)], 1);
          decode_row(src, &ksrc[i * row_bytes(src, 1)], &t, 1);
          kx[i] = static_cast<float>(t);
          encode_row(src, &vf[i], &vsrc[i * row_bytes(src, 1)], 1);
          decode_row(src, &vsrc[i * row_bytes(src, 1)], &t, 1);
          vx[i] = static_cast<float>(t);
        }
        const int64_t rk = row_bytes(kt, D), rv = row_bytes(vt, D);
        const int64_t rows = num_blocks * bs * n_kv;
        std::vector<uint8_t> hk(static_cast<size_t>(rows * rk), 0xAB), hv(static_cast<size_t>(rows * rv), 0xCD);
        DeviceBuffer dk = to_device(hk), dv = to_device(hv), dks = to_device(ksrc), dvs = to_device(vsrc),
                     dsl = to_device(slots), guard(8);
        cuda_ok(cudaMemset(guard.get(), 0, 8), "memset");
        dc::KvPoolView p;
        p.k = dk.get();
        p.v = dv.get();
        p.k_type = kt;
        p.v_type = vt;
        p.num_blocks = num_blocks;
        p.block_size = bs;
        p.n_kv_heads = n_kv;
        p.head_dim = D;
        dc::KvWrite w;
        w.k_new = dks.get();
        w.v_new = dvs.get();
        w.src_type = src;
        w.n_tokens = n_tok;
        w.slots = dsl.as<int64_t>();
        dc::write_kv(p, w, true, guard.as<int32_t>(), nullptr);
        cuda_ok(cudaDeviceSynchronize(), "write_kv");
        for (int i = 0; i < n_tok; ++i) {
          if (slots[i] < 0) continue;
          for (int h = 0; h < n_kv; ++h) {
            const int64_t row = slots[i] * n_kv + h;
            encode_row(kt, &kx[(static_cast<size_t>(i) * n_kv + h) * D], &hk[row * rk], D);
            encode_row(vt, &vx[(static_cast<size_t>(i) * n_kv + h) * D], &hv[row * rv], D);
          }
        }
        INFO("src " << dtype_name(src) << " K " << dtype_name(kt) << " V " << dtype_name(vt));
        CHECK(to_host<uint8_t>(dk, hk.size()) == hk);  // written rows match, the rest untouched
        CHECK(to_host<uint8_t>(dv, hv.size()) == hv);
        CHECK(to_host<int32_t>(guard, 2)[0] == 0);
      }
    }
  }
}

TEST_CASE("write_kv refuses slots past the pool", "[gpu][kv_write][guard]") {
  dc::KvPoolView p;
  p.k_type = DType::q4_0;
  p.v_type = DType::bf16;
  p.num_blocks = 2;
  p.block_size = 16;
  p.n_kv_heads = 1;
  p.head_dim = 32;
  DeviceBuffer dk(2 * 16 * 18), dv(2 * 16 * 64), src(2 * 32 * 4), guard(8);
  cuda_ok(cudaMemset(dk.get(), 0, dk.bytes()), "memset");
  cuda_ok(cudaMemset(dv.get(), 0, dv.bytes()), "memset");
  cuda_ok(cudaMemset(src.get(), 0x3f, src.bytes()), "memset");
  cuda_ok(cudaMemset(guard.get(), 0, 8), "memset");
  p.k = dk.get();
  p.v = dv.get();
  const std::vector<int64_t> slots{31, 32 + 16 * 5};
  DeviceBuffer ds = to_device(slots);
  dc::KvWrite w;
  w.k_new = w.v_new = src.get();
  w.src_type = DType::f32;
  w.n_tokens = 2;
  w.slots = ds.as<int64_t>();
  dc::write_kv(p, w, true, guard.as<int32_t>(), nullptr);
  cuda_ok(cudaDeviceSynchronize(), "write_kv");
  const auto g = to_host<int32_t>(guard, 2);
  CHECK(g[0] == 1);
  CHECK(g[1] == 7);  // block of the refused slot
  REQUIRE_THROWS_AS(dc::write_kv(p, w, true, nullptr, nullptr), std::invalid_argument);
}

TEST_CASE("a pool past 2^32 elements decodes from its last block", "[gpu][decode][bigpool]") {
  // 131,073 blocks of [32, 8, 128] f16: 4,295,032,832 elements (8.6 GB) per pool; the last
  // block starts at element 2^32 exactly, where a 32-bit offset would wrap to block 0.
  const int bs = 32, n_kv = 8, D = 128, n_q = 16;
  const int64_t num_blocks = 131073, last = num_blocks - 1;
  const int64_t block_bytes = int64_t{bs} * n_kv * D * 2;
  REQUIRE(num_blocks * bs * n_kv * D > (int64_t{1} << 32));
  DeviceBuffer dk(static_cast<size_t>(num_blocks * block_bytes)), dv(static_cast<size_t>(num_blocks * block_bytes));
  cuda_ok(cudaMemset(dk.get(), 0, dk.bytes()), "memset K");
  cuda_ok(cudaMemset(dv.get(), 0, dv.bytes()), "memset V");
  dc::KvPoolView p;
  p.k = dk.get();
  p.v = dv.get();
  p.k_type = p.v_type = DType::f16;
  p.num_blocks = num_blocks;
  p.block_size = bs;
  p.n_kv_heads = n_kv;
  p.head_dim = D;
  // Distinct rows into block 0 and the last block, through write_kv (64-bit slots).
  Rng rng(2024);
  std::vector<int64_t> slots;
  for (int t = 0; t < bs; ++t) slots.push_back(last * bs + t);
  for (int t = 0; t < bs; ++t) slots.push_back(t);
  std::vector<float> kf(slots.size() * n_kv * D), vf(kf.size());
  for (auto& x : kf) x = rng.uniform(-2.f, 2.f);
  for (auto& x : vf) x = rng.uniform(-2.f, 2.f);
  DeviceBuffer dks = to_device(kf), dvs = to_device(vf), dsl = to_device(slots), guard(8);
  cuda_ok(cudaMemset(guard.get(), 0, 8), "memset");
  dc::KvWrite w;
  w.k_new = dks.get();
  w.v_new = dvs.get();
  w.src_type = DType::f32;
  w.n_tokens = static_cast<int32_t>(slots.size());
  w.slots = dsl.as<int64_t>();
  dc::write_kv(p, w, true, guard.as<int32_t>(), nullptr);
  cuda_ok(cudaDeviceSynchronize(), "write_kv");
  REQUIRE(to_host<int32_t>(guard, 2)[0] == 0);

  // Host mini-pool: block 0 and a copy of the last block as block 1.
  std::vector<uint8_t> mini(static_cast<size_t>(2 * block_bytes));
  for (size_t i = 0; i < slots.size(); ++i)
    for (int h = 0; h < n_kv; ++h) {
      const int64_t blk = slots[i] / bs == last ? 1 : 0;
      const int64_t row = (blk * bs + slots[i] % bs) * n_kv + h;
      encode_row(DType::f16, &kf[(i * n_kv + h) * D], &mini[row * D * 2], D);
    }
  // The device really holds those bytes at the last block (byte offset > 2^33).
  CHECK(to_host<uint8_t>(dk, static_cast<size_t>(block_bytes), static_cast<size_t>(last * block_bytes)) ==
        std::vector<uint8_t>(mini.begin() + block_bytes, mini.end()));
  std::vector<uint8_t> mini_v(mini.size());
  for (size_t i = 0; i < slots.size(); ++i)
    for (int h = 0; h < n_kv; ++h) {
      const int64_t blk = slots[i] / bs == last ? 1 : 0;
      const int64_t row = (blk * bs + slots[i] % bs) * n_kv + h;
      encode_row(DType::f16, &vf[(i * n_kv + h) * D], &mini_v[row * D * 2], D);
    }

  const std::vector<int32_t> lens{32, 64, 5};
  const int32_t stride = 2;
  const std::vector<int32_t> dev_table{static_cast<int32_t>(last), 0, 0, static_cast<int32_t>(last),
                                       static_cast<int32_t>(last), 0};
  const std::vector<int32_t> mini_table{1, 0, 0, 1, 1, 0};
  std::vector<float> q(lens.size() * n_q * D);
  for (auto& x : q) x = rng.uniform(-2.f, 2.f);

  cpu::PagedDecodeRefArgs ra;
  ra.n_seqs = 3;
  ra.n_q_heads = n_q;
  ra.n_kv_heads = n_kv;
  ra.head_dim = D;
  ra.block_size = bs;
  ra.num_blocks = 2;
  ra.q = q.data();
  ra.q_type = DType::f32;
  ra.k_pool = mini.data();
  ra.k_type = DType::f16;
  ra.v_pool = mini_v.data();
  ra.v_type = DType::f16;
  ra.block_table = mini_table.data();
  ra.max_blocks_per_seq = stride;
  ra.seq_lens = lens.data();
  ra.scale = 1.0 / std::sqrt(128.0);
  const std::vector<double> ref = cpu::paged_attention_decode_ref(ra);

  DeviceBuffer dq = to_device(q), dt = to_device(dev_table), dl = to_device(lens), out(q.size() * 4);
  for (auto kernel : {dc::DecodeKernel::tensor_core, dc::DecodeKernel::portable}) {
    for (int32_t chunk : {0, 16}) {
      cuda_ok(cudaMemset(out.get(), 0xFF, out.bytes()), "poison");
      dc::DecodeOptions opts;
      opts.kernel = kernel;
      opts.bounds_check = true;
      const dc::DecodeLaunchConfig dev = dc::choose_decode_launch(p, n_q, opts);
      const dc::DecodePlan plan = dc::plan_decode(dev, n_kv, lens, chunk);
      dc::DecodeWorkspace ws(static_cast<int32_t>(plan.items.size()), 3, n_q, D);
      ws.upload(plan, nullptr);
      dc::DecodeQuery dq_;
      dq_.q = dq.get();
      dq_.q_type = DType::f32;
      dq_.out = out.get();
      dq_.out_type = DType::f32;
      dq_.n_seqs = 3;
      dq_.n_q_heads = n_q;
      dq_.scale = static_cast<float>(1.0 / std::sqrt(128.0));
      dq_.block_table = dt.as<int32_t>();
      dq_.block_table_stride = stride;
      dq_.seq_lens = dl.as<int32_t>();
      dc::paged_attention_decode(p, dq_, ws, opts, nullptr);
      cuda_ok(cudaDeviceSynchronize(), "decode");
      CHECK_FALSE(ws.take_guard_report(nullptr).tripped);
      const ErrorStats e = compare(to_host<float>(out, q.size()), ref);
      std::printf("pool of %lld blocks (%lld elements): %s chunk %d max abs error %.3g\n",
                  static_cast<long long>(num_blocks), static_cast<long long>(num_blocks * bs * n_kv * D),
                  kernel == dc::DecodeKernel::tensor_core ? "tensor-core" : "portable", chunk, e.max_abs);
      CHECK(e.non_finite == 0);
      CHECK(e.max_abs <= 5e-4);
    }
  }
}
