// ResultFile (programs/bench_result/result_file.h): the keys and types of a benchmark program's
// result file, which bench/report.py and the study runner read.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "programs/bench_result/result_file.h"
#include "server/build_info.h"
#include "tests/test_paths.h"

using ds::bench::ResultFile;
using Json = nlohmann::json;

TEST_CASE("a result file names the program, its command, the date and the build, then one row per measurement",
          "[bench_result]") {
  char a0[] = "build/bench_x", a1[] = "--batches", a2[] = "1,8";
  char* argv[] = {a0, a1, a2};
  ResultFile r("bench_x", 3, argv);
  r.set("gpu", "NVIDIA H200");  // a string literal stays a string (not a bool)
  r.set("copy_gb_per_s", 4143.5);
  r.set("sm_count", 132);
  r.set("sm_count", 133);  // set twice: the last value
  r.add("decode b8 ctx1024", 1424.0, "tok/s", {{"floor", "bytes"}, {"of_floor", 0.72}, {"batch", 8}, {"graphs", true}});
  r.add("prefill 1 x 4096", 38335.0, "tok/s");

  const Json j = Json::parse(r.text());
  CHECK(j["program"] == "bench_x");
  CHECK(j["command"] == "bench_x --batches 1,8");  // the program's name, not the path it ran from
  CHECK(std::regex_match(j["date"].get<std::string>(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")));
  CHECK(j["version"] == ds::build_version());
  CHECK(j["commit"] == ds::build_commit());
  CHECK(j["gpu"] == "NVIDIA H200");
  CHECK(j["copy_gb_per_s"] == 4143.5);
  CHECK(j["sm_count"] == 133);
  REQUIRE(j["results"].size() == 2);
  const Json& row = j["results"][0];
  CHECK(row["metric"] == "decode b8 ctx1024");
  CHECK(row["value"] == 1424.0);
  CHECK(row["unit"] == "tok/s");
  CHECK(row["floor"] == "bytes");
  CHECK(row["of_floor"] == 0.72);
  CHECK(row["batch"].is_number_integer());
  CHECK(row["graphs"] == true);
  CHECK(j["results"][1].size() == 3);
  // metric, value, unit lead each row, as the file's readers print them.
  CHECK(r.text().find(R"("metric": "decode b8 ctx1024",)") < r.text().find(R"("value": 1424.0)"));
}

TEST_CASE("a result file is written where --json says, nowhere without it, and a bad path is an error",
          "[bench_result]") {
  char a0[] = "bench_x";
  char* argv[] = {a0};
  ResultFile r("bench_x", 1, argv);
  r.add("m", 1.5, "ms");
  const std::string path = ds::test::temp_path("ds_result_file_" + std::to_string(::getpid()) + ".json");
  r.write(path);
  std::ifstream in(path);
  const Json j = Json::parse(in);
  CHECK(j["results"][0]["value"] == 1.5);
  std::filesystem::remove(path);
  CHECK_NOTHROW(r.write(""));
  CHECK_THROWS_AS(r.write(ds::test::temp_path("no-such-dir-" + std::to_string(::getpid()) + "/r.json")),
                  std::runtime_error);
}
