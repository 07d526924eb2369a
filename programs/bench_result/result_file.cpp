#include "programs/bench_result/result_file.h"

#include <ctime>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "server/build_info.h"

namespace ds::bench {

namespace {

using Json = nlohmann::ordered_json;

Json to_json(const ResultValue& v) {
  return std::visit([](const auto& x) { return Json(x); }, v.get());
}

void put(Json& j, const std::string& key, const ResultValue& v) { j[key] = to_json(v); }

}  // namespace

ResultFile::ResultFile(std::string program, int argc, char** argv) : program_(std::move(program)) {
  for (int i = 0; i < argc; ++i) {
    if (i) command_ += ' ';
    command_ += i == 0 ? program_ : std::string(argv[i]);
  }
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  date_ = buf;
}

void ResultFile::set(const std::string& key, ResultValue value) {
  for (auto& [k, v] : facts_)
    if (k == key) {
      v = std::move(value);
      return;
    }
  facts_.emplace_back(key, std::move(value));
}

void ResultFile::add(const std::string& metric, double value, const std::string& unit, ResultRow more) {
  ResultRow row{{"metric", metric}, {"value", value}, {"unit", unit}};
  for (auto& kv : more) row.push_back(std::move(kv));
  rows_.push_back(std::move(row));
}

std::string ResultFile::text() const {
  Json j = {{"program", program_}, {"command", command_}, {"date", date_}, {"version", build_version()},
            {"commit", build_commit()}};
  for (const auto& [k, v] : facts_) put(j, k, v);
  Json rows = Json::array();
  for (const ResultRow& r : rows_) {
    Json row = Json::object();
    for (const auto& [k, v] : r) put(row, k, v);
    rows.push_back(std::move(row));
  }
  j["results"] = std::move(rows);
  return j.dump(1, ' ', false, Json::error_handler_t::replace) + "\n";
}

void ResultFile::write(const std::string& path) const {
  if (path.empty()) return;
  std::ofstream f(path);
  f << text();
  if (!f) throw std::runtime_error("cannot write the result file " + path);
}

}  // namespace ds::bench
