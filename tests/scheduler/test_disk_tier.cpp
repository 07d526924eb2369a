// The disk tier (scheduler/disk_tier.h) through the engine on the checking FakeModel: the host
// tier's entries are written to a directory and read back by a restarted engine (a new model
// whose host memory starts as garbage), whose next turns resume from them with the outputs of
// a cold run -- the fake checks that the K/V and state read back are the ones written -- and
// files that are corrupt, truncated, renamed or another model's are never trusted.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <unistd.h>

#include "engine_test_util.h"
#include "fake_model.h"
#include "scheduler/engine.h"
#include "tests/test_paths.h"

using namespace ds;
using namespace ds::scheduler;
using ds::test::collect;
using ds::test::FakeModel;
using ds::test::Outcome;
namespace fs = std::filesystem;

namespace {

EngineConfig disk_config(const fs::path& dir) {
  EngineConfig c = ds::test::fake_engine_config(40, 16, 4, 64);
  c.prefix_caching = true;
  c.num_snapshots = 2;
  c.host_cache_bytes = int64_t{1} << 20;
  c.host_disk_dir = dir.string();
  c.host_disk_fingerprint = 42;
  return c;
}

std::vector<int32_t> random_tokens(std::mt19937& rng, int64_t len) {
  std::uniform_int_distribution<int32_t> d(0, 63);
  std::vector<int32_t> p(static_cast<size_t>(len));
  for (auto& t : p) t = d(rng);
  return p;
}

Request turn(const std::vector<int32_t>& history) {
  Request r(history);
  r.max_tokens = 8;
  r.ignore_eos = true;
  r.sampling.temperature = 0;
  r.cache_points = {static_cast<int64_t>(history.size()) - 1};
  return r;
}

// One turn of each session (each extends its history); returns the cached tokens of each.
std::vector<int64_t> run_turns(Engine& e, FakeModel& m, std::vector<std::vector<int32_t>>& histories, std::mt19937& rng) {
  std::vector<int64_t> cached;
  for (auto& h : histories) {
    const Request r = turn(h);
    auto s = e.submit(r);
    REQUIRE(s.ok());
    const Outcome o = collect(s.handle);
    CHECK(o.tokens == m.reference_tokens(h, 8, {}, 1 << 20, r.sampling, 0));
    cached.push_back(o.last.metrics.cached_tokens);
    h.insert(h.end(), o.tokens.begin(), o.tokens.end());
    const auto more = random_tokens(rng, 20);
    h.insert(h.end(), more.begin(), more.end());
  }
  return cached;
}

std::vector<fs::path> files(const fs::path& dir, const std::string& suffix = ".dskv") {
  std::vector<fs::path> out;
  for (const auto& d : fs::directory_iterator(dir))
    if (d.path().extension() == suffix) out.push_back(d.path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("disk tier: a restarted engine resumes from the files, and untrusted files are refused", "[disk]") {
  const fs::path dir = test::temp_path("ds_disk_tier_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  std::mt19937 rng(21);
  std::vector<std::vector<int32_t>> histories;
  for (int i = 0; i < 5; ++i) histories.push_back(random_tokens(rng, 60 + 10 * i));
  std::vector<int64_t> previous;
  {
    FakeModel m(64);
    Engine e(m, disk_config(dir), kernels::cpu::make_cpu_sampler());
    run_turns(e, m, histories, rng);
    previous.clear();
    for (const auto& h : histories) previous.push_back(static_cast<int64_t>(h.size()) - 28);  // the last prompts' lengths
    REQUIRE(test::wait_stats(e, [](const EngineStats& s) { return s.disk_files_written_total > 0; }));
    CHECK(m.violations() == 0);
  }  // the engine's end writes what is still queued
  const std::vector<fs::path> written = files(dir);
  REQUIRE(written.size() > 4);
  CHECK(files(dir, ".tmp").empty());

  // A new model (its host memory garbage) and engine: everything read back, the next turns
  // resume at least where the previous prompts' last blocks ended, outputs exact.
  {
    FakeModel m(64);
    Engine e(m, disk_config(dir), kernels::cpu::make_cpu_sampler());
    std::vector<std::vector<int32_t>> h2 = histories;
    std::mt19937 rng2(5);
    const std::vector<int64_t> cached = run_turns(e, m, h2, rng2);
    for (size_t i = 0; i < cached.size(); ++i) {
      INFO("session " << i);
      CHECK(cached[i] >= (previous[i] - 1) / 16 * 16);
    }
    const EngineStats s = e.stats();
    CHECK(s.disk_files_loaded_total == static_cast<int64_t>(written.size()));
    CHECK(s.disk_files_refused_total == 0);
    CHECK(s.host_cache_hits_total > 0);
    CHECK(m.violations() == 0);
  }

  // Damaged files: one byte flipped, one truncated, one renamed to another entry's name; a
  // file of another model beside them, and a leftover temporary file.
  const std::vector<fs::path> now = files(dir);
  REQUIRE(now.size() >= 4);
  {
    std::fstream f(now[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(80);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x10);
    f.seekp(80);
    f.write(&c, 1);
  }
  fs::resize_file(now[1], fs::file_size(now[1]) - 3);
  fs::rename(now[2], dir / (now[2].filename().string().substr(0, 17) + "b-00000000000000aa-00000000000000bb.dskv"));
  const fs::path foreign = dir / "00000000deadbeef-b-0000000000000001-0000000000000002.dskv";
  { std::ofstream(foreign) << "another model's entry"; }
  { std::ofstream(dir / (now[3].filename().string() + ".tmp")) << "half written"; }
  {
    FakeModel m(64);
    Engine e(m, disk_config(dir), kernels::cpu::make_cpu_sampler());
    std::vector<std::vector<int32_t>> h3 = histories;
    std::mt19937 rng3(5);
    run_turns(e, m, h3, rng3);  // exact outputs whatever was lost (the fake checks every step)
    const EngineStats s = e.stats();
    CHECK(s.disk_files_refused_total == 3);
    CHECK(m.violations() == 0);
  }
  CHECK(fs::exists(foreign));  // another model's file is left alone
  CHECK(files(dir, ".tmp").empty());
  fs::remove_all(dir);
}
