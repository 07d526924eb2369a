// GET /v1/models, POST /tokenize, POST /detokenize (vLLM's shapes).
#include "server/api_error.h"
#include "server/chat_request.h"
#include "server/client_watch.h"
#include "server/request_params.h"
#include "server/routes.h"

namespace ds::server {

namespace {

Json model_card(const ServedModel& m) {
  return Json{{"id", m.name},
              {"object", "model"},
              {"created", m.created},
              {"owned_by", "deltaserve"},
              {"root", m.name},  // never the server's path to the weights
              {"parent", nullptr},
              {"max_model_len", m.engine->max_ctx()}};
}

// A LoRA adapter's card: vLLM's, with the base as its parent (and not its path as the root).
Json adapter_card(const ServedModel& m, const LoraRegistry::Info& a) {
  Json card = model_card(m);
  card["id"] = a.name;
  card["root"] = a.name;
  card["parent"] = m.name;
  return card;
}

}  // namespace

Json parse_json_body(const HttpRequest& req) {
  if (json_too_deep(req.body))
    throw bad_request("the request body nests arrays or objects deeper than " + std::to_string(kMaxJsonDepth) +
                      " levels");
  Json body = Json::parse(req.body, nullptr, false);
  if (body.is_discarded()) throw bad_request("the request body is not valid JSON");
  if (!body.is_object()) throw bad_request("the request body must be a JSON object");
  return body;
}

LoraChoice check_model(const Json& body, const ServedModel& model) {
  auto name = get_string(body, "model");
  if (!name || *name == model.name) return {};
  if (model.loras) {
    std::optional<LoraChoice> c;
    try {
      c = model.loras->find(*name);
    } catch (const std::exception& e) {
      throw internal_error("the LoRA adapter '" + *name + "' could not be read again: " + e.what());
    }
    if (c) return *c;
  }
  throw model_not_found(*name);
}

void send_json(HttpResponse& res, int status, const Json& body) {
  res.status = status;
  res.content_type = "application/json";
  res.body = dump_json(body);
}

void handle_models(const RouteContext& ctx, const HttpRequest&, HttpResponse& res) {
  Json data = Json::array({model_card(ctx.model)});
  if (ctx.model.loras)
    for (const LoraRegistry::Info& a : ctx.model.loras->list()) data.push_back(adapter_card(ctx.model, a));
  send_json(res, 200, Json{{"object", "list"}, {"data", std::move(data)}});
}

void handle_model(const RouteContext& ctx, const HttpRequest& req, HttpResponse& res) {
  const std::string id = req.path.substr(std::string_view("/v1/models/").size());
  if (id == ctx.model.name) return send_json(res, 200, model_card(ctx.model));
  if (ctx.model.loras)
    for (const LoraRegistry::Info& a : ctx.model.loras->list())
      if (a.name == id) return send_json(res, 200, adapter_card(ctx.model, a));
  throw model_not_found(id);
}

void handle_tokenize(const RouteContext& ctx, const HttpRequest& req, HttpResponse& res) {
  const Json body = parse_json_body(req);
  check_model(body, ctx.model);
  std::vector<int32_t> ids;
  if (body.contains("messages")) {
    const ClientWatch client(ctx);
    ids = build_chat_prompt(body, ctx.model, client.fetch_stop()).ids;
  } else if (auto prompt = get_string(body, "prompt")) {
    ids = ctx.model.tokenizer->encode(*prompt, /*allow_special=*/true);
  } else {
    throw bad_request("give 'prompt' (a string) or 'messages'", "prompt");
  }
  Json out = {{"count", ids.size()}, {"max_model_len", ctx.model.engine->max_ctx()}, {"tokens", ids}};
  if (get_bool(body, "return_token_strs").value_or(false)) {
    Json strs = Json::array();
    for (int32_t id : ids) strs.push_back(std::string(ctx.model.tokenizer->token_text(id)));
    out["token_strs"] = std::move(strs);
  }
  send_json(res, 200, out);
}

void handle_detokenize(const RouteContext& ctx, const HttpRequest& req, HttpResponse& res) {
  const Json body = parse_json_body(req);
  check_model(body, ctx.model);
  if (!body.contains("tokens") || !body["tokens"].is_array())
    throw bad_request("'tokens' must be a list of token ids", "tokens");
  const int64_t vocab = ctx.model.engine->vocab_size();
  std::vector<int32_t> ids;
  for (const auto& v : body["tokens"]) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= vocab)
      throw bad_request("'tokens' must hold token ids in [0, " + std::to_string(vocab) + ")", "tokens");
    ids.push_back(v.get<int32_t>());
  }
  const bool skip = get_bool(body, "skip_special_tokens").value_or(false);
  send_json(res, 200, Json{{"prompt", ctx.model.tokenizer->decode(ids, skip)}});
}

}  // namespace ds::server
