// ClientWatch: the client of a request, watched while the handler prepares the request's
// work (fetching its images, compiling its grammar), before the generation job watches it.
// When the client leaves, gone() turns true (GrammarCache::get polls it) and the fetch under
// way is shut (FetchStop), so an abandoned request costs no further time, CPU or memory.
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include "server/disconnect_watcher.h"
#include "server/media_fetch.h"
#include "server/routes.h"

namespace ds::server {

class ClientWatch {
 public:
  explicit ClientWatch(const RouteContext& ctx)
      : watcher_(ctx.watcher), gone_(std::make_shared<std::atomic<bool>>(false)), fetch_(std::make_shared<FetchStop>()) {
    token_ = watcher_.watch(ctx.socket, [g = gone_, f = fetch_] {
      g->store(true);
      f->stop();
    });
  }
  ~ClientWatch() { watcher_.unwatch(token_); }
  ClientWatch(const ClientWatch&) = delete;
  ClientWatch& operator=(const ClientWatch&) = delete;

  std::function<bool()> gone() const {
    return [g = gone_] { return g->load(); };
  }
  FetchStop* fetch_stop() const { return fetch_.get(); }

 private:
  DisconnectWatcher& watcher_;
  std::shared_ptr<std::atomic<bool>> gone_;
  std::shared_ptr<FetchStop> fetch_;
  DisconnectWatcher::Token token_ = 0;
};

}  // namespace ds::server
