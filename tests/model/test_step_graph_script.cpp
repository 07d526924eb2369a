// The recorded-step tests' script (step_graph_script.h) on the CPU engine, padded steps run
// eagerly: the bystander keeps its state and the padded steps give the unpadded logits.
#include <catch2/catch.hpp>

#include "kernels/cpu/cpu_backend.h"
#include "model/qwen35/refcheck.h"
#include "tests/model/step_graph_script.h"
#include "tests/test_paths.h"

using namespace ds;
namespace script = ds::test::step_graph_script;

TEST_CASE("step graphs: the GPU tests' script padded on the CPU", "[forward][graphs]") {
  auto be = kernels::cpu::make_cpu_backend();
  auto model = qwen35::Model::load(*be, test::data_path("tiny-qwen35"));
  const script::Run padded = script::run_script(*model, *be, script::Mode::padded_eager);
  const script::Run eager = script::run_script(*model, *be, script::Mode::eager);
  CHECK(script::first_difference(padded.bystander_after, padded.bystander_before) == "equal");
  CHECK(script::first_difference(padded.bystander_before, eager.bystander_before) == "equal");
  CHECK(script::first_difference(eager.bystander_after, eager.bystander_before) == "equal");
  CHECK(padded.stats.padded_eager >= 28);
  REQUIRE(padded.logits.size() == eager.logits.size());
  for (size_t s = 0; s < padded.logits.size(); ++s) {
    INFO("step " << s);
    CHECK(qwen35::relative_error(padded.logits[s], eager.logits[s]) < 1e-5);
  }
  CHECK(qwen35::relative_error(padded.bystander_logits, eager.bystander_logits) < 1e-5);
}
