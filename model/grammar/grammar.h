// Grammar: the form every constraint is written in before it is compiled (compiler.h).
//
// A Grammar is a list of named rules; each rule's body is an expression over BYTES: literal
// byte strings, sets of one byte, sequences, alternatives, bounded or unbounded repetition,
// references to rules, and `text_until` (any UTF-8 text up to and including the first
// occurrence of an ASCII terminator, as Qwen's XML tool-call values need). Characters are
// bytes: a class of code points is written as the alternatives of its UTF-8 byte sequences
// (utf8_class.h), so a token that ends in the middle of a character simply leaves the
// matcher in the middle of that character's bytes.
//
// The front ends produce Grammars: ebnf.h (a GBNF-like text form), regex.h, json_schema.h.
// Expressions are immutable and shared: a sub-expression used in many places (JSON
// whitespace, a string body) is built once; compiling copies it into each place it is used,
// which is what lets the compiler see whole regions of a grammar as one automaton.
//
// Every walk over an expression recurses on its nesting, so the builders refuse expressions
// nested deeper than kMaxExprDepth: whatever a front end reads (a regex with 100,000
// quantifiers, a schema nested as deep as its JSON allows), the walks stay within a bounded
// stack, and the client gets a GrammarError (a 400) instead of a crash.
#pragma once

#include <bitset>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ds::grammar {

// A grammar that cannot be built or compiled (bad syntax, an unsupported feature, a limit):
// the message names what is wrong, in words a client can act on (it is what a 400 says).
struct GrammarError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using ByteSet = std::bitset<256>;
// The maximal runs [lo, hi] of bytes in a set, ascending.
std::vector<std::pair<uint8_t, uint8_t>> byte_ranges(const ByteSet& set);

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;

struct Expr {
  enum class Kind : uint8_t {
    empty,       // matches the empty string
    bytes,       // the literal `text`
    byte_set,    // one byte from `set`
    seq,         // items in order
    alt,         // one of items (no items: matches nothing)
    repeat,      // item, min..max times (max < 0: unbounded); with `extra`: separated by it
    rule_ref,    // the rule numbered `rule`
    text_until,  // valid UTF-8 text containing neither `text` nor any of `words`, then `text`
    members,     // JSON object members: see members() below
  };
  Kind kind = Kind::empty;
  std::string text;
  ByteSet set;
  std::vector<ExprPtr> items;
  ExprPtr item;
  int32_t min = 0, max = 0;
  int32_t rule = -1;
  // members: items[i] is member i, required[i] whether it must appear; `item` the separator;
  // `extra` (may be null) a member that may repeat after the declared ones.
  // repeat: `extra` (may be null) the separator between two repetitions.
  std::vector<bool> required;
  ExprPtr extra;
  std::vector<std::string> words;  // text_until: strings the text may not contain
  int32_t depth = 1;               // 1 + the deepest sub-expression's depth
};

// The deepest expression the builders make (see the top of this file).
inline constexpr int32_t kMaxExprDepth = 1000;

// Builders. They simplify as they go (a sequence of one item is that item, nested sequences
// and alternatives are flattened), so front ends can build naively.
ExprPtr empty();
ExprPtr nothing();  // matches no string
ExprPtr bytes(std::string_view text);
ExprPtr byte_set(const ByteSet& set);
ExprPtr byte_range(uint8_t lo, uint8_t hi);
ExprPtr seq(std::vector<ExprPtr> items);
ExprPtr alt(std::vector<ExprPtr> items);
// max < 0: unbounded. A repetition of a repetition whose counts are 0 or 1 and unbounded is
// the one repetition they amount to ((x*)+ is x*), so `a` followed by any chain of `*`, `+`
// and `?` stays one expression.
ExprPtr repeat(ExprPtr item, int32_t min, int32_t max);
// min..max items with `separator` between two of them (a JSON array's items): compiled with
// one copy of the item for the unbounded part, where item (separator item)* would need two.
ExprPtr separated(ExprPtr item, ExprPtr separator, int32_t min, int32_t max);
ExprPtr optional(ExprPtr item);
ExprPtr star(ExprPtr item);
ExprPtr plus(ExprPtr item);
ExprPtr rule_ref(int32_t rule);
// Any valid UTF-8 text up to the first `terminator`, containing none of `forbidden`
// (all ASCII, non-empty), then the terminator.
ExprPtr text_until(std::string_view terminator, std::vector<std::string> forbidden = {});
// Comma-separated members in the declared order, each present if required or chosen, with
// `separator` between two present ones; then, when `extra` is set, any number of extra
// members (separated the same way). What a JSON object's body is; built so that its size is
// linear in the number of members (an expression tree would repeat the tail per choice).
ExprPtr members(std::vector<ExprPtr> items, std::vector<bool> required, ExprPtr separator, ExprPtr extra);

// Upper bound on repetition counts and on the expanded size of a grammar (compiler.h): a
// schema's maxLength of a million is refused rather than compiled for minutes.
inline constexpr int32_t kMaxRepeat = 10000;

struct Rule {
  std::string name;
  ExprPtr body;
};

class Grammar {
 public:
  // Adds a rule (body may be set later with set_body, so rules can refer to each other).
  int32_t add_rule(std::string name, ExprPtr body = nullptr);
  void set_body(int32_t rule, ExprPtr body);
  // The rule named `name`, or -1.
  int32_t find_rule(std::string_view name) const;

  const std::vector<Rule>& rules() const { return rules_; }
  const Rule& rule(int32_t id) const { return rules_.at(static_cast<size_t>(id)); }
  int32_t root() const { return root_; }
  void set_root(int32_t rule) { root_ = rule; }

  // Throws GrammarError when a rule has no body, a reference points nowhere, or there is no
  // root. tick (when given) runs every few thousand expressions: a compile's budget check,
  // since a constraint's expressions can number millions.
  void check(const std::function<void()>& tick = {}) const;
  // GBNF-like text (ebnf.h's syntax, byte escapes for non-ASCII), for tests and messages.
  std::string to_string() const;

 private:
  std::vector<Rule> rules_;
  int32_t root_ = -1;
};

// The text form of one expression (as Grammar::to_string writes rule bodies).
std::string expr_to_string(const Expr& e, const Grammar* names = nullptr);

}  // namespace ds::grammar
