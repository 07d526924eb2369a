#include "programs/bench_serve/bench_options.h"

#include <cmath>

#include <CLI/CLI.hpp>

#include "programs/bench_serve/random_image.h"

namespace ds::bench {

void add_bench_options(CLI::App& app, BenchOptions& o) {
  app.add_option("--base-url", o.base_url, "Server root, without /v1 (http://HOST:PORT[/PREFIX])")
      ->capture_default_str();
  app.add_option("--endpoint", o.endpoint, "/v1/completions or /v1/chat/completions")->capture_default_str();
  app.add_option("--model", o.model, "The \"model\" of every request (default: the first of /v1/models)");
  app.add_option("--lora-modules", o.lora_modules,
                 "LoRA adapter names the requests rotate through as their \"model\" (a mix over adapters)");
  app.add_option("--api-key", o.api_key, "Send 'Authorization: Bearer KEY'")->envname("OPENAI_API_KEY");

  app.add_option("--dataset", o.dataset, "random, shared-prefix, multi-turn, agent or file")->capture_default_str();
  app.add_option("--num-prompts", o.num_prompts,
                 "Requests to send (multi-turn: conversations; file: default every line once)")
      ->capture_default_str();
  app.add_option("--random-input-len", o.random_input_len,
                 "Prompt tokens (random); user-message tokens (multi-turn)")
      ->capture_default_str();
  app.add_option("--random-output-len", o.random_output_len, "max_tokens of each request (not file)")
      ->capture_default_str();
  app.add_option("--random-range-ratio", o.random_range_ratio,
                 "Input and output lengths drawn uniformly from [len * (1 - r), len * (1 + r)]")
      ->capture_default_str();
  app.add_option("--random-vocab-size", o.random_vocab_size,
                 "Completions prompts as random token ids below this (exact lengths); 0: random words, "
                 "about one token each (counts then come from the server's usage)")
      ->capture_default_str();
  app.add_option("--shared-prefix-groups", o.shared_prefix_groups, "shared-prefix: groups of requests")
      ->capture_default_str();
  app.add_option("--shared-prefix-len", o.shared_prefix_len, "shared-prefix: tokens shared within a group")
      ->capture_default_str();
  app.add_option("--shared-suffix-len", o.shared_suffix_len, "shared-prefix: unique tokens per request")
      ->capture_default_str();
  app.add_option("--turns", o.turns, "multi-turn: turns per conversation")->capture_default_str();
  app.add_option("--system-prompt-len", o.system_prompt_len, "multi-turn: system prompt tokens (0: none)")
      ->capture_default_str();
  app.add_option("--agent-sessions", o.agent_sessions,
                 "agent: conversations, all in flight together, each revisited as its reply comes")
      ->capture_default_str();
  app.add_option("--agent-max-tokens", o.agent_max_tokens,
                 "agent: context tokens a conversation grows to by its last turn (tool outputs, short replies)")
      ->capture_default_str();
  app.add_option("--agent-min-tokens", o.agent_min_tokens,
                 "agent: each conversation grows to a length drawn from [this, --agent-max-tokens] (0: all to the max)")
      ->capture_default_str();
  app.add_option("--dataset-path", o.dataset_path,
                 "file: JSONL, one {\"prompt\": text or ids | \"messages\": [...], \"max_tokens\": N} per line");
  app.add_option("--image-size", o.image_size,
                 "WxH: each request's user message also carries random JPEG images of this size "
                 "(chat endpoint; random and shared-prefix datasets)");
  app.add_option("--images-per-request", o.images_per_request, "Images per request (default 1 with --image-size)")
      ->capture_default_str();
  app.add_option("--video-seconds", o.video_seconds,
                 "S: each request's user message also carries a synthetic H.264 MP4 clip this long (with "
                 "--video-size; chat endpoint; random and shared-prefix datasets; 8 distinct clips in turn)");
  app.add_option("--video-size", o.video_size, "WxH of the --video-seconds clip (even sides)");
  app.add_option("--video-fps", o.video_fps, "Frame rate of the --video-seconds clip")->capture_default_str();
  app.add_flag("--ignore-eos", o.ignore_eos, "Send ignore_eos: every reply runs to max_tokens");
  app.add_option("--temperature", o.temperature, "Sampling temperature (default: the server's)");
  app.add_option("--extra-body", o.extra_body, "JSON object merged into every request body");
  app.add_option("--structured-fraction", o.structured_fraction,
                 "Fraction of the requests (chosen from --seed) constrained by --structured-body")
      ->capture_default_str();
  app.add_option("--structured-body", o.structured_body,
                 "JSON object merged into the constrained requests (default: a response_format "
                 "json_schema for chat, structured_outputs.json for completions, of a small record)");

  app.add_option("--max-concurrency", o.max_concurrency, "Requests in flight at most (0: no limit)")
      ->capture_default_str();
  app.add_option("--request-rate", o.request_rate, "Poisson arrival rate in requests/s (inf: all at once)")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "Seed of the prompts and the arrival times")->capture_default_str();
  app.add_option("--warmup", o.warmup, "Requests sent before the measurement, not counted")->capture_default_str();
  app.add_option("--request-timeout", o.request_timeout, "Seconds a request may wait for the next byte")
      ->capture_default_str();

  app.add_option("--result-json", o.result_json, "Write the results as JSON (vllm bench serve's keys)");
  app.add_option("--label", o.label, "A name stored in the result file");
  app.add_flag("--progress,!--no-progress", o.progress, "Live progress line when stderr is a terminal");
}

bool is_chat_endpoint(const BenchOptions& o) { return o.endpoint == "/v1/chat/completions"; }

std::string validate_options(const BenchOptions& o) {
  if (o.endpoint != "/v1/completions" && o.endpoint != "/v1/chat/completions")
    return "--endpoint must be /v1/completions or /v1/chat/completions (got '" + o.endpoint + "')";
  if (o.dataset != "random" && o.dataset != "shared-prefix" && o.dataset != "multi-turn" && o.dataset != "agent" &&
      o.dataset != "file")
    return "--dataset must be random, shared-prefix, multi-turn, agent or file (got '" + o.dataset + "')";
  if ((o.dataset == "multi-turn" || o.dataset == "agent") && !is_chat_endpoint(o))
    return "--dataset " + o.dataset + " sends conversations: use --endpoint /v1/chat/completions";
  if (o.agent_sessions < 1) return "--agent-sessions must be at least 1";
  if (o.dataset == "agent" &&
      o.agent_max_tokens < o.system_prompt_len + o.turns * (o.random_output_len + 1))
    return "--agent-max-tokens must hold the system prompt and, each turn, a reply of --random-output-len and a "
           "tool output";
  if (o.agent_min_tokens < 0 || o.agent_min_tokens > o.agent_max_tokens)
    return "--agent-min-tokens must lie between 0 and --agent-max-tokens";
  if (o.dataset == "agent" && o.agent_min_tokens > 0 &&
      o.agent_min_tokens < o.system_prompt_len + o.turns * (o.random_output_len + 1))
    return "--agent-min-tokens must hold the system prompt and, each turn, a reply of --random-output-len and a "
           "tool output";
  if (o.dataset == "file" && o.dataset_path.empty()) return "--dataset file needs --dataset-path";
  if (o.dataset != "file" && !o.dataset_path.empty()) return "--dataset-path is for --dataset file";
  if (o.num_prompts < 1) return "--num-prompts must be at least 1";
  if (o.random_input_len < 1) return "--random-input-len must be at least 1";
  if (o.random_output_len < 1) return "--random-output-len must be at least 1";
  if (!(o.random_range_ratio >= 0 && o.random_range_ratio < 1)) return "--random-range-ratio must be in [0, 1)";
  if (o.random_vocab_size < 0) return "--random-vocab-size must be >= 0";
  if (o.shared_prefix_groups < 1) return "--shared-prefix-groups must be at least 1";
  if (o.shared_prefix_len < 0 || o.shared_suffix_len < 0 || o.shared_prefix_len + o.shared_suffix_len < 1)
    return "--shared-prefix-len and --shared-suffix-len must be >= 0 and not both 0";
  if (o.turns < 1) return "--turns must be at least 1";
  if (o.system_prompt_len < 0) return "--system-prompt-len must be >= 0";
  if (o.images_per_request < 0) return "--images-per-request must be >= 0";
  if (o.images_per_request > 0 && o.image_size.empty()) return "--images-per-request needs --image-size WxH";
  if (!o.image_size.empty()) {
    int w = 0, h = 0;
    if (!parse_image_size(o.image_size, w, h))
      return "--image-size must be WxH, each side 1..16384 (got '" + o.image_size + "')";
    if (!is_chat_endpoint(o)) return "--image-size sends images in chat messages: use --endpoint /v1/chat/completions";
    if (o.dataset != "random" && o.dataset != "shared-prefix")
      return "--image-size works with --dataset random or shared-prefix";
  }
  if (o.video_seconds != 0 || !o.video_size.empty()) {
    int w = 0, h = 0;
    if (!(o.video_seconds > 0 && o.video_seconds <= 3600)) return "--video-seconds must be in (0, 3600] (with --video-size)";
    if (!parse_image_size(o.video_size, w, h) || w % 2 || h % 2 || w < 16 || h < 16)
      return "--video-size must be WxH, each side even, 16..16384 (got '" + o.video_size + "')";
    if (!(o.video_fps > 0 && o.video_fps <= 240)) return "--video-fps must be in (0, 240]";
    if (!is_chat_endpoint(o)) return "--video-seconds sends a clip in chat messages: use --endpoint /v1/chat/completions";
    if (o.dataset != "random" && o.dataset != "shared-prefix")
      return "--video-seconds works with --dataset random or shared-prefix";
  }
  if (o.max_concurrency < 0) return "--max-concurrency must be >= 0";
  if (!(o.request_rate > 0)) return "--request-rate must be positive (inf: all at once)";
  if (o.warmup < 0) return "--warmup must be >= 0";
  if (!(o.request_timeout > 0)) return "--request-timeout must be positive";
  if (o.temperature && !(*o.temperature >= 0)) return "--temperature must be >= 0";
  if (!(o.structured_fraction >= 0 && o.structured_fraction <= 1)) return "--structured-fraction must be in [0, 1]";
  if (!o.structured_body.empty() && o.structured_fraction == 0)
    return "--structured-body needs a --structured-fraction above 0";
  return {};
}

}  // namespace ds::bench
