// The padded steps of recorded steps (model/qwen35/step_graphs.cpp) on the CPU engine:
// Model::enable_step_graphs with record = false pads decode steps to the recorded batch sizes
// and plans them with fixed-width tables, and runs them eagerly, so that the padding is
// checked here without a GPU: each real sequence gets the logits it gets unpadded, and the
// padding sequences (on the model's pad block and pad slot) leave every other sequence's
// state as it was.
#include <catch2/catch.hpp>

#include <vector>

#include "model/qwen35/refcheck.h"
#include "tests/model/harness.h"
#include "tests/test_paths.h"

using namespace ds;
using ds::test::Harness;

namespace {

std::vector<float> state_of(qwen35::Model& m, const Harness::Seq& s) {
  std::vector<float> all;
  for (int64_t l = 0; l < m.config().num_deltanet_layers(); ++l)
    for (const kernels::Tensor& t : {m.conv_state(s.slot.id, l), m.recurrent_state(s.slot.id, l)}) {
      std::vector<float> v(static_cast<size_t>(t.numel()));
      m.backend().copy_to_host(t, v);
      all.insert(all.end(), v.begin(), v.end());
    }
  return all;
}

}  // namespace

TEST_CASE("step graphs: padded decode steps give each sequence its unpadded logits", "[forward][graphs]") {
  const auto dir = test::data_path("tiny-qwen35");
  Harness plain(dir, 96, 4, 8), padded(dir, 96, 4, 8);
  padded.model().enable_step_graphs({.max_seq_len = 64, .max_batch = 16, .record = false});
  REQUIRE(padded.model().step_graphs_enabled());
  CHECK_FALSE(plain.model().step_graphs_enabled());
  const std::vector<std::vector<int32_t>> prompts{{5, 6, 7}, {11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21}, {42}, {9, 8}};
  std::vector<Harness::Seq*> ps, qs;
  for (const auto& p : prompts) {
    ps.push_back(&plain.add_sequence());
    qs.push_back(&padded.add_sequence());
    const auto a = plain.prefill(*ps.back(), p);
    const auto b = padded.prefill(*qs.back(), p);
    CHECK(qwen35::relative_error(a, b) < 1e-5);
  }
  // Sequence 3 sits out the decode steps: the padding must leave its state alone.
  const std::vector<float> bystander = state_of(padded.model(), *qs[3]);
  int32_t token = 100;
  for (int step = 0; step < 12; ++step) {
    // 3 sequences (padded to 4), then 2 (padded to 2: no padding), crossing 4-token blocks.
    const size_t n = step < 8 ? 3 : 2;
    std::vector<Harness::Part> a, b;
    for (size_t i = 0; i < n; ++i) {
      a.push_back({ps[i], {token + static_cast<int32_t>(i)}, 1});
      b.push_back({qs[i], {token + static_cast<int32_t>(i)}, 1});
    }
    ++token;
    const auto la = plain.step(a), lb = padded.step(b);
    INFO("step " << step);
    REQUIRE(la.size() == lb.size());
    CHECK(qwen35::relative_error(la, lb) < 1e-5);
  }
  CHECK(state_of(padded.model(), *qs[3]) == bystander);
  for (size_t i = 0; i < 3; ++i) {
    INFO("sequence " << i);
    CHECK(qwen35::relative_error(state_of(plain.model(), *ps[i]), state_of(padded.model(), *qs[i])) < 1e-5);
  }
  // The bystander's next step sees its own K/V and state.
  CHECK(qwen35::relative_error(plain.step({{ps[3], {77}, 1}}), padded.step({{qs[3], {77}, 1}})) < 1e-5);
  const auto st = padded.model().step_graph_stats();
  CHECK(st.padded_eager >= 13);  // the decode steps, the last one and the short prefills
  CHECK(st.replayed == 0);
  CHECK(st.recorded == 0);
  // A recording backend is needed for recordings: the CPU one ignores them.
  plain.model().enable_step_graphs({.max_seq_len = 64, .max_batch = 16});
  CHECK_FALSE(plain.model().step_graphs_enabled());
}
