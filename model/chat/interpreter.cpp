#include "model/chat/interpreter.h"

#include <cmath>
#include <limits>

#include "model/chat/builtins.h"
#include "model/chat/py_format.h"
#include "model/chat/py_string.h"
#include "model/chat/template_error.h"

namespace ds::chat {

void eval_fail(const std::string& message) { throw EvalError(message); }

namespace {

[[noreturn]] void undefined_error(const Value& v) { eval_fail(v.undefined_reason()); }

std::string type_object(const Value& v) { return "'" + v.type_name() + " object'"; }

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

Value arith(Interpreter& in, const std::string& op, const Value& a, const Value& b) {
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

bool compare(const std::string& op, const Value& a, const Value& b) {
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

}  // namespace

// ---- Frame ----

Frame::Frame(Interpreter& interp, Frame* parent)
    : interp_(interp), parent_(parent), id_(interp.next_frame_id_++) {
  interp_.frame_stack_.push_back(this);
}

Frame::~Frame() { interp_.frame_stack_.pop_back(); }

void Frame::set(const std::string& name, Value value) {
  for (auto& [k, v] : vars_) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  vars_.emplace_back(name, std::move(value));
}

const Value* Frame::find(std::string_view name) const {
  for (const auto& [k, v] : vars_)
    if (k == name) return &v;
  return nullptr;
}

// ---- Interpreter ----

Interpreter::Interpreter(const ParsedTemplate& tmpl, const RenderLimits& limits,
                         const Value& variables)
    : tmpl_(tmpl), limits_(limits), variables_(variables), globals_(make_globals()) {}

Interpreter::~Interpreter() = default;

void Interpreter::fail_at(std::size_t offset, const std::string& message) const {
  throw TemplateRuntimeError(tmpl_.map->where(offset) + ": " + message);
}

void Interpreter::check_size(std::size_t bytes) const {
  if (bytes > limits_.max_string_bytes)
    eval_fail("output too large (over " + std::to_string(limits_.max_string_bytes) + " bytes)");
}

void Interpreter::count_step() {
  if (++steps_ > limits_.max_steps)
    eval_fail("template rendering exceeded " + std::to_string(limits_.max_steps) + " steps");
}

void Interpreter::track(const Value& ns) { namespaces_.push_back(ns); }

std::string Interpreter::render() {
  std::string out;
  try {
    Frame root(*this, nullptr);
    root_ = &root;
    try {
      exec_body(tmpl_.body, root, out);
    } catch (const EvalError& e) {
      // Raised outside any expression (a statement-level check).
      throw TemplateRuntimeError(tmpl_.map->name() + ": " + e.what());
    }
  } catch (...) {
    for (Value& ns : namespaces_) ns.mutable_dict().clear();
    namespaces_.clear();
    throw;
  }
  // Namespaces may reference each other (ns.a = ns); emptying them breaks any cycle.
  for (Value& ns : namespaces_) ns.mutable_dict().clear();
  namespaces_.clear();
  return out;
}

// A closure's frame, if it is still alive (a macro can outlive the loop iteration that
// defined it by being stored in a namespace); otherwise the root frame.
Frame* Interpreter::live_frame(Frame* f, uint64_t id) const {
  for (auto it = frame_stack_.rbegin(); it != frame_stack_.rend(); ++it)
    if (*it == f && f->id() == id) return f;
  return root_;
}

Value Interpreter::lookup(const std::string& name, Frame& frame) {
  for (Frame* f = &frame; f; f = f->parent()) {
    if (const Value* v = f->find(name)) return *v;
  }
  if (variables_.is_dict())
    if (const Value* v = variables_.dict_obj().find(std::string_view(name))) return *v;
  const auto it = globals_.find(name);
  if (it != globals_.end()) return it->second;
  return Value::undefined("'" + name + "' is undefined");
}

Value Interpreter::to_list(const Value& v) {
  switch (v.type()) {
    case Value::Type::kList:
      return v;
    case Value::Type::kDict: {
      if (v.is_namespace()) break;
      std::vector<Value> keys;
      keys.reserve(v.dict_obj().size());
      for (const auto& [k, val] : v.dict_obj().items()) keys.push_back(k);
      return Value::list(std::move(keys));
    }
    case Value::Type::kString: {
      std::vector<Value> chars;
      for (std::string& c : py_chars(v.str())) chars.emplace_back(std::move(c));
      return Value::list(std::move(chars));
    }
    case Value::Type::kUndefined:
      return Value::list({});
    default:
      break;
  }
  eval_fail(type_object(v) + " is not iterable");
}

Value Interpreter::getattr(const Value& obj, const std::string& name) {
  switch (obj.type()) {
    case Value::Type::kUndefined:
      undefined_error(obj);
    case Value::Type::kDict:
      if (!obj.is_namespace() && has_method(obj, name)) break;
      if (const Value* v = obj.dict_obj().find(std::string_view(name))) return *v;
      return Value::undefined(std::string(obj.is_namespace() ? "'Namespace object'" : "'dict object'") +
                              " has no attribute '" + name + "'");
    default:
      break;
  }
  if (has_method(obj, name)) {
    const Value self = obj;
    const std::string method = name;
    return Value::function(obj.type_name() + "." + name, [self, method](Interpreter& in, CallArgs& args) {
      return call_method(in, self, method, args);
    });
  }
  return Value::undefined(type_object(obj) + " has no attribute '" + name + "'");
}

Value Interpreter::getitem(const Value& obj, const Value& key) {
  switch (obj.type()) {
    case Value::Type::kUndefined:
      undefined_error(obj);
    case Value::Type::kDict: {
      if (obj.is_namespace()) break;
      if (key.is_list() && !key.list_obj().is_tuple) eval_fail("unhashable type: 'list'");
      if (const Value* v = obj.dict_obj().find(key)) return *v;
      if (key.is_string() && has_method(obj, key.str())) return getattr(obj, key.str());
      return Value::undefined("'dict object' has no attribute " + py_repr(key));
    }
    case Value::Type::kList:
    case Value::Type::kString: {
      if (key.is_int() || key.is_bool()) {
        const bool is_str = obj.is_string();
        std::vector<std::string> chars;
        if (is_str) chars = py_chars(obj.str());
        const int64_t n = is_str ? static_cast<int64_t>(chars.size())
                                 : static_cast<int64_t>(obj.items().size());
        int64_t i = key.as_int();
        if (i < 0) i += n;
        if (i < 0 || i >= n)
          return Value::undefined(type_object(obj) + " has no element " + py_repr(key));
        if (is_str) return Value(std::move(chars[static_cast<std::size_t>(i)]));
        return obj.items()[static_cast<std::size_t>(i)];
      }
      if (key.is_string()) return getattr(obj, key.str());
      return Value::undefined(type_object(obj) + " has no element " + py_repr(key));
    }
    default:
      break;
  }
  if (key.is_string()) return getattr(obj, key.str());
  return Value::undefined(type_object(obj) + " has no element " + py_repr(key));
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) undefined_error(callee);
  if (!callee.is_callable()) eval_fail(type_object(callee) + " is not callable");
  return callee.callable().fn(*this, args);
}

Value Interpreter::apply_filter(const std::string& name, const Value& input, CallArgs& args) {
  return call_filter(*this, name, input, args);
}

bool Interpreter::apply_test(const std::string& name, const Value& input, CallArgs& args) {
  return call_test(*this, name, input, args);
}

// ---- statements ----

Interpreter::Flow Interpreter::exec_body(const Body& body, Frame& frame, std::string& out) {
  for (const StmtPtr& s : body) {
    const Flow flow = exec(*s, frame, out);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec(const Stmt& s, Frame& frame, std::string& out) {
  try {
    count_step();
  } catch (const EvalError& e) {
    fail_at(s.offset, e.what());
  }
  switch (s.kind) {
    case StmtKind::kText:
      out += s.text;
      if (out.size() > limits_.max_string_bytes) fail_at(s.offset, "output too large");
      return Flow::kNormal;
    case StmtKind::kOutput: {
      const Value v = eval(*s.expr, frame);
      out += py_str(v);
      if (out.size() > limits_.max_string_bytes) fail_at(s.offset, "output too large");
      return Flow::kNormal;
    }
    case StmtKind::kIf:
      for (const auto& [cond, body] : s.branches)
        if (eval(*cond, frame).truthy()) return exec_body(body, frame, out);
      return exec_body(s.else_body, frame, out);
    case StmtKind::kFor:
      return exec_for(s, frame, out);
    case StmtKind::kSet:
    case StmtKind::kSetBlock:
      exec_set(s, frame, out);
      return Flow::kNormal;
    case StmtKind::kMacro:
      define_macro(s, frame);
      return Flow::kNormal;
    case StmtKind::kCallBlock:
      exec_call_block(s, frame, out);
      return Flow::kNormal;
    case StmtKind::kFilterBlock: {
      std::string inner;
      Frame child(*this, &frame);
      exec_body(s.body, child, inner);
      const Value input(std::move(inner));
      out += py_str(eval_filter(*s.filter, frame, &input));
      if (out.size() > limits_.max_string_bytes) fail_at(s.offset, "output too large");
      return Flow::kNormal;
    }
    case StmtKind::kWith: {
      Frame child(*this, &frame);
      for (const auto& [name, expr] : s.assignments) child.set(name, eval(*expr, child));
      return exec_body(s.body, child, out);
    }
    case StmtKind::kBreak:
      return Flow::kBreak;
    case StmtKind::kContinue:
      return Flow::kContinue;
    case StmtKind::kBlock:
      return exec_body(s.body, frame, out);
  }
  return Flow::kNormal;
}

void Interpreter::assign(Frame& frame, const std::vector<std::string>& targets, bool tuple,
                         const Value& v) {
  if (!tuple) {
    frame.set(targets[0], v);
    return;
  }
  if (v.is_undefined()) undefined_error(v);
  if (!v.is_list() && !v.is_string() && !(v.is_dict() && !v.is_namespace()))
    eval_fail("cannot unpack non-iterable " + v.type_name() + " object");
  const Value items = to_list(v);
  const std::size_t n = items.items().size();
  if (n > targets.size())
    eval_fail("too many values to unpack (expected " + std::to_string(targets.size()) + ")");
  if (n < targets.size())
    eval_fail("not enough values to unpack (expected " + std::to_string(targets.size()) +
              ", got " + std::to_string(n) + ")");
  for (std::size_t i = 0; i < n; ++i) frame.set(targets[i], items.items()[i]);
}

Interpreter::Flow Interpreter::exec_for(const Stmt& s, Frame& frame, std::string& out) {
  const Value iterable = eval(*s.iter, frame);
  Value seq;
  try {
    seq = to_list(iterable);
  } catch (const EvalError& e) {
    fail_at(s.iter->offset, e.what());
  }
  std::vector<Value> filtered;
  const std::vector<Value>* items = &seq.items();
  if (s.filter) {
    for (const Value& item : *items) {
      Frame probe(*this, &frame);
      try {
        assign(probe, s.targets, s.target_is_tuple, item);
      } catch (const EvalError& e) {
        fail_at(s.offset, e.what());
      }
      if (eval(*s.filter, probe).truthy()) filtered.push_back(item);
    }
    items = &filtered;
  }
  const auto n = static_cast<int64_t>(items->size());
  if (n == 0) {
    Frame child(*this, &frame);
    const Flow flow = exec_body(s.else_body, child, out);
    return flow == Flow::kBreak || flow == Flow::kContinue ? Flow::kNormal : flow;
  }
  // One loop object per loop, updated in place each iteration (jinja2's LoopContext is
  // likewise a single mutable object). Its keys never change, so slots are fixed.
  enum Slot { kIndex, kIndex0, kRevindex, kRevindex0, kFirst, kLast, kLength, kDepth, kDepth0,
              kPrevitem, kNextitem, kCycle, kSlots };
  static const char* const kSlotNames[kSlots] = {"index", "index0", "revindex", "revindex0",
                                                 "first", "last", "length", "depth", "depth0",
                                                 "previtem", "nextitem", "cycle"};
  auto index_cell = std::make_shared<int64_t>(0);
  Value loop = Value::dict();
  DictObj& d = loop.mutable_dict();
  for (const char* name : kSlotNames) d.set(Value(name), Value());
  d.value_at(kLength) = Value(n);
  d.value_at(kDepth) = Value(1);
  d.value_at(kDepth0) = Value(0);
  d.value_at(kCycle) = Value::function("loop.cycle", [index_cell](Interpreter&, CallArgs& args) {
    if (args.positional.empty()) eval_fail("no items for cycling given");
    return args.positional[static_cast<std::size_t>(*index_cell) % args.positional.size()];
  });
  const Value no_item = Value::undefined("there is no previous or next item");
  for (int64_t i = 0; i < n; ++i) {
    try {
      count_step();
    } catch (const EvalError& e) {
      fail_at(s.offset, e.what());
    }
    *index_cell = i;
    Frame child(*this, &frame);
    try {
      assign(child, s.targets, s.target_is_tuple, (*items)[static_cast<std::size_t>(i)]);
    } catch (const EvalError& e) {
      fail_at(s.offset, e.what());
    }
    d.value_at(kIndex) = Value(i + 1);
    d.value_at(kIndex0) = Value(i);
    d.value_at(kRevindex) = Value(n - i);
    d.value_at(kRevindex0) = Value(n - i - 1);
    d.value_at(kFirst) = Value(i == 0);
    d.value_at(kLast) = Value(i == n - 1);
    d.value_at(kPrevitem) = i > 0 ? (*items)[static_cast<std::size_t>(i - 1)] : no_item;
    d.value_at(kNextitem) = i + 1 < n ? (*items)[static_cast<std::size_t>(i + 1)] : no_item;
    child.set("loop", loop);
    const Flow flow = exec_body(s.body, child, out);
    if (flow == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

void Interpreter::exec_set(const Stmt& s, Frame& frame, std::string& out) {
  Value v;
  if (s.kind == StmtKind::kSet) {
    v = eval(*s.expr, frame);
  } else {
    std::string inner;
    {
      Frame child(*this, &frame);
      exec_body(s.body, child, inner);
    }
    Value input(std::move(inner));
    v = s.filter ? eval_filter(*s.filter, frame, &input) : input;
  }
  if (!s.attribute.empty()) {
    const Value target = lookup(s.targets[0], frame);
    if (!target.is_namespace()) fail_at(s.offset, "cannot assign attribute on non-namespace object");
    target.mutable_dict().set(Value(s.attribute), std::move(v));
    return;
  }
  try {
    assign(frame, s.targets, s.target_is_tuple, v);
  } catch (const EvalError& e) {
    fail_at(s.offset, e.what());
  }
  (void)out;
}

void Interpreter::define_macro(const Stmt& s, Frame& frame) {
  Frame* closure = &frame;
  const uint64_t closure_id = frame.id();
  const Stmt* macro = &s;
  frame.set(s.name, Value::function(s.name, [macro, closure, closure_id](Interpreter& in, CallArgs& args) {
    return Value(in.render_macro(*macro, closure, closure_id, args));
  }));
}

std::string Interpreter::render_macro(const Stmt& s, Frame* closure, uint64_t closure_id,
                                      CallArgs& args) {
  if (call_depth_ >= limits_.max_call_depth)
    eval_fail("macro calls nested more than " + std::to_string(limits_.max_call_depth) + " deep");
  struct DepthGuard {
    int& d;
    explicit DepthGuard(int& depth) : d(depth) { ++d; }
    ~DepthGuard() { --d; }
  } guard(call_depth_);

  Frame frame(*this, live_frame(closure, closure_id));
  const std::size_t n_params = s.params.size();
  std::vector<bool> bound(n_params, false);
  std::vector<Value> extra_positional;
  for (std::size_t i = 0; i < args.positional.size(); ++i) {
    if (i < n_params) {
      frame.set(s.params[i].name, args.positional[i]);
      bound[i] = true;
    } else {
      extra_positional.push_back(args.positional[i]);
    }
  }
  if (!extra_positional.empty() && !s.uses_varargs)
    eval_fail("macro '" + s.name + "' takes not more than " + std::to_string(n_params) +
              " argument(s)");
  Value kwargs = Value::dict();
  Value caller;
  bool have_caller = false;
  for (auto& [key, value] : args.keyword) {
    bool matched = false;
    for (std::size_t i = 0; i < n_params; ++i) {
      if (s.params[i].name == key) {
        if (bound[i]) eval_fail("macro '" + s.name + "' got multiple values for argument '" + key + "'");
        frame.set(key, value);
        bound[i] = true;
        matched = true;
        break;
      }
    }
    if (matched) continue;
    if (key == "caller") {
      caller = value;
      have_caller = true;
      continue;
    }
    if (!s.uses_kwargs) eval_fail("macro '" + s.name + "' takes no keyword argument '" + key + "'");
    kwargs.mutable_dict().set(Value(key), value);
  }
  for (std::size_t i = 0; i < n_params; ++i) {
    if (bound[i]) continue;
    const MacroParam& p = s.params[i];
    frame.set(p.name, p.default_value
                             ? eval(*p.default_value, frame)
                             : Value::undefined("parameter '" + p.name + "' was not provided"));
  }
  frame.set("varargs", Value::list(std::move(extra_positional), true));
  frame.set("kwargs", kwargs);
  if (have_caller) frame.set("caller", caller);
  std::string out;
  exec_body(s.body, frame, out);
  return out;
}

void Interpreter::exec_call_block(const Stmt& s, Frame& frame, std::string& out) {
  const Expr& call_expr = *s.expr;
  const Value callee = eval(*call_expr.object, frame);
  CallArgs args = eval_args(call_expr.args, frame);
  Frame* site = &frame;
  const uint64_t site_id = frame.id();
  const Stmt* block = &s;
  args.keyword.emplace_back("caller", Value::function("caller", [block, site, site_id](Interpreter& in, CallArgs& cargs) {
    if (in.call_depth_ >= in.limits_.max_call_depth) eval_fail("caller() nested too deep");
    Frame f(in, in.live_frame(site, site_id));
    for (std::size_t i = 0; i < block->params.size(); ++i) {
      const Value* v = cargs.get(i, block->params[i].name);
      f.set(block->params[i].name,
            v ? *v
              : (block->params[i].default_value ? in.eval(*block->params[i].default_value, f)
                                                : Value::undefined("caller parameter '" +
                                                                   block->params[i].name +
                                                                   "' was not provided")));
    }
    ++in.call_depth_;
    std::string inner;
    try {
      in.exec_body(block->body, f, inner);
    } catch (...) {
      --in.call_depth_;
      throw;
    }
    --in.call_depth_;
    return Value(std::move(inner));
  }));
  Value result;
  try {
    result = call(callee, args);
  } catch (const EvalError& e) {
    fail_at(call_expr.offset, e.what());
  }
  out += py_str(result);
  if (out.size() > limits_.max_string_bytes) fail_at(s.offset, "output too large");
}

// ---- expressions ----

CallArgs Interpreter::eval_args(const Arguments& a, Frame& frame) {
  CallArgs args;
  args.positional.reserve(a.positional.size());
  for (const ExprPtr& e : a.positional) args.positional.push_back(eval(*e, frame));
  for (const auto& [k, e] : a.keyword) args.keyword.emplace_back(k, eval(*e, frame));
  return args;
}

Value Interpreter::eval(const Expr& e, Frame& frame) {
  try {
    count_step();
    return eval_inner(e, frame);
  } catch (const EvalError& err) {
    fail_at(e.offset, err.what());
  }
}

Value Interpreter::eval_filter(const Expr& e, Frame& frame, const Value* block_input) {
  Value input;
  if (!e.object) {
    input = *block_input;
  } else if (e.object->kind == ExprKind::kFilter && block_input) {
    input = eval_filter(*e.object, frame, block_input);
  } else {
    input = eval(*e.object, frame);
  }
  CallArgs args = eval_args(e.args, frame);
  try {
    return apply_filter(e.name, input, args);
  } catch (const EvalError& err) {
    fail_at(e.offset, err.what());
  }
}

Value Interpreter::eval_call(const Expr& e, Frame& frame) {
  const Expr& target = *e.object;
  if (target.kind == ExprKind::kGetAttr) {
    const Value obj = eval(*target.object, frame);
    if (!obj.is_undefined() && has_method(obj, target.name)) {
      CallArgs args = eval_args(e.args, frame);
      return call_method(*this, obj, target.name, args);
    }
    const Value callee = getattr(obj, target.name);
    CallArgs args = eval_args(e.args, frame);
    return call(callee, args);
  }
  const Value callee = eval(target, frame);
  CallArgs args = eval_args(e.args, frame);
  return call(callee, args);
}

Value Interpreter::eval_inner(const Expr& e, Frame& frame) {
  switch (e.kind) {
    case ExprKind::kLiteral:
      return e.value;
    case ExprKind::kName:
      return lookup(e.name, frame);
    case ExprKind::kList:
    case ExprKind::kTuple: {
      std::vector<Value> items;
      items.reserve(e.items.size());
      for (const ExprPtr& item : e.items) items.push_back(eval(*item, frame));
      return Value::list(std::move(items), e.kind == ExprKind::kTuple);
    }
    case ExprKind::kDict: {
      Value d = Value::dict();
      for (const auto& [k, v] : e.pairs) {
        Value key = eval(*k, frame);
        if ((key.is_list() && !key.list_obj().is_tuple) || key.is_dict() || key.is_undefined())
          eval_fail("unhashable type: '" + key.type_name() + "'");
        d.mutable_dict().set(key, eval(*v, frame));
      }
      return d;
    }
    case ExprKind::kGetAttr:
      return getattr(eval(*e.object, frame), e.name);
    case ExprKind::kGetItem:
      return getitem(eval(*e.object, frame), eval(*e.index, frame));
    case ExprKind::kSlice: {
      const Value obj = eval(*e.object, frame);
      const Value start = e.start ? eval(*e.start, frame) : Value::none();
      const Value stop = e.stop ? eval(*e.stop, frame) : Value::none();
      const Value step = e.step ? eval(*e.step, frame) : Value::none();
      if (obj.is_undefined()) undefined_error(obj);
      if (obj.is_string()) {
        const std::vector<std::string> chars = py_chars(obj.str());
        std::string out;
        for (const std::size_t i : slice_indices(static_cast<int64_t>(chars.size()), start, stop, step))
          out += chars[i];
        return Value(std::move(out));
      }
      if (obj.is_list()) {
        std::vector<Value> out;
        for (const std::size_t i :
             slice_indices(static_cast<int64_t>(obj.items().size()), start, stop, step))
          out.push_back(obj.items()[i]);
        return Value::list(std::move(out), obj.list_obj().is_tuple);
      }
      return Value::undefined(type_object(obj) + " is not subscriptable");
    }
    case ExprKind::kCall:
      return eval_call(e, frame);
    case ExprKind::kFilter:
      return eval_filter(e, frame, nullptr);
    case ExprKind::kTest: {
      const Value input = eval(*e.object, frame);
      CallArgs args = eval_args(e.args, frame);
      return Value(apply_test(e.name, input, args));
    }
    case ExprKind::kNot:
      return Value(!eval(*e.object, frame).truthy());
    case ExprKind::kNeg:
    case ExprKind::kPos: {
      const Value v = eval(*e.object, frame);
      if (v.is_undefined()) undefined_error(v);
      if (!v.is_number())
        eval_fail(std::string("bad operand type for unary ") + (e.kind == ExprKind::kNeg ? "-" : "+") +
                  ": '" + v.type_name() + "'");
      if (e.kind == ExprKind::kPos) return v.is_bool() ? Value(v.as_int()) : v;
      if (v.is_float()) return Value(-v.as_float());
      if (v.as_int() == std::numeric_limits<int64_t>::min()) eval_fail("integer overflow");
      return Value(-v.as_int());
    }
    case ExprKind::kBinary: {
      const Value a = eval(*e.lhs, frame);
      const Value b = eval(*e.index, frame);
      return arith(*this, e.name, a, b);
    }
    case ExprKind::kAnd: {
      Value a = eval(*e.lhs, frame);
      if (!a.truthy()) return a;
      return eval(*e.index, frame);
    }
    case ExprKind::kOr: {
      Value a = eval(*e.lhs, frame);
      if (a.truthy()) return a;
      return eval(*e.index, frame);
    }
    case ExprKind::kCompare: {
      Value left = eval(*e.object, frame);
      for (const auto& [op, operand] : e.comparisons) {
        Value right = eval(*operand, frame);
        if (!compare(op, left, right)) return Value(false);
        left = std::move(right);
      }
      return Value(true);
    }
    case ExprKind::kCondExpr:
      if (eval(*e.index, frame).truthy()) return eval(*e.lhs, frame);
      if (e.otherwise) return eval(*e.otherwise, frame);
      return Value::undefined("the inline if-expression evaluated to false and no else section was defined");
  }
  eval_fail("unknown expression");
}

}  // namespace ds::chat
