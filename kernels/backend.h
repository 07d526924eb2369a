// Backend: the operations a Qwen3.5 forward pass is made of, over backend-owned Tensors.
//
// The model (model/qwen35/) writes its forward once against this interface; kernels/cpu/
// implements it in float32 on the host (the reference), kernels/cuda/ on the device. The
// backend owns every buffer: weights (uploaded from checkpoint bytes, stored in whatever
// type the backend computes with), activations, the paged K/V pools and the DeltaNet state.
//
// Conventions every implementation follows:
//  * Activations are row-major, one row per token of the step ([rows, ...]), in f32, except
//    the GEMM inputs the model allocates in activation_dtype() (the normed mixer/MLP input,
//    the attention and gated-norm outputs, the SwiGLU product): the type gemm reads fastest
//    (f32 on the CPU, bf16 on CUDA). Ops that write those buffers (rms_norm, paged_attention,
//    sigmoid_gate, gated_rms_norm, swiglu) accept it as their output type.
//  * Weights keep the checkpoint's [out, in] layout; gemm computes x · Wᵀ.
//  * Per-step indices (positions, K/V slots, sequence spans, state slots, logit rows) come
//    from a BatchPlan made by plan() (validated there; see batch_plan.h).
//  * K/V pools, per full-attention layer: K and V each [num_blocks, block_size, n_kv_heads,
//    head_dim] (kvcache::KvPoolLayout order) in kv_cache_dtype().
//  * DeltaNet state, all layers of all slots in two tensors (kvcache::StateLayout order):
//    conv [num_slots, n_layers, conv_dim, Kc-1] (oldest input first) and recurrent
//    [num_slots, n_layers, Hv, dk, dv] (S with the key index as rows); conv f32, recurrent in
//    recurrent_state_dtype().
//  * `out` may be the same tensor as an input only where an op says so.
//  * Shapes and types are checked here, once, for every backend (backend.cpp): each op is a
//    public function that checks its arguments against this contract, then calls the
//    backend's do_<op> with arguments that satisfy it. A mismatch is std::invalid_argument
//    naming the op. A backend only adds the checks of its own limits (a kernel size it has no
//    kernel for, say).
#pragma once

#include <array>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/batch_plan.h"
#include "kernels/step_graph.h"
#include "kernels/tensor.h"
#include "kernels/vision_plan.h"

namespace ds::kernels {

// Partial rotate-half RoPE: dims [0, rotary_dim) of each head rotate, pairs (i, i + rotary_dim/2),
// angle_i = f32(position * inv_freq_i), and the rotated pair is scaled by attention_scaling
// (HF multiplies cos and sin by it; the dims past rotary_dim are not scaled). Interleaved
// M-RoPE (a plan with M-RoPE positions, batch_plan.h): frequency i takes the h position when
// i % 3 == 1 and i < 3 * mrope_section[1], the w position when i % 3 == 2 and
// i < 3 * mrope_section[2], the t position otherwise (HF's mrope_section, Qwen3.5's [11, 11, 10]).
struct RopeParams {
  RopeParams() = default;
  RopeParams(int64_t rotary, double base) : rotary_dim(rotary), theta(base) {}

  int64_t rotary_dim = 0;
  double theta = 0;  // inv_freq_i = 1 / theta^(2i / rotary_dim), in HF's f32 recipe
  // Scaled RoPE (YaRN, computed by the model: model/qwen35/rope.h): the rotary_dim / 2
  // frequencies themselves, in place of theta's; empty: theta's.
  std::vector<float> inv_freq;
  float attention_scaling = 1.0f;
  std::array<int64_t, 3> mrope_section{};  // read only for a plan with M-RoPE positions
};

// The frequencies a backend rotates by: params.inv_freq, or theta's in HF's f32 recipe
// (1 / f32(theta^f32(2i / R))). One function, so every backend rotates by the same angles.
std::vector<float> rope_frequencies(const RopeParams& params);

// Gated DeltaNet head geometry. conv channels = [q: Hk*dk | k: Hk*dk | v: Hv*dv].
struct DeltaNetDims {
  int64_t k_heads = 0;  // Hk
  int64_t v_heads = 0;  // Hv (a multiple of Hk; v head j reads q/k head j / (Hv/Hk))
  int64_t k_dim = 0;    // dk
  int64_t v_dim = 0;    // dv
  int64_t conv_dim() const { return 2 * k_heads * k_dim + v_heads * v_dim; }
};

// One projection of a grouped LoRA expand (Backend::lora_expand_group): what lora_expand's
// arguments other than tmp and the plan say for one call.
struct LoraExpandMember {
  int64_t first_rank = 0;  // its ranks: columns [first_rank, first_rank + R) of tmp
  Tensor b;                // [slots, N, R] f32
  Tensor out;              // [rows, >= col_offset + N] f32, added to in place
  int64_t col_offset = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;

  // ---- memory -------------------------------------------------------------------------
  // A buffer of the given type and shape; contents undefined.
  virtual Tensor alloc(DType dtype, const Shape& shape) = 0;
  // A weight from host bytes (f32/bf16/f16). The stored type is the backend's choice among f32
  // and activation_dtype() (the CPU backend widens to f32 exactly); the shape is kept.
  virtual Tensor upload(const HostTensor& src) = 0;
  // Whether weights may stay FP8: upload() takes fp8_e4m3 matrices with their block scales
  // (HostTensor::scales) and gemm / gate_up_swiglu read them. Otherwise a loader dequantises
  // FP8 weights on the host and uploads the values.
  virtual bool fp8_weights() const { return false; }
  // Whether weights may stay 4-bit: upload() takes int4 matrices with their groups
  // (HostTensor::int4) and gemm / gate_up_swiglu read them. Otherwise a loader dequantises
  // GPTQ / AWQ weights on the host and uploads the values.
  virtual bool int4_weights() const { return false; }
  // Element type of the K/V pools this backend allocates and reads.
  virtual DType kv_cache_dtype() const = 0;
  // Element type of the recurrent (delta-rule) state slots: f32, what Qwen3.5's config asks for
  // (mamba_ssm_dtype), or bf16, half the bytes of the stream that dominates a decode step at
  // high concurrency (vLLM's --mamba-ssm-cache-dtype, SGLang's --mamba-ssm-dtype). The
  // arithmetic is fp32 either way: a bf16 state is rounded where a step stores it.
  virtual DType recurrent_state_dtype() const { return DType::f32; }
  // Element type of the GEMM-input activation buffers (see the conventions above).
  virtual DType activation_dtype() const { return DType::f32; }
  // Free and total bytes of the device this backend computes on (zeros for host backends):
  // what the server sizes its caches from after loading the weights.
  struct DeviceMemory {
    int64_t free_bytes = 0;
    int64_t total_bytes = 0;
  };
  virtual DeviceMemory device_memory() const { return {}; }
  // Waits until every op issued so far has finished, surfacing its errors (a no-op where ops
  // run synchronously). Benchmarks time with it.
  virtual void synchronize() {}
  void fill_zero(Tensor& t);
  // Copies src into dst (same dtype and element count) where both live: device to device on
  // a device backend, never through the host (prefix-cache state snapshots).
  void copy(const Tensor& src, Tensor& dst);
  // Copies a whole tensor to host f32 (dst.size() == t.numel()) or from host f32; a backend
  // whose activation_dtype() is not f32 also converts tensors of that type.
  void copy_to_host(const Tensor& src, std::span<float> dst);
  void copy_from_host(std::span<const float> src, Tensor& dst);
  // ---- host transfers (the prefix cache's host tier: kvcache/host_cache.h) ------------------
  // Host memory that transfers copy to and from: page-locked on a device backend, so copies
  // run at the link's speed and asynchronously; ordinary memory on the host backend (mapped
  // lazily: untouched pages cost nothing). Contents undefined.
  virtual std::shared_ptr<void> alloc_host(int64_t bytes);
  // Queues copies between contiguous backend tensors (a pool block, a state slot) and host
  // bytes (each host range holds device.bytes()), device -> host (to_host) or host -> device,
  // and returns a ticket. They start after every op issued before the call and run beside the
  // ops issued after it (on a device backend: a copy stream per direction; a load also waits
  // for the offloads queued before it, whose host bytes it may read). The host backend copies
  // at once. A ticket completes when its copies and every earlier one of its direction have.
  struct HostCopy {
    Tensor device;
    void* host = nullptr;
  };
  uint64_t transfer(std::span<const HostCopy> copies, bool to_host);
  // Whether a ticket's copies are done (never blocks; their data is then visible to any op).
  virtual bool transfer_done(uint64_t ticket) { return ticket <= transfers_issued_; }
  // Blocks the calling thread until the ticket's copies are done.
  virtual void wait_transfer(uint64_t ticket) { (void)ticket; }
  // Ops issued from now on run after the ticket's copies (on a device backend the device
  // waits, not the host): before memory a transfer reads or writes is used again.
  virtual void order_after(uint64_t ticket) { (void)ticket; }
  // Validates a step's indices and makes them available to the ops.
  virtual std::unique_ptr<BatchPlan> plan(const BatchDesc& desc) = 0;
  // The same for a vision-encoder step (vision_plan.h); a device backend uploads it.
  virtual std::unique_ptr<VisionPlan> plan_vision(const VisionBatchDesc& desc) {
    return std::make_unique<VisionPlan>(desc);
  }

  // ---- recorded steps (kernels/step_graph.h) ----------------------------------------------
  // Whether this backend records steps. Only then are the calls below made.
  virtual bool can_record_steps() const { return false; }
  // From now until end_recording, ops are recorded instead of run. The ops must behave as on
  // a step of the same shape that ran just before (nothing allocated or copied to the host
  // in between): the caller runs one such step eagerly first.
  virtual void begin_recording() {}
  // The recording of the ops since begin_recording, or null when recording failed (`why`
  // says why; the backend is usable again, nothing of the recorded ops has run).
  virtual std::unique_ptr<StepGraph> end_recording(std::string& why) {
    why = "this backend does not record steps";
    return nullptr;
  }
  // Runs a recording with the current contents of the memory it reads. false (nothing
  // queued): the recording reads memory the backend has since reallocated; record again.
  virtual bool replay(const StepGraph& graph) {
    (void)graph;
    return false;
  }

  // ---- ops ----------------------------------------------------------------------------
  // "f32 or act" below: f32 or activation_dtype(). Weights (table, w, gate_up) are what
  // upload() stored: f32 or activation_dtype(); w and gate_up also fp8_e4m3 where
  // fp8_weights() and int4 where int4_weights().
  // out[r] = table[token_ids[r]]. table [V, H], out [rows, H] f32.
  void embedding(const Tensor& table, const BatchPlan& plan, Tensor& out);
  // out[i] = x[logit_rows[i]]. x [rows, H], out [logit_rows, H], both f32.
  void gather_rows(const Tensor& x, const BatchPlan& plan, Tensor& out);
  // Zero-centred RMSNorm over the last weight.numel() elements of each row:
  // out = x * rsqrt(mean(x²) + eps) * (1 + w). x may be [n, d] or [n, heads, d]; out may be x.
  // x and out f32 or act, weight f32.
  void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out);
  // out = x · wᵀ (accumulate: out += x · wᵀ, the residual add). x [M, K] f32 or act, w [N, K],
  // out [M, N] f32.
  void gemm(const Tensor& x, const Tensor& w, Tensor& out, bool accumulate);
  // gemm plus a linear layer's bias [N] f32 on every row (the vision encoder's projections).
  // The default is gemm then add_bias; CUDA adds it in the GEMM's epilogue.
  void gemm_bias(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out, bool accumulate);
  // SwiGLU on a fused projection: gate_up [M, 2I] f32 = [gate | up]; out [M, I] f32 or act =
  // silu(gate) * up.
  void swiglu(const Tensor& gate_up, Tensor& out);
  // The MLP's first half: out = silu(x · Wgᵀ) * (x · Wuᵀ) for the stacked gate_up = [Wg; Wu]
  // [2I, K]; scratch [M, 2I] f32 holds the projection where a backend needs it; out [M, I].
  // The default is gemm then swiglu; a backend may fuse them (CUDA does for one row).
  void gate_up_swiglu(const Tensor& x, const Tensor& gate_up, Tensor& scratch, Tensor& out);
  // Splits a gated q_proj output [M, Nq, 2D] (per head: query then gate) into q and gate,
  // each [M, Nq, D]; all f32.
  void split_query_gate(const Tensor& qg, Tensor& q, Tensor& gate);
  // Copies consecutive column ranges of x [M, N] into parts, in order: part i (contiguous,
  // M rows of n_i values in any shape) gets columns [n_0 + ... + n_(i-1), ... + n_i); the n_i
  // sum to N. At most kMaxSplitParts parts; all f32.
  static constexpr int kMaxSplitParts = 4;
  void split_columns(const Tensor& x, std::span<Tensor> parts);
  // Steps of at most this many rows compute a layer's stacked input projections (see
  // model/qwen35/weights.h) as one GEMM followed by split_columns; larger steps, one GEMM per
  // projection over row views of the stacked weight, writing each output in place. One GEMM
  // saves launches and the latency of the small ones (the DeltaNet's 32-row a/b projections)
  // where that outweighs the extra pass over the outputs: small steps on a GPU. 0 = never.
  virtual int64_t fused_projection_rows() const { return 0; }
  // In-place partial RoPE on x [rows, heads, D] f32 at each row's position.
  void rope(Tensor& x, const BatchPlan& plan, const RopeParams& params);
  // The gated attention's q/k preparation: split qg [rows, Nq, 2D] into q and gate, q =
  // rope(rms_norm(q, q_norm)), k = rope(rms_norm(k, k_norm)) in place (k [rows, Nkv, D]); all
  // f32. The default runs those five ops; a backend may fuse them (CUDA does).
  void prepare_qk(const Tensor& qg, const Tensor& q_norm, const Tensor& k_norm, float eps, const BatchPlan& plan,
                  const RopeParams& rope_params, Tensor& q, Tensor& gate, Tensor& k);
  // x *= sigmoid(gate), elementwise; same shapes; x f32 or act, gate f32.
  void sigmoid_gate(Tensor& x, const Tensor& gate);
  // Writes each row's k and v ([rows, Nkv, D] f32) into the pools at its K/V slot.
  void kv_write(const Tensor& k, const Tensor& v, const BatchPlan& plan, Tensor& k_pool, Tensor& v_pool);
  // Causal attention through the paged pools: row r (sequence s, position p) attends to
  // positions [0, p] of s, which must already be written (kv_write first). GQA: query head h
  // reads KV head h / (Nq / Nkv). Softmax in f32 with scores * scale.
  // q [rows, Nq, D] f32, out [rows, Nq, D] f32 or act.
  void paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const BatchPlan& plan,
                       float scale, Tensor& out);
  // Depthwise causal conv1d + SiLU over each sequence's rows, continuing from its conv state
  // in `layer` (the DeltaNet layer index) and leaving the last Kc-1 inputs there; a chunk
  // with row-state slots (batch_plan.h) also leaves the last Kc-1 inputs up to row i in
  // row_state_slots[i], and one with snapshot rows those up to each row in its slot.
  // x [rows, C], weight [C, 1, Kc], conv_state [slots, layers, C, Kc-1], out [rows, C]; all f32.
  void causal_conv1d(const Tensor& x, const Tensor& weight, Tensor& conv_state, int64_t layer, const BatchPlan& plan,
                     Tensor& out);
  // The gated delta rule (the DeltaNet recurrence) with its gates, token by token per sequence
  // from its recurrent state (prefill leaves exactly the state per-token decode would):
  //   q, k = L2-normalised heads of qkv (q then scaled by dk^-1/2), v = the v heads;
  //   beta = sigmoid(b), g = -exp(A_log) * softplus(a + dt_bias);
  //   S = exp(g) S; S += k (beta (v - Sᵀk))ᵀ; out = Sᵀ q.
  // A chunk with row-state slots also leaves S after row i in row_state_slots[i], and one with
  // snapshot rows S after each of them in its slot.
  // qkv [rows, conv_dim] (after the conv), a, b [rows, Hv], a_log, dt_bias [Hv],
  // recurrent_state [slots, layers, Hv, dk, dv] in recurrent_state_dtype(), out [rows, Hv, dv];
  // the others f32.
  void gated_delta_rule(const Tensor& qkv, const Tensor& a, const Tensor& b, const Tensor& a_log,
                        const Tensor& dt_bias, Tensor& recurrent_state, int64_t layer, const BatchPlan& plan,
                        const DeltaNetDims& dims, Tensor& out);
  // Gated RMSNorm per head with a plain weight: out = (x * rsqrt(mean(x²) + eps) * w) * silu(z).
  // x, z [rows, heads, d] f32, weight [d] f32, out f32 or act; out may be x when f32.
  void gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps, Tensor& out);

  // ---- LoRA adapters (model/qwen35/lora_adapter.h): Punica's gathered shrink and expand ----
  // Row r of the step applies the adapter in slot s = plan.row_lora_slots()[r] (-1: none) of a
  // slot pool: a [slots, R, K] holds each slot's A (rows past its rank zero), b [slots, N, R]
  // its B with the adapter's scale folded in (columns past its rank zero), all f32. So
  // y += scale * B (A x) is shrink then expand, and a batch mixes adapters and the base.
  // shrink: tmp[r] = a[s] · x[r] (rows without an adapter untouched); x [rows, K] f32 or act,
  // tmp [rows, R] f32. expand: out[r, col_offset + j] += sum_i b[s, j, i] * tmp[r, first_rank + i]
  // for rows with an adapter (other rows untouched); tmp [rows, W] with first_rank + R <= W, out
  // [rows, >= col_offset + N] f32. The rank range lets projections that read one input share a
  // shrink (a stacked A, each one's ranks a column range of tmp) and expand each from its range.
  void lora_shrink(const Tensor& x, const Tensor& a, const BatchPlan& plan, Tensor& tmp);
  void lora_expand(const Tensor& tmp, int64_t first_rank, const Tensor& b, const BatchPlan& plan, int64_t col_offset,
                   Tensor& out);
  // The expands of up to kMaxLoraExpandMembers projections that share one tmp, as one op (one
  // launch on CUDA: the expands are mostly fixed latency there), with what each member's own
  // lora_expand would give, bit for bit. Each member is checked as lora_expand checks its
  // arguments; members of no columns or ranks are skipped. Members may write column ranges of
  // one output (the MLP's [gate | up]) but never the same element: two members with the same
  // out (start and row length) need disjoint column ranges, and members of different outputs
  // disjoint spans of memory (first written element to last).
  static constexpr int kMaxLoraExpandMembers = 4;
  void lora_expand_group(const Tensor& tmp, std::span<const LoraExpandMember> members, const BatchPlan& plan);

  // ---- the vision encoder's ops (model/qwen35/vision_encoder.h) ---------------------------
  // LayerNorm with weight and bias over the last dim d: out = (x - mean) * rsqrt(var + eps)
  // * w + b (biased variance). x [n, d] f32, weight and bias [d] f32, out [n, d] f32 or act.
  void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& out);
  // x += bias on every row. x [n, d] f32, bias [d] f32.
  void add_bias(Tensor& x, const Tensor& bias);
  // out = GELU(x + bias) (the MLP's bias folded into its activation's pass): exact (erf) or
  // the tanh approximation (HF's gelu_pytorch_tanh). x [n, d] f32, bias [d] f32, out [n, d]
  // f32 or act.
  enum class Gelu : uint8_t { erf, tanh };
  void gelu(const Tensor& x, const Tensor& bias, Gelu kind, Tensor& out);
  // The MLP's first half: out = GELU(x · wᵀ + bias). x [M, K] f32 or act, w [N, K], bias [N]
  // f32, scratch [M, N] f32 (where a backend needs the product), out [M, N] f32 or act. The
  // default is gemm then gelu; CUDA runs the tanh form in cuBLASLt's GELU_BIAS epilogue.
  void gemm_bias_gelu(const Tensor& x, const Tensor& w, const Tensor& bias, Gelu kind, Tensor& scratch, Tensor& out);
  // x[r] += sum_t plan.pos_weight[r, t] * table[plan.pos_index[r, t]]: the learned position
  // embedding resampled to each image's grid. table [plan.pos_table_rows(), d] f32 or act,
  // x [rows, d] f32.
  void add_position_embedding(const Tensor& table, const VisionPlan& plan, Tensor& x);
  // In-place rotate-half RoPE over the whole head with the plan's per-row tables: for
  // i < d / 2, (x_i, x_{i+d/2}) -> (x_i cos - x_{i+d/2} sin, x_{i+d/2} cos + x_i sin).
  // x [rows, heads, d] f32 with d = 2 * plan.rope_half().
  void rotary_embedding(Tensor& x, const VisionPlan& plan);
  // Non-causal attention within each of the plan's segments: row r of segment s attends to
  // every row of s. Softmax in f32 with scores * scale. q, k, v [rows, heads, d] f32,
  // out [rows, heads, d] f32 or act.
  void segment_attention(const Tensor& q, const Tensor& k, const Tensor& v, const VisionPlan& plan, float scale,
                         Tensor& out);
  // A vision block's attention from its fused projection, as add_bias, split_columns,
  // rotary_embedding of q and k, and segment_attention: qkv [rows, 3 heads d] f32 (q, k and v
  // side by side, before their bias), bias [3 heads d] f32, out [rows, heads, d] f32 or act.
  // scratch [3 rows, heads d] f32 holds the split q, k and v where a backend does these steps
  // one by one; qkv and scratch are left undefined.
  void qkv_segment_attention(Tensor& qkv, const Tensor& bias, const VisionPlan& plan, float scale, Tensor& scratch,
                             Tensor& out);

 protected:
  // The backend's implementations, called with arguments that satisfy the contract above.
  virtual void do_fill_zero(Tensor& t) = 0;
  virtual void do_copy(const Tensor& src, Tensor& dst) = 0;
  virtual void do_copy_to_host(const Tensor& src, std::span<float> dst) = 0;
  virtual void do_copy_from_host(std::span<const float> src, Tensor& dst) = 0;
  // The copies of transfer(), checked; returns the ticket. Default: memcpy now (host memory).
  virtual uint64_t do_transfer(std::span<const HostCopy> copies, bool to_host);
  uint64_t transfers_issued_ = 0;  // the default's tickets
  virtual void do_embedding(const Tensor& table, const BatchPlan& plan, Tensor& out) = 0;
  virtual void do_gather_rows(const Tensor& x, const BatchPlan& plan, Tensor& out) = 0;
  virtual void do_rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) = 0;
  virtual void do_gemm(const Tensor& x, const Tensor& w, Tensor& out, bool accumulate) = 0;
  virtual void do_gemm_bias(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out, bool accumulate) {
    gemm(x, w, out, accumulate);
    add_bias(out, bias);
  }
  virtual void do_swiglu(const Tensor& gate_up, Tensor& out) = 0;
  virtual void do_gate_up_swiglu(const Tensor& x, const Tensor& gate_up, Tensor& scratch, Tensor& out) {
    gemm(x, gate_up, scratch, false);
    swiglu(scratch, out);
  }
  virtual void do_split_query_gate(const Tensor& qg, Tensor& q, Tensor& gate) = 0;
  virtual void do_split_columns(const Tensor& x, std::span<Tensor> parts) = 0;
  virtual void do_rope(Tensor& x, const BatchPlan& plan, const RopeParams& params) = 0;
  virtual void do_prepare_qk(const Tensor& qg, const Tensor& q_norm, const Tensor& k_norm, float eps,
                             const BatchPlan& plan, const RopeParams& rope_params, Tensor& q, Tensor& gate,
                             Tensor& k) {
    split_query_gate(qg, q, gate);
    rms_norm(q, q_norm, eps, q);
    rms_norm(k, k_norm, eps, k);
    rope(q, plan, rope_params);
    rope(k, plan, rope_params);
  }
  virtual void do_sigmoid_gate(Tensor& x, const Tensor& gate) = 0;
  virtual void do_kv_write(const Tensor& k, const Tensor& v, const BatchPlan& plan, Tensor& k_pool,
                           Tensor& v_pool) = 0;
  virtual void do_paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const BatchPlan& plan,
                                  float scale, Tensor& out) = 0;
  virtual void do_causal_conv1d(const Tensor& x, const Tensor& weight, Tensor& conv_state, int64_t layer,
                                const BatchPlan& plan, Tensor& out) = 0;
  virtual void do_gated_delta_rule(const Tensor& qkv, const Tensor& a, const Tensor& b, const Tensor& a_log,
                                   const Tensor& dt_bias, Tensor& recurrent_state, int64_t layer,
                                   const BatchPlan& plan, const DeltaNetDims& dims, Tensor& out) = 0;
  virtual void do_gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps, Tensor& out) = 0;
  virtual void do_lora_shrink(const Tensor& x, const Tensor& a, const BatchPlan& plan, Tensor& tmp) = 0;
  virtual void do_lora_expand(const Tensor& tmp, int64_t first_rank, const Tensor& b, const BatchPlan& plan,
                              int64_t col_offset, Tensor& out) = 0;
  // Members with something to write (N and R > 0), at least one.
  virtual void do_lora_expand_group(const Tensor& tmp, std::span<const LoraExpandMember> members,
                                    const BatchPlan& plan) = 0;
  virtual void do_layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& out) = 0;
  virtual void do_add_bias(Tensor& x, const Tensor& bias) = 0;
  virtual void do_gelu(const Tensor& x, const Tensor& bias, Gelu kind, Tensor& out) = 0;
  virtual void do_gemm_bias_gelu(const Tensor& x, const Tensor& w, const Tensor& bias, Gelu kind, Tensor& scratch,
                                 Tensor& out) {
    gemm(x, w, scratch, false);
    gelu(scratch, bias, kind, out);
  }
  virtual void do_add_position_embedding(const Tensor& table, const VisionPlan& plan, Tensor& x) = 0;
  virtual void do_rotary_embedding(Tensor& x, const VisionPlan& plan) = 0;
  virtual void do_segment_attention(const Tensor& q, const Tensor& k, const Tensor& v, const VisionPlan& plan,
                                    float scale, Tensor& out) = 0;
  // The steps one by one (backend_vision.cpp).
  virtual void do_qkv_segment_attention(Tensor& qkv, const Tensor& bias, const VisionPlan& plan, float scale,
                                        Tensor& scratch, Tensor& out);
};

}  // namespace ds::kernels
