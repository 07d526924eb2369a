// The CPU backend's kernels, one per file in this folder. CpuBackend (cpu_backend.cpp)
// forwards the Backend interface to these with arguments the Backend layer has checked;
// backend.h documents what each computes and the shapes it gets.
#pragma once

#include <span>
#include <string>

#include "kernels/backend.h"
#include "kernels/cpu/thread_pool.h"

namespace ds::kernels::cpu {

// Throws std::invalid_argument("<op>: <what>").
[[noreturn]] void fail(const char* op, const std::string& what);
// Fails with the message unless ok; the message is only built on failure (these checks run
// on every op of every step).
// (Wrap a condition holding braces, e.g. Shape{a, b}, in parentheses.)
#define DS_CHECK(ok, op, ...)                            \
  do {                                                   \
    if (!(ok)) ::ds::kernels::cpu::fail(op, __VA_ARGS__); \
  } while (0)

void embedding(ThreadPool& pool, const Tensor& table, const BatchPlan& plan, Tensor& out);
void gather_rows(const Tensor& x, const BatchPlan& plan, Tensor& out);
void rms_norm(ThreadPool& pool, const Tensor& x, const Tensor& weight, float eps, Tensor& out);
void gemm(ThreadPool& pool, const Tensor& x, const Tensor& w, Tensor& out, bool accumulate);
void swiglu(ThreadPool& pool, const Tensor& gate_up, Tensor& out);
void split_query_gate(const Tensor& qg, Tensor& q, Tensor& gate);
void split_columns(const Tensor& x, std::span<Tensor> parts);
void rope(ThreadPool& pool, Tensor& x, const BatchPlan& plan, const RopeParams& params);
void sigmoid_gate(ThreadPool& pool, Tensor& x, const Tensor& gate);
void kv_write(const Tensor& k, const Tensor& v, const BatchPlan& plan, Tensor& k_pool,
              Tensor& v_pool);
void paged_attention(ThreadPool& pool, const Tensor& q, const Tensor& k_pool,
                     const Tensor& v_pool, const BatchPlan& plan, float scale, Tensor& out);
void causal_conv1d(ThreadPool& pool, const Tensor& x, const Tensor& weight, Tensor& conv_state,
                   int64_t layer, const BatchPlan& plan, Tensor& out);
void gated_delta_rule(ThreadPool& pool, const Tensor& qkv, const Tensor& a, const Tensor& b,
                      const Tensor& a_log, const Tensor& dt_bias, Tensor& recurrent_state,
                      int64_t layer, const BatchPlan& plan, const DeltaNetDims& dims,
                      Tensor& out);
void gated_rms_norm(ThreadPool& pool, const Tensor& x, const Tensor& z, const Tensor& weight,
                    float eps, Tensor& out);
void lora_shrink(ThreadPool& pool, const Tensor& x, const Tensor& a, const BatchPlan& plan, Tensor& tmp);
void lora_expand(ThreadPool& pool, const Tensor& tmp, int64_t first_rank, const Tensor& b, const BatchPlan& plan,
                 int64_t col_offset, Tensor& out);
void layer_norm(ThreadPool& pool, const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& out);
void add_bias(ThreadPool& pool, Tensor& x, const Tensor& bias);
void gelu(ThreadPool& pool, const Tensor& x, const Tensor& bias, Backend::Gelu kind, Tensor& out);
void add_position_embedding(ThreadPool& pool, const Tensor& table, const VisionPlan& plan, Tensor& x);
void rotary_embedding(ThreadPool& pool, Tensor& x, const VisionPlan& plan);
void segment_attention(ThreadPool& pool, const Tensor& q, const Tensor& k, const Tensor& v, const VisionPlan& plan,
                       float scale, Tensor& out);

}  // namespace ds::kernels::cpu
