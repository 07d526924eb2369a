// scripted_serve: the HTTP server over a ScriptedModel (scripted_model.h), with the tiny
// model's tokenizer and chat template, as a process -- for the client tests in other
// languages (tests/npm) that need replies a random-weight model never writes: reasoning and a
// tool call.
//
//   scripted_serve [--api-key KEY] SCRIPT_TEXT
//
// The model writes SCRIPT_TEXT (then eos) after any prompt. Prints "listening on
// http://127.0.0.1:PORT" and "ready:", serves until SIGINT or SIGTERM, then exits 0.
#include <csignal>
#include <cstdio>
#include <string>

#include "tests/server/server_fixture.h"

int main(int argc, char** argv) {
  std::string key, script;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--api-key" && i + 1 < argc)
      key = argv[++i];
    else
      script = a;
  }
  if (script.empty()) {
    std::fprintf(stderr, "usage: scripted_serve [--api-key KEY] SCRIPT_TEXT\n");
    return 2;
  }
  // Blocked before any thread starts, so sigwait below is where they land.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  ds::test::TestServerConfig cfg;
  cfg.scripted = true;
  cfg.script = ds::test::encode(script);
  cfg.api_key = key;
  ds::test::TestServer server(cfg);
  std::printf("listening on http://127.0.0.1:%d\nready: scripted model\n", server.port());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  return 0;
}
