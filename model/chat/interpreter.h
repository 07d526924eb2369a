// Interpreter: renders a parsed template (parser.h) with a set of variables, following
// jinja2's runtime semantics as HF's ImmutableSandboxedEnvironment sees them.
//
// Scoping, as in jinja2: a for-loop iteration, a macro call, a with-block and a call-block
// body each get their own frame; `set` writes to the innermost frame, so assignments inside a
// loop are gone after the iteration (templates use namespace() to carry state out), while an
// `if` body shares its enclosing frame. A macro sees the frames enclosing its definition as
// they are when it is called. Lookup goes frame by frame, then the render variables, then the
// globals (range, namespace, dict, raise_exception, strftime_now, joiner).
//
// Attribute and item access follow jinja2's sandbox: obj.name tries a Python attribute first
// (dict methods such as items/get, str methods), then obj["name"]; obj[key] tries the item
// first, then the attribute; a missing one is Undefined. Using Undefined in arithmetic, as a
// callee or for attribute access raises, with jinja2's message ("'x' is undefined", "'dict
// object' has no attribute 'y'").
//
// Bounds (RenderLimits) make any template terminate: a step budget (every evaluated node and
// loop iteration counts), a macro call depth, a maximum size for every produced string and for
// range(). Exceeding one is a TemplateRuntimeError.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/chat/ast.h"
#include "model/chat/lexer.h"
#include "model/chat/parser.h"
#include "model/chat/value.h"

namespace ds::chat {

struct RenderLimits {
  int64_t max_steps = 5'000'000;
  int max_call_depth = 64;
  std::size_t max_string_bytes = 32u << 20;
  int64_t max_range = 100'000;  // jinja2's sandbox MAX_RANGE
};

// An error raised by a builtin without a location; the interpreter adds "NAME:LINE:COLUMN"
// of the expression being evaluated and rethrows it as TemplateRuntimeError.
struct EvalError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
[[noreturn]] void eval_fail(const std::string& message);

// Python's a < b for numbers, strings and same-kind sequences; eval_fail otherwise.
bool py_less(const Value& a, const Value& b);
// Python's len(); eval_fail for values without a length.
int64_t py_length(const Value& v);

class Interpreter;

// One scope. Frames live on the C++ stack of the interpreter, strictly nested; a frame has
// few variables, so they sit in a small vector.
class Frame {
 public:
  Frame(Interpreter& interp, Frame* parent);
  ~Frame();
  Frame(const Frame&) = delete;
  Frame& operator=(const Frame&) = delete;

  Frame* parent() const { return parent_; }
  uint64_t id() const { return id_; }
  void set(const std::string& name, Value value);
  const Value* find(std::string_view name) const;

 private:
  Interpreter& interp_;
  Frame* parent_;
  uint64_t id_;
  std::vector<std::pair<std::string, Value>> vars_;
};

class Interpreter {
 public:
  Interpreter(const ParsedTemplate& tmpl, const RenderLimits& limits, const Value& variables);
  ~Interpreter();

  std::string render();

  // ---- services for builtins (builtins.h) ----
  const RenderLimits& limits() const { return limits_; }
  Value getattr(const Value& obj, const std::string& name);
  Value getitem(const Value& obj, const Value& key);
  // Calls any callable value.
  Value call(const Value& callee, CallArgs& args);
  Value apply_filter(const std::string& name, const Value& input, CallArgs& args);
  bool apply_test(const std::string& name, const Value& input, CallArgs& args);
  // The elements a for-loop would visit (list items, dict keys, string characters).
  Value to_list(const Value& v);
  void check_size(std::size_t bytes) const;
  // Registers a namespace so render() can break reference cycles between namespaces.
  void track(const Value& ns);
  void count_step();

 private:
  friend class Frame;
  enum class Flow { kNormal, kBreak, kContinue };

  Flow exec_body(const Body& body, Frame& frame, std::string& out);
  Flow exec(const Stmt& s, Frame& frame, std::string& out);
  Flow exec_for(const Stmt& s, Frame& frame, std::string& out);
  void exec_set(const Stmt& s, Frame& frame, std::string& out);
  void define_macro(const Stmt& s, Frame& frame);
  std::string render_macro(const Stmt& s, Frame* closure, uint64_t closure_id, CallArgs& args);
  void exec_call_block(const Stmt& s, Frame& frame, std::string& out);

  Value eval(const Expr& e, Frame& frame);
  Value eval_inner(const Expr& e, Frame& frame);
  Value eval_call(const Expr& e, Frame& frame);
  Value eval_filter(const Expr& e, Frame& frame, const Value* block_input);
  CallArgs eval_args(const Arguments& a, Frame& frame);
  Value lookup(const std::string& name, Frame& frame);
  void assign(Frame& frame, const std::vector<std::string>& targets, bool tuple, const Value& v);
  Frame* live_frame(Frame* f, uint64_t id) const;

  [[noreturn]] void fail_at(std::size_t offset, const std::string& message) const;

  const ParsedTemplate& tmpl_;
  RenderLimits limits_;
  Value variables_;
  std::unordered_map<std::string, Value> globals_;
  std::vector<const Frame*> frame_stack_;  // the live frames, innermost last
  uint64_t next_frame_id_ = 1;
  Frame* root_ = nullptr;
  int64_t steps_ = 0;
  int call_depth_ = 0;
  std::vector<Value> namespaces_;
};

}  // namespace ds::chat
