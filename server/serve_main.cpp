// serve: the OpenAI-compatible server. See README.md "Usage" and `serve --help`; the process's
// life (listener first, loading, signals, drain) is run_server's (serve_run.h).
#include <string>

#include <CLI/CLI.hpp>

#include "server/build_info.h"
#include "server/serve_run.h"
#include "server/server_options.h"

int main(int argc, char** argv) {
  ds::server::ServerOptions o;
  CLI::App app{"serve: OpenAI-compatible HTTP server for Qwen3.5 / Qwen3.6 dense models (deltaserve)"};
  ds::server::add_server_options(app, o);
  app.set_version_flag("--version", std::string("deltaserve ") + ds::build_version() + " (commit " +
                                        ds::build_commit() + ")");
  CLI11_PARSE(app, argc, argv);
  return ds::server::run_server(o, argv[0]);
}
