// INT4 weights: GPTQ checkpoints (Qwen's -GPTQ-Int4 releases, AutoGPTQ / GPTQModel output) and
// AWQ ones (AutoAWQ's GEMM layout), read into one form: 4-bit codes with a scale and a zero
// point per row and group of input columns (kernels::Int4Groups).
//
// A quantised linear layer X of [N, K] (out, in) is stored as X.qweight, X.qzeros, X.scales
// (and, for GPTQ, X.g_idx) instead of X.weight; G = group_size (K for -1), K / G groups:
//
// GPTQ (quant_method gptq; vLLM's gptq and gptq_marlin read the same tensors):
//   qweight I32 [K/8, N]   packed along the input: code(k, n) = qweight[k/8][n] >> 4(k%8) & 15
//   qzeros  I32 [K/G, N/8] packed along the output: z(g, n) = qzeros[g][n/8] >> 4(n%8) & 15
//   scales  F16 [K/G, N]
//   g_idx   I32 [K]        the group of input k: k / G, or with desc_act (act order) any
//                          assignment of G inputs to each group
//   w(n, k) = scales[g][n] * (code(k, n) - zero(g, n)),  g = g_idx[k]
//   The zero point: checkpoint_format "gptq" (v1: AutoGPTQ's packer, GPTQModel's default
//   output) stores zero - 1 ("zeros minus one"), "gptq_v2" the zero itself. With sym (every
//   release's setting) the zero is 8 by definition: v1 files hold 7, v2 files 8, and vLLM's
//   gptq_marlin, which serves these checkpoints, does not read qzeros at all (its uint4b8
//   type subtracts 8). So here: sym -> zero 8, with every stored zero checked to be 7 or 8 (a
//   checkpoint whose zeros are anything else is not what its config says, and is refused);
//   otherwise zero = stored + 1 (v1) or stored (v2), in 0..16.
//
// AWQ (quant_method awq, version gemm, zero_point true; vLLM's awq and awq_marlin):
//   qweight I32 [K, N/8]   packed along the output in AWQ's interleaved order: output n of
//                          word qweight[k][n/8] is nibble kAwqNibble[n % 8] = (0 4 1 5 2 6 3 7)
//   qzeros  I32 [K/G, N/8] the same order
//   scales  F16 [K/G, N]
//   w(n, k) = scales[k/G][n] * (code(k, n) - zero(k/G, n))
//
// Scales may also be BF16 or F32. The canonical form (Weight, what a backend that keeps 4-bit
// weights receives) holds per row n the codes in stored column order, two per byte, the f32
// scales and u8 zeros per group, and for act order the permutation that sorts the input
// columns by group (stable), so that each group's columns are consecutive and a GEMM reads
// x[:, perm[k]]; without act order (or when g_idx is sorted already) no permutation.
// Everywhere else (the CPU) gets the values dequantised in f32, s * (code - zero): exact,
// since an f16 scale times an integer of at most 5 bits fits f32's mantissa.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "kernels/tensor.h"
#include "model/qwen35/checkpoint.h"
#include "model/qwen35/config.h"

namespace ds::qwen35::int4 {

// Output n of an AWQ word sits at nibble kAwqNibble[n % 8] (AutoAWQ packs in the order
// 0 2 4 6 1 3 5 7).
inline constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

// One weight [rows, cols] in the canonical form (kernels::Int4Groups), owning its memory.
struct Weight {
  int64_t rows = 0, cols = 0, group_size = 0;
  std::vector<uint8_t> codes;  // [rows, cols / 2]: stored column 2i in the low nibble of byte i
  std::vector<float> scales;   // [rows, groups()]
  std::vector<uint8_t> zeros;  // [rows, groups()]
  std::vector<int32_t> perm;   // [cols], or empty for the identity
  int64_t groups() const { return group_size > 0 ? cols / group_size : 0; }
  // A view for Backend::upload.
  kernels::HostTensor host() const;
};

// Whether the checkpoint stores the linear layer `module` ("...mlp.down_proj") quantised
// (module.qweight present).
bool stored(const Checkpoint& ckpt, const std::string& module);

// Reads module's tensors (qweight, qzeros, scales, g_idx for GPTQ) as the config says, for a
// weight of [rows, cols] (from config.json), and records their names in `used`. Throws
// std::runtime_error naming the file and tensor: a missing, mis-typed or mis-shaped tensor,
// K not a multiple of the group size, a g_idx that is not what desc_act says, zeros that are
// not sym's.
Weight read(const Checkpoint& ckpt, const std::string& module, const Int4Config& config, int64_t rows, int64_t cols,
            std::set<std::string>& used);

// The values [rows, cols] of an int4 host tensor in input column order, f32 (on the host's
// threads).
std::vector<float> dequantize(const kernels::HostTensor& w);

// Int4 host tensors stacked by rows in order (a layer's q|k|v, gate|up...): they must share
// the column count, group size and permutation (else the caller stacks values instead).
bool stackable(const std::vector<kernels::HostTensor>& parts);
Weight stack(const std::vector<kernels::HostTensor>& parts);

}  // namespace ds::qwen35::int4
