#include "model/tokenizer/bpe_model.h"

#include <algorithm>
#include <limits>
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

  static uint64_t key_of(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  static uint64_t hash(uint64_t k) { return (k * 0x9E3779B97F4A7C15ULL) >> 17; }

  explicit MergeTable(std::size_t n) {
    std::size_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    slots.resize(cap);
    mask = cap - 1;
  }
  // A later duplicate overrides an earlier one, as in HF's map construction.
  void put(int32_t a, int32_t b, int32_t rank, int32_t new_id) {
    const uint64_t k = key_of(a, b);
    for (uint64_t i = hash(k) & mask;; i = (i + 1) & mask) {
      if (slots[i].key == kEmpty || slots[i].key == k) {
        slots[i] = {k, rank, new_id};
        return;
      }
    }
  }
  const Slot* find(int32_t a, int32_t b) const {
    const uint64_t k = key_of(a, b);
    for (uint64_t i = hash(k) & mask;; i = (i + 1) & mask) {
      if (slots[i].key == k) return &slots[i];
      if (slots[i].key == kEmpty) return nullptr;
    }
  }
};

struct BpeModel::Cache {
  static constexpr std::size_t kShards = 16;
  static constexpr std::size_t kMaxPerShard = 8192;
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map;
  };
  std::array<Shard, kShards> shards;
};

namespace {

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  bool alive;
};

struct Candidate {
  int32_t rank;
  int32_t pos;
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
  return m;
}

std::optional<int32_t> BpeModel::token_id(std::string_view text) const {
  const auto it = text_to_id_.find(text);
  if (it == text_to_id_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::merge(std::string_view piece, std::vector<int32_t>& out) const {
  Scratch& s = scratch();
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
    if (const auto* mr = merges_->find(sym[i].id, sym[i + 1].id))
      heap.push_back({mr->rank, i, mr->new_id});
  }
  std::make_heap(heap.begin(), heap.end(), LaterCandidate{});
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), LaterCandidate{});
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = sym[top.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = sym[left.next];
    // The pair may have changed since this candidate was pushed.
    const auto* mr = merges_->find(left.id, right.id);
    if (!mr || mr->new_id != top.new_id) continue;
    left.id = top.new_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = top.pos;
    if (left.prev >= 0) {
      if (const auto* p = merges_->find(sym[left.prev].id, left.id)) {
        heap.push_back({p->rank, left.prev, p->new_id});
        std::push_heap(heap.begin(), heap.end(), LaterCandidate{});
      }
    }
    if (left.next >= 0) {
      if (const auto* p = merges_->find(left.id, sym[left.next].id)) {
        heap.push_back({p->rank, top.pos, p->new_id});
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
  if (piece.size() > kMaxCachedPieceBytes) {
    merge(piece, out);
    return;
  }
  Cache::Shard& shard = cache_->shards[StringHash{}(piece) % Cache::kShards];
  {
    std::lock_guard<std::mutex> lock(shard.mu);
    const auto it = shard.map.find(piece);
    if (it != shard.map.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const std::size_t first = out.size();
  merge(piece, out);
  std::vector<int32_t> ids(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
  std::lock_guard<std::mutex> lock(shard.mu);
  if (shard.map.size() >= Cache::kMaxPerShard) shard.map.clear();
  shard.map.emplace(std::string(piece), std::move(ids));
}

}  // namespace ds::tok
