#include "server/media_fetch.h"

#include <httplib.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <fstream>

#include "server/api_error.h"
#include "server/base64.h"

namespace ds::server {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

[[noreturn]] void refuse(const std::string& field, const std::string& what) {
  throw ApiError(400, what, "invalid_request_error", field, "invalid_image_url");
}

std::vector<uint8_t> from_data_url(const std::string& url, const MediaPolicy& p, const std::string& field, const std::string& kind) {
  const size_t comma = url.find(',');
  if (comma == std::string::npos) refuse(field, "the data: URL has no ',' before its data");
  const std::string head = lower(url.substr(5, comma - 5));
  if (head.size() < 7 || head.compare(head.size() - 7, 7, ";base64") != 0)
    refuse(field, "only base64 data: URLs are accepted (data:" + kind + "/<type>;base64,...)");
  const std::string type = head.substr(0, head.size() - 7);
  if (!type.empty() && type.rfind(kind + "/", 0) != 0)
    refuse(field, "the data: URL's media type '" + type + "' is not " + (kind == "image" ? "an image" : "a " + kind) + " type");
  const std::string_view data = std::string_view(url).substr(comma + 1);
  if (static_cast<int64_t>(data.size()) > (p.max_bytes + 2) / 3 * 4 + 4)
    refuse(field, "the " + kind + " is larger than the " + std::to_string(p.max_bytes) + " bytes allowed");
  std::vector<uint8_t> out;
  if (!decode_base64(data, out)) refuse(field, "the data: URL's base64 data is malformed");
  return out;
}

std::vector<uint8_t> from_file(const std::string& url, const MediaPolicy& p, const std::string& field, const std::string& kind) {
  if (p.allowed_local_path.empty())
    refuse(field, "file:// " + kind + " URLs are off; start serve with --allowed-local-media-path DIR to allow files under DIR");
  std::string path = url.substr(7);
  if (path.rfind("localhost/", 0) == 0) path.erase(0, 9);
  if (path.empty() || path[0] != '/') refuse(field, "a file:// URL must name an absolute path");
  std::error_code ec;
  const auto root = std::filesystem::weakly_canonical(p.allowed_local_path, ec);
  const auto real = std::filesystem::weakly_canonical(path, ec);
  if (ec) refuse(field, "the file " + path + " cannot be read");
  const auto rel = real.lexically_relative(root);
  if (rel.empty() || rel.native().rfind("..", 0) == 0)
    refuse(field, "the file " + path + " is outside --allowed-local-media-path");
  if (!std::filesystem::is_regular_file(real, ec)) refuse(field, "the file " + path + " is not a regular file");
  const auto size = std::filesystem::file_size(real, ec);
  if (ec || static_cast<int64_t>(size) > p.max_bytes)
    refuse(field, "the file " + path + " is larger than the " + std::to_string(p.max_bytes) + " bytes allowed");
  std::ifstream in(real, std::ios::binary);
  std::vector<uint8_t> out(static_cast<size_t>(size));
  if (!in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(size)))
    refuse(field, "the file " + path + " cannot be read");
  return out;
}

struct Url {
  std::string scheme, host, path;
  int port = 0;
};

bool parse_url(const std::string& url, Url& u) {
  const size_t sep = url.find("://");
  if (sep == std::string::npos) return false;
  u.scheme = lower(url.substr(0, sep));
  const size_t host_begin = sep + 3;
  const size_t path_begin = url.find_first_of("/?#", host_begin);
  std::string authority = url.substr(host_begin, path_begin == std::string::npos ? std::string::npos : path_begin - host_begin);
  u.path = path_begin == std::string::npos ? "/" : url.substr(path_begin);
  if (const size_t hash = u.path.find('#'); hash != std::string::npos) u.path.erase(hash);
  if (u.path.empty() || u.path[0] != '/') u.path = "/" + u.path;
  if (authority.find('@') != std::string::npos || authority.empty() || authority[0] == '[') return false;
  u.port = u.scheme == "https" ? 443 : 80;
  if (const size_t colon = authority.rfind(':'); colon != std::string::npos) {
    const std::string port = authority.substr(colon + 1);
    if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), ::isdigit)) return false;
    u.port = std::stoi(port);
    authority.erase(colon);
  }
  u.host = lower(authority);
  return !u.host.empty() && (u.scheme == "http" || u.scheme == "https") && u.port > 0 && u.port < 65536;
}

[[noreturn]] void client_left() {
  throw client_closed("the client closed the connection while its media was fetched");
}

std::vector<uint8_t> from_http(const std::string& url, const MediaPolicy& p, const std::string& field, FetchStop* stop,
                               const std::string& kind) {
  Url u;
  if (!parse_url(url, u)) refuse(field, "the " + kind + " URL is not a valid http(s) URL");
  const bool allowed = std::any_of(p.allowed_domains.begin(), p.allowed_domains.end(),
                                   [&](const std::string& d) { return lower(d) == u.host; });
  if (!allowed)
    refuse(field, p.allowed_domains.empty()
                      ? kind + " URLs are not fetched by this server (start serve with --allowed-media-domains HOST,...); "
                        "send the " + kind + " as a data: URL"
                      : "the host " + u.host + " is not in --allowed-media-domains");
  const auto deadline = std::chrono::steady_clock::now() + p.timeout;
  std::string path = u.path;
  for (int hop = 0; hop <= p.max_redirects; ++hop) {
    httplib::Client cli(u.scheme + "://" + u.host + ":" + std::to_string(u.port));
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) refuse(field, "fetching the " + kind + " took longer than " + std::to_string(p.timeout.count()) + " ms");
    cli.set_connection_timeout(left);
    cli.set_read_timeout(left);
    cli.set_write_timeout(left);
    cli.set_follow_location(false);
    std::vector<uint8_t> body;
    bool too_big = false, too_slow = false;
    // A slow host holds the request's thread until the deadline; a client that leaves shuts
    // the connection (httplib's stop() is the thread-safe way to abort a request under way).
    struct Disarm {
      FetchStop* stop;
      ~Disarm() {
        if (stop) stop->clear();
      }
    } disarm{stop};
    if (stop && !stop->arm([&cli] { cli.stop(); })) client_left();
    auto res = cli.Get(path, [&](const char* data, size_t n) {
      if (static_cast<int64_t>(body.size() + n) > p.max_bytes) return !(too_big = true);
      if (std::chrono::steady_clock::now() > deadline) return !(too_slow = true);
      body.insert(body.end(), data, data + n);
      return true;
    });
    if (stop && stop->stopped()) client_left();
    if (too_big) refuse(field, "the " + kind + " at " + url + " is larger than the " + std::to_string(p.max_bytes) + " bytes allowed");
    if (too_slow) refuse(field, "fetching the " + kind + " took longer than " + std::to_string(p.timeout.count()) + " ms");
    if (!res) refuse(field, "the " + kind + " at " + url + " could not be fetched (" + httplib::to_string(res.error()) + ")");
    if (res->status >= 300 && res->status < 400 && res->has_header("Location")) {
      const std::string loc = res->get_header_value("Location");
      Url next;
      if (!loc.empty() && loc[0] == '/') {
        path = loc;
        continue;
      }
      if (!parse_url(loc, next) || next.scheme != u.scheme || next.host != u.host || next.port != u.port)
        refuse(field, "the " + kind + " URL redirects to another host, which is not followed");
      path = next.path;
      continue;
    }
    if (res->status != 200) refuse(field, "the " + kind + " URL answered HTTP " + std::to_string(res->status));
    return body;
  }
  refuse(field, "the " + kind + " URL redirects more than " + std::to_string(p.max_redirects) + " times");
}

}  // namespace

void FetchStop::stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = true;
  if (shut_) shut_();
}

bool FetchStop::stopped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stopped_;
}

bool FetchStop::arm(std::function<void()> shut) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) return false;
  shut_ = std::move(shut);
  return true;
}

void FetchStop::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  shut_ = nullptr;
}

std::vector<uint8_t> fetch_media(const std::string& url, const MediaPolicy& policy, const std::string& field,
                                 FetchStop* stop, const std::string& kind) {
  const std::string scheme = lower(url.substr(0, std::min<size_t>(url.size(), 8)));
  if (scheme.rfind("data:", 0) == 0) return from_data_url(url, policy, field, kind);
  if (scheme.rfind("file://", 0) == 0) return from_file(url, policy, field, kind);
  if (scheme.rfind("http://", 0) == 0 || scheme.rfind("https://", 0) == 0) return from_http(url, policy, field, stop, kind);
  refuse(field, kind + " URLs must be data:, http(s):// or file:// URLs");
}

}  // namespace ds::server
