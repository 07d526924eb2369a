// Fetching an image or video a request names by URL, under the server's media policy (vLLM's flags):
//  * data: URLs (data:image/<type>;base64,<data>) always;
//  * http(s):// only for hosts listed in --allowed-media-domains (none by default: the server
//    fetches nothing a client points it at unless told to), with a byte limit and a deadline,
//    following a redirect only to the same scheme, host and port;
//  * file:// only under --allowed-local-media-path (none by default), resolved through
//    symlinks before the check.
// Every refusal is an ApiError 400 that names the field and says what is wrong. A fetch whose
// client left is ended at once through its FetchStop (an ApiError 499), not at its deadline.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace ds::server {

struct MediaPolicy {
  std::vector<std::string> allowed_domains;  // host names, compared case-insensitively
  std::filesystem::path allowed_local_path;   // empty: file:// refused
  int64_t max_bytes = int64_t{32} << 20;
  std::chrono::milliseconds timeout{10000};   // the whole fetch, redirects included
  int max_redirects = 3;
};

// Ends a request's fetches from another thread (the disconnect watcher's, when the client
// leaves): the connection under way is shut, and a fetch started later fails at once.
class FetchStop {
 public:
  void stop();
  bool stopped() const;
  // While a connection is open: how to shut it. Returns false (and installs nothing) once
  // stopped. clear() before the connection goes away.
  bool arm(std::function<void()> shut);
  void clear();

 private:
  mutable std::mutex mu_;
  bool stopped_ = false;
  std::function<void()> shut_;
};

// The bytes `url` names. field: the request field, for error messages; stop: null, or the
// request's (its client may leave while the fetch waits on a slow host); kind: "image" or
// "video", what the messages call it and the media type a data: URL must name (data:video/...
// for a video; the bytes are sniffed by the decoder whatever it says).
std::vector<uint8_t> fetch_media(const std::string& url, const MediaPolicy& policy, const std::string& field,
                                 FetchStop* stop = nullptr, const std::string& kind = "image");

}  // namespace ds::server
