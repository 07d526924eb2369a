#include "server/logging.h"

#include <ctime>
#include <memory>
#include <stdexcept>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "server/json.h"

namespace ds::server {

namespace {

class JsonLineFormatter final : public spdlog::formatter {
 public:
  explicit JsonLineFormatter(std::string instance = {}) : instance_(std::move(instance)) {}
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    using namespace std::chrono;
    const auto t = msg.time;
    const std::time_t secs = system_clock::to_time_t(t);
    const auto ms = duration_cast<milliseconds>(t.time_since_epoch()).count() % 1000;
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[40];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    char stamp[48];
    std::snprintf(stamp, sizeof stamp, "%s.%03lldZ", buf, static_cast<long long>(ms));
    const auto level = spdlog::level::to_string_view(msg.level);
    Json j = {{"time", stamp},
              {"level", std::string(level.data(), level.size())},
              {"message", std::string(msg.payload.data(), msg.payload.size())}};
    if (!instance_.empty()) j["instance"] = instance_;
    const std::string line = dump_json(j) + "\n";
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<JsonLineFormatter>(instance_); }

 private:
  std::string instance_;
};

std::string g_format = "text";

}  // namespace

void setup_logging(const std::string& level, const std::string& format) {
  const auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off")
    throw std::invalid_argument("--log-level must be trace, debug, info, warn, error, critical or off (got '" +
                                level + "')");
  auto logger = spdlog::stderr_color_mt("serve");
  if (format == "json") {
    logger->set_formatter(std::make_unique<JsonLineFormatter>());
  } else if (format == "text") {
    logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] %v");
  } else {
    throw std::invalid_argument("--log-format must be text or json (got '" + format + "')");
  }
  g_format = format;
  logger->set_level(lvl);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

void set_log_instance(const std::string& instance_id) {
  auto logger = spdlog::default_logger();
  if (g_format == "json")
    logger->set_formatter(std::make_unique<JsonLineFormatter>(instance_id));
  else {
    std::string id;  // a '%' would start a pattern flag
    for (char c : instance_id) id += c == '%' ? std::string("%%") : std::string(1, c);
    logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] [" + id + "] %v");
  }
}

}  // namespace ds::server
