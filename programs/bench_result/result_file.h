// ResultFile: what a benchmark program measured, as JSON (each program's --json FILE), in the
// one shape every benchmark program shares:
//
//   {"program": "bench_cuda_model", "command": "bench_cuda_model --model ... --batches 1,8",
//    "date": "2026-12-04T10:00:00Z", "version": "0.1.0", "commit": "0a16ec0c1d2e",
//    <facts of the run: "gpu", "copy_gb_per_s", "model", ...>,
//    "results": [{"metric": "decode b8 ctx1024", "value": 1424.0, "unit": "tok/s", <more keys>}, ...]}
//
// "date" is UTC as bench_serve's --result-json writes it; version and commit are the binary's
// (server/build_info.h). One row per measurement, with "metric" (what was measured, as the
// program's table names it), "value" and "unit" first; rows may add keys (a floor, a shape, a
// path). bench/README.md says how studies collect these files and how the report uses them.
//
// Kept free of the JSON library's types, so CUDA sources include it as they are.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace ds::bench {

// A number, a string or a flag (explicit overloads: a string literal must not become a bool).
class ResultValue {
 public:
  ResultValue(bool v) : v_(v) {}
  ResultValue(int v) : v_(static_cast<int64_t>(v)) {}
  ResultValue(long v) : v_(static_cast<int64_t>(v)) {}
  ResultValue(long long v) : v_(static_cast<int64_t>(v)) {}
  ResultValue(unsigned v) : v_(static_cast<int64_t>(v)) {}
  ResultValue(unsigned long v) : v_(static_cast<int64_t>(v)) {}
  ResultValue(double v) : v_(v) {}
  ResultValue(float v) : v_(static_cast<double>(v)) {}
  ResultValue(const char* v) : v_(std::string(v)) {}
  ResultValue(std::string v) : v_(std::move(v)) {}
  const std::variant<bool, int64_t, double, std::string>& get() const { return v_; }

 private:
  std::variant<bool, int64_t, double, std::string> v_;
};

using ResultRow = std::vector<std::pair<std::string, ResultValue>>;

class ResultFile {
 public:
  // The program's name and its command line as run (argv joined with spaces).
  ResultFile(std::string program, int argc, char** argv);

  // A fact of the whole run (the GPU, its measured ceilings, the model...); a key set twice
  // keeps the last value.
  void set(const std::string& key, ResultValue value);
  // One measurement: metric, value and unit, then any other keys of the row.
  void add(const std::string& metric, double value, const std::string& unit, ResultRow more = {});

  // Writes the file (an empty path writes nothing); throws std::runtime_error when it cannot.
  void write(const std::string& path) const;
  // The file's text (what write() writes).
  std::string text() const;

 private:
  std::string program_, command_, date_;
  ResultRow facts_;
  std::vector<ResultRow> rows_;
};

}  // namespace ds::bench
