// Python's operators for the template interpreter: arithmetic, comparison, membership,
// len() and the errors they raise (interpreter.h, operators.h).
#include "model/chat/operators.h"

#include <cmath>
#include <limits>

#include "model/chat/builtins.h"
#include "model/chat/py_format.h"
#include "model/chat/py_string.h"
#include "model/chat/template_error.h"

namespace ds::chat {

void eval_fail(const std::string& message) { throw EvalError(message); }

void undefined_error(const Value& v) { eval_fail(v.undefined_reason()); }

std::string type_object(const Value& v) { return "'" + v.type_name() + " object'"; }

namespace {

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  eval_fail("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" +
            b.type_name() + "'");
}

bool checked_mul(int64_t a, int64_t b, int64_t& out) { return !__builtin_mul_overflow(a, b, &out); }

int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) eval_fail("integer division or modulo by zero");
  if (a == std::numeric_limits<int64_t>::min() && b == -1) eval_fail("integer overflow");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t floor_mod(int64_t a, int64_t b) {
  if (b == 0) eval_fail("integer division or modulo by zero");
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

double float_mod(double a, double b) {
  if (b == 0.0) eval_fail("float modulo");
  double r = std::fmod(a, b);
  if (r != 0.0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

}  // namespace

Value binary_op(Interpreter& in, const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = py_str(a);
    s += py_str(b);
    in.check_size(s.size());
    return Value(std::move(s));
  }
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  const bool nums = a.is_number() && b.is_number();
  const bool ints = nums && !a.is_float() && !b.is_float();
  if (op == "+") {
    if (ints) {
      int64_t r;
      if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) eval_fail("integer overflow");
      return Value(r);
    }
    if (nums) return Value(a.as_float() + b.as_float());
    if (a.is_string() && b.is_string()) {
      in.check_size(a.str().size() + b.str().size());
      return Value(a.str() + b.str());
    }
    if (a.is_list() && b.is_list() && a.list_obj().is_tuple == b.list_obj().is_tuple) {
      std::vector<Value> items = a.items();
      items.insert(items.end(), b.items().begin(), b.items().end());
      in.check_size(items.size() * sizeof(Value));
      return Value::list(std::move(items), a.list_obj().is_tuple);
    }
    if (a.is_string())
      eval_fail("can only concatenate str (not \"" + b.type_name() + "\") to str");
    unsupported("+", a, b);
  }
  if (op == "-") {
    if (ints) {
      int64_t r;
      if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) eval_fail("integer overflow");
      return Value(r);
    }
    if (nums) return Value(a.as_float() - b.as_float());
    unsupported("-", a, b);
  }
  if (op == "*") {
    if (ints) {
      int64_t r;
      if (!checked_mul(a.as_int(), b.as_int(), r)) eval_fail("integer overflow");
      return Value(r);
    }
    if (nums) return Value(a.as_float() * b.as_float());
    const Value* seq = nullptr;
    const Value* count = nullptr;
    if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) {
      seq = &a;
      count = &b;
    } else if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) {
      seq = &b;
      count = &a;
    }
    if (!seq) unsupported("*", a, b);
    const int64_t n = std::max<int64_t>(0, count->as_int());
    if (seq->is_string()) {
      const std::size_t unit = seq->str().size();
      if (unit && static_cast<uint64_t>(n) > in.limits().max_string_bytes / unit)
        in.check_size(in.limits().max_string_bytes + 1);
      std::string s;
      s.reserve(unit * static_cast<std::size_t>(n));
      for (int64_t i = 0; i < n; ++i) s += seq->str();
      return Value(std::move(s));
    }
    const std::size_t unit = seq->items().size();
    if (unit && static_cast<uint64_t>(n) > in.limits().max_string_bytes / (unit * sizeof(Value)))
      in.check_size(in.limits().max_string_bytes + 1);
    std::vector<Value> items;
    for (int64_t i = 0; i < n; ++i)
      items.insert(items.end(), seq->items().begin(), seq->items().end());
    return Value::list(std::move(items), seq->list_obj().is_tuple);
  }
  if (op == "/") {
    if (!nums) unsupported("/", a, b);
    if (b.as_float() == 0.0) eval_fail("division by zero");
    return Value(a.as_float() / b.as_float());
  }
  if (op == "//") {
    if (ints) return Value(floor_div(a.as_int(), b.as_int()));
    if (nums) {
      if (b.as_float() == 0.0) eval_fail("float floor division by zero");
      return Value(std::floor(a.as_float() / b.as_float()));
    }
    unsupported("//", a, b);
  }
  if (op == "%") {
    if (a.is_string()) return Value(py_percent_format(in, a.str(), b));
    if (ints) return Value(floor_mod(a.as_int(), b.as_int()));
    if (nums) return Value(float_mod(a.as_float(), b.as_float()));
    unsupported("%", a, b);
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) {
      int64_t result = 1, base = a.as_int(), e = b.as_int();
      while (e > 0) {
        if ((e & 1) && !checked_mul(result, base, result)) eval_fail("integer overflow");
        e >>= 1;
        if (e > 0 && !checked_mul(base, base, base)) eval_fail("integer overflow");
      }
      return Value(result);
    }
    if (nums) {
      if (a.as_float() == 0.0 && b.as_float() < 0)
        eval_fail("0.0 cannot be raised to a negative power");
      return Value(std::pow(a.as_float(), b.as_float()));
    }
    unsupported("**", a, b);
  }
  eval_fail("unknown operator " + op);
}

// Python's <, for the types that support ordering.
namespace {

bool less_than(const Value& a, const Value& b, const char* op) {
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() < b.as_float();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 order = code points
  if (a.is_list() && b.is_list() && a.list_obj().is_tuple == b.list_obj().is_tuple) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (x[i].equals(y[i])) continue;
      return less_than(x[i], y[i], op);
    }
    return x.size() < y.size();
  }
  eval_fail(std::string("'") + op + "' not supported between instances of '" + a.type_name() +
            "' and '" + b.type_name() + "'");
}

}  // namespace

bool py_less(const Value& a, const Value& b) { return less_than(a, b, "<"); }

int64_t py_length(const Value& v) {
  switch (v.type()) {
    case Value::Type::kString: return static_cast<int64_t>(py_len(v.str()));
    case Value::Type::kList: return static_cast<int64_t>(v.items().size());
    case Value::Type::kDict:
      if (v.is_namespace()) break;
      return static_cast<int64_t>(v.dict_obj().size());
    case Value::Type::kUndefined: return 0;
    default: break;
  }
  eval_fail("object of type '" + v.type_name() + "' has no len()");
}

namespace {

bool contains(const Value& container, const Value& item) {
  switch (container.type()) {
    case Value::Type::kString:
      if (!item.is_string())
        eval_fail("'in <string>' requires string as left operand, not " + item.type_name());
      return container.str().find(item.str()) != std::string::npos;
    case Value::Type::kList:
      for (const Value& v : container.items())
        if (v.equals(item)) return true;
      return false;
    case Value::Type::kDict:
      if (container.is_namespace()) break;
      if (item.is_list() && !item.list_obj().is_tuple) eval_fail("unhashable type: 'list'");
      if (item.is_dict()) eval_fail("unhashable type: 'dict'");
      return container.dict_obj().find(item) != nullptr;
    case Value::Type::kUndefined:
      return false;
    default:
      break;
  }
  eval_fail("argument of type '" + container.type_name() + "' is not iterable");
}

}  // namespace

bool compare_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return a.equals(b);
  if (op == "!=") return !a.equals(b);
  if (op == "<") return less_than(a, b, "<");
  if (op == ">") return less_than(b, a, ">");
  if (op == "<=") {
    if (a.is_undefined()) undefined_error(a);
    if (b.is_undefined()) undefined_error(b);
    return a.equals(b) || less_than(a, b, "<=");
  }
  if (op == ">=") {
    if (a.is_undefined()) undefined_error(a);
    if (b.is_undefined()) undefined_error(b);
    return a.equals(b) || less_than(b, a, ">=");
  }
  if (op == "in") return contains(b, a);
  if (op == "notin") return !contains(b, a);
  eval_fail("unknown comparison " + op);
}

// Python slice indices for a sequence of length n.
std::vector<std::size_t> slice_indices(int64_t n, const Value& start_v, const Value& stop_v,
                                       const Value& step_v) {
  const auto as_index = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_none() || v.is_undefined()) return std::nullopt;
    if (!v.is_int() && !v.is_bool())
      eval_fail(std::string("slice ") + what + " must be an integer or None");
    return v.as_int();
  };
  const int64_t step = as_index(step_v, "step").value_or(1);
  if (step == 0) eval_fail("slice step cannot be zero");
  const auto clamp = [&](std::optional<int64_t> idx, int64_t fallback) {
    if (!idx) return fallback;
    int64_t i = *idx;
    if (i < 0) i += n;
    if (step > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t start = clamp(as_index(start_v, "start"), step > 0 ? 0 : n - 1);
  const int64_t stop = clamp(as_index(stop_v, "stop"), step > 0 ? n : -1);
  std::vector<std::size_t> out;
  if (step > 0)
    for (int64_t i = start; i < stop; i += step) out.push_back(static_cast<std::size_t>(i));
  else
    for (int64_t i = start; i > stop; i += step) out.push_back(static_cast<std::size_t>(i));
  return out;
}

}  // namespace ds::chat
