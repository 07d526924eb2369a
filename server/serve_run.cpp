// run_server (serve_run.h): serve's life once its flags are parsed.
#include "server/serve_run.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include <spdlog/spdlog.h>

#include "server/http_server.h"
#include "server/logging.h"
#include "server/model_loader.h"

namespace ds::server {
namespace {

int g_signal_pipe[2] = {-1, -1};

void on_signal(int sig) {
  const int saved = errno;
  const unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] auto n = ::write(g_signal_pipe[1], &b, 1);
  errno = saved;
}

constexpr auto kDrain = std::chrono::seconds(30);

struct ShutdownSignal {
  std::mutex mu;
  std::condition_variable cv;
  int count = 0;
  std::atomic<bool> loading{true};
  std::atomic<bool> exiting{false};
};

}  // namespace

int run_server(const ServerOptions& o, const char* argv0, const EngineComposer& compose) {
  try {
    setup_logging(o.log_level, o.log_format);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "serve: %s\n", e.what());
    return 2;
  }
  if (std::string err = validate_options(o); !err.empty()) {
    spdlog::error("{}", err);
    return 2;
  }
  std::string model_dir;
  try {
    model_dir = resolve_model_dir(o, argv0);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 2;
  }

  // Signals land on whichever thread does not block them (OpenBLAS starts its threads before
  // main), so the handler only writes the signal number to a pipe; one thread reads it.
  if (::pipe2(g_signal_pipe, O_CLOEXEC) != 0) {
    spdlog::error("pipe2: {}", std::strerror(errno));
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);  // a client that went away is a failed write, not a crash
  // Every open connection is a descriptor: take the hard limit, not the shell's soft 1024.
  if (rlimit rl{}; ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }

  if (const std::string why = backend_not_built(o); !why.empty()) {
    spdlog::error("{}", why);
    return 1;
  }
  const std::string name = served_name(o, model_dir);
  ServerMetrics metrics(name);
  HttpServerOptions ho;
  ho.api_key = o.api_key;
  ho.served_name = name;
  ho.transport = transport_options(o.limits);
  ho.transport.host = o.host;
  ho.transport.port = o.port;
  // A thread per request that may be served or refused at once (request_thread_pool.h).
  ho.transport.max_threads =
      static_cast<size_t>(std::min<int64_t>(4096, int64_t{o.max_num_seqs} + o.max_queue + 64));
  HttpServer http(ho, metrics);
  int port = 0;
  try {
    port = http.bind();
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
  const std::string instance = o.instance_id.empty() ? o.host + ":" + std::to_string(port) : o.instance_id;
  set_log_instance(instance);
  metrics.set_instance_id(instance);
  http.set_instance_id(instance);
  http.start();
  const std::string url = "http://" + (o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host) + ":" +
                          std::to_string(port);
  spdlog::info("listening on {} (loading the model; /health answers 503 until it is ready)", url);
  if (!o.api_key.empty()) spdlog::info("API key required (Authorization: Bearer ...) except on /health and /metrics");

  ShutdownSignal sd;
  std::thread signal_thread([&] {
    for (;;) {
      unsigned char b = 0;
      const ssize_t r = ::read(g_signal_pipe[0], &b, 1);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0 || sd.exiting.load()) return;
      const int sig = b;
      if (sd.loading.load()) {
        spdlog::warn("signal {} while loading: exiting", sig);
        spdlog::default_logger()->flush();
        std::_Exit(0);
      }
      int n;
      {
        std::lock_guard lock(sd.mu);
        n = ++sd.count;
      }
      sd.cv.notify_all();
      if (n == 1) {
        spdlog::info("signal {}: shutting down; in-flight requests may finish for up to {} s (signal again to "
                     "cancel them)",
                     sig, kDrain.count());
      } else {
        spdlog::warn("signal {} again: cancelling in-flight requests", sig);
        http.cancel_all();
      }
      if (n >= 2) return;
    }
  });

  std::unique_ptr<LoadedModel> lm;
  try {
    const bool bar = o.log_format == "text" && ::isatty(STDERR_FILENO);
    lm = load_model(o, model_dir, bar, &metrics, compose);
  } catch (const std::exception& e) {
    spdlog::error("cannot start: {}", e.what());
    spdlog::default_logger()->flush();
    std::_Exit(1);  // the signal thread is parked in read(); nothing else to clean up
  }
  http.set_model(&lm->served);
  sd.loading.store(false);
  spdlog::info("ready: {}/v1 serving model '{}' (curl {}/v1/models)", url, lm->served.name, url);

  {
    std::unique_lock lock(sd.mu);
    sd.cv.wait(lock, [&] { return sd.count > 0; });
  }
  http.begin_shutdown();
  const auto stats = lm->engine->stats();
  spdlog::info("draining: {} running, {} waiting", stats.running, stats.waiting);
  lm->engine->shutdown(std::chrono::duration_cast<std::chrono::milliseconds>(kDrain));
  // Let handlers write their last bytes before the listener closes under them.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (http.active_requests() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  http.stop();
  spdlog::info("stopped");
  spdlog::default_logger()->flush();
  // Wake the signal thread (if it still waits for a second signal) so it can be joined.
  sd.exiting.store(true);
  const unsigned char wake = 0;
  [[maybe_unused]] auto w = ::write(g_signal_pipe[1], &wake, 1);
  signal_thread.join();
  lm.reset();
  return 0;
}

}  // namespace ds::server
