// The checks every op of the Backend contract is made of (backend.cpp, backend_vision.cpp):
// each throws std::invalid_argument("<op>: <what>"), the message built only on failure.
// Internal to ds_kernels.
#pragma once

#include <stdexcept>
#include <string>

#include "kernels/backend.h"

namespace ds::kernels::contract {

[[noreturn]] inline void fail(const char* op, const std::string& what) {
  throw std::invalid_argument(std::string(op) + ": " + what);
}
// The message is built only on failure: these checks run on every op of every step.
// (Wrap a condition holding braces, e.g. Shape{a, b}, in parentheses.)
#define DS_REQUIRE(ok, op, ...)        \
  do {                                 \
    if (!(ok)) fail(op, __VA_ARGS__); \
  } while (0)

inline std::string type_name(DType t) { return std::string(dtype_name(t)); }

// t is a non-empty tensor of type `want`.
inline void require_type(const Tensor& t, const char* op, const char* name, DType want) {
  DS_REQUIRE(!t.empty(), op, std::string(name) + " is empty");
  DS_REQUIRE(t.dtype() == want, op, std::string(name) + " must be " + type_name(want) + ", not " + type_name(t.dtype()));
}

// A GEMM weight: f32, activation_dtype(), fp8_e4m3 (2-D, with scales) where the backend
// keeps FP8 weights, or int4 (2-D, with groups that divide K) where it keeps 4-bit weights.
inline void require_weight(const Backend& be, const Tensor& w, const char* op, const char* name) {
  DS_REQUIRE(!w.empty(), op, std::string(name) + " is empty");
  const bool fp8 = w.dtype() == DType::fp8_e4m3 && be.fp8_weights();
  const bool int4 = w.dtype() == DType::int4 && be.int4_weights();
  DS_REQUIRE(fp8 || int4 || w.dtype() == DType::f32 || w.dtype() == be.activation_dtype(), op,
             std::string(name) + " must be f32 or " + type_name(be.activation_dtype()) +
                 (be.fp8_weights() ? " or fp8_e4m3" : "") + (be.int4_weights() ? " or int4" : "") + ", not " +
                 type_name(w.dtype()));
  DS_REQUIRE(!fp8 || (w.rank() == 2 && w.fp8_scales().data &&
                      w.fp8_scales().cols == (w.dim(1) + Fp8Scales::kBlockCols - 1) / Fp8Scales::kBlockCols),
             op, std::string(name) + " is fp8_e4m3 without scales for " + w.shape().str());
  const Int4Groups& g = w.int4_groups();
  DS_REQUIRE(!int4 || (w.rank() == 2 && g.scales && g.zeros && g.group_size > 0 && w.dim(1) % g.group_size == 0),
             op, std::string(name) + " is int4 without groups for " + w.shape().str());
}

// t is a non-empty tensor of type f32 or `other` (activation_dtype(): GEMM inputs and weights).
inline void require_f32_or(const Tensor& t, const char* op, const char* name, DType other) {
  DS_REQUIRE(!t.empty(), op, std::string(name) + " is empty");
  DS_REQUIRE(t.dtype() == DType::f32 || t.dtype() == other, op,
             std::string(name) + " must be f32" + (other == DType::f32 ? "" : " or " + type_name(other)) + ", not " +
                 type_name(t.dtype()));
}

// x ends in d = weight.numel() elements per row.
inline void require_rows_of(const Tensor& x, const Tensor& weight, const char* op) {
  const int64_t d = weight.numel();
  DS_REQUIRE(d > 0 && x.rank() >= 1 && x.dim(x.rank() - 1) == d, op,
             "x " + x.shape().str() + " must end in the weight's " + std::to_string(d) + " elements");
}

}  // namespace ds::kernels::contract
