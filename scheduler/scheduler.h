// Scheduler: the batching policy, with no model and no threads, so it can be tested and
// benchmarked alone. It owns the Sequences and decides, every step, which of them run, with
// which tokens, in which blocks and state slots, and, once the engine (engine.h) has run the
// model on the plan and sampled its rows, what came of it: update() accepts drafts, appends
// the tokens, finishes the sequences that are done and frees what they held.
//
// One step (schedule()), the vLLM V1 shape made for a hybrid model:
//  1. Decodes: every running sequence with one pending token, in admission order, one token
//     each, while the token budget (max_num_batched_tokens) lasts. A decode whose next token
//     needs a new block and finds none free preempts the most recently admitted running
//     sequence (possibly itself) until the block fits.
//  2. Running prefills: sequences admitted earlier whose prompt is not all computed, in
//     admission order, each a chunk of min(pending, budget left) tokens, shrunk to the blocks
//     that are free. One that cannot fit a single token may preempt running sequences
//     admitted after it that have no chunk in this step: without that, sequences holding
//     half their prompts could wait on each other for ever.
//  3. Admissions: waiting sequences in queue order (preempted ones go back to the head),
//     each with a first chunk of min(pending, budget left) tokens, while fewer than
//     max_num_seqs run. A sequence is admitted only when the chunk's blocks and a state slot
//     can both be had: the blocks are reserved, then the slot acquired (which zeroes it), and
//     a failure of either leaves both pools as they were. Under memory pressure a prompt is
//     started only when the blocks for all of it (past its cache hit) are free or evictable
//     beside those the running prefills still need (SGLang's conservative admission): prompts
//     admitted on their first chunk alone later preempt one another, and a hybrid's
//     preempted prefill resumes only from its last state snapshot. Decodes' growth is not
//     reserved (it still preempts, as step 1 says). Admission stops at the first
//     sequence that does not fit (no overtaking), and is skipped in a step that preempted
//     (what was just freed would otherwise be handed straight back to a newcomer).
//
// Prefix caching (with a PrefixCache, kvcache/prefix_cache.h): admission first looks up the
// longest cached prefix of the sequence's tokens that ends at a state snapshot (at most all
// tokens but the last, which must be computed to sample); its blocks are shared into the
// table, the snapshot is copied into the sequence's fresh slot before the step's forward
// (StepPlan::restores) and the sequence starts from there. A sequence snapshots its state at
// its cache points: the block boundaries at or before the positions the request names
// (Request::cache_points: for a chat request the server names its prompt's end, which the next
// turn of the conversation extends, and the end of its system messages, which other requests
// share). A prefill chunk that runs past a point not yet cached leaves the state there in a
// staging slot (a snapshot row of the chunk, kernels/batch_plan.h), taken from the free state
// slots that waiting sequences do not need; without one the chunk is cut to end at the point
// (so its first token would come a step later). Once the chunk has run its blocks are
// recorded and the states copied from the staging slots, or the sequence's own slot when the
// chunk ended at a point, into snapshot slots (take_saves()). Branch points become cache
// points too: where an admitted prompt stops matching cached blocks (beyond its snapshot hit),
// and where it stops matching the prompt of a sequence still prefilling (that one snapshots
// there, if it has not planned past it; a chunk planned in the same step is shortened to end
// there) -- so requests sharing a prefix nobody named (the same long document, few-shot
// examples, the choices of n > 1) hit from the third, or from the second when they arrive
// together. A waiting sequence whose prompt a running one is about to cache at a point beyond
// the current hit waits (admission stops) for up to kMaxDeferredSteps steps, so n > 1 choices
// and requests arriving together share one prefill.
// Finished and preempted sequences leave their full blocks cached; blocks are taken from the
// cache's evictable ones whenever the free list runs short.
//
// Host tier (a PrefixCache with a HostCache, kvcache/host_cache.h): a hit may continue past
// the device's blocks into the host's, or end at a snapshot only the host holds. Its host
// entries are pinned at the lookup; admission then takes fresh blocks for the host blocks and
// the state slot as usual, plans no chunk, and lists the copies in StepPlan::loads, which the
// engine queues (asynchronously on a device: the step's forward runs beside them) and whose
// ticket it keeps in the sequence. The sequence is `loading` -- running, holding its blocks
// and slot, given no chunk -- until the engine sees the ticket done (load_done()); other
// sequences run meanwhile. A loading sequence that is preempted or finished (cancelled) gives
// back its pins at once, records none of the blocks being loaded, and has the engine order
// every later op after its copies (the load fence), so that memory they still write is not
// reused under them.
//
// Speculative decoding: a decoding sequence whose `draft` the engine filled before schedule()
// gets a verify chunk instead of a one-token decode: the pending token and the draft, as many
// drafted tokens as the budget, the free blocks (drafts never preempt nor evict cached
// blocks) and the state slots allow. Its rows after the first each need a state slot for the
// DeltaNet state after the row before (kernels/batch_plan.h row states): the sequence takes
// spare slots from the pool as it needs them and keeps them while it runs, unless sequences
// waiting for admission need the free slots (then it drafts less; an admission short of a
// slot takes back a spare one that the plan does not use). Every row of a verify chunk
// samples. update() judges the draft: row i's sample is the token after the pending one and
// the first i drafted ones, so the draft is accepted as far as the samples reproduce it (the
// first row whose sample differs from its draft gives the last token). With a drafted tokens
// accepted the sequence's computed tokens grow by 1 + a, its state is the one after row a
// (the spare slot holding it is swapped with its slot: nothing is copied or recomputed), and
// the blocks past its computed tokens go back to the pool (the K/V rows
// written for rejected tokens sit beyond num_computed, are never recorded in the prefix
// cache, and are overwritten before anything reads them). Single-token decodes are planned
// before verify chunks (a device backend's decode kernel takes the leading one-row chunks).
//
// Images: a prompt with images (SequenceImages) has them encoded by the engine before the
// first chunk that reaches their pads, each image whole. Encoding counts against a per-step
// encoder budget (SchedulerConfig::max_encoder_tokens, in image tokens): a prefill chunk that
// reaches an image whose encoder output the engine does not hold (SequenceImage::ready) takes
// its tokens from the budget, and one that does not fit is cut before that image (a chunk may
// still end inside an image whose output is held: the engine feeds the rows it covers). The
// engine refuses images larger than the whole budget at submit. The prefix cache keys a
// sequence by cache_tokens(): its pads read as ids of the image's content, so prompts that
// differ only in an image never share blocks past it.
//
// LoRA adapters: a sequence may run with an adapter (add()'s lora_id), which pins one of the
// model's adapter slots (SchedulerConfig::max_loras; lora_residency.h) while it runs; its
// chunks name that slot (SequenceChunk::lora_slot), and a slot that must first receive the
// adapter's weights is listed in StepPlan::lora_loads (the engine copies them in before the
// forward). A waiting sequence whose adapter has no slot to be had (every slot pinned by
// running sequences with other adapters) stops admission like one whose blocks do not fit:
// nothing overtakes it, the running sequences finish and unpin, so it is admitted in turn and
// never starves. Its prefix-cache keys are rooted in its adapter (Sequence::key_root), so
// cached K/V and states are shared only between sequences of one adapter.
//
// A chunk that reaches the last token of its sequence samples (one logits row). Prefix-cache
// admission (the lookup, branch points, staging and snapshots) lives in prefix_admission.cpp.
// Preemption
// is by recompute: blocks and slot are freed, num_computed returns to 0, the generated tokens
// stay, and the sequence re-prefills everything when admitted again. Progress is guaranteed
// as long as one sequence of max_ctx tokens fits the pool (the engine checks): the oldest
// running sequence is only ever preempted by itself, when it is alone.
//
// Not thread-safe: the engine thread owns it.
#pragma once

#include <cstdint>
#include <random>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kernels/batch_plan.h"
#include "kernels/sampler.h"
#include "kvcache/block_pool.h"
#include "kvcache/prefix_cache.h"
#include "kvcache/state_pool.h"
#include "scheduler/lora_residency.h"
#include "scheduler/request.h"
#include "scheduler/sequence.h"

namespace ds::scheduler {

struct SchedulerConfig {
  int32_t max_num_seqs = 256;             // running sequences (each holds a state slot)
  int64_t max_num_batched_tokens = 2048;  // tokens of one step, decodes and prefill chunks
  // Image tokens the vision encoder may encode in one step (see "Images"); 0 = as many as
  // max_num_batched_tokens (vLLM's encoder budget).
  int64_t max_encoder_tokens = 0;
  // LoRA adapter slots in the model (serve --max-loras); 0: no sequence may name an adapter.
  int32_t max_loras = 0;
  int64_t encoder_budget() const { return max_encoder_tokens > 0 ? max_encoder_tokens : max_num_batched_tokens; }
};

// A sequence's chunk of a step: the one struct every layer uses (kernels/batch_plan.h). Its
// sampling rows are its last logit_rows: one for a chunk that reaches its sequence's last
// token, 1 + the drafted tokens for a verify chunk (the pending token, then the draft).
using kernels::SequenceChunk;
inline bool samples(const SequenceChunk& c) { return c.logit_rows > 0; }
inline int32_t num_drafted(const SequenceChunk& c) { return c.logit_rows > 1 ? c.logit_rows - 1 : 0; }

// A DeltaNet state copied from one slot to another (snapshot slots included).
struct StateCopy {
  kvcache::SlotId from = -1;
  kvcache::SlotId to = -1;
};

// The copies that bring a host-tier hit in (the engine queues them after planning).
struct HostLoad {
  Sequence* seq = nullptr;
  std::vector<kvcache::BlockTransfer> blocks;  // host block -> the sequence's fresh device block
  std::vector<kvcache::StateTransfer> states;  // host snapshot -> its state slot
};

struct StepPlan {
  // What the forward runs: decodes first, then verify chunks, then prefill chunks; chunks[i]
  // belongs to sequences[i]. The chunks' spans point into the sequences (tokens, table,
  // slots): they hold until the next schedule() or update().
  std::vector<SequenceChunk> chunks;
  std::vector<Sequence*> sequences;
  std::vector<StateCopy> restores;     // prefix hits: run before the forward
  std::vector<HostLoad> loads;         // host-tier hits admitted in this step (loading)
  std::vector<RequestId> preempted;    // preempted while planning (now waiting again)
  std::vector<Sequence*> admitted;     // admitted in this step (first time or again)
  // LoRA slots to load with an admitted sequence's adapter before the forward.
  struct LoraLoad {
    int32_t slot = -1;
    Sequence* seq = nullptr;
  };
  std::vector<LoraLoad> lora_loads;
  int64_t num_tokens = 0;
  int64_t num_decodes = 0;        // decoding sequences (one pending token each)
  int64_t num_draft_tokens = 0;   // drafted tokens of their verify chunks
  int64_t num_samples = 0;        // sampling chunks
  bool empty() const { return chunks.empty(); }  // (loads may still have been planned)
  // Sampled rows over all chunks (the rows update() reads, in chunk order).
  int64_t num_logit_rows() const {
    int64_t n = 0;
    for (const SequenceChunk& c : chunks) n += c.logit_rows;
    return n;
  }
};

// What a sampling chunk came to (Scheduler::update).
struct SequenceUpdate {
  Sequence* seq = nullptr;   // lives until the next update() (an ended one is the outcome's)
  size_t chunk = 0;          // its index in the plan
  int64_t first_row = 0;     // its first row in `sampled`
  int32_t num_draft = 0;     // drafted tokens it verified
  int32_t accepted = 0;      // how many of them its samples reproduced
  // Tokens appended, sampled[first_row, first_row + num_tokens): the accepted drafts and the
  // next, up to the first that finishes the sequence; 0 when its row had no token.
  int32_t num_tokens = 0;
  // Set when the sequence ended in this step (its blocks and slots are freed): stop or
  // length, or error when its row had no token (the caller says why).
  std::optional<FinishReason> finish;
};

struct StepOutcome {
  std::vector<SequenceUpdate> updates;            // the plan's sampling chunks, in order
  std::vector<std::unique_ptr<Sequence>> ended;   // their sequences that ended, kept for the caller
};

class Scheduler {
 public:
  static constexpr int32_t kMaxDeferredSteps = 64;

  // cache: null = no prefix caching.
  Scheduler(SchedulerConfig config, kvcache::BlockPool& blocks, kvcache::StatePool& slots,
            kvcache::PrefixCache* cache = nullptr);
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;
  ~Scheduler();

  const SchedulerConfig& config() const { return config_; }

  // Queues a new sequence at the tail. tokens = the prompt (not empty); ids must be unique.
  // cache_points: prompt positions worth a state snapshot besides the prompt's end (rounded
  // down to blocks; ignored without a prefix cache).
  // lora_id: the sequence's adapter (0: the base; another needs max_loras > 0).
  Sequence& add(RequestId id, std::vector<int32_t> tokens, FinishCriteria finish,
                std::vector<int64_t> cache_points = {}, SequenceImages images = {}, LoraId lora_id = 0);
  Sequence* find(RequestId id);

  // Plans the next step (see above). The plan stays valid until the next schedule(),
  // update() or finish() on one of its sequences.
  const StepPlan& schedule();

  // The forward over `plan` (this scheduler's latest, or a part of it) succeeded and its
  // sampling rows were sampled: sampled[i] is the i-th row over the plan's chunks in order
  // (a token < 0: that row has none). Completes the chunks (their tokens are now in the
  // caches; a chunk that ends at a cache point records its blocks and asks for a snapshot,
  // take_saves()), judges verify chunks' drafts, appends the sampled tokens, and finishes the
  // sequences that are done (or whose row has no token), freeing their blocks and slots. The
  // outcome stays valid until the next update().
  const StepOutcome& update(const StepPlan& plan, std::span<const kernels::SampledToken> sampled);

  // The state copies update() asked for (sequence slot -> snapshot slot), to run now, before
  // the sequence's next step; a copy that fails must be dropped with drop_snapshot().
  std::vector<StateCopy> take_saves();
  void drop_snapshot(kvcache::SlotId snapshot);
  // The copies take_saves() gave are queued: those snapshots may go to the host tier now.
  void snapshots_saved() {
    if (cache_) cache_->snapshots_saved();
  }

  // Host tier (see above): a loading sequence's copies are done; it runs from the next step.
  void load_done(Sequence& seq);
  // Called with the ticket of a loading sequence that is preempted or finished: the engine
  // orders every later op after that ticket's copies.
  void set_load_fence(std::function<void(uint64_t)> fence) { load_fence_ = std::move(fence); }
  // Running sequences that are loading.
  int32_t num_loading() const;
  // Admissions that hit the host tier, and the tokens whose blocks they loaded from it.
  int64_t host_hits() const { return host_hits_; }
  int64_t host_hit_tokens() const { return host_hit_tokens_; }

  // Frees the sequence's blocks and slot (if running) and forgets it. The Sequence is
  // destroyed: pointers to it (in a plan too) are dead afterwards.
  void finish(Sequence& seq);

  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int64_t num_preemptions() const { return num_preemptions_; }
  // Tokens looked up in the prefix cache at admissions, and found.
  int64_t prefix_queries() const { return prefix_queries_; }
  int64_t prefix_hits() const { return prefix_hits_; }
  const kvcache::PrefixCache* prefix_cache() const { return cache_; }
  const LoraResidency& lora_residency() const { return lora_; }
  // A planned load failed: the slot no longer holds its adapter (loaded again on next use).
  void invalidate_lora_slot(int32_t slot) { lora_.invalidate(slot); }
  bool has_work() const { return !running_.empty() || !waiting_.empty(); }
  const std::vector<Sequence*>& running() const { return running_; }
  const std::deque<Sequence*>& waiting() const { return waiting_; }

  // Checks the bookkeeping against the pools (tests, debug): every running sequence holds a
  // live slot (and live spare slots) and exactly the blocks of its table, waiting ones hold
  // nothing, the pools' used counts match. Throws std::logic_error naming the first inconsistency.
  void check_invariants() const;

 private:
  // Planning (scheduler.cpp).
  void schedule_decodes(int64_t& budget);
  // Extends this step's decodes with their drafts (after every decode has its block).
  void schedule_drafts(int64_t& budget);
  void schedule_running_prefills(int64_t& budget);
  void schedule_admissions(int64_t& budget);
  // Tokens of `want` that fit seq's table plus the free (or evictable) blocks.
  int64_t fitting_tokens(const Sequence& seq, int64_t want) const;
  int32_t available_blocks() const;
  // Blocks the running sequences still need for the rest of their prompts.
  int64_t prompt_blocks_owed() const;
  // Whether the blocks for all of seq's prompt past its table are there beside those owed
  // (always when nothing runs); see "Admissions".
  bool whole_prompt_fits(const Sequence& seq) const;
  // Undoes look_up_prefix for a sequence that is not admitted after all: its hit's blocks,
  // host pins and staged snapshots go back.
  void give_back_lookup(Sequence& seq);
  // Reserves n blocks, evicting cached ones when the free list is short.
  std::optional<kvcache::Reservation> reserve_blocks(int32_t n);
  // Reserves and commits the blocks for n more tokens (they must fit).
  void grow_table(Sequence& seq, int64_t n);
  void add_chunk(Sequence& seq, int64_t n);
  // Points the plan's chunks at their sequences' tables, slots and snapshot rows (which
  // planning may have moved since each chunk was added).
  void finish_plan();
  // The drafted tokens of seq that this step can verify (budget, free blocks, spare slots);
  // fills its verify_tokens and row_slots.
  int32_t plan_draft(Sequence& seq, int64_t budget, int64_t slots_kept);
  // Gives one spare slot that this step's plan does not use back to the pool; false if none.
  bool reclaim_spare_slot();
  void release_spare_slots(Sequence& seq);
  // Free state slots that sequences waiting for admission may need.
  int64_t slots_kept() const;
  void preempt(Sequence& seq);
  void remove_running(Sequence& seq);
  // Gives seq's blocks back (recording its computed full blocks in the cache) and its slot.
  void release_cache(Sequence& seq);

  // Prefix-cache admission (prefix_admission.cpp). Looks up the head of the queue's longest
  // cached prefix and finds its branch points; false when it should wait for a prefix a
  // running sequence is about to cache (see above).
  bool look_up_prefix(Sequence& seq, kvcache::PrefixHit& hit, int64_t& budget);
  // seq was admitted with `hit`: counts it, restores the snapshot into `slot`, tracks its
  // cache points.
  void admit_prefix(Sequence& seq, const kvcache::PrefixHit& hit, kvcache::SlotId slot);
  // Host tier (host_admission.cpp): pins the hit's host entries (at the lookup); admits seq
  // loading the hit (false, giving everything back, when its blocks or slot cannot be had);
  // gives back the pins; what release_cache does first for a loading sequence.
  void pin_host(Sequence& seq, const kvcache::PrefixHit& hit);
  // Pins the slot of s's adapter (schedule_admissions checked that one can be had), queueing
  // its load in the plan when the slot does not hold it yet.
  void pin_lora(Sequence& s);
  bool admit_from_host(Sequence& seq, const kvcache::PrefixHit& hit);
  void unpin_host(Sequence& seq);
  void abandon_load(Sequence& seq);
  // A chunk of seq from num_computed of at most n tokens: the cache points inside it are
  // staged while slots can be had (see above); the first one that cannot be ends it.
  int64_t cut_at_cache_point(Sequence& seq, int64_t n);
  bool stage_snapshot(Sequence& seq, int64_t row);
  // Gives back the staging slots of the points at or after `from` (all by default).
  void drop_staged_snapshots(Sequence& seq, int64_t from = 0);
  // The tokens of a chunk of seq from `start` (at most n) that this step's encoder budget
  // allows (see "Images"); images it reaches are counted against the budget.
  int64_t fit_encoder(Sequence& seq, int64_t start, int64_t n);
  // Branch points: where seq's prompt stops sharing cached blocks, or the prompt of a running
  // sequence, beyond its hit; those get a cache point (see above).
  void find_branch_points(Sequence& seq, const kvcache::PrefixHit& hit, int64_t& budget);
  // Ends seq's chunk of this step at `end`; returns the tokens taken off.
  int64_t shorten_chunk(Sequence& seq, int64_t end);
  void add_cache_point(Sequence& seq, int64_t position);
  // Whether a running sequence is about to cache a longer prefix of seq than `hit` tokens.
  bool prefix_in_flight(const Sequence& seq, int64_t hit) const;
  void track_cache_points(const Sequence& seq, int delta);
  // A completed chunk of seq: its prompt's blocks and the states at its cache points are
  // recorded (the copies queued for take_saves()).
  void record_prefix(const SequenceChunk& chunk, Sequence& seq);

  // The step's outcome (step_outcome.cpp): a chunk's tokens are in the caches (a verify
  // chunk's pending token and `accepted` drafts); a sampled token joins the sequence
  // (returns the reason it is now finished: stop tokens win over the length limits,
  // FinishCriteria::reason); retire() frees what seq holds and hands it over.
  void complete(const SequenceChunk& chunk, Sequence& seq);
  void complete_verified(const SequenceChunk& chunk, Sequence& seq, int32_t accepted);
  std::optional<FinishReason> append_token(Sequence& seq, int32_t token);
  std::unique_ptr<Sequence> retire(Sequence& seq);

  SchedulerConfig config_;
  kvcache::BlockPool& blocks_;
  kvcache::StatePool& slots_;
  kvcache::PrefixCache* cache_;
  LoraResidency lora_;
  std::unordered_map<kvcache::PrefixKey, int32_t> in_flight_;  // cache points of running sequences
  std::vector<StateCopy> saves_;
  int64_t prefix_queries_ = 0, prefix_hits_ = 0;
  int64_t host_hits_ = 0, host_hit_tokens_ = 0;
  std::function<void(uint64_t)> load_fence_;
  std::unordered_map<RequestId, std::unique_ptr<Sequence>> seqs_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;  // admission order, oldest first
  StepPlan plan_;
  StepOutcome outcome_;
  uint64_t step_ = 0;
  int64_t encoder_budget_ = 0;  // image tokens this step may still encode
  uint64_t next_arrival_ = 0;
  // Mixed into LoRA chain roots (add()): fresh per scheduler, so roots never match across runs.
  const uint64_t lora_salt_ = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  uint64_t next_admission_ = 0;
  int64_t num_preemptions_ = 0;
};

}  // namespace ds::scheduler
