// Paged decode on the GPU against the float64 CPU reference (kernels/cpu/paged_attention_ref).
// Needs a CUDA device (label gpu).
#include <catch2/catch.hpp>

#include <climits>
#include <cstdio>

#include "tests/kernels_cuda/decode_scenario.h"

using namespace ds;
using namespace ds::test;
namespace dc = ds::cuda;

namespace {

constexpr double kTol = 5e-4;
const DType kTypes[] = {DType::bf16, DType::f16, DType::q8_0, DType::q4_0};

std::string label(const Scenario& s, const char* mode) {
  return std::string(dtype_name(s.kt)) + "/" + std::string(dtype_name(s.vt)) + " D=" +
         std::to_string(s.sh.head_dim) + " " + mode;
}

void expect_close(const RunResult& r, const std::vector<double>& ref, const std::string& what, double tol = kTol) {
  const ErrorStats e = compare(r.out, ref);
  INFO(what << ": max abs error " << e.max_abs << ", non-finite " << e.non_finite << ", chunk "
            << r.plan.chunk_tokens << ", items " << r.plan.items.size());
  CHECK(e.non_finite == 0);
  CHECK(e.max_abs <= tol);
  CHECK_FALSE(r.guard.tripped);
}

}  // namespace

TEST_CASE("decode matches the float64 reference for every K/V type pair, split and unsplit", "[gpu][decode]") {
  const std::vector<int32_t> lens{0, 1, 15, 16, 17, 100, 333, 1000, 64, 257};
  for (const Shape sh : {Shape{24, 4, 256, 16}, Shape{16, 4, 128, 16}}) {
    for (DType kt : kTypes) {
      for (DType vt : kTypes) {
        const Scenario s = make_scenario(sh, kt, vt, lens, 1000 + static_cast<int>(kt) * 10 + static_cast<int>(vt));
        DeviceScenario d(s);
        double worst_tc = 0, worst_portable = 0;
        for (bool qbf : {false, true}) {
          const std::vector<double> ref = reference(s, qbf);
          struct Mode {
            dc::DecodeKernel kernel;
            int32_t chunk;
            const char* name;
            bool token_rows = true;
          };
          // Quantised K and V on sm_90: split 48 and auto read whole token rows (one block per
          // chunk); "per head" and single (INT_MAX is not a multiple of 16) use a block per
          // head with bulk tensor copies at head_dim 256; split 40 (tiles not aligned to 16
          // tokens) copies by cp.async.
          for (const Mode m : {Mode{dc::DecodeKernel::tensor_core, 48, "tc split 48"},
                               Mode{dc::DecodeKernel::tensor_core, 48, "tc split 48 per head", false},
                               Mode{dc::DecodeKernel::tensor_core, 40, "tc split 40"},
                               Mode{dc::DecodeKernel::tensor_core, 0, "tc auto"},
                               Mode{dc::DecodeKernel::tensor_core, INT_MAX, "tc single"},
                               Mode{dc::DecodeKernel::portable, 48, "portable split 48"},
                               Mode{dc::DecodeKernel::portable, INT_MAX, "portable single"}}) {
            RunOptions o;
            o.kernel = m.kernel;
            o.chunk = m.chunk;
            o.token_rows = m.token_rows;
            o.q_bf16 = qbf;
            const RunResult r = run_decode(s, d, o);
            expect_close(r, ref, label(s, m.name) + (qbf ? " q bf16" : " q f32"));
            const double e = compare(r.out, ref).max_abs;
            (m.kernel == dc::DecodeKernel::tensor_core ? worst_tc : worst_portable) =
                std::max(m.kernel == dc::DecodeKernel::tensor_core ? worst_tc : worst_portable, e);
          }
        }
        std::printf("decode %-5s K / %-5s V  D=%d: max abs error tensor-core %.3g, portable %.3g\n",
                    std::string(dtype_name(kt)).c_str(), std::string(dtype_name(vt)).c_str(), sh.head_dim, worst_tc,
                    worst_portable);
      }
    }
  }
}

TEST_CASE("bf16 output is the rounded fp32 result", "[gpu][decode]") {
  const Scenario s = make_scenario(Shape{}, DType::bf16, DType::q8_0, {3, 200, 1500}, 77);
  DeviceScenario d(s);
  const std::vector<double> ref = reference(s, true);
  RunOptions o;
  o.q_bf16 = true;
  o.out_type = DType::bf16;
  o.chunk = 100;
  const RunResult r = run_decode(s, d, o);
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i)
    worst = std::max(worst, std::fabs(r.out[i] - ref[i]) - std::fabs(ref[i]) * (1.0 / 256));
  CHECK(worst <= kTol);
  CHECK(compare(r.out, ref).non_finite == 0);
}

TEST_CASE("block sizes, GQA ratios and batch-to-row mapping", "[gpu][decode]") {
  struct Case {
    Shape sh;
    DType kt, vt;
    std::vector<int32_t> lens;
  };
  const std::vector<Case> cases{
      {Shape{16, 4, 128, 32}, DType::bf16, DType::q4_0, {5, 31, 32, 33, 700}},
      {Shape{16, 4, 128, 528}, DType::q8_0, DType::bf16, {527, 528, 529, 1500, 0}},  // vLLM-style hybrid page
      {Shape{24, 2, 256, 16}, DType::f16, DType::q8_0, {1, 90, 600}},                 // group 12: two head chunks
      {Shape{8, 8, 128, 16}, DType::q4_0, DType::q4_0, {77, 300}},                    // group 1
      {Shape{40, 4, 128, 16}, DType::bf16, DType::bf16, {1, 129, 1000}},              // group 10
  };
  for (const Case& c : cases) {
    const Scenario s = make_scenario(c.sh, c.kt, c.vt, c.lens, 4242);
    DeviceScenario d(s);
    const std::vector<double> ref = reference(s, false);
    for (int32_t chunk : {0, 48, INT_MAX}) {
      for (auto kernel : {dc::DecodeKernel::tensor_core, dc::DecodeKernel::portable}) {
        RunOptions o;
        o.kernel = kernel;
        o.chunk = chunk;
        expect_close(run_decode(s, d, o), ref,
                     label(s, kernel == dc::DecodeKernel::tensor_core ? "tc" : "portable") + " bs=" +
                         std::to_string(c.sh.block_size) + " group=" + std::to_string(c.sh.n_q_heads / c.sh.n_kv_heads) +
                         " chunk=" + std::to_string(chunk));
      }
    }
  }
}

TEST_CASE("empty batches and empty sequences give zeros, never NaN", "[gpu][decode]") {
  const Scenario s = make_scenario(Shape{}, DType::q4_0, DType::bf16, {0, 0, 0}, 5);
  DeviceScenario d(s);
  for (int32_t chunk : {0, 16}) {
    RunOptions o;
    o.chunk = chunk;
    const RunResult r = run_decode(s, d, o);
    for (float v : r.out) REQUIRE(v == 0.0f);
  }
  // A batch of no sequences is a no-op.
  const dc::KvPoolView pools = pool_view(s, d);
  const dc::DecodeLaunchConfig dev = dc::choose_decode_launch(pools, 24, {});
  const dc::DecodePlan plan = dc::plan_decode(dev, 4, std::vector<int32_t>{});
  dc::DecodeWorkspace ws(1, 1, 24, 256);
  ws.upload(plan, nullptr);
  dc::DecodeQuery q;
  q.n_seqs = 0;
  q.n_q_heads = 24;
  q.q_type = DType::f32;
  REQUIRE_NOTHROW(dc::paged_attention_decode(pools, q, ws, {}, nullptr));
}

TEST_CASE("one sequence split into more than 1,024 chunks merges like the reference", "[gpu][decode]") {
  // The merge kernel keeps the weights of 1,024 chunks at a time in shared memory and cuts
  // head_dim into four slices for a batch of one: both show here (1,250 chunks of 16 tokens).
  const Scenario s = make_scenario(Shape{}, DType::bf16, DType::q8_0, {20000}, 2024);
  DeviceScenario d(s);
  for (bool qbf : {false, true}) {
    const std::vector<double> ref = reference(s, qbf);
    for (auto kernel : {dc::DecodeKernel::tensor_core, dc::DecodeKernel::portable}) {
      RunOptions o;
      o.kernel = kernel;
      o.chunk = 16;
      o.q_bf16 = qbf;
      const RunResult r = run_decode(s, d, o);
      REQUIRE(r.plan.items.size() == 1250);
      expect_close(r, ref, label(s, kernel == dc::DecodeKernel::tensor_core ? "tc 1250 chunks" : "portable 1250 chunks") +
                               (qbf ? " q bf16" : " q f32"));
    }
  }
}

TEST_CASE("ragged batch 128K + 7 x 8K matches the reference", "[gpu][decode][long]") {
  std::vector<int32_t> lens{131072};
  for (int i = 0; i < 7; ++i) lens.push_back(8192);
  for (auto [kt, vt] : {std::pair{DType::bf16, DType::bf16}, std::pair{DType::q8_0, DType::q4_0}}) {
    const Scenario s = make_scenario(Shape{}, kt, vt, lens, 31337, 0);
    DeviceScenario d(s);
    const std::vector<double> ref = reference(s, true);
    for (int32_t chunk : {0, INT_MAX}) {
      RunOptions o;
      o.q_bf16 = true;
      o.chunk = chunk;
      const RunResult r = run_decode(s, d, o);
      expect_close(r, ref, label(s, chunk ? "ragged single" : "ragged auto"));
      std::printf("ragged %s/%s %s: chunk %d, %zu items, max abs error %.3g\n", std::string(dtype_name(kt)).c_str(),
                  std::string(dtype_name(vt)).c_str(), chunk ? "single" : "auto", r.plan.chunk_tokens,
                  r.plan.items.size(), compare(r.out, ref).max_abs);
    }
  }
}

TEST_CASE("the bounds guard refuses corrupt block ids", "[gpu][decode][guard]") {
  Scenario s = make_scenario(Shape{}, DType::bf16, DType::q8_0, {50, 70, 40}, 8);
  DeviceScenario d(s);
  const std::vector<double> ref = reference(s, false);
  std::vector<int32_t> bad = s.table;
  bad[1 * s.stride + 1] = static_cast<int32_t>(s.num_blocks + 3);
  bad[2 * s.stride + 0] = -7;
  DeviceBuffer dbad = to_device(bad);
  for (auto kernel : {dc::DecodeKernel::tensor_core, dc::DecodeKernel::portable}) {
    RunOptions o;
    o.kernel = kernel;
    o.chunk = 32;
    o.table_override = dbad.as<int32_t>();
    const RunResult r = run_decode(s, d, o);
    REQUIRE(r.guard.tripped);
    if (r.guard.bad_id != std::numeric_limits<int32_t>::min())  // debug builds report through the exception
      CHECK((r.guard.bad_id == s.num_blocks + 3 || r.guard.bad_id == -7));
    // The untouched sequence is still right, and nothing is NaN.
    const size_t per_seq = static_cast<size_t>(s.sh.n_q_heads) * s.sh.head_dim;
    double err0 = 0;
    for (size_t i = 0; i < per_seq; ++i) err0 = std::max(err0, std::fabs(r.out[i] - ref[i]));
    CHECK(err0 <= kTol);
    CHECK(compare(r.out, ref).non_finite == 0);
  }
}

TEST_CASE("the tensor-core kernel stamps every block's phases in order", "[gpu][decode]") {
  // The traced kernels (decode_trace.h): per block, the phases in program order on one SM's
  // clock, the chunk's token count, and the result still exact.
  const std::vector<int32_t> lens{0, 1, 100, 1000, 333};
  const Scenario s = make_scenario(Shape{24, 4, 256, 16}, DType::q8_0, DType::q8_0, lens, 4242);
  DeviceScenario d(s);
  const int64_t max_blocks = int64_t{4} * 64;  // KV heads x items (48-token chunks; one head chunk of 6)
  DeviceBuffer trace(static_cast<size_t>(max_blocks) * 16 * 8);
  cuda_ok(cudaMemset(trace.get(), 0, trace.bytes()), "clear trace");
  RunOptions o;
  o.chunk = 48;
  o.token_rows = false;  // a block per KV head (the token-row kernel stamps fewer phases)
  o.trace = trace.as<uint64_t>();
  const RunResult r = run_decode(s, d, o);
  expect_close(r, reference(s, false), "traced run");
  const int64_t blocks_x = r.plan.launch.blocks_per_item(s.sh.n_kv_heads);
  REQUIRE(static_cast<int64_t>(r.plan.items.size()) * blocks_x <= max_blocks);
  const auto h = to_host<uint64_t>(trace, static_cast<size_t>(r.plan.items.size() * blocks_x * 16));
  for (size_t y = 0; y < r.plan.items.size(); ++y) {
    const dc::DecodeWorkItem& it = r.plan.items[y];
    const int32_t len = lens[static_cast<size_t>(it.seq)];
    const int32_t end = (it.flags & dc::kItemLast) ? len : std::min(len, it.token_begin + r.plan.chunk_tokens);
    const uint64_t tokens = static_cast<uint64_t>(std::max(0, end - it.token_begin));
    for (int64_t x = 0; x < blocks_x; ++x) {
      const uint64_t* t = &h[(y * blocks_x + static_cast<size_t>(x)) * 16];
      INFO("item " << y << " (seq " << it.seq << ", from " << it.token_begin << "), block x " << x);
      CHECK(t[7] == tokens);
      CHECK(t[6] >= t[0]);  // %globaltimer at the end, not before the start
      CHECK(t[2] <= t[8]);   // start <= item and length <= block ids <= stages issued
      CHECK(t[8] <= t[9]);
      CHECK(t[9] <= t[12]);
      CHECK(t[12] <= t[14]);  // stages issued <= q in shared memory <= q in registers
      CHECK(t[14] <= t[10]);
      CHECK(t[4] <= t[11]);  // last tile <= sums reduced <= written
      CHECK(t[11] <= t[5]);
      if (tokens > 0) {  // warp 0 has a tile: q <= first tile <= last tile
        CHECK(t[10] <= t[3]);
        CHECK(t[3] <= t[4]);
      } else {
        CHECK(t[10] <= t[4]);
      }
    }
  }
}
