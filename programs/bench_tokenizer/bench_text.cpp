#include "programs/bench_tokenizer/bench_text.h"

#include <array>
#include <string_view>
#include <vector>

namespace ds::tok::bench {
namespace {

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
  bool chance(int percent) { return below(100) < static_cast<std::size_t>(percent); }
  // Roughly Zipf-like: small indices are much more likely.
  std::size_t skewed(std::size_t n) {
    const std::size_t a = below(n), b = below(n);
    return a < b ? a : b;
  }

 private:
  uint64_t s_;
};

template <class List>
std::string_view pick(Rng& rng, const List& list) {
  return list[rng.skewed(std::size(list))];
}

constexpr std::string_view kCommonWords[] = {
    "the", "of", "and", "to", "a", "in", "is", "that", "it", "was", "for", "on", "are", "as",
    "with", "his", "they", "at", "be", "this", "from", "have", "or", "by", "one", "had", "not",
    "but", "what", "all", "were", "when", "we", "there", "can", "an", "your", "which", "their",
    "said", "if", "do", "will", "each", "about", "how", "up", "out", "them", "then", "she",
    "many", "some", "so", "these", "would", "other", "into", "has", "more", "her", "two",
    "like", "him", "see", "time", "could", "no", "make", "than", "first", "been", "its", "who",
    "now", "people", "my", "made", "over", "did", "down", "only", "way", "find", "use", "may",
    "water", "long", "little", "very", "after", "words", "called", "just", "where", "most",
    "know", "get", "through", "back", "much", "before", "go", "good", "new", "write", "our",
    "used", "me", "man", "too", "any", "day", "same", "right", "look", "think", "also",
    "around", "another", "came", "come", "work", "three", "word", "must", "because", "does",
    "part", "even", "place", "well", "such", "here", "take", "why", "things", "help", "put",
    "years", "different", "away", "again", "off", "went", "old", "number", "great", "tell",
    "men", "say", "small", "every", "found", "still", "between", "name", "should", "home",
    "big", "give", "air", "line", "set", "own", "under", "read", "last", "never", "us", "left",
    "end", "along", "while", "might", "next", "sound", "below", "saw", "something", "thought",
    "both", "few", "those", "always", "show", "large", "often", "together", "asked", "house",
    "don't", "world", "going", "want", "school", "important", "until", "form", "food", "keep",
    "children", "feet", "land", "side", "without", "boy", "once", "animals", "life", "enough",
    "took", "sometimes", "four", "head", "above", "kind", "began", "almost", "live", "page",
    "got", "earth", "need", "far", "hand", "high", "year", "mother", "light", "parts",
    "country", "father", "let", "night", "following", "picture", "being", "study", "second",
    "eyes", "soon", "times", "story", "boys", "since", "white", "days", "ever", "paper",
    "hard", "near", "sentence", "better", "best", "across", "during", "today", "others",
    "however", "sure", "means", "knew", "it's", "try", "told", "young", "miles", "sun", "ways",
    "thing", "whole", "hear", "example", "heard", "several", "change", "answer", "room",
    "sea", "against", "top", "turned", "learn", "point", "city", "play", "toward", "five",
    "himself", "usually", "money", "seen", "didn't", "car", "morning", "I'm", "body",
    "upon", "family", "later", "turn", "move", "face", "door", "cut", "done", "group", "true",
    "leave", "system", "government", "research", "analysis", "measurement", "inference"};

constexpr std::string_view kSyllables[] = {
    "ka", "ter", "on", "vi", "stra", "mel", "dor", "in", "que", "lo", "ran", "tis", "pe",
    "gra", "ble", "mon", "sha", "ex", "pli", "cor", "nu", "ta", "ven", "zo", "rim", "al",
    "ect", "ous", "ment", "ing", "tion", "er", "ly", "ful", "ist", "ize", "ward", "ness"};

std::string made_up_word(Rng& rng) {
  std::string w;
  const std::size_t n = 2 + rng.below(3);
  for (std::size_t i = 0; i < n; ++i) w += kSyllables[rng.below(std::size(kSyllables))];
  return w;
}

constexpr std::string_view kIdentParts[] = {
    "get", "set", "value", "index", "count", "buffer", "node", "result", "item", "size",
    "data", "user", "request", "response", "token", "cache", "key", "name", "config", "path",
    "offset", "length", "block", "table", "state", "error", "handle", "stream", "batch",
    "limit", "total", "max", "min", "next", "prev", "seq", "id", "len", "tmp", "ptr"};

std::string identifier(Rng& rng, bool camel) {
  std::string s(pick(rng, kIdentParts));
  const std::size_t extra = rng.below(3);
  for (std::size_t i = 0; i < extra; ++i) {
    std::string part(kIdentParts[rng.below(std::size(kIdentParts))]);
    if (camel) {
      part[0] = static_cast<char>(part[0] - 'a' + 'A');
    } else {
      s += '_';
    }
    s += part;
  }
  if (rng.chance(10)) s += std::to_string(rng.below(10));
  return s;
}

void python_function(Rng& rng, std::string& out) {
  out += "def " + identifier(rng, false) + "(" + identifier(rng, false) + ", " +
         identifier(rng, false) + "=" + std::to_string(rng.below(100)) + "):\n";
  out += "    \"\"\"Return the " + std::string(pick(rng, kCommonWords)) + " " +
         std::string(pick(rng, kCommonWords)) + " of the input.\"\"\"\n";
  const std::size_t lines = 3 + rng.below(8);
  for (std::size_t i = 0; i < lines; ++i) {
    const std::string a = identifier(rng, false), b = identifier(rng, false);
    switch (rng.below(6)) {
      case 0: out += "    " + a + " = " + b + " + " + std::to_string(rng.below(1000)) + "\n"; break;
      case 1: out += "    if " + a + " is None or len(" + b + ") > " + std::to_string(rng.below(64)) + ":\n        return []\n"; break;
      case 2: out += "    for " + a + " in range(" + b + "):\n        " + b + ".append(" + a + " * 2)\n"; break;
      case 3: out += "    # " + std::string(pick(rng, kCommonWords)) + " " + std::string(pick(rng, kCommonWords)) + " before the " + std::string(pick(rng, kCommonWords)) + "\n"; break;
      case 4: out += "    " + a + "[\"" + b + "\"] = {\"" + identifier(rng, false) + "\": " + std::to_string(rng.below(10)) + "}\n"; break;
      default: out += "    return " + a + ".get(\"" + b + "\", 0.5)\n"; break;
    }
  }
  out += "\n\n";
}

void cpp_function(Rng& rng, std::string& out) {
  out += "static int64_t " + identifier(rng, true) + "(const std::vector<int32_t>& " +
         identifier(rng, true) + ", std::size_t " + identifier(rng, true) + ") {\n";
  const std::size_t lines = 3 + rng.below(8);
  for (std::size_t i = 0; i < lines; ++i) {
    const std::string a = identifier(rng, true), b = identifier(rng, true);
    switch (rng.below(5)) {
      case 0: out += "  auto " + a + " = " + b + "->" + identifier(rng, true) + "();\n"; break;
      case 1: out += "  if (" + a + " >= " + std::to_string(rng.below(4096)) + ") {\n    throw std::runtime_error(\"" + b + " out of range\");\n  }\n"; break;
      case 2: out += "  for (std::size_t i = 0; i < " + a + ".size(); ++i) " + b + " += " + a + "[i];\n"; break;
      case 3: out += "  // " + std::string(pick(rng, kCommonWords)) + " " + std::string(pick(rng, kCommonWords)) + " " + std::string(pick(rng, kCommonWords)) + "\n"; break;
      default: out += "  " + a + ".push_back(static_cast<int32_t>(" + b + " & 0x" + std::to_string(rng.below(100)) + "ff));\n"; break;
    }
  }
  out += "  return " + identifier(rng, true) + ";\n}\n\n";
}

// Common Chinese characters and a few Japanese kana words, mixed with CJK punctuation.
constexpr std::string_view kHanzi =
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过"
    "家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本"
    "见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己"
    "话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平"
    "真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报"
    "立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务"
    "制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科"
    "怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运"
    "武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸"
    "钱党倒未持音程模型数据服务器推理批处理缓存计算";
constexpr std::string_view kKana[] = {"これは", "テキスト", "です", "ありがとう", "日本語の",
                                       "サーバー", "トークン", "を使って", "しました"};
constexpr std::string_view kCjkPunct[] = {"，", "。", "、", "！", "？", "：", "；", "「", "」"};

std::string_view hanzi_at(std::size_t i) { return kHanzi.substr(i * 3, 3); }

}  // namespace

std::string english_prose(std::size_t bytes, uint64_t seed) {
  Rng rng(seed);
  std::string out;
  out.reserve(bytes + 256);
  while (out.size() < bytes) {
    const std::size_t sentences = 2 + rng.below(5);
    for (std::size_t s = 0; s < sentences; ++s) {
      const std::size_t words = 6 + rng.below(16);
      for (std::size_t w = 0; w < words; ++w) {
        std::string word = rng.chance(12) ? made_up_word(rng) : std::string(pick(rng, kCommonWords));
        if (rng.chance(3)) word = std::to_string(rng.below(100000));
        if (w == 0 && word[0] >= 'a' && word[0] <= 'z') word[0] = static_cast<char>(word[0] - 32);
        out += word;
        if (w + 1 < words) out += rng.chance(8) ? ", " : " ";
      }
      out += rng.chance(80) ? ". " : (rng.chance(50) ? "? " : "! ");
    }
    out += "\n\n";
  }
  out.resize(bytes);
  return out;
}

std::string source_code(std::size_t bytes, uint64_t seed) {
  Rng rng(seed);
  std::string out;
  out.reserve(bytes + 1024);
  while (out.size() < bytes) {
    if (rng.chance(50))
      python_function(rng, out);
    else
      cpp_function(rng, out);
  }
  out.resize(bytes);
  return out;
}

std::string cjk_text(std::size_t bytes, uint64_t seed) {
  Rng rng(seed);
  const std::size_t n_hanzi = kHanzi.size() / 3;
  std::string out;
  out.reserve(bytes + 64);
  while (out.size() < bytes) {
    const std::size_t clauses = 1 + rng.below(4);
    for (std::size_t c = 0; c < clauses; ++c) {
      if (rng.chance(15)) {
        out += pick(rng, kKana);
        out += pick(rng, kKana);
      } else {
        const std::size_t len = 3 + rng.below(12);
        for (std::size_t i = 0; i < len; ++i) out += hanzi_at(rng.skewed(n_hanzi));
      }
      if (rng.chance(5)) out += std::to_string(rng.below(2030));
      out += kCjkPunct[rng.below(std::size(kCjkPunct))];
    }
    if (rng.chance(20)) out += "\n";
  }
  // Cut back to a character boundary.
  std::size_t cut = bytes;
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
  out.resize(cut);
  return out;
}

}  // namespace ds::tok::bench
