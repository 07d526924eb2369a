// BenchOptions: the flags of bench_serve, modelled on `vllm bench serve` so that a sweep
// written for one runs with the other (README.md, "Benchmarking a server").
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace ds::bench {

struct BenchOptions {
  // Where and what to ask.
  std::string base_url = "http://127.0.0.1:8080";  // scheme://host[:port][/prefix], no /v1
  std::string endpoint = "/v1/completions";        // or /v1/chat/completions
  std::string model;                               // empty: the first model of /v1/models
  // vllm bench serve's --lora-modules: request i of a session names lora_modules[i % n] as its
  // model (sessions rotate through them), a request mix over n adapters; empty: --model.
  std::vector<std::string> lora_modules;
  std::string api_key;                             // sent as "Authorization: Bearer KEY"

  // What to send.
  std::string dataset = "random";  // random | shared-prefix | multi-turn | agent | file
  int num_prompts = 1000;          // requests (conversations for multi-turn)
  bool num_prompts_given = false;  // file: without it, every line of the file once
  int random_input_len = 1024;
  int random_output_len = 128;
  double random_range_ratio = 0.0;  // lengths uniform in [len * (1 - r), len * (1 + r)]
  // Random prompts of /v1/completions are token ids in [0, random_vocab_size); 0 = random
  // words instead (any tokenizer, lengths then approximate: usage gives the true counts).
  int64_t random_vocab_size = 0;
  int shared_prefix_groups = 4;  // shared-prefix: groups, each with its own prefix
  int shared_prefix_len = 512;   // tokens every request of a group starts with
  int shared_suffix_len = 128;   // unique tokens after it
  int turns = 4;                 // multi-turn: turns per conversation
  int system_prompt_len = 256;   // multi-turn, agent: system prompt words
  // agent: conversations, each growing by tool outputs over --turns turns to about this many
  // tokens of context, all in flight together (so revisited round-robin as their replies come).
  int agent_sessions = 48;
  int agent_max_tokens = 48000;
  int agent_min_tokens = 0;  // 0: every conversation grows to agent_max_tokens
  std::string dataset_path;      // file: JSONL of {prompt | messages, max_tokens}
  // Images (chat; random and shared-prefix): each user message also carries this many
  // random JPEGs of image_size ("WxH"), as data: URLs, new ones for every request.
  std::string image_size;
  int images_per_request = 0;  // 0 with --image-size: 1
  // Video (chat; random and shared-prefix): each user message also carries one synthetic MP4
  // clip (random_video.h) of video_size ("WxH"), video_seconds long at video_fps.
  std::string video_size;
  double video_seconds = 0;
  double video_fps = 30;
  bool ignore_eos = false;
  std::optional<double> temperature;  // sent only when given (else the server's default)
  std::string extra_body;             // a JSON object merged into every request body
  // Structured outputs: this fraction of the requests (chosen from --seed) also carry
  // structured_body, merged in before extra_body; empty: default_structured_body().
  double structured_fraction = 0;
  std::string structured_body;

  // How to send it.
  int max_concurrency = 0;  // requests in flight at most; 0 = no limit
  double request_rate = std::numeric_limits<double>::infinity();  // Poisson arrivals per second
  uint64_t seed = 0;
  int warmup = 0;               // requests sent (and not counted) before the measurement
  double request_timeout = 6 * 3600.0;  // seconds a stream may stay silent

  // What to write.
  std::string result_json;  // also write the results here
  std::string label;        // a free-text name stored in the result file
  bool progress = true;     // a live progress line when stderr is a terminal
};

// Registers every flag on `app`, writing into `o`.
void add_bench_options(CLI::App& app, BenchOptions& o);

// Cross-flag checks after parsing; the message of the first problem, or empty.
std::string validate_options(const BenchOptions& o);

bool is_chat_endpoint(const BenchOptions& o);

}  // namespace ds::bench
