#include "server/http_transport.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <spdlog/spdlog.h>

#include "server/http_wire.h"
#include "server/request_thread_pool.h"

namespace ds::server {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr size_t kReadChunk = 16u << 10;
constexpr size_t kReadBudgetPerEvent = 256u << 10;  // fairness between busy connections
constexpr milliseconds kLinger{2000};               // draining a refused request before closing,
constexpr size_t kLingerBytes = 8u << 20;           // for at most this long and this many bytes
constexpr milliseconds kSweepInterval{100};
constexpr milliseconds kAcceptPause{50};            // out of descriptors: retry accepting after this
constexpr int kBacklog = 4096;                      // the kernel caps it at net.core.somaxconn

enum class Phase { idle, reading, lingering };

struct Connection {
  Connection(int f, const HttpLimits& limits, std::atomic<size_t>& open_count)
      : fd(f), parser(limits), open(open_count) {
    ++open;
  }
  ~Connection() {
    ::close(fd);
    --open;
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  int fd;
  RequestParser parser;
  std::atomic<size_t>& open;
  std::string remote_addr;
  int remote_port = 0;
  Phase phase = Phase::idle;
  Clock::time_point last_active = Clock::now();
  Clock::time_point request_start;  // the current request's first byte
  Clock::time_point head_deadline;
  Clock::time_point body_start;     // its head's end (while the body is read)
  bool head_seen = false;           // its head went through the owner's check
  size_t body_reserved = 0;         // its share of the in-flight body budget
  Clock::time_point linger_deadline;
  std::string out;  // an error reply still being flushed while lingering
  size_t out_off = 0;
  size_t discarded = 0;  // bytes read and dropped while lingering
  bool kept_alive = false;  // back from a reply, waiting for its next request
};
using ConnectionPtr = std::shared_ptr<Connection>;

// Writes all of `data` before `deadline`; false when the peer is gone or does not read.
bool send_all(int fd, std::string_view data, Clock::time_point deadline) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{fd, POLLOUT, 0};
      const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
      if (r < 0 && errno != EINTR) return false;
      if (r > 0 && (p.revents & (POLLERR | POLLHUP | POLLNVAL))) return false;
      continue;
    }
    return false;
  }
  return true;
}

std::string peer_address(const sockaddr_storage& ss, int& port) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
    port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
    port = ntohs(a->sin6_port);
  }
  return buf;
}

}  // namespace

struct HttpTransport::Impl {
  HttpTransportOptions opt;
  Handler handler;
  ErrorRenderer render_error;
  Observer observe;
  RequestThreadPool pool;

  int listen_fd = -1;
  int epoll_fd = -1;
  int wake_fd = -1;
  int bound_port = -1;
  std::thread loop;
  std::atomic<bool> stopping{false};
  std::atomic<bool> stopped{false};
  std::atomic<bool> closing_connections{false};  // close_connections_after_replies()
  std::atomic<size_t> open{0};

  // Owned by the event-loop thread.
  std::unordered_map<int, ConnectionPtr> conns;
  bool accept_paused = false;
  Clock::time_point accept_resume;
  Clock::time_point last_fd_warning;

  // Shared with the handler threads.
  std::mutex mu;
  std::vector<ConnectionPtr> returned;   // served, waiting for the event loop to take them back
  std::unordered_set<int> serving;       // sockets of requests being handled

  HeadCheck head_check;
  // Bytes reserved by bodies being received or handled: added by the event loop, released by
  // whichever thread lets go of the request.
  std::atomic<size_t> inflight_body{0};

  Impl(HttpTransportOptions o, Handler h, ErrorRenderer r, Observer ob, HeadCheck hc)
      : opt(std::move(o)), handler(std::move(h)), render_error(std::move(r)), observe(std::move(ob)),
        pool(opt.max_threads), head_check(std::move(hc)) {}

  void wake() {
    const uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_fd, &one, sizeof one);
  }

  std::string error_reply(int status, const std::string& message, int version_minor) {
    HttpResponse res;
    render_error(status, message, res);
    res.status = status;
    return whole_reply(res, version_minor);
  }
  std::string whole_reply(const HttpResponse& res, int version_minor) {
    std::string out = http_response_head(res, opt.default_headers, version_minor, false, false, res.body.size());
    return out + res.body;
  }

  // ---- event loop -------------------------------------------------------------------------

  void run() {
    std::vector<epoll_event> events(256);
    auto next_sweep = Clock::now() + kSweepInterval;
    while (!stopping.load()) {
      const int n = ::epoll_wait(epoll_fd, events.data(), static_cast<int>(events.size()),
                                 static_cast<int>(kSweepInterval.count()));
      if (n < 0 && errno != EINTR) {
        spdlog::error("http: epoll_wait: {}", std::strerror(errno));
        break;
      }
      for (int i = 0; i < n && !stopping.load(); ++i) {
        const int fd = events[static_cast<size_t>(i)].data.fd;
        const uint32_t ev = events[static_cast<size_t>(i)].events;
        if (fd == wake_fd) {
          uint64_t v;
          [[maybe_unused]] auto r = ::read(wake_fd, &v, sizeof v);
        } else if (fd == listen_fd) {
          accept_all();
        } else if (auto it = conns.find(fd); it != conns.end()) {
          on_event(it->second, ev);
        }
      }
      adopt_returned();
      if (closing_connections.load()) close_idle();
      const auto now = Clock::now();
      if (now >= next_sweep) {
        sweep(now);
        next_sweep = now + kSweepInterval;
      }
      if (accept_paused && now >= accept_resume) {
        epoll_event e{};
        e.events = EPOLLIN;
        e.data.fd = listen_fd;
        ::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, listen_fd, &e);
        accept_paused = false;
      }
    }
    // Stopping: nothing held here is being served, so all of it closes now.
    ::close(listen_fd);
    listen_fd = -1;
    conns.clear();
    std::lock_guard lock(mu);
    returned.clear();
  }

  void watch(const ConnectionPtr& c, uint32_t events, int op) {
    epoll_event e{};
    e.events = events;
    e.data.fd = c->fd;
    ::epoll_ctl(epoll_fd, op, c->fd, &e);
  }

  size_t total_connections() {
    std::lock_guard lock(mu);
    return conns.size() + serving.size() + returned.size();
  }

  void accept_all() {
    for (;;) {
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      const int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          const auto now = Clock::now();
          if (now - last_fd_warning > std::chrono::seconds(10)) {
            spdlog::warn("http: cannot accept connections: {} ({} open); raise the file-descriptor limit "
                         "(ulimit -n) or lower --max-connections",
                         std::strerror(errno), open.load());
            last_fd_warning = now;
          }
          epoll_event e{};
          e.data.fd = listen_fd;
          ::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, listen_fd, &e);
          accept_paused = true;
          accept_resume = now + kAcceptPause;
        }
        return;
      }
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      auto c = std::make_shared<Connection>(fd, opt.limits, open);
      c->remote_addr = peer_address(ss, c->remote_port);
      if (total_connections() >= opt.max_connections && !evict_idle() && !evict_slowest_reader()) {
        const std::string reply = error_reply(503, "the server has too many open connections; retry shortly", 1);
        [[maybe_unused]] auto n = ::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        observe(nullptr, 503);
        continue;  // c closes the socket
      }
      conns.emplace(fd, c);
      watch(c, EPOLLIN | EPOLLRDHUP, EPOLL_CTL_ADD);
    }
  }

  // Closes the connection idle the longest; false when none is idle.
  bool evict_idle() {
    auto victim = conns.end();
    for (auto it = conns.begin(); it != conns.end(); ++it)
      if (it->second->phase == Phase::idle && (victim == conns.end() || it->second->last_active < victim->second->last_active))
        victim = it;
    if (victim == conns.end()) return false;
    conns.erase(victim);
    return true;
  }

  // Closes (with a 408) the connection that has been sending its request for over a second
  // at the lowest rate; false when there is none.
  bool evict_slowest_reader() {
    const auto now = Clock::now();
    ConnectionPtr victim;
    double victim_rate = 0;
    for (auto& [fd, c] : conns) {
      if (c->phase != Phase::reading) continue;
      const double secs = std::chrono::duration<double>(now - c->request_start).count();
      if (secs < 1.0) continue;
      const double rate = static_cast<double>(c->parser.body_received() + c->parser.pending()) / secs;
      if (!victim || rate < victim_rate) {
        victim = c;
        victim_rate = rate;
      }
    }
    if (!victim) return false;
    spdlog::debug("http: {}:{} evicted for a new connection (sending at {:.0f} B/s)", victim->remote_addr,
                  victim->remote_port, victim_rate);
    const std::string reply = error_reply(408, "the request arrived too slowly while the server was at its connection limit", 1);
    [[maybe_unused]] auto n = ::send(victim->fd, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    observe(nullptr, 408);
    close_connection(victim->fd);
    return true;
  }

  void close_connection(int fd) {
    auto it = conns.find(fd);
    if (it == conns.end()) return;
    release_body(*it->second);
    conns.erase(it);
  }

  void release_body(Connection& c) {
    if (c.body_reserved > 0) inflight_body.fetch_sub(c.body_reserved);
    c.body_reserved = 0;
  }

  // After bytes arrived for a request still being read: the owner's look at a new head, and
  // the body's share of the in-flight budget. False when the request was refused.
  bool on_progress(const ConnectionPtr& c) {
    if (!c->parser.reading_body()) return true;
    if (!c->head_seen) {
      c->head_seen = true;
      c->body_start = Clock::now();
      HttpResponse refusal;
      if (head_check && !head_check(c->parser.head(), refusal)) {
        refuse_with(c, refusal, &c->parser.head());
        return false;
      }
    }
    const size_t want = std::max<size_t>(static_cast<size_t>(c->parser.announced_length()), c->parser.body_received());
    if (want > c->body_reserved) {
      if (inflight_body.load() + (want - c->body_reserved) > opt.max_inflight_body_bytes) {
        refuse(c, 503, "the server is receiving too many request bodies at once; retry shortly");
        return false;
      }
      inflight_body += want - c->body_reserved;
      c->body_reserved = want;
    }
    return true;
  }

  void on_event(const ConnectionPtr& c, uint32_t ev) {
    if (c->phase == Phase::lingering) return linger(c, ev);
    char buf[kReadChunk];
    size_t budget = kReadBudgetPerEvent;
    const auto now = Clock::now();
    for (;;) {
      const ssize_t r = ::recv(c->fd, buf, sizeof buf, 0);
      if (r > 0) {
        if (c->phase == Phase::idle) {
          c->phase = Phase::reading;
          c->request_start = now;
          c->head_deadline = now + opt.head_timeout;
        }
        c->last_active = now;
        const auto st = c->parser.feed(std::string_view(buf, static_cast<size_t>(r)));
        if (st == RequestParser::Status::complete) return dispatch(c);
        if (st == RequestParser::Status::error) return refuse(c, c->parser.error_status(), c->parser.error_message());
        if (!on_progress(c)) return;
        if (c->parser.wants_continue()) {
          static constexpr std::string_view k100 = "HTTP/1.1 100 Continue\r\n\r\n";
          [[maybe_unused]] auto n = ::send(c->fd, k100.data(), k100.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
          c->parser.continue_sent();
        }
        if (static_cast<size_t>(r) >= budget) return;  // level-triggered: the rest comes next round
        budget -= static_cast<size_t>(r);
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      return close_connection(c->fd);  // EOF (idle, or a request cut short) or a reset
    }
  }

  // Answers a request the transport refuses, then drains what the client still sends for a
  // moment before closing, so the reply is read rather than lost to a reset.
  void refuse(const ConnectionPtr& c, int status, const std::string& message) {
    spdlog::debug("http: {}:{} refused with {}: {}", c->remote_addr, c->remote_port, status, message);
    HttpResponse res;
    render_error(status, message, res);
    res.status = status;
    refuse_with(c, res, nullptr);
  }
  void refuse_with(const ConnectionPtr& c, const HttpResponse& res, const HttpRequest* req) {
    c->out = whole_reply(res, 1);
    c->out_off = 0;
    c->phase = Phase::lingering;
    c->linger_deadline = Clock::now() + kLinger;
    release_body(*c);
    observe(req, res.status);
    flush(c);
  }

  void flush(const ConnectionPtr& c) {
    while (c->out_off < c->out.size()) {
      const ssize_t n = ::send(c->fd, c->out.data() + c->out_off, c->out.size() - c->out_off, MSG_NOSIGNAL);
      if (n > 0) {
        c->out_off += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        watch(c, EPOLLIN | EPOLLOUT | EPOLLRDHUP, EPOLL_CTL_MOD);
        return;
      }
      return close_connection(c->fd);
    }
    ::shutdown(c->fd, SHUT_WR);
    watch(c, EPOLLIN | EPOLLRDHUP, EPOLL_CTL_MOD);
  }

  void linger(const ConnectionPtr& c, uint32_t ev) {
    if ((ev & EPOLLOUT) && c->out_off < c->out.size()) {
      const int fd = c->fd;
      flush(c);
      if (!conns.count(fd)) return;
    }
    char buf[kReadChunk];
    for (size_t got = 0; got < kReadBudgetPerEvent;) {
      const ssize_t r = ::recv(c->fd, buf, sizeof buf, 0);
      if (r > 0) {
        got += static_cast<size_t>(r);
        c->discarded += static_cast<size_t>(r);
        if (c->discarded > kLingerBytes) return close_connection(c->fd);
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      return close_connection(c->fd);
    }
  }

  void sweep(Clock::time_point now) {
    std::vector<std::pair<ConnectionPtr, int>> expired;  // connection, 0 = close / 408
    for (auto& [fd, c] : conns) {
      switch (c->phase) {
        case Phase::idle:
          if (now - c->last_active > opt.keep_alive_timeout) expired.emplace_back(c, 0);
          break;
        case Phase::reading:
          if (c->parser.reading_body() ? body_too_slow(*c, now) : now > c->head_deadline) expired.emplace_back(c, 408);
          break;
        case Phase::lingering:
          if (now > c->linger_deadline) expired.emplace_back(c, 0);
          break;
      }
    }
    for (auto& [c, status] : expired) {
      if (status == 0) {
        close_connection(c->fd);
      } else {
        refuse(c, status,
               c->parser.reading_body() ? "the request body arrived too slowly" : "the request head took too long to arrive");
      }
    }
  }

  // A body that stalled, is past its deadline, or arrives below the minimum rate.
  bool body_too_slow(const Connection& c, Clock::time_point now) const {
    if (now - c.last_active > opt.read_idle_timeout || now - c.body_start > opt.body_timeout) return true;
    const auto elapsed = now - c.body_start;
    if (elapsed <= opt.body_rate_grace || opt.min_body_rate == 0) return false;
    const double secs = std::chrono::duration<double>(elapsed).count();
    return static_cast<double>(c.parser.body_received()) < static_cast<double>(opt.min_body_rate) * secs;
  }

  // Connections between requests close at once while draining: a load balancer must not send
  // its next request down a connection that stop() is about to close under it. A new one,
  // whose first request is on its way, stays, and so does one whose next request has begun
  // to arrive (it is read, answered and then closed).
  void close_idle() {
    std::vector<int> idle;
    for (auto& [fd, c] : conns) {
      if (c->phase != Phase::idle || !c->kept_alive) continue;
      char b;
      if (::recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) > 0) continue;
      idle.push_back(fd);
    }
    for (int fd : idle) close_connection(fd);
  }

  void adopt_returned() {
    std::vector<ConnectionPtr> back;
    {
      std::lock_guard lock(mu);
      back.swap(returned);
    }
    const auto now = Clock::now();
    for (auto& c : back) {
      c->kept_alive = true;
      c->last_active = now;
      c->phase = c->parser.in_request() ? Phase::reading : Phase::idle;
      c->request_start = now;
      c->head_deadline = now + opt.head_timeout;
      conns.emplace(c->fd, c);
      watch(c, EPOLLIN | EPOLLRDHUP, EPOLL_CTL_ADD);
      on_progress(c);  // a pipelined request's head may have come with the last one
    }
  }

  void dispatch(const ConnectionPtr& c) {
    ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c->fd, nullptr);
    ConnectionPtr held = c;
    c->head_seen = false;
    conns.erase(c->fd);
    {
      std::lock_guard lock(mu);
      serving.insert(held->fd);
    }
    pool.enqueue([this, held] { serve(held); });
  }

  // ---- handler threads --------------------------------------------------------------------

  void serve(const ConnectionPtr& c) {
    bool keep = false;
    for (;;) {
      HttpRequest req = c->parser.take();
      req.remote_addr = c->remote_addr;
      req.remote_port = c->remote_port;
      req.socket = c->fd;
      int status = 0;
      {
        HttpResponse res;
        try {
          handler(req, res);
        } catch (const std::exception& e) {
          res = HttpResponse{};
          render_error(500, std::string("internal error: ") + e.what(), res);
          res.status = 500;
        }
        keep = req.keep_alive && !stopping.load() && !closing_connections.load();
        keep = write_response(c->fd, req, res, keep);
        status = res.status;
      }  // the response (and whatever its stream held) goes before the socket is reused or closed
      observe(&req, status);
      release_body(*c);  // the request and its body are gone
      if (!keep) break;
      const auto st = c->parser.parse();
      if (st == RequestParser::Status::complete) continue;  // a pipelined request, already here
      if (st == RequestParser::Status::error) {
        send_all(c->fd, error_reply(c->parser.error_status(), c->parser.error_message(), 1),
                 Clock::now() + opt.write_timeout);
        observe(nullptr, c->parser.error_status());
        keep = false;
      }
      break;
    }
    std::lock_guard lock(mu);
    serving.erase(c->fd);
    if (keep && !stopping.load()) {
      returned.push_back(c);
      wake();
    }
  }

  // Writes the reply; returns whether the connection can carry another request.
  bool write_response(int fd, const HttpRequest& req, HttpResponse& res, bool keep) {
    const auto deadline = [&] { return Clock::now() + opt.write_timeout; };
    if (!res.stream) {
      std::string out = http_response_head(res, opt.default_headers, req.version_minor, keep, false, res.body.size());
      out += res.body;
      return send_all(fd, out, deadline()) && keep;
    }
    const bool chunked = req.version_minor >= 1;
    if (!chunked) keep = false;  // an HTTP/1.0 body ends with the connection
    if (!send_all(fd, http_response_head(res, opt.default_headers, req.version_minor, keep, chunked, 0), deadline()))
      return false;
    bool alive = true;
    const BodyWriter write = [&](std::string_view piece) {
      if (alive && !piece.empty()) alive = send_all(fd, chunked ? http_chunk(piece) : std::string(piece), deadline());
      return alive;
    };
    res.stream(write);
    if (alive && chunked) alive = send_all(fd, kHttpLastChunk, deadline());
    return alive && keep;
  }
};

HttpTransport::HttpTransport(HttpTransportOptions options, Handler handler, ErrorRenderer render_error,
                             Observer observe, HeadCheck head_check)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler), std::move(render_error),
                                   std::move(observe), std::move(head_check))) {}

HttpTransport::~HttpTransport() { stop(); }

int HttpTransport::bind() {
  auto& i = *impl_;
  const std::string where = i.opt.host + ":" + std::to_string(i.opt.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(i.opt.port);
  if (const int rc = ::getaddrinfo(i.opt.host.empty() ? nullptr : i.opt.host.c_str(), port.c_str(), &hints, &found);
      rc != 0)
    throw std::runtime_error("cannot listen on " + where + ": " + ::gai_strerror(rc));
  std::string why = "no usable address";
  for (addrinfo* a = found; a && i.listen_fd < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    // SO_REUSEADDR only (not SO_REUSEPORT): a second server on the same port must fail.
    const int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, kBacklog) == 0) {
      i.listen_fd = fd;
    } else {
      why = std::strerror(errno);
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  if (i.listen_fd < 0)
    throw std::runtime_error("cannot listen on " + where + " (" + why +
                             "; is the port in use, or the address not on this machine?)");
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(i.listen_fd, reinterpret_cast<sockaddr*>(&ss), &len);
  peer_address(ss, i.bound_port);
  return i.bound_port;
}

void HttpTransport::add_default_header(std::string name, std::string value) {
  impl_->opt.default_headers.emplace_back(std::move(name), std::move(value));
}

void HttpTransport::start() {
  auto& i = *impl_;
  if (i.listen_fd < 0) throw std::logic_error("HttpTransport::start before bind");
  i.epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  i.wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (i.epoll_fd < 0 || i.wake_fd < 0) throw std::runtime_error(std::string("epoll/eventfd: ") + std::strerror(errno));
  for (int fd : {i.listen_fd, i.wake_fd}) {
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.fd = fd;
    ::epoll_ctl(i.epoll_fd, EPOLL_CTL_ADD, fd, &e);
  }
  i.loop = std::thread([&i] { i.run(); });
}

void HttpTransport::stop() {
  if (!impl_) return;
  auto& i = *impl_;
  if (i.stopped.exchange(true)) return;
  i.stopping.store(true);
  if (i.loop.joinable()) {
    i.wake();
    i.loop.join();
  } else if (i.listen_fd >= 0) {
    ::close(i.listen_fd);
    i.listen_fd = -1;
  }
  {
    // Replies still being written end now: their sockets fail every further write.
    std::lock_guard lock(i.mu);
    for (int fd : i.serving) ::shutdown(fd, SHUT_RDWR);
  }
  i.pool.shutdown();
  if (i.epoll_fd >= 0) ::close(i.epoll_fd);
  if (i.wake_fd >= 0) ::close(i.wake_fd);
  i.epoll_fd = i.wake_fd = -1;
}

void HttpTransport::close_connections_after_replies() {
  impl_->closing_connections.store(true);
  impl_->wake();
}

int HttpTransport::port() const { return impl_->bound_port; }

size_t HttpTransport::open_connections() const { return impl_->open.load(); }

}  // namespace ds::server
