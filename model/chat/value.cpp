#include "model/chat/value.h"

#include <algorithm>
#include <cmath>

#include "model/chat/template_error.h"

namespace ds::chat {
namespace {

constexpr int kMaxJsonDepth = 512;
constexpr std::size_t kIndexThreshold = 8;

Value from_json_at(const nlohmann::ordered_json& j, int depth) {
  if (depth > kMaxJsonDepth)
    throw TemplateRuntimeError("template input is nested more than 512 levels deep");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<int64_t>(u));
      return Value(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json_at(e, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value d = Value::dict();
      for (const auto& [k, v] : j.items()) d.mutable_dict().set(Value(k), from_json_at(v, depth + 1));
      return d;
    }
    default:
      return Value::none();  // binary / discarded: not produced by the JSON parser
  }
}

}  // namespace

void DictObj::index_string_keys() {
  string_index_.clear();
  for (std::size_t i = 0; i < items_.size(); ++i)
    if (items_[i].first.is_string()) string_index_.emplace(items_[i].first.str(), i);
}

namespace {
void check_depth(int depth) {
  if (depth > kMaxValueDepth)
    throw TemplateRuntimeError("value nested more than " + std::to_string(kMaxValueDepth) +
                               " levels deep");
}
}  // namespace

void DictObj::set(const Value& key, Value value) {
  const int d = 1 + std::max(key.depth(), value.depth());
  check_depth(d);
  depth_ = std::max(depth_, d);
  if (const Value* slot = find(key)) {
    *const_cast<Value*>(slot) = std::move(value);
    return;
  }
  items_.emplace_back(key, std::move(value));
  if (items_.size() == kIndexThreshold + 1) {
    index_string_keys();
  } else if (items_.size() > kIndexThreshold + 1 && key.is_string()) {
    string_index_.emplace(key.str(), items_.size() - 1);
  }
}

const Value* DictObj::find(std::string_view key) const {
  if (items_.size() > kIndexThreshold) {
    const auto it = string_index_.find(std::string(key));
    return it == string_index_.end() ? nullptr : &items_[it->second].second;
  }
  for (const auto& [k, v] : items_)
    if (k.is_string() && k.str() == key) return &v;
  return nullptr;
}

const Value* DictObj::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.str()));
  for (const auto& [k, v] : items_)
    if (k.equals(key)) return &v;
  return nullptr;
}

Value& DictObj::value_at(std::size_t i) { return items_[i].second; }

void DictObj::clear() {
  items_.clear();
  string_index_.clear();
}

const Value* CallArgs::get(std::size_t pos, std::string_view name) const {
  for (const auto& [k, v] : keyword)
    if (k == name) return &v;
  return pos < positional.size() ? &positional[pos] : nullptr;
}

Value Value::undefined(std::string reason) {
  return Value(UndefinedTag{std::make_shared<const std::string>(std::move(reason))});
}

Value Value::list(std::vector<Value> items, bool is_tuple) {
  int d = 0;
  for (const Value& v : items) d = std::max(d, v.depth());
  check_depth(d + 1);
  auto l = std::make_shared<ListObj>();
  l->depth = d + 1;
  l->items = std::move(items);
  l->is_tuple = is_tuple;
  return Value(std::move(l));
}

Value Value::dict() { return Value(std::make_shared<DictObj>()); }

Value Value::function(std::string name, std::function<Value(Interpreter&, CallArgs&)> fn) {
  auto c = std::make_shared<Callable>();
  c->name = std::move(name);
  c->fn = std::move(fn);
  return Value(std::move(c));
}

Value Value::from_json(const nlohmann::ordered_json& j) { return from_json_at(j, 0); }

const std::string& Value::undefined_reason() const {
  static const std::string kNone = "value is undefined";
  const auto& r = std::get<UndefinedTag>(v_).reason;
  return r ? *r : kNone;
}

bool Value::truthy() const {
  switch (type()) {
    case Type::kUndefined: case Type::kNone: return false;
    case Type::kBool: return as_bool();
    case Type::kInt: return as_int() != 0;
    case Type::kFloat: return as_float() != 0.0;
    case Type::kString: return !str().empty();
    case Type::kList: return !items().empty();
    case Type::kDict: return dict_obj().size() != 0;
    case Type::kCallable: return true;
  }
  return false;
}

bool Value::equals(const Value& o) const {
  if (is_number() && o.is_number()) {
    if (is_float() || o.is_float()) return as_float() == o.as_float();
    return as_int() == o.as_int();
  }
  if (type() != o.type()) return false;
  switch (type()) {
    case Type::kUndefined: case Type::kNone: return true;
    case Type::kString: return str() == o.str();
    case Type::kList: {
      if (list_obj().is_tuple != o.list_obj().is_tuple) return false;
      const auto& a = items();
      const auto& b = o.items();
      if (a.size() != b.size()) return false;
      for (std::size_t i = 0; i < a.size(); ++i)
        if (!a[i].equals(b[i])) return false;
      return true;
    }
    case Type::kDict: {
      if (&dict_obj() == &o.dict_obj()) return true;
      if (dict_obj().size() != o.dict_obj().size()) return false;
      for (const auto& [k, v] : dict_obj().items()) {
        const Value* other = o.dict_obj().find(k);
        if (!other || !v.equals(*other)) return false;
      }
      return true;
    }
    case Type::kCallable: return &callable() == &o.callable();
    default: return false;
  }
}

std::string Value::type_name() const {
  switch (type()) {
    case Type::kUndefined: return "Undefined";
    case Type::kNone: return "NoneType";
    case Type::kBool: return "bool";
    case Type::kInt: return "int";
    case Type::kFloat: return "float";
    case Type::kString: return "str";
    case Type::kList: return list_obj().is_tuple ? "tuple" : "list";
    case Type::kDict: return is_namespace() ? "Namespace" : "dict";
    case Type::kCallable: return "function";
  }
  return "object";
}

int Value::depth() const {
  if (is_list()) return list_obj().depth;
  if (is_dict()) return dict_obj().depth();
  return 0;
}

std::size_t Value::hash() const {
  switch (type()) {
    case Type::kBool: case Type::kInt: return std::hash<int64_t>{}(as_int());
    case Type::kFloat: {
      const double f = as_float();
      if (std::isfinite(f) && f == std::floor(f) && std::fabs(f) < 9.2e18)
        return std::hash<int64_t>{}(static_cast<int64_t>(f));
      return std::hash<double>{}(f);
    }
    case Type::kString: return std::hash<std::string>{}(str());
    case Type::kList: {
      std::size_t h = 0x345678;
      for (const Value& v : items()) h = h * 1000003 ^ v.hash();
      return h;
    }
    default: return static_cast<std::size_t>(type()) * 0x9E3779B9u;
  }
}

}  // namespace ds::chat
