// Errors of the chat template engine.
//
//   TemplateError           base class; what() is a complete message.
//   ├─ TemplateSyntaxError  the template source is broken (found when it is parsed, i.e. when
//   │                       the model is loaded): message "NAME:LINE:COLUMN: ...".
//   ├─ TemplateRuntimeError rendering failed: an undefined value used in arithmetic, a type
//   │                       error, a resource limit. Usually caused by request content the
//   │                       template does not expect.
//   └─ TemplateRaisedError  the template called raise_exception(message): the template
//                           itself rejects the request (what() is the template's message).
// A server answers a render error (runtime or raised) with 400; a syntax error means the
// model's template is unusable.
#pragma once

#include <stdexcept>
#include <string>

namespace ds::chat {

class TemplateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class TemplateSyntaxError : public TemplateError {
 public:
  TemplateSyntaxError(const std::string& message, int line, int column)
      : TemplateError(message), line_(line), column_(column) {}
  int line() const { return line_; }
  int column() const { return column_; }

 private:
  int line_, column_;
};

class TemplateRuntimeError : public TemplateError {
 public:
  using TemplateError::TemplateError;
};

class TemplateRaisedError : public TemplateError {
 public:
  using TemplateError::TemplateError;
};

}  // namespace ds::chat
