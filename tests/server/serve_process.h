// ServeProcess: runs the real `serve` executable as a child process (output to a log file)
// for the tests of its command line, start-up log and signal handling.
#pragma once

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_paths.h"

extern char** environ;

namespace ds::test {

class ServeProcess {
 public:
  // Starts DS_SERVE_BIN with args; cwd empty = inherit.
  explicit ServeProcess(const std::vector<std::string>& args, const std::string& cwd = {}) {
    static int counter = 0;
    log_path_ = temp_path("ds_serve_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + ".log");
    std::vector<std::string> argv_s = {DS_SERVE_BIN};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
    if (posix_spawn(&pid_, argv_s[0].c_str(), &fa, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  ~ServeProcess() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::remove(log_path_.c_str());
  }

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  std::string log() const {
    std::ifstream in(log_path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // Waits until the log contains `needle` (true) or the process exits / time runs out.
  bool wait_log(const std::string& needle, std::chrono::seconds timeout = std::chrono::seconds(60)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (log().find(needle) != std::string::npos) return true;
      if (poll_exit()) return log().find(needle) != std::string::npos;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  // The port from "listening on http://HOST:PORT".
  int port() {
    if (!wait_log("listening on ")) return -1;
    std::smatch m;
    const std::string l = log();
    static const std::regex re(R"(listening on http://[^ ]*:(\d+))");
    return std::regex_search(l, m, re) ? std::stoi(m[1]) : -1;
  }
  void signal(int sig) { ::kill(pid_, sig); }
  // The exit code (or 128 + signal), or nullopt on timeout.
  std::optional<int> wait_exit(std::chrono::seconds timeout = std::chrono::seconds(60)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (poll_exit()) return code_;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::nullopt;
  }

 private:
  bool poll_exit() {
    if (exited_) return true;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) != pid_) return false;
    exited_ = true;
    code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return true;
  }

  pid_t pid_ = -1;
  std::string log_path_;
  bool exited_ = false;
  int code_ = -1;
};

}  // namespace ds::test
