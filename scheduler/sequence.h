// Sequence: the scheduler's record of one request: its tokens, how many of them the caches
// hold, and the blocks and state slot it holds while running.
//
// tokens = prompt then generated tokens. num_computed of them have been fed through the model
// (their K/V is in the table's blocks and the state slot has consumed them); the rest are
// pending. A running sequence always has at least one pending token: while decoding, the last
// sampled token; while prefilling, the rest of its prompt. A preempted sequence drops its
// blocks and slot and starts again from num_computed = 0 with every token it has, generated
// ones included, as its prompt to recompute.
//
// Speculative decoding: drafted tokens are never in `tokens` (which holds only what was
// sampled); they live in `draft` until a step verifies them, and only those the verification
// accepts are appended.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kernels/batch_plan.h"
#include "kvcache/block_table.h"
#include "kvcache/host_cache.h"
#include "kvcache/prefix_key.h"
#include "kvcache/state_pool.h"
#include "scheduler/request.h"

namespace ds::scheduler {

enum class SeqState : uint8_t { waiting, running };

// When a sequence ends by itself.
struct FinishCriteria {
  int64_t max_tokens = 16;         // generated tokens
  int64_t max_ctx = 0;             // prompt + generated tokens
  std::vector<int32_t> stop_ids;   // sorted: eos ids (unless ignore_eos) and stop_token_ids

  bool is_stop(int32_t token) const { return std::binary_search(stop_ids.begin(), stop_ids.end(), token); }
  // Why a sequence that now has num_tokens tokens, num_generated of them generated, the last
  // being `token`, is finished (stop tokens win over the length limits); nullopt if it is not.
  std::optional<FinishReason> reason(int32_t token, int64_t num_generated, int64_t num_tokens) const {
    if (is_stop(token)) return FinishReason::stop;
    if (num_generated >= max_tokens) return FinishReason::length;
    if (max_ctx > 0 && num_tokens >= max_ctx) return FinishReason::length;
    return std::nullopt;
  }
  // How many tokens a sequence with these counts may still generate.
  int64_t tokens_left(int64_t num_generated, int64_t num_tokens) const {
    int64_t left = max_tokens - num_generated;
    if (max_ctx > 0) left = std::min(left, max_ctx - num_tokens);
    return left;
  }
};

// A prompt image as the scheduler sees it: its pad tokens and whether the engine holds its
// encoder output (scheduler.h, "Images").
struct SequenceImage {
  int64_t offset = 0;
  int64_t tokens = 0;
  bool ready = false;
  uint64_t planned_step = 0;  // the step whose encoder budget it was counted against
};

// What add() needs to know of a prompt's images: their spans, and the prefix cache's view of
// the prompt (key_tokens: the tokens with each image's pads replaced by ids derived from its
// hash; empty for a text prompt).
struct SequenceImages {
  std::vector<SequenceImage> spans;
  std::vector<int32_t> key_tokens;
};

struct Sequence {
  Sequence(RequestId id_, uint64_t arrival_, std::vector<int32_t> prompt, int32_t block_size,
           FinishCriteria finish_)
      : id(id_), arrival(arrival_), tokens(std::move(prompt)),
        prompt_len(static_cast<int64_t>(tokens.size())), table(block_size), finish(std::move(finish_)) {}

  RequestId id;
  uint64_t arrival;             // submission order
  std::vector<int32_t> tokens;  // prompt, then generated tokens
  int64_t prompt_len;
  int64_t num_computed = 0;     // tokens in the caches (== table.num_tokens())
  kvcache::BlockTable table;
  std::optional<kvcache::SlotHandle> slot;  // held while running
  SeqState state = SeqState::waiting;
  uint64_t admission = 0;       // order of its latest admission; larger = more recent
  uint64_t scheduled_step = 0;  // last step that gave it a chunk
  int32_t num_preemptions = 0;
  FinishCriteria finish;

  // Prefix caching (scheduler.h): the chain keys of tokens' full blocks (computed as needed),
  // the positions still to snapshot (block multiples, ascending), the one the current chunk
  // ends at (0 = none), prompt tokens found cached at the first admission, and steps spent
  // waiting for a running sequence to compute a prefix it shares.
  std::vector<kvcache::PrefixKey> keys;
  std::vector<int64_t> cache_points;
  int64_t snapshot_due = 0;
  // Cache points inside the current chunk: the chunk's snapshot rows (kernels/batch_plan.h;
  // row = point - chunk start - 1) and the staging slots they name, held until its update()
  // has the states saved.
  std::vector<kernels::SnapshotRow> snapshot_rows;
  std::vector<kvcache::SlotHandle> staging_slots;
  int64_t planned_end = 0;  // num_computed after this step's chunk (when it has one)
  int64_t cached_tokens = 0;
  int32_t deferred_steps = 0;

  // The host tier (scheduler.h, "Host tier"): admitted with a hit the host holds part of, the
  // sequence runs no chunk while `loading` (its host blocks and snapshot being copied in under
  // the engine's load_ticket, 0 until issued); the host entries it pins meanwhile, and the
  // tokens of its hit that were on the device.
  bool loading = false;
  uint64_t load_ticket = 0;
  std::vector<kvcache::HostBlockId> host_pins;
  kvcache::HostSlotId host_snapshot_pin = -1;
  int64_t device_hit = 0;

  // Speculative decoding (scheduler.h): tokens drafted to follow `tokens` (set before
  // schedule(), trimmed to what the step holds, cleared when verified); the planned verify
  // chunk's tokens (the pending token, then the draft) and the slots that get the state after
  // each of its rows but the last; the spare state slots held for that (acquired as needed,
  // kept while running, since one of them becomes `slot` whenever a draft is cut short).
  std::vector<int32_t> draft;
  std::vector<int32_t> verify_tokens;
  std::vector<kvcache::SlotId> row_slots;
  std::vector<kvcache::SlotHandle> spare_slots;

  // Images (scheduler.h): spans in prompt order, and the prefix cache's view of the tokens
  // (key_tokens, extended with the generated tokens as cache_tokens() is asked for).
  std::vector<SequenceImage> images;
  std::vector<int32_t> key_tokens;

  // LoRA (scheduler.h, "LoRA adapters"): the request's adapter (0: the base), the slot it pins
  // while running (-1: none), and the root of its prefix-cache chain keys (0 for the base; a
  // hash of the adapter otherwise, so adapters never share cached K/V or states).
  uint64_t lora_id = 0;
  int32_t lora_slot = -1;
  kvcache::PrefixKey key_root = 0;

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int64_t num_generated() const { return num_tokens() - prompt_len; }
  int64_t num_pending() const { return num_tokens() - num_computed; }
  std::span<const int32_t> prompt() const { return {tokens.data(), static_cast<size_t>(prompt_len)}; }
  std::span<const int32_t> generated() const {
    return {tokens.data() + prompt_len, static_cast<size_t>(num_generated())};
  }
  // The tokens as the prefix cache keys and compares them: `tokens`, except that an image's
  // pads read as ids of its content, so prompts that differ only in an image differ there.
  std::span<const int32_t> cache_tokens() {
    if (key_tokens.empty()) return tokens;
    if (key_tokens.size() < tokens.size()) key_tokens.insert(key_tokens.end(), tokens.begin() + static_cast<long>(key_tokens.size()), tokens.end());
    return key_tokens;
  }
  // Extends keys to every full block of tokens.
  void update_keys(int32_t block_size) {
    const std::span<const int32_t> t = cache_tokens();
    const size_t n = t.size() / static_cast<size_t>(block_size);
    kvcache::PrefixKey k = keys.empty() ? key_root : keys.back();
    for (size_t i = keys.size(); i < n; ++i) {
      k = kvcache::chain_key(k, t.subspan(i * static_cast<size_t>(block_size), static_cast<size_t>(block_size)));
      keys.push_back(k);
    }
  }
};

}  // namespace ds::scheduler
