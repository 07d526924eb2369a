#include "model/chat/interpreter.h"

#include <cmath>
#include <limits>

#include "model/chat/builtins.h"
#include "model/chat/operators.h"
#include "model/chat/py_format.h"
#include "model/chat/py_string.h"
#include "model/chat/template_error.h"

namespace ds::chat {

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
      return binary_op(*this, e.name, a, b);
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
        if (!compare_op(op, left, right)) return Value(false);
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
