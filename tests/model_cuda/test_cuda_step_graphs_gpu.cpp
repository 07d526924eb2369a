// Recorded steps (CUDA graphs, kernels/step_graph.h) on the tiny Qwen3.5 model, over the
// script of tests/model/step_graph_script.h: replays give bit for bit the logits of the same
// padded steps run eagerly (Model::StepGraphOptions::record = false), across steps whose block
// tables, lengths and table widths change, for decode and verify steps, padded batches
// included; the bystander (a sequence outside every step) keeps its state in every mode; and
// the padded path stays within bf16 rounding of plain eager steps.
// Vectors are compared with first_difference: a failing check names the first differing
// element instead of printing megabytes of floats.
#include <catch2/catch.hpp>

#include <algorithm>
#include <span>

#include "kernels/cuda/cuda_backend.h"
#include "model/qwen35/refcheck.h"
#include "tests/model/step_graph_script.h"
#include "tests/test_paths.h"

using namespace ds;
namespace script = ds::test::step_graph_script;

namespace {

// "equal", or the first difference and where in the state it lies.
std::string state_difference(const qwen35::Model& model, const std::vector<float>& a, const std::vector<float>& b) {
  const std::string d = script::first_difference(a, b);
  if (d == "equal" || a.size() != b.size()) return d;
  size_t i = 0;
  while (a[i] == b[i] || (a[i] != a[i] && b[i] != b[i])) ++i;
  return d + " (" + script::state_location(model, i) + ")";
}

}  // namespace

TEST_CASE("step graphs: replays match the same padded steps run eagerly, bit for bit", "[cuda_model][gpu][graphs]") {
  cuda::CudaBackendOptions o;
  auto be = cuda::make_cuda_backend(o);
  REQUIRE(be->can_record_steps());
  auto model = qwen35::Model::load(*be, test::data_path("tiny-qwen35"));
  const script::Run recorded = script::run_script(*model, *be, script::Mode::recorded);
  const script::Run padded = script::run_script(*model, *be, script::Mode::padded_eager);
  const script::Run eager = script::run_script(*model, *be, script::Mode::eager);
  INFO("replayed " << recorded.stats.replayed << ", recorded " << recorded.stats.recorded << ", padded eager "
                   << recorded.stats.padded_eager << ", failed " << recorded.stats.failed);
  // The bystander's state is untouched by every mode's steps (plain eager included, which
  // tells a padding or recording fault from one of the script or the kernels).
  CHECK(state_difference(*model, eager.bystander_after, eager.bystander_before) == "equal");
  CHECK(state_difference(*model, padded.bystander_after, padded.bystander_before) == "equal");
  CHECK(state_difference(*model, recorded.bystander_after, recorded.bystander_before) == "equal");
  CHECK(state_difference(*model, recorded.bystander_before, padded.bystander_before) == "equal");
  CHECK(script::first_difference(recorded.bystander_logits, padded.bystander_logits) == "equal");
  CHECK(qwen35::relative_error(recorded.bystander_logits, eager.bystander_logits) < 2e-2);

  CHECK(recorded.stats.failed == 0);
  CHECK(recorded.stats.recorded >= 6);  // batch 4 at two widths, 8, verify 4, 1, 2
  CHECK(recorded.stats.replayed >= 20);
  CHECK(padded.stats.replayed == 0);
  CHECK(padded.stats.padded_eager >= 28);
  CHECK(eager.stats.padded_eager == 0);

  REQUIRE(recorded.logits.size() == padded.logits.size());
  const int64_t V = model->config().vocab_size;
  double worst = 0;
  for (size_t s = 0; s < recorded.logits.size(); ++s) {
    INFO("step " << s);
    CHECK(script::first_difference(recorded.logits[s], padded.logits[s]) == "equal");
    REQUIRE(recorded.logits[s].size() == eager.logits[s].size());
    for (size_t r = 0; r < eager.logits[s].size() / static_cast<size_t>(V); ++r) {
      const auto row = [&](const std::vector<float>& v) {
        return std::span<const float>(v).subspan(r * static_cast<size_t>(V), static_cast<size_t>(V));
      };
      worst = std::max(worst, qwen35::relative_error(row(recorded.logits[s]), row(eager.logits[s])));
    }
  }
  // Padding and the fixed decode plan change only the rounding (other GEMM shapes, other
  // attention splits).
  INFO("worst relative logit difference, recorded vs plain eager: " << worst);
  CHECK(worst < 2e-2);
  // The numbers the device script's summary quotes (printed without -s too).
  WARN("replayed " << recorded.stats.replayed << ", recorded " << recorded.stats.recorded << ", padded eager "
                   << recorded.stats.padded_eager << ", failed " << recorded.stats.failed
                   << "; worst relative logit difference, recorded vs plain eager: " << worst);
}

// The same script with kernels launched unchained (no programmatic dependent launch): tells a
// fault of chaining under replay (a kernel reading before griddepcontrol.wait) from one of
// recording itself.
TEST_CASE("step graphs: the bystander keeps its state with chained launches off", "[cuda_model][gpu][graphs]") {
  cuda::CudaBackendOptions o;
  o.paths.chained_launches = false;
  auto be = cuda::make_cuda_backend(o);
  auto model = qwen35::Model::load(*be, test::data_path("tiny-qwen35"));
  const script::Run recorded = script::run_script(*model, *be, script::Mode::recorded);
  const script::Run padded = script::run_script(*model, *be, script::Mode::padded_eager);
  CHECK(state_difference(*model, padded.bystander_after, padded.bystander_before) == "equal");
  CHECK(state_difference(*model, recorded.bystander_after, recorded.bystander_before) == "equal");
  REQUIRE(recorded.logits.size() == padded.logits.size());
  for (size_t s = 0; s < recorded.logits.size(); ++s) {
    INFO("step " << s);
    CHECK(script::first_difference(recorded.logits[s], padded.logits[s]) == "equal");
  }
}
