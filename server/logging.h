// Start-up of spdlog for serve: text lines ("[time] [level] message") or, with
// --log-format json, one JSON object per line {"time", "level", "message"} for log
// collectors. Everything goes to stderr.
#pragma once

#include <string>

namespace ds::server {

// Throws std::invalid_argument for an unknown level or format.
void setup_logging(const std::string& level, const std::string& format);
// Names this server in every later line (text: "[id]" after the level; json: "instance"), so
// the logs of several replicas can be merged.
void set_log_instance(const std::string& instance_id);

}  // namespace ds::server
