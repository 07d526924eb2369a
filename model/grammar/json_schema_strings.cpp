// The string pieces of JSON Schema: known formats as expressions, and the keys an object
// with additionalProperties may add (json_schema.h, json_schema_detail.h).
#include <map>

#include "model/grammar/json_schema_detail.h"
#include "model/grammar/regex.h"
#include "model/grammar/utf8_class.h"
#include "model/tokenizer/utf8.h"

namespace ds::grammar {
namespace {

std::string date_regex() {
  return "[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|"
         "02-(?:0[1-9]|1[0-9]|2[0-8]))";
}
std::string time_regex() {
  return "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
}
std::string hostname_regex() {
  const std::string label = "[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,30}[a-zA-Z0-9])?";
  return label + "(?:\\." + label + ")*";
}


}  // namespace

ExprPtr json_format_content(const std::string& f) {
  std::string re;
  if (f == "date") re = date_regex();
  else if (f == "time") re = time_regex();
  else if (f == "date-time") re = date_regex() + "T" + time_regex();
  else if (f == "uuid") re = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";
  else if (f == "email") re = "[a-zA-Z0-9_%+-]+(?:\\.[a-zA-Z0-9_%+-]+)*@" + hostname_regex() + "\\.[a-zA-Z]{2,10}";
  else if (f == "ipv4")
    re = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}";
  else if (f == "hostname") re = hostname_regex();
  else if (f == "uri") re = "[a-zA-Z][a-zA-Z0-9+.-]*://" + hostname_regex() + "(?:/[a-zA-Z0-9._~%!$&'()*+,;=:@-]*)*";
  else return nullptr;
  return regex_expr(re, RegexMode::whole_text);
}

namespace detail {

// A trie of the names, where each node may end (unless it is a name) or continue with a child
// or with any other character. Names are considered up to kKeyPrefix code points: a key that
// starts with a longer name's first kKeyPrefix code points is not offered at all, which keeps
// the trie (and the expression's nesting) shallow whatever the names' length, and every
// generated key still differs from every declared one.
ExprPtr key_content_except(const std::vector<std::string>& names, bool lt_raw) {
  constexpr size_t kKeyPrefix = 64;
  CodepointSet chars = CodepointSet::of(0x20, kMaxCodepoint);
  CodepointSet special;
  special.add('"');
  special.add('\\');
  if (!lt_raw) special.add('<');
  chars = chars.minus(special);
  struct Node {
    std::map<char32_t, size_t> kids;
    bool word = false;
    bool dead = false;  // the prefix of a name longer than kKeyPrefix: nothing below it
  };
  std::vector<Node> nodes(1);
  for (const std::string& name : names) {
    // Decode; a name with a character a plain key cannot hold can never collide.
    std::vector<char32_t> cps;
    bool plain = true;
    for (size_t i = 0; i < name.size() && plain;) {
      char32_t cp = 0;
      const size_t n = tok::utf8::decode_one(name, i, cp);
      if (n == 0 || !chars.contains(cp)) plain = false;
      cps.push_back(cp);
      i += n ? n : 1;
    }
    if (!plain) continue;
    const bool truncated = cps.size() > kKeyPrefix;
    if (truncated) cps.resize(kKeyPrefix);
    size_t u = 0;
    for (char32_t c : cps) {
      if (nodes[u].dead) break;
      auto it = nodes[u].kids.find(c);
      if (it == nodes[u].kids.end()) {
        nodes.push_back({});
        it = nodes[u].kids.emplace(c, nodes.size() - 1).first;
      }
      u = it->second;
    }
    if (truncated) nodes[u].dead = true;
    else nodes[u].word = true;
  }
  const ExprPtr any = star(utf8_expr(chars));
  // Children before parents (post-order, iteratively; the trie is at most kKeyPrefix deep).
  std::vector<ExprPtr> built(nodes.size());
  std::vector<std::pair<size_t, bool>> stack{{0, false}};
  while (!stack.empty()) {
    auto [u, expanded] = stack.back();
    stack.pop_back();
    if (nodes[u].dead) {
      built[u] = nothing();
      continue;
    }
    if (!expanded) {
      stack.push_back({u, true});
      for (const auto& kv : nodes[u].kids) stack.push_back({kv.second, false});
      continue;
    }
    std::vector<ExprPtr> alts;
    if (!nodes[u].word) alts.push_back(empty());
    CodepointSet others = chars;
    for (const auto& [c, v] : nodes[u].kids) {
      std::string enc;
      tok::utf8::append(enc, c);
      alts.push_back(seq({bytes(enc), built[v]}));
      others = others.minus(CodepointSet::of(c, c));
    }
    alts.push_back(seq({utf8_expr(others), any}));
    built[u] = alt(std::move(alts));
  }
  return built[0];
}

}  // namespace detail
}  // namespace ds::grammar
