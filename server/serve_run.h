// run_server: serve's life once its flags are parsed. Logging, the option checks that need no
// model, the listener up before the model (so /health answers 503 while it loads, and
// orchestrators can tell "loading" from "down"), the model loaded (model_loader.h), then
// serving until a signal. SIGINT/SIGTERM: stop admitting (503), let in-flight requests finish
// for up to 30 s, cancel the rest, close the listener, exit 0; a second signal cancels
// in-flight requests at once. A signal while the model is still loading exits 0 straight
// away (nothing is in flight). Signals reach one thread through a self-pipe: OpenBLAS starts
// its threads before main, so a signal may land on any of them.
//
// serve runs it with the product's engine; programs/serve_bench passes a composer that hands
// the engine benchmark-only parts (model_loader.h, EngineComposer).
#pragma once

#include "server/model_loader.h"
#include "server/server_options.h"

namespace ds::server {

// The process's exit status: 0 after a graceful stop, 1 when the listener or the model could
// not start, 2 for options that cannot work.
int run_server(const ServerOptions& o, const char* argv0, const EngineComposer& compose = {});

}  // namespace ds::server
