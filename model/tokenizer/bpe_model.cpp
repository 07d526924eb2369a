#include "model/tokenizer/bpe_model.h"

#include <algorithm>
#include <limits>
#include <atomic>
#include <cstring>
#include <mutex>

#include "model/tokenizer/byte_level.h"
#include "model/tokenizer/tokenizer_error.h"

namespace ds::tok {

// Merge rules keyed by the pair of ids they join: open addressing with linear probing, because
// the merge loop looks pairs up far more often than anything else in the tokenizer.
struct BpeModel::MergeTable {
  static constexpr uint64_t kEmpty = std::numeric_limits<uint64_t>::max();
  struct Slot {
    uint64_t key = kEmpty;
    int32_t rank = 0;
    int32_t new_id = 0;
  };
  std::vector<Slot> slots;
  uint64_t mask = 0;
  // A blocked Bloom filter over the keys (about 14 bits per merge, all bits of a key in one
  // 64-byte line): most pairs a text asks about do not merge, and the filter answers that
  // from a few hundred KiB instead of a probe into the megabytes of slots.
  std::vector<uint64_t> bloom;  // blocks of 8 words
  uint64_t bloom_blocks_mask = 0;

  static uint64_t key_of(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  static uint64_t hash(uint64_t k) { return (k * 0x9E3779B97F4A7C15ULL) >> 17; }

  explicit MergeTable(std::size_t n) {
    std::size_t cap = 16;
    while (cap * 7 < n * 10) cap <<= 1;  // load factor at most 0.7
    slots.resize(cap);
    mask = cap - 1;
    std::size_t blocks = 1;
    while (blocks * 512 < n * 14) blocks <<= 1;
    bloom.assign(blocks * 8, 0);
    bloom_blocks_mask = blocks - 1;
  }
  static uint64_t bloom_hash(uint64_t k) {
    k ^= k >> 31;
    k *= 0xD6E8FEB86659FD93ULL;
    k ^= k >> 32;
    return k;
  }
  void bloom_add(uint64_t k) {
    const uint64_t h = bloom_hash(k);
    uint64_t* block = &bloom[((h >> 32) & bloom_blocks_mask) * 8];
    for (int i = 0; i < 3; ++i) {
      const unsigned bit = (h >> (9 * i)) & 511;
      block[bit >> 6] |= uint64_t{1} << (bit & 63);
    }
  }
  bool bloom_may_contain(uint64_t k) const {
    const uint64_t h = bloom_hash(k);
    const uint64_t* block = &bloom[((h >> 32) & bloom_blocks_mask) * 8];
    for (int i = 0; i < 3; ++i) {
      const unsigned bit = (h >> (9 * i)) & 511;
      if (!(block[bit >> 6] & (uint64_t{1} << (bit & 63)))) return false;
    }
    return true;
  }
  // A later duplicate overrides an earlier one, as in HF's map construction.
  void put(int32_t a, int32_t b, int32_t rank, int32_t new_id) {
    const uint64_t k = key_of(a, b);
    bloom_add(k);
    for (uint64_t i = hash(k) & mask;; i = (i + 1) & mask) {
      if (slots[i].key == kEmpty || slots[i].key == k) {
        slots[i] = {k, rank, new_id};
        return;
      }
    }
  }
  const Slot* find(int32_t a, int32_t b) const {
    const uint64_t k = key_of(a, b);
    if (!bloom_may_contain(k)) return nullptr;
    for (uint64_t i = hash(k) & mask;; i = (i + 1) & mask) {
      if (slots[i].key == k) return &slots[i];
      if (slots[i].key == kEmpty) return nullptr;
    }
  }
};

// Results for short pieces, in fixed slots (no allocation per entry): direct-mapped within
// each of 16 shards, each shard under its own mutex. A new piece simply replaces whatever
// occupied its slot.
struct BpeModel::Cache {
  static constexpr std::size_t kShards = 16;
  static constexpr std::size_t kSlotsPerShard = 4096;
  static constexpr std::size_t kMaxKey = 46;
  static constexpr std::size_t kMaxIds = 12;
  struct Slot {
    uint64_t hash = 0;
    uint8_t key_len = 0;
    uint8_t n_ids = 0;  // 0: empty
    char key[kMaxKey];
    int32_t ids[kMaxIds];
  };
  struct Shard {
    std::mutex mu;
    std::vector<Slot> slots = std::vector<Slot>(kSlotsPerShard);
  };
  std::array<Shard, kShards> shards;

  static bool cacheable(std::string_view piece) { return piece.size() <= kMaxKey; }
  Slot& slot_for(uint64_t h, Shard*& shard) {
    shard = &shards[h % kShards];
    return shard->slots[(h / kShards) % kSlotsPerShard];
  }
};

namespace {

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  bool alive;
};

// A possible merge of the symbol at `pos` with its right neighbour. It is still valid when
// popped if both symbols still have the ids recorded here: a symbol's id only changes by
// growing, and a longer pair would produce a different token, so this is the same test as
// HF's "the pair still merges into new_id", without a table lookup.
struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t left;
  int32_t right;
  int32_t new_id;
};

// Heap order: the lowest rank on top, then the leftmost position.
struct LaterCandidate {
  bool operator()(const Candidate& x, const Candidate& y) const {
    return x.rank != y.rank ? x.rank > y.rank : x.pos > y.pos;
  }
};

struct Scratch {
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
  std::vector<int32_t> ids;
};

// A small per-thread, direct-mapped cache of merge-table answers (including "no merge"). The
// merge table is megabytes and its probes are cache misses; the pairs a text keeps asking
// about (the bytes of common characters, frequent neighbours) fit in 64 KiB.
struct PairCache {
  static constexpr std::size_t kSize = 1 << 12;
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  struct Entry {
    uint64_t key = kEmpty;
    int32_t rank = -1;  // -1: the pair does not merge
    int32_t new_id = 0;
  };
  uint64_t owner = 0;  // serial of the model whose answers are cached
  std::array<Entry, kSize> entries;
};

PairCache& pair_cache(uint64_t owner) {
  thread_local PairCache cache;
  if (cache.owner != owner) {
    cache.entries.fill(PairCache::Entry{});
    cache.owner = owner;
  }
  return cache;
}

std::atomic<uint64_t> next_model_serial{1};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

std::pair<std::string, std::string> parse_merge(const nlohmann::json& m, std::size_t rank) {
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
    return {m[0].get<std::string>(), m[1].get<std::string>()};
  if (m.is_string()) {
    const std::string s = m.get<std::string>();
    const std::size_t sp = s.find(' ');
    if (sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos)
      return {s.substr(0, sp), s.substr(sp + 1)};
  }
  throw TokenizerError("model.merges[" + std::to_string(rank) +
                       "]: expected [\"a\", \"b\"] or \"a b\", got " + m.dump());
}

}  // namespace

BpeModel::BpeModel() = default;
BpeModel::~BpeModel() = default;
BpeModel::BpeModel(BpeModel&&) noexcept = default;
BpeModel& BpeModel::operator=(BpeModel&&) noexcept = default;

BpeModel BpeModel::from_json(const nlohmann::json& model) {
  if (!model.is_object()) throw TokenizerError("\"model\" must be an object");
  const std::string type = model.value("type", std::string("BPE"));
  if (type != "BPE")
    throw TokenizerError("model type \"" + type + "\" is not supported (only byte-level BPE)");
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      model["dropout"].get<double>() > 0.0)
    throw TokenizerError("model.dropout is not supported");
  if (model.value("byte_fallback", false))
    throw TokenizerError("model.byte_fallback is not supported (not a byte-level BPE)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty())
      throw TokenizerError(std::string("model.") + key + " is not supported");
  }
  if (!model.contains("vocab") || !model["vocab"].is_object())
    throw TokenizerError("model.vocab must be an object of token -> id");
  if (!model.contains("merges") || !model["merges"].is_array())
    throw TokenizerError("model.merges must be a list");

  BpeModel m;
  const auto& vocab = model["vocab"];
  m.text_to_id_.reserve(vocab.size());
  int32_t max_id = -1;
  for (const auto& [text, id_json] : vocab.items()) {
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0 ||
        id_json.get<int64_t>() > std::numeric_limits<int32_t>::max() / 2)
      throw TokenizerError("model.vocab[\"" + text + "\"]: id must be a non-negative integer");
    const auto id = static_cast<int32_t>(id_json.get<int64_t>());
    m.text_to_id_.emplace(text, id);
    max_id = std::max(max_id, id);
  }
  m.id_to_text_.assign(static_cast<std::size_t>(max_id + 1), std::string());
  for (const auto& [text, id] : m.text_to_id_) m.id_to_text_[static_cast<std::size_t>(id)] = text;

  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
  for (int b = 0; b < 256; ++b) {
    const auto it = m.text_to_id_.find(alphabet.text_of(static_cast<unsigned char>(b)));
    m.byte_id_[b] = it == m.text_to_id_.end() ? -1 : it->second;
  }

  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    const std::string unk = model["unk_token"].get<std::string>();
    const auto it = m.text_to_id_.find(unk);
    if (it == m.text_to_id_.end())
      throw TokenizerError("model.unk_token \"" + unk + "\" is not in the vocabulary");
    m.unk_id_ = it->second;
  }
  m.fuse_unk_ = model.value("fuse_unk", false);
  m.ignore_merges_ = model.value("ignore_merges", false);

  const auto& merges = model["merges"];
  m.merges_ = std::make_unique<MergeTable>(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const auto [a, b] = parse_merge(merges[rank], rank);
    const auto ia = m.text_to_id_.find(a);
    const auto ib = m.text_to_id_.find(b);
    const auto ij = m.text_to_id_.find(a + b);
    if (ia == m.text_to_id_.end() || ib == m.text_to_id_.end() || ij == m.text_to_id_.end())
      throw TokenizerError("model.merges[" + std::to_string(rank) + "] (\"" + a + "\", \"" + b +
                           "\") names a token missing from the vocabulary");
    m.merges_->put(ia->second, ib->second, static_cast<int32_t>(rank), ij->second);
  }
  m.cache_ = std::make_unique<Cache>();
  m.serial_ = next_model_serial.fetch_add(1);
  return m;
}

std::optional<int32_t> BpeModel::token_id(std::string_view text) const {
  const auto it = text_to_id_.find(text);
  if (it == text_to_id_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::merge(std::string_view piece, std::vector<int32_t>& out) const {
  Scratch& s = scratch();
  PairCache& pc = pair_cache(serial_);
  // The merge for (a, b): rank >= 0 and the merged id, or rank -1.
  const auto lookup = [&](int32_t a, int32_t b) -> const PairCache::Entry& {
    const uint64_t key = MergeTable::key_of(a, b);
    PairCache::Entry& e = pc.entries[MergeTable::hash(key) & (PairCache::kSize - 1)];
    if (e.key != key) {
      const auto* mr = merges_->find(a, b);
      e = {key, mr ? mr->rank : -1, mr ? mr->new_id : 0};
    }
    return e;
  };
  std::vector<Symbol>& sym = s.symbols;
  sym.clear();
  // Initial symbols: one per byte; bytes without a token become unk (or vanish).
  bool last_was_unk = false;
  for (const char c : piece) {
    const int32_t id = byte_id_[static_cast<unsigned char>(c)];
    if (id >= 0) {
      sym.push_back({id, 0, 0, true});
      last_was_unk = false;
    } else if (unk_id_) {
      if (!(fuse_unk_ && last_was_unk)) sym.push_back({*unk_id_, 0, 0, true});
      last_was_unk = true;
    }
  }
  const auto n = static_cast<int32_t>(sym.size());
  for (int32_t i = 0; i < n; ++i) {
    sym[i].prev = i - 1;
    sym[i].next = i + 1 < n ? i + 1 : -1;
  }
  std::vector<Candidate>& heap = s.heap;
  heap.clear();
  for (int32_t i = 0; i + 1 < n; ++i) {
    const auto& mr = lookup(sym[i].id, sym[i + 1].id);
    if (mr.rank >= 0) heap.push_back({mr.rank, i, sym[i].id, sym[i + 1].id, mr.new_id});
  }
  std::make_heap(heap.begin(), heap.end(), LaterCandidate{});
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), LaterCandidate{});
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = sym[top.pos];
    if (!left.alive || left.next < 0 || left.id != top.left) continue;
    Symbol& right = sym[left.next];
    if (right.id != top.right) continue;  // the pair changed since this candidate was pushed
    left.id = top.new_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = top.pos;
    if (left.prev >= 0) {
      if (const auto& p = lookup(sym[left.prev].id, left.id); p.rank >= 0) {
        heap.push_back({p.rank, left.prev, sym[left.prev].id, left.id, p.new_id});
        std::push_heap(heap.begin(), heap.end(), LaterCandidate{});
      }
    }
    if (left.next >= 0) {
      if (const auto& p = lookup(left.id, sym[left.next].id); p.rank >= 0) {
        heap.push_back({p.rank, top.pos, left.id, sym[left.next].id, p.new_id});
        std::push_heap(heap.begin(), heap.end(), LaterCandidate{});
      }
    }
  }
  for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
}

void BpeModel::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (piece.size() == 1 && byte_id_[static_cast<unsigned char>(piece[0])] >= 0) {
    out.push_back(byte_id_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (ignore_merges_) {
    if (const auto id = token_id(ByteLevelAlphabet::get().encode(piece))) {
      out.push_back(*id);
      return;
    }
  }
  if (!Cache::cacheable(piece)) {
    merge(piece, out);
    return;
  }
  const uint64_t h = StringHash{}(piece);
  Cache::Shard* shard = nullptr;
  Cache::Slot& slot = cache_->slot_for(h, shard);
  {
    std::lock_guard<std::mutex> lock(shard->mu);
    if (slot.n_ids && slot.hash == h && slot.key_len == piece.size() &&
        std::memcmp(slot.key, piece.data(), piece.size()) == 0) {
      out.insert(out.end(), slot.ids, slot.ids + slot.n_ids);
      return;
    }
  }
  const std::size_t first = out.size();
  merge(piece, out);
  const std::size_t n = out.size() - first;
  if (n == 0 || n > Cache::kMaxIds) return;
  std::lock_guard<std::mutex> lock(shard->mu);
  slot.hash = h;
  slot.key_len = static_cast<uint8_t>(piece.size());
  slot.n_ids = static_cast<uint8_t>(n);
  std::memcpy(slot.key, piece.data(), piece.size());
  std::copy(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(), slot.ids);
}

}  // namespace ds::tok
