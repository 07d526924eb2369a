#include "model/tokenizer/pre_tokenizer.h"

#include <utility>

#include "model/tokenizer/regex.h"
#include "model/tokenizer/tokenizer_error.h"

namespace ds::tok {
namespace {

// GPT-2's pattern, used by ByteLevel when use_regex is true.
constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

enum class Behavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

Behavior parse_behavior(const std::string& name) {
  if (name == "Isolated") return Behavior::kIsolated;
  if (name == "Removed") return Behavior::kRemoved;
  if (name == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::kMergedWithNext;
  if (name == "Contiguous") return Behavior::kContiguous;
  throw TokenizerError("pre_tokenizer: Split behavior \"" + name + "\" is not supported");
}

std::string escape_literal(std::string_view s) {
  std::string out;
  for (const char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}-").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

struct Span {
  std::size_t begin, end;
  bool is_match;
};

// HF's SplitDelimiterBehavior applied to the alternating list of gaps and matches.
std::vector<Span> apply_behavior(std::vector<Span> spans, Behavior behavior) {
  std::vector<Span> out;
  out.reserve(spans.size());
  bool previous_match = false;
  switch (behavior) {
    case Behavior::kIsolated:
      return spans;
    case Behavior::kRemoved:
      for (const Span& s : spans)
        if (!s.is_match) out.push_back(s);
      return out;
    case Behavior::kMergedWithPrevious:
      for (const Span& s : spans) {
        if (s.is_match && !previous_match && !out.empty())
          out.back().end = s.end;
        else
          out.push_back(s);
        previous_match = s.is_match;
      }
      return out;
    case Behavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !out.empty())
          out.back().begin = it->begin;
        else
          out.push_back(*it);
        previous_match = it->is_match;
      }
      return {out.rbegin(), out.rend()};
    case Behavior::kContiguous:
      for (const Span& s : spans) {
        if (s.is_match == previous_match && !out.empty())
          out.back().end = s.end;
        else
          out.push_back(s);
        previous_match = s.is_match;
      }
      return out;
  }
  return out;
}

}  // namespace

struct PreTokenizer::Step {
  virtual ~Step() = default;
  // Rewrites `in` into pieces appended to out.views.
  virtual void apply(std::string_view in, Pieces& out) const = 0;
};

namespace {

struct SplitStep final : PreTokenizer::Step {
  Regex regex;
  Behavior behavior;
  bool invert;
  SplitStep(const std::string& pattern, Behavior b, bool inv)
      : regex(pattern), behavior(b), invert(inv) {}

  void apply(std::string_view in, Pieces& out) const override {
    if (in.empty()) return;
    // Fast path for the common case: isolated matches, emitted as they are found.
    if (behavior == Behavior::kIsolated) {
      std::size_t prev = 0;
      regex.find_all(in, [&](std::size_t b, std::size_t e) {
        if (b > prev) out.views.push_back(in.substr(prev, b - prev));
        if (e > b) out.views.push_back(in.substr(b, e - b));
        prev = e;
      });
      if (prev < in.size()) out.views.push_back(in.substr(prev));
      return;
    }
    std::vector<Span> spans;
    std::size_t prev = 0;
    regex.find_all(in, [&](std::size_t b, std::size_t e) {
      if (b > prev) spans.push_back({prev, b, invert});
      spans.push_back({b, e, !invert});
      prev = e;
    });
    if (prev < in.size()) spans.push_back({prev, in.size(), invert});
    for (const Span& s : apply_behavior(std::move(spans), behavior))
      if (s.end > s.begin) out.views.push_back(in.substr(s.begin, s.end - s.begin));
  }
};

struct ByteLevelStep final : PreTokenizer::Step {
  bool add_prefix_space;
  std::unique_ptr<SplitStep> gpt2;
  ByteLevelStep(bool prefix, bool use_regex) : add_prefix_space(prefix) {
    if (use_regex) gpt2 = std::make_unique<SplitStep>(kGpt2Pattern, Behavior::kIsolated, false);
  }

  void apply(std::string_view in, Pieces& out) const override {
    if (add_prefix_space && (in.empty() || in.front() != ' ')) {
      std::string& prefixed = out.owned.emplace_back();
      prefixed.reserve(in.size() + 1);
      prefixed += ' ';
      prefixed += in;
      in = prefixed;
    }
    if (gpt2)
      gpt2->apply(in, out);
    else if (!in.empty())
      out.views.push_back(in);
  }
};

bool get_bool(const nlohmann::json& j, const char* key, bool fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_boolean())
    throw TokenizerError(std::string("pre_tokenizer: \"") + key + "\" must be a boolean");
  return j[key].get<bool>();
}

void add_steps(const nlohmann::json& j, std::vector<std::unique_ptr<PreTokenizer::Step>>& steps,
               bool& has_byte_level) {
  if (j.is_null()) return;
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    throw TokenizerError("pre_tokenizer: expected an object with a \"type\"");
  const std::string type = j["type"].get<std::string>();
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array())
      throw TokenizerError("pre_tokenizer: Sequence without a \"pretokenizers\" list");
    for (const auto& sub : j["pretokenizers"]) add_steps(sub, steps, has_byte_level);
  } else if (type == "Split") {
    if (!j.contains("pattern") || !j["pattern"].is_object())
      throw TokenizerError("pre_tokenizer: Split without a \"pattern\" object");
    const auto& pat = j["pattern"];
    std::string pattern;
    if (pat.contains("Regex") && pat["Regex"].is_string())
      pattern = pat["Regex"].get<std::string>();
    else if (pat.contains("String") && pat["String"].is_string())
      pattern = escape_literal(pat["String"].get<std::string>());
    else
      throw TokenizerError("pre_tokenizer: Split pattern must be {\"Regex\": ...} or {\"String\": ...}");
    const std::string behavior =
        j.contains("behavior") && j["behavior"].is_string() ? j["behavior"].get<std::string>()
                                                            : "Isolated";
    steps.push_back(std::make_unique<SplitStep>(pattern, parse_behavior(behavior),
                                                get_bool(j, "invert", false)));
  } else if (type == "ByteLevel") {
    has_byte_level = true;
    const bool prefix = get_bool(j, "add_prefix_space", false);
    const bool use_regex = get_bool(j, "use_regex", true);
    // Without a prefix space or a regex the step only announces the byte-level alphabet.
    if (prefix || use_regex) steps.push_back(std::make_unique<ByteLevelStep>(prefix, use_regex));
  } else {
    throw TokenizerError("pre_tokenizer: unsupported type \"" + type +
                         "\" (supported: Split, ByteLevel, Sequence)");
  }
}

}  // namespace

PreTokenizer::PreTokenizer() = default;
PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

PreTokenizer PreTokenizer::from_json(const nlohmann::json& j) {
  PreTokenizer p;
  add_steps(j, p.steps_, p.has_byte_level_);
  return p;
}

void PreTokenizer::split(std::string_view text, Pieces& out) const {
  if (steps_.empty()) {
    if (!text.empty()) out.views.push_back(text);
    return;
  }
  if (steps_.size() == 1) {
    steps_[0]->apply(text, out);
    return;
  }
  std::vector<std::string_view> current{text};
  for (const auto& step : steps_) {
    Pieces next;
    next.owned = std::move(out.owned);
    for (const std::string_view piece : current) step->apply(piece, next);
    out.owned = std::move(next.owned);
    current = std::move(next.views);
  }
  out.views.insert(out.views.end(), current.begin(), current.end());
}

}  // namespace ds::tok
