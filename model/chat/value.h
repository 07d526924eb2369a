// Value: the dynamic values of the Jinja interpreter, modelled on the Python objects jinja2
// works with, so that templates written for HF's jinja2 behave the same here.
//
// Types: Undefined (jinja2's default Undefined: falsy, renders as "", iterates as empty, and
// raises when used in arithmetic, called, or asked for an attribute), None, bool, int (64-bit),
// float, str (UTF-8), list (also used for tuples, flagged for repr), dict (insertion-ordered,
// any hashable key; a dict flagged as a namespace accepts attribute assignment) and callables
// (builtins, bound methods, macros).
//
// Values are cheap to copy: strings and containers are shared, immutable after construction
// (the interpreter follows jinja2's ImmutableSandboxedEnvironment: no list.append, no
// dict.update); only namespaces are mutated, through `set ns.attr = ...`.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace ds::chat {

class Value;
class Interpreter;

// Containers record their nesting depth; building one deeper than kMaxValueDepth is a
// TemplateRuntimeError, so no value is too deep to print, compare or destroy recursively.
inline constexpr int kMaxValueDepth = 512;

struct ListObj {
  std::vector<Value> items;
  bool is_tuple = false;
  int depth = 1;
};

class DictObj {
 public:
  bool is_namespace = false;
  int depth() const { return depth_; }

  std::size_t size() const;  // defined below, once Value is complete
  const std::vector<std::pair<Value, Value>>& items() const { return items_; }
  // Inserts or replaces (keeping the first insertion's position, like a Python dict).
  void set(const Value& key, Value value);
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  // The value of the i-th entry, for in-place updates of an object whose keys are fixed.
  Value& value_at(std::size_t i);
  void clear();

 private:
  std::vector<std::pair<Value, Value>> items_;
  std::unordered_map<std::string, std::size_t> string_index_;  // built past a few entries
  int depth_ = 1;
  void index_string_keys();
};

// Arguments of a call: positional, then keyword (in call order).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;

  // The argument for parameter `name` at position `pos`, or nullptr.
  const Value* get(std::size_t pos, std::string_view name) const;
};

struct Callable {
  std::string name;
  std::function<Value(Interpreter&, CallArgs&)> fn;
};

struct UndefinedTag {
  // Why the value is undefined, for the error raised when it is misused.
  std::shared_ptr<const std::string> reason;
};

struct NoneTag {};

class Value {
 public:
  enum class Type { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };

  Value() : v_(UndefinedTag{}) {}
  static Value undefined(std::string reason);
  static Value none() { return Value(NoneTag{}); }
  Value(bool b) : v_(b) {}
  Value(int64_t i) : v_(i) {}
  Value(int i) : v_(static_cast<int64_t>(i)) {}
  Value(double f) : v_(f) {}
  Value(std::string s) : v_(std::make_shared<const std::string>(std::move(s))) {}
  Value(const char* s) : Value(std::string(s)) {}
  Value(std::shared_ptr<ListObj> l) : v_(std::move(l)) {}
  Value(std::shared_ptr<DictObj> d) : v_(std::move(d)) {}
  Value(std::shared_ptr<Callable> c) : v_(std::move(c)) {}

  static Value list(std::vector<Value> items, bool is_tuple = false);
  static Value dict();
  static Value function(std::string name, std::function<Value(Interpreter&, CallArgs&)> fn);

  // Converts JSON (nesting depth limited to 512; deeper input throws TemplateRuntimeError).
  static Value from_json(const nlohmann::ordered_json& j);

  Type type() const { return static_cast<Type>(v_.index()); }
  bool is_undefined() const { return type() == Type::kUndefined; }
  bool is_none() const { return type() == Type::kNone; }
  bool is_bool() const { return type() == Type::kBool; }
  bool is_int() const { return type() == Type::kInt; }  // bools are not ints here
  bool is_float() const { return type() == Type::kFloat; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return type() == Type::kString; }
  bool is_list() const { return type() == Type::kList; }
  bool is_dict() const { return type() == Type::kDict; }
  bool is_callable() const { return type() == Type::kCallable; }
  bool is_namespace() const { return is_dict() && dict_obj().is_namespace; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return is_bool() ? (as_bool() ? 1 : 0) : std::get<int64_t>(v_); }
  double as_float() const {
    return is_float() ? std::get<double>(v_) : static_cast<double>(as_int());
  }
  const std::string& str() const { return *std::get<std::shared_ptr<const std::string>>(v_); }
  const ListObj& list_obj() const { return *std::get<std::shared_ptr<ListObj>>(v_); }
  const std::vector<Value>& items() const { return list_obj().items; }
  const DictObj& dict_obj() const { return *std::get<std::shared_ptr<DictObj>>(v_); }
  DictObj& mutable_dict() const { return *std::get<std::shared_ptr<DictObj>>(v_); }
  const std::shared_ptr<DictObj>& dict_ptr() const {
    return std::get<std::shared_ptr<DictObj>>(v_);
  }
  const Callable& callable() const { return *std::get<std::shared_ptr<Callable>>(v_); }
  const std::string& undefined_reason() const;

  // Python truthiness (undefined is false).
  bool truthy() const;
  // Python ==.
  bool equals(const Value& other) const;
  // Python type name, for messages ("str", "int", "dict", ...).
  std::string type_name() const;
  // A hash consistent with equals(), for dict keys and unique.
  std::size_t hash() const;
  // Nesting depth of a container (0 for scalars).
  int depth() const;

 private:
  explicit Value(UndefinedTag u) : v_(std::move(u)) {}
  explicit Value(NoneTag n) : v_(n) {}
  std::variant<UndefinedTag, NoneTag, bool, int64_t, double, std::shared_ptr<const std::string>,
               std::shared_ptr<ListObj>, std::shared_ptr<DictObj>, std::shared_ptr<Callable>>
      v_;
};

inline std::size_t DictObj::size() const { return items_.size(); }

}  // namespace ds::chat
