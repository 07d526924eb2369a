// GEMM of the CUDA backend (cuda_gemm.cpp, cuda_gemm_int4.cpp): cuBLAS, or the decode-sized
// kernels of gemv.cu, skinny_gemm.cu, fp8_gemm.cu and int4_gemm.cu, as choose_gemm decides.
//
// Internal to kernels/cuda.
#pragma once

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/gemm_chooser.h"
#include "kernels/tensor.h"

namespace ds::cuda {

// out [M, N] (f32) = x [M, K] · w [N, K]ᵀ (+ out when accumulate). w bf16, fp8_e4m3 or int4 with x
// bf16 (an f32 x is converted first), or w f32 with x f32: fp32 accumulation either way.
// Decode-sized steps take gemv.cu (one row) or skinny_gemm.cu (2-8 rows), or their FP8 forms
// in fp8_gemm.cu, where `paths` allows them; larger FP8 steps run cuBLASLt's block-scaled FP8
// GEMM on x quantised per row and 128 columns (fp8_block_gemm.h), or where that does not
// apply cuBLAS over bf16 tiles of the weight dequantised into scratch; 4-bit weights as
// run_gemm_int4 says.
// Arguments satisfy the Backend contract (kernels/backend.cpp).
void run_gemm(CudaContext& ctx, const CudaBackendOptions::KernelPaths& paths, const kernels::Tensor& x,
              const kernels::Tensor& w, kernels::Tensor& out, bool accumulate);

// out (+)= x · wᵀ + bias (bias [N] f32) with the bias in cuBLASLt's epilogue (bias_gemm.h), for
// the steps where choose_gemm picks cuBLAS and w is bf16 (x bf16 or converted first). Returns
// false, having done nothing, for the others (the caller runs gemm then add_bias).
bool run_gemm_bias(CudaContext& ctx, const CudaBackendOptions::KernelPaths& paths, const kernels::Tensor& x,
                   const kernels::Tensor& w, const kernels::Tensor& bias, kernels::Tensor& out, bool accumulate);
// out = GELU_tanh(x · wᵀ + bias) in cuBLASLt's GELU_BIAS epilogue (out f32 or bf16), on the same
// steps as run_gemm_bias; false, having done nothing, for the others.
bool run_gemm_bias_gelu(CudaContext& ctx, const CudaBackendOptions::KernelPaths& paths, const kernels::Tensor& x,
                        const kernels::Tensor& w, const kernels::Tensor& bias, kernels::Tensor& out);

// The MLP's gate/up projection and SwiGLU for steps that run cuBLAS (more than kSkinnyMaxRows
// rows, bf16 weight, x and out): the [M, 2I] product is rounded to bf16 into scratch (the f32
// [M, 2I] the Backend contract provides), which halves the bytes the GEMM writes and the
// SwiGLU pass reads (docs/bench-log, "Prefill small kernels"); the SwiGLU product is bf16
// either way. Returns false, having done nothing, for steps that take another path.
bool run_gate_up_swiglu_tiled(CudaContext& ctx, const kernels::Tensor& x, const kernels::Tensor& w,
                              kernels::Tensor& scratch, kernels::Tensor& out);
// The same for an FP8 weight on the block-scaled FP8 GEMM (paths.fp8_block_gemm, more than
// paths.fp8_skinny_rows rows): the bf16 [M, 2I] product straight from cuBLASLt.
bool run_gate_up_swiglu_fp8_blocks(CudaContext& ctx, const CudaBackendOptions::KernelPaths& paths,
                                   const kernels::Tensor& x, const kernels::Tensor& w, kernels::Tensor& scratch,
                                   kernels::Tensor& out);

// ---- 4-bit weights (cuda_gemm_int4.cpp), on the kernel choose_gemm picked for the step.
// out (+)= x · wᵀ for an int4 weight and bf16 x: skinny_int4 on int4_gemm.cu's kernel (codes
// read directly), int4_dequant_tiles by cuBLAS over bf16 tiles dequantised into scratch.
void run_gemm_int4(CudaContext& ctx, GemmKernel kernel, const uint16_t* x, const kernels::Tensor& w, int64_t M,
                   kernels::Tensor& out, bool accumulate);
// gate_up + SwiGLU over an int4 weight: one row of skinny_int4 by the fused kernel;
// int4_dequant_tiles with bf16 out, the bf16 product of the tiles into scratch (as
// run_gate_up_swiglu_tiled), then SwiGLU. False, having done nothing, otherwise.
bool run_gate_up_swiglu_int4(CudaContext& ctx, GemmKernel kernel, const kernels::Tensor& x, const kernels::Tensor& w,
                             kernels::Tensor& scratch, kernels::Tensor& out);

}  // namespace ds::cuda
