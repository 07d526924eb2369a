// The template interpreter's statements: bodies, if / for / set / macro / call blocks
// (interpreter.h).
#include "model/chat/interpreter.h"

#include "model/chat/builtins.h"
#include "model/chat/operators.h"
#include "model/chat/py_format.h"
#include "model/chat/template_error.h"

namespace ds::chat {

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

}  // namespace ds::chat
