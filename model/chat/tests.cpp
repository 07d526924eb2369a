// The tests of builtins.h (`x is name`), following jinja2's definitions, including its
// Python-isms: a bool is a number; a dict is a sequence; Undefined is iterable.
#include <string_view>
#include <unordered_map>

#include "model/chat/builtin_args.h"
#include "model/chat/builtins.h"
#include "model/chat/py_string.h"

namespace ds::chat {
namespace {

const Value& other(const CallArgs& a) {
  const Value* v = a.get(0, "other");
  if (!v) v = a.get(0, "value");
  if (!v) eval_fail("this test needs an argument");
  return *v;
}

bool t_boolean(Interpreter&, const Value& v, CallArgs&) { return v.is_bool(); }
bool t_callable(Interpreter&, const Value& v, CallArgs&) { return v.is_callable(); }
bool t_defined(Interpreter&, const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Interpreter&, const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(Interpreter&, const Value& v, CallArgs&) { return v.is_none(); }
bool t_true(Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); }
bool t_false(Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); }
bool t_integer(Interpreter&, const Value& v, CallArgs&) { return v.is_int(); }
bool t_float(Interpreter&, const Value& v, CallArgs&) { return v.is_float(); }
bool t_number(Interpreter&, const Value& v, CallArgs&) { return v.is_number(); }
bool t_string(Interpreter&, const Value& v, CallArgs&) { return v.is_string(); }
bool t_mapping(Interpreter&, const Value& v, CallArgs&) { return v.is_dict() && !v.is_namespace(); }
bool t_iterable(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() || v.is_list() || (v.is_dict() && !v.is_namespace()) || v.is_undefined();
}
bool t_sequence(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() || v.is_list() || (v.is_dict() && !v.is_namespace()) || v.is_undefined();
}
bool t_escaped(Interpreter&, const Value&, CallArgs&) { return false; }

bool t_eq(Interpreter&, const Value& v, CallArgs& a) { return v.equals(other(a)); }
bool t_ne(Interpreter&, const Value& v, CallArgs& a) { return !v.equals(other(a)); }
bool t_lt(Interpreter&, const Value& v, CallArgs& a) { return py_less(v, other(a)); }
bool t_gt(Interpreter&, const Value& v, CallArgs& a) { return py_less(other(a), v); }
bool t_le(Interpreter&, const Value& v, CallArgs& a) { return v.equals(other(a)) || py_less(v, other(a)); }
bool t_ge(Interpreter&, const Value& v, CallArgs& a) { return v.equals(other(a)) || py_less(other(a), v); }

bool t_in(Interpreter& in, const Value& v, CallArgs& a) {
  const Value* seq = a.get(0, "seq");
  if (!seq) eval_fail("the 'in' test needs a sequence");
  if (seq->is_string()) {
    if (!v.is_string()) eval_fail("'in <string>' requires string as left operand, not " + v.type_name());
    return seq->str().find(v.str()) != std::string::npos;
  }
  if (seq->is_dict() && !seq->is_namespace()) return seq->dict_obj().find(v) != nullptr;
  const Value items = in.to_list(*seq);
  for (const Value& x : items.items())
    if (x.equals(v)) return true;
  return false;
}

int64_t int_of(const Value& v, const char* test) {
  if (!v.is_int() && !v.is_bool()) eval_fail(std::string("the '") + test + "' test needs an integer");
  return v.as_int();
}

bool t_odd(Interpreter&, const Value& v, CallArgs&) { return (int_of(v, "odd") % 2) != 0; }
bool t_even(Interpreter&, const Value& v, CallArgs&) { return (int_of(v, "even") % 2) == 0; }
bool t_divisibleby(Interpreter&, const Value& v, CallArgs& a) {
  const Value* n = a.get(0, "num");
  if (!n) eval_fail("divisibleby needs a number");
  const int64_t d = int_of(*n, "divisibleby");
  if (d == 0) eval_fail("integer division or modulo by zero");
  if (d == -1) return true;
  return int_of(v, "divisibleby") % d == 0;
}

bool t_lower(Interpreter&, const Value& v, CallArgs&) { return v.is_string() ? py_islower(v.str()) : py_islower(py_str(v)); }
bool t_upper(Interpreter&, const Value& v, CallArgs&) { return v.is_string() ? py_isupper(v.str()) : py_isupper(py_str(v)); }

bool t_sameas(Interpreter&, const Value& v, CallArgs& a) {
  const Value& o = other(a);
  if (v.type() != o.type()) return false;
  switch (v.type()) {
    case Value::Type::kNone: case Value::Type::kUndefined: return true;
    case Value::Type::kBool: case Value::Type::kInt: return v.as_int() == o.as_int();
    case Value::Type::kList: return &v.list_obj() == &o.list_obj();
    case Value::Type::kDict: return &v.dict_obj() == &o.dict_obj();
    case Value::Type::kCallable: return &v.callable() == &o.callable();
    default: return false;
  }
}

bool t_filter(Interpreter&, const Value& v, CallArgs&) { return v.is_string() && has_filter(v.str()); }
bool t_test(Interpreter&, const Value& v, CallArgs&);

const std::unordered_map<std::string_view, TestFn>& test_table();

bool t_test(Interpreter&, const Value& v, CallArgs&) { return v.is_string() && test_table().count(v.str()); }

const std::unordered_map<std::string_view, TestFn>& test_table() {
  static const std::unordered_map<std::string_view, TestFn> table = {
      {"boolean", t_boolean},   {"callable", t_callable}, {"defined", t_defined},
      {"divisibleby", t_divisibleby}, {"eq", t_eq},       {"equalto", t_eq},
      {"==", t_eq},             {"escaped", t_escaped},   {"even", t_even},
      {"false", t_false},       {"filter", t_filter},     {"float", t_float},
      {"ge", t_ge},             {">=", t_ge},             {"gt", t_gt},
      {">", t_gt},              {"greaterthan", t_gt},    {"in", t_in},
      {"integer", t_integer},   {"iterable", t_iterable}, {"le", t_le},
      {"<=", t_le},             {"lower", t_lower},       {"lt", t_lt},
      {"<", t_lt},              {"lessthan", t_lt},       {"mapping", t_mapping},
      {"ne", t_ne},             {"!=", t_ne},             {"none", t_none},
      {"number", t_number},     {"odd", t_odd},           {"sameas", t_sameas},
      {"sequence", t_sequence}, {"string", t_string},     {"test", t_test},
      {"true", t_true},         {"undefined", t_undefined}, {"upper", t_upper},
  };
  return table;
}

}  // namespace

bool has_test(std::string_view name) { return test_table().count(name) != 0; }

bool call_test(Interpreter& in, std::string_view name, const Value& input, CallArgs& args) {
  const auto& t = test_table();
  const auto it = t.find(name);
  if (it == t.end()) eval_fail("no test named '" + std::string(name) + "'");
  // Every test takes the value and at most one argument.
  if (args.positional.size() + args.keyword.size() > 1)
    eval_fail("test '" + std::string(name) + "' takes at most 1 argument");
  return it->second(in, input, args);
}

}  // namespace ds::chat
