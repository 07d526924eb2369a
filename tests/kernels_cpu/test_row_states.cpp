// Row states (kernels/batch_plan.h), what speculative decoding's rollback rests on: a chunk
// that names row-state slots leaves in slot i exactly (bit for bit) the DeltaNet state that
// feeding its first i + 1 tokens leaves, in the conv window and in the delta-rule matrix, and
// touches nothing else; the plan refuses row states that would collide. A snapshot row (prefix
// caching) is the same contract for one row of a prefill chunk.
#include <catch2/catch.hpp>

#include "kernels/common/half.h"
#include "tests/kernels_cpu/kernel_test_util.h"

using Catch::Matchers::Contains;
using ds::kernels::DeltaNetDims;
using ds::kernels::Shape;
namespace t = ds::test;

namespace {

constexpr int64_t kSlots = 6, kLayers = 2, kLayer = 1, kSlot = 1, kN = 5;
const std::vector<int32_t> kRowSlots = {3, 0, 5, 2};  // kN - 1 of them, in no particular order

// A [slots, layers, per] state array of the backend's type for it (`type`) holding `values`.
ds::kernels::Tensor state_of(ds::kernels::Backend& be, ds::DType type, const std::vector<float>& values, int64_t per) {
  auto st = be.alloc(type, Shape{kSlots, kLayers, per});
  be.copy_from_host(values, st);
  return st;
}

// One layer's part of a slot in a [slots, layers, per...] state array.
std::vector<float> part(const std::vector<float>& all, int64_t slot, int64_t layer, int64_t per) {
  const int64_t at = (slot * kLayers + layer) * per;
  return {all.begin() + at, all.begin() + at + per};
}

// Runs `op(plan, first, n)` over rows [first, first + n) of a kN-row input as one chunk with
// the row states, then, for each prefix length, from the initial state again without them;
// checks the row-state slots against the prefixes' final states and everything else untouched.
// `type`: the state's element type (f32, or a bf16 recurrent state: the same contract holds bit
// for bit, as every slot is the fp32 state rounded once where the chunk stores it).
template <class Op>
void check_row_states(ds::kernels::Backend& be, const std::vector<float>& state0, int64_t per, Op op,
                      ds::DType type = ds::DType::f32) {
  auto state = state_of(be, type, state0, per);
  auto plan = t::plan_of(be, {{kN, 7, kSlot, {0, 1, 2, 3}, kRowSlots}}, 4, 4, kSlots);
  op(*plan, state, 0, kN);
  const auto got = t::get(be, state);
  for (int64_t i = 0; i < kN; ++i) {
    auto fresh = state_of(be, type, state0, per);
    auto p = t::plan_of(be, {{i + 1, 7, kSlot, {0, 1, 2, 3}}}, 4, 4, kSlots);
    op(*p, fresh, 0, i + 1);
    const auto want = part(t::get(be, fresh), kSlot, kLayer, per);
    const int64_t slot = i + 1 < kN ? kRowSlots[static_cast<size_t>(i)] : kSlot;
    INFO("after row " << i);
    CHECK(part(got, slot, kLayer, per) == want);
  }
  // Other layers, and the slot no one named, keep their state.
  for (int64_t s = 0; s < kSlots; ++s) CHECK(part(got, s, 0, per) == part(state0, s, 0, per));
  CHECK(part(got, 4, kLayer, per) == part(state0, 4, kLayer, per));
}

// The same for snapshot rows: a chunk naming rows leaves in each one's slot the state the
// tokens up to that row leave, and its own slot as without them; every single row but the
// last, then three rows at once.
template <class Op>
void check_snapshot_rows(ds::kernels::Backend& be, const std::vector<float>& state0, int64_t per, Op op,
                         ds::DType type = ds::DType::f32) {
  auto full = state_of(be, type, state0, per);
  op(*t::plan_of(be, {{kN, 7, kSlot, {0, 1, 2, 3}}}, 4, 4, kSlots), full, 0, kN);
  const auto want_end = t::get(be, full);
  std::vector<std::vector<ds::kernels::SnapshotRow>> cases;
  for (int64_t r = 0; r + 1 < kN; ++r) cases.push_back({{r, 3}});
  cases.push_back({{0, 3}, {2, 5}, {3, 0}});
  for (const auto& rows : cases) {
    auto state = state_of(be, type, state0, per);
    op(*t::plan_of(be, {{kN, 7, kSlot, {0, 1, 2, 3}, {}, rows}}, 4, 4, kSlots), state, 0, kN);
    const auto got = t::get(be, state);
    std::vector<bool> named(kSlots, false);
    named[kSlot] = true;
    for (const auto& sr : rows) {
      auto prefix = state_of(be, type, state0, per);
      op(*t::plan_of(be, {{sr.row + 1, 7, kSlot, {0, 1, 2, 3}}}, 4, 4, kSlots), prefix, 0, sr.row + 1);
      INFO("snapshot after row " << sr.row << " in slot " << sr.slot << " (" << rows.size() << " rows)");
      CHECK(part(got, sr.slot, kLayer, per) == part(t::get(be, prefix), kSlot, kLayer, per));
      named[static_cast<size_t>(sr.slot)] = true;
    }
    CHECK(part(got, kSlot, kLayer, per) == part(want_end, kSlot, kLayer, per));
    for (int64_t s = 0; s < kSlots; ++s) {
      CHECK(part(got, s, 0, per) == part(state0, s, 0, per));
      if (!named[static_cast<size_t>(s)]) CHECK(part(got, s, kLayer, per) == part(state0, s, kLayer, per));
    }
  }
}

}  // namespace

TEST_CASE("row states: causal conv1d leaves the window after each verified row", "[kernels]") {
  auto be = t::cpu();
  constexpr int64_t kC = 70, kKc = 4, kTaps = 3;
  const auto x = t::random_vec(kN * kC, 1);
  auto w = t::make(*be, Shape{kC, 1, kKc}, t::random_vec(kC * kKc, 2, 0.5f));
  const auto state0 = t::random_vec(kSlots * kLayers * kC * kTaps, 3);
  auto op = [&](const ds::kernels::BatchPlan& plan, ds::kernels::Tensor& st, int64_t first, int64_t n) {
    auto xt = t::make(*be, Shape{n, kC}, std::vector<float>(x.begin() + first * kC, x.begin() + (first + n) * kC));
    auto out = t::zeros(*be, Shape{n, kC});
    ds::kernels::Tensor st4 = st.reshape(Shape{kSlots, kLayers, kC, kTaps});
    be->causal_conv1d(xt, w, st4, kLayer, plan, out);
  };
  check_row_states(*be, state0, kC * kTaps, op);
  check_snapshot_rows(*be, state0, kC * kTaps, op);
}

TEST_CASE("row states: the gated delta rule leaves S after each verified row, in f32 or bf16 slots", "[kernels]") {
  for (const ds::DType type : {ds::DType::f32, ds::DType::bf16}) {
    INFO("recurrent state " << ds::dtype_name(type));
    auto be = ds::kernels::cpu::make_cpu_backend({.num_threads = 2, .recurrent_state_dtype = type});
    constexpr int64_t kHk = 2, kHv = 4, kDk = 16, kDv = 8, kConv = 2 * kHk * kDk + kHv * kDv;
    const auto qkv = t::random_vec(kN * kConv, 10);
    const auto a = t::random_vec(kN * kHv, 20, 2.0f), b = t::random_vec(kN * kHv, 30, 2.0f);
    auto al = t::make(*be, Shape{kHv}, {-0.5f, 0.2f, 0.9f, -1.5f});
    auto dt = t::make(*be, Shape{kHv}, {0.3f, -0.2f, 1.0f, 0.0f});
    auto state0 = t::random_vec(kSlots * kLayers * kHv * kDk * kDv, 40, 0.3f);
    for (float& v : state0) v = ds::bf16_to_f32(ds::f32_to_bf16(v));  // held exactly by either type
    auto op = [&](const ds::kernels::BatchPlan& plan, ds::kernels::Tensor& st, int64_t first, int64_t n) {
      auto xt = t::make(*be, Shape{n, kConv}, std::vector<float>(qkv.begin() + first * kConv, qkv.begin() + (first + n) * kConv));
      auto at = t::make(*be, Shape{n, kHv}, std::vector<float>(a.begin() + first * kHv, a.begin() + (first + n) * kHv));
      auto bt = t::make(*be, Shape{n, kHv}, std::vector<float>(b.begin() + first * kHv, b.begin() + (first + n) * kHv));
      auto out = t::zeros(*be, Shape{n, kHv, kDv});
      ds::kernels::Tensor st5 = st.reshape(Shape{kSlots, kLayers, kHv, kDk, kDv});
      be->gated_delta_rule(xt, at, bt, al, dt, st5, kLayer, plan, DeltaNetDims{kHk, kHv, kDk, kDv}, out);
    };
    check_row_states(*be, state0, kHv * kDk * kDv, op, type);
    check_snapshot_rows(*be, state0, kHv * kDk * kDv, op, type);
  }
}

TEST_CASE("row states: the plan refuses slots that collide or overflow", "[kernels]") {
  auto be = t::cpu();
  auto err = [&](std::vector<t::SeqDesc> seqs) -> std::string {
    try {
      t::plan_of(*be, seqs, 4, 8, 4);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "accepted";
  };
  CHECK(err({{3, 0, 0, {1}, {2, 3}}, {1, 0, 1, {2}}}) == "accepted");
  CHECK_THAT(err({{3, 0, 0, {1}, {2, 3, 1}}}), Contains("after 3 rows of a chunk of 3"));
  CHECK_THAT(err({{3, 0, 0, {1}, {2, 4}}}), Contains("row-state slot 4 outside [0, 4)"));
  CHECK_THAT(err({{3, 0, 0, {1}, {2, 0}}}), Contains("share a state slot"));
  CHECK_THAT(err({{3, 0, 0, {1}, {2}}, {1, 0, 2, {2}}}), Contains("share a state slot"));
  CHECK_THAT(err({{3, 0, 0, {1}, {2, 2}}}), Contains("share a state slot"));
  // Snapshot rows: ascending inside the chunk but its last row, slots of the pool no one else uses.
  CHECK(err({{3, 0, 0, {1}, {}, {{1, 2}}}}) == "accepted");
  CHECK(err({{4, 0, 0, {1}, {}, {{0, 2}, {2, 3}}}}) == "accepted");
  CHECK_THAT(err({{3, 0, 0, {1}, {}, {{2, 2}}}}), Contains("snapshot after row 2 of a chunk of 3"));
  CHECK_THAT(err({{3, 0, 0, {1}, {}, {{-1, 2}}}}), Contains("snapshot after row -1"));
  CHECK_THAT(err({{4, 0, 0, {1}, {}, {{1, 2}, {1, 3}}}}), Contains("snapshot after row 1"));
  CHECK_THAT(err({{4, 0, 0, {1}, {}, {{2, 2}, {0, 3}}}}), Contains("snapshot after row 0"));
  CHECK_THAT(err({{3, 0, 0, {1}, {}, {{0, 4}}}}), Contains("snapshot slot 4 outside [0, 4)"));
  CHECK_THAT(err({{3, 0, 0, {1}, {}, {{0, 0}}}}), Contains("share a state slot"));
  CHECK_THAT(err({{4, 0, 0, {1}, {}, {{0, 2}, {1, 2}}}}), Contains("share a state slot"));
  CHECK_THAT(err({{3, 0, 0, {1}, {2}, {{1, 3}}}}), Contains("both row states and snapshot rows"));
  CHECK_THAT(err({{3, 0, 0, {1}, {}, {{0, 2}}}, {1, 0, 2, {2}}}), Contains("share a state slot"));
}
