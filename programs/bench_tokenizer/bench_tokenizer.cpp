// bench_tokenizer: single-thread encode and decode throughput of a tokenizer.json on
// synthetic English prose, source code and CJK text (bench_text.h).
//
//   bench_tokenizer [--tokenizer PATH] [--mb N] [--passes N]
//
// For each corpus: a first pass with an empty BPE cache ("cold": every distinct word merged
// from scratch), then `passes` passes with the cache as a running server would have it
// ("warm", best pass). Decode is timed the same way on the ids. Each corpus gets a freshly
// loaded tokenizer, so no cache carries over. MB = 10^6 bytes of input text.
// Every figure is given twice: per wall-clock second and per CPU second of the benchmark
// thread (CLOCK_THREAD_CPUTIME_ID). On a machine shared with other work the thread does not
// get a whole core, and the CPU-second figure is the per-core throughput.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <optional>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "programs/bench_tokenizer/bench_text.h"
#include "model/tokenizer/tokenizer.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Stats {
  double wall, cpu;  // best pass, seconds
};

template <class F>
Stats time_passes(int passes, F&& f) {
  Stats best{1e30, 1e30};
  for (int i = 0; i < passes; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = thread_cpu_seconds();
    f();
    best.cpu = std::min(best.cpu, thread_cpu_seconds() - c0);
    best.wall = std::min(best.wall, seconds_since(t0));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tokenizer encode/decode throughput on synthetic prose, code and CJK text"};
  std::string path = DS_QWEN3_TOKENIZER_JSON;
  double mb = 4.0;
  int passes = 5;
  app.add_option("--tokenizer", path, "model directory or tokenizer.json (default: Qwen3)");
  app.add_option("--mb", mb, "size of each corpus in MB")->check(CLI::Range(0.01, 1024.0));
  app.add_option("--passes", passes, "timed passes per measurement")->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);

  const auto t_load = std::chrono::steady_clock::now();
  std::optional<ds::tok::Tokenizer> tok(ds::tok::Tokenizer::load(path));
  std::printf("tokenizer: %s (vocab %d, loaded in %.2f s)\n", path.c_str(), tok->vocab_size(),
              seconds_since(t_load));
  std::printf("corpus size: %.2f MB each, %d timed passes, 1 thread\n\n", mb, passes);
  std::printf("MB/s per wall second / per CPU second of the thread\n");
  std::printf("%-8s %16s %16s %16s %12s\n", "corpus", "encode cold", "encode warm", "decode",
              "bytes/token");

  const auto bytes = static_cast<std::size_t>(mb * 1e6);
  struct Corpus {
    const char* name;
    std::string text;
  };
  const Corpus corpora[] = {{"english", ds::tok::bench::english_prose(bytes, 1)},
                            {"code", ds::tok::bench::source_code(bytes, 2)},
                            {"cjk", ds::tok::bench::cjk_text(bytes, 3)}};
  bool first = true;
  for (const Corpus& c : corpora) {
    if (!first) tok.emplace(ds::tok::Tokenizer::load(path));  // an empty cache per corpus
    first = false;
    std::vector<int32_t> ids;
    const Stats cold = time_passes(1, [&] { ids = tok->encode(c.text); });
    const Stats enc = time_passes(passes, [&] { ids = tok->encode(c.text); });
    std::string back;
    const Stats dec = time_passes(passes, [&] { back = tok->decode(ids); });
    if (back != c.text) {
      std::fprintf(stderr, "round trip failed on %s\n", c.name);
      return 1;
    }
    const double n = static_cast<double>(c.text.size()) / 1e6;
    const auto pair = [n](const Stats& st) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%6.1f / %6.1f", n / st.wall, n / st.cpu);
      return std::string(buf);
    };
    std::printf("%-8s %16s %16s %16s %12.2f\n", c.name, pair(cold).c_str(), pair(enc).c_str(),
                pair(dec).c_str(), static_cast<double>(c.text.size()) / static_cast<double>(ids.size()));
  }
  return 0;
}
