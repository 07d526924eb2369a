// bench_tokenizer: single-thread encode and decode throughput of a tokenizer.json on
// synthetic English prose, source code and CJK text (bench_text.h).
//
//   bench_tokenizer [--tokenizer PATH] [--mb N] [--passes N]
//
// For each corpus: one untimed pass (fills the BPE cache, as a running server's would be),
// then `passes` timed passes of encode over the whole corpus; MB/s uses the best pass and the
// median is printed beside it. Decode is timed the same way on the ids. MB = 10^6 bytes of
// input text.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "model/tokenizer/bench_text.h"
#include "model/tokenizer/tokenizer.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Stats {
  double best, median;
};

template <class F>
Stats time_passes(int passes, F&& f) {
  std::vector<double> t;
  for (int i = 0; i < passes; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(seconds_since(t0));
  }
  std::sort(t.begin(), t.end());
  return {t.front(), t[t.size() / 2]};
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
  const ds::tok::Tokenizer tok = ds::tok::Tokenizer::load(path);
  std::printf("tokenizer: %s (vocab %d, loaded in %.2f s)\n", path.c_str(), tok.vocab_size(),
              seconds_since(t_load));
  std::printf("corpus size: %.2f MB each, %d timed passes, 1 thread\n\n", mb, passes);
  std::printf("%-8s %12s %12s %12s %14s %12s\n", "corpus", "encode MB/s", "(median)",
              "bytes/token", "decode MB/s", "(median)");

  const auto bytes = static_cast<std::size_t>(mb * 1e6);
  struct Corpus {
    const char* name;
    std::string text;
  };
  const Corpus corpora[] = {{"english", ds::tok::bench::english_prose(bytes, 1)},
                            {"code", ds::tok::bench::source_code(bytes, 2)},
                            {"cjk", ds::tok::bench::cjk_text(bytes, 3)}};
  for (const Corpus& c : corpora) {
    std::vector<int32_t> ids = tok.encode(c.text);  // untimed: warms the cache
    const Stats enc = time_passes(passes, [&] { ids = tok.encode(c.text); });
    std::string back;
    const Stats dec = time_passes(passes, [&] { back = tok.decode(ids); });
    if (back != c.text) {
      std::fprintf(stderr, "round trip failed on %s\n", c.name);
      return 1;
    }
    const double n = static_cast<double>(c.text.size()) / 1e6;
    std::printf("%-8s %12.2f %12.2f %12.2f %14.1f %12.1f\n", c.name, n / enc.best,
                n / enc.median, static_cast<double>(c.text.size()) / static_cast<double>(ids.size()),
                n / dec.best, n / dec.median);
  }
  return 0;
}
