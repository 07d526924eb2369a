// cuBLASLt's block-scaled FP8 GEMM (fp8_block_gemm.h). Row-major [N, K] w and [M, K] x are
// column-major K x N and K x M, so out (column-major N x M, i.e. row-major [M, N]) =
// op_T(w) · x: cuBLAS's "TN" form, the only one its FP8 GEMMs take. One plan (descriptors and
// the heuristic's algorithm) per shape, kept for the context's life: a prefill step's shapes
// repeat every layer and step.
#include "kernels/cuda/fp8_block_gemm.h"

#include <memory>
#include <stdexcept>
#include <string>

#include "kernels/cuda/lt_plan.h"

namespace ds::cuda {
namespace {

constexpr const char* kWho = "fp8 block gemm";
void check_lt(cublasStatus_t st, const char* what) { ds::cuda::check_lt(st, kWho, what); }

// The configuration of a step of M <= kDecodeTileRows rows, N weight rows and K columns, in
// place of the heuristic's (decode_tile). A decode step reads the weight once and its time is
// the weight's bytes over the rate at which the tiles stream them; the heuristic offers 128 x
// 128 tiles in clusters of 2-4 along N for every such shape, which leaves many SMs idle where N
// / 128 is near or below the SM count. Every configuration cuBLASLt accepts was timed with the
// L2 flushed (`bench_fp8_gemm --search`), then the choice below per op and in the 9B's and
// 27B's decode steps (docs/bench-log, "cuBLASLt's configurations for FP8 decode steps"):
// * N = 8192-16384: 128 x 64 tiles without clusters;
// * the N = 4096-5120 outputs: 64 x 64 tiles without clusters, except at 16 rows or fewer with
//   K above 4096, where they were slower than the heuristic's (the 27B's down projection);
// * gate_up (N >= 20480): 128 x 64 tiles split in two along K where K >= 5120 (the 27B's; the
//   9B's, K = 4096, ran fastest on the heuristic's).
struct DecodeTile {
  uint32_t tile = CUBLASLT_MATMUL_TILE_UNDEFINED;
  int32_t splits = 1;
};

bool decode_tile(int64_t M, int64_t N, int64_t K, DecodeTile& t) {
  if (M > Fp8BlockGemm::kDecodeTileRows) return false;
  if (N >= 20480) {
    if (K < 5120) return false;
    t = {CUBLASLT_MATMUL_TILE_128x64, 2};
  } else if (N >= 8192) {
    t = {CUBLASLT_MATMUL_TILE_128x64, 1};
  } else if (K <= 4096 || M > 16) {
    t = {CUBLASLT_MATMUL_TILE_64x64, 1};
  } else {
    return false;
  }
  return true;
}

}  // namespace

struct Fp8BlockGemm::Plan : LtPlan {};

Fp8BlockGemm::Fp8BlockGemm(cudaStream_t stream, void* workspace, size_t workspace_bytes)
    : stream_(stream), workspace_(workspace), workspace_bytes_(workspace_bytes) {
  check_lt(cublasLtCreate(&lt_), "cublasLtCreate");
}

Fp8BlockGemm::~Fp8BlockGemm() {
  plans_.clear();
  if (lt_) cublasLtDestroy(lt_);
}

Fp8BlockGemm::Plan* Fp8BlockGemm::plan_for(const Key& key, const float* w_scales, const float* x_scales) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();
  const auto [M, N, K, ld_out, a_mode, b_mode, out_type, decode_tiles] = key;
  Plan* p = plans_.emplace(key, std::make_unique<Plan>()).first->second.get();
  const cudaDataType_t dt = static_cast<DType>(out_type) == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F;
  check_lt(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  const auto am = static_cast<cublasLtMatmulMatrixScale_t>(a_mode), bm = static_cast<cublasLtMatmulMatrixScale_t>(b_mode);
  check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "set transa");
  check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "set transb");
  check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &am, sizeof am), "set a scale mode");
  check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &bm, sizeof bm), "set b scale mode");
  // The heuristic sees the scale pointers of the first call (the block-scaled kernels check them).
  check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scales, sizeof w_scales),
           "set w scales");
  check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scales, sizeof x_scales),
           "set x scales");
  check_lt(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_8F_E4M3, static_cast<uint64_t>(K), static_cast<uint64_t>(N), K),
           "layout of w");
  check_lt(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_8F_E4M3, static_cast<uint64_t>(K), static_cast<uint64_t>(M), K),
           "layout of x");
  check_lt(cublasLtMatrixLayoutCreate(&p->d, dt, static_cast<uint64_t>(N), static_cast<uint64_t>(M), ld_out),
           "layout of out");
  cublasLtMatmulHeuristicResult_t result;
  p->usable = lt_heuristic_algo(lt_, p->desc, p->a, p->b, p->d, workspace_bytes_, kWho, result);
  if (!p->usable) return p;
  p->algo = result.algo;
  DecodeTile t;
  if (decode_tiles && decode_tile(M, N, K, t)) {
    // The heuristic's algorithm and stages with the decode tile, no clusters; a split sums in
    // a workspace in fp32 (a fixed order). Kept only where cuBLASLt accepts it for this
    // problem within the workspace.
    cublasLtMatmulAlgo_t algo = result.algo;
    const uint16_t cluster = CUBLASLT_CLUSTER_SHAPE_1x1x1;
    const uint32_t reduction = t.splits > 1 ? CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE : CUBLASLT_REDUCTION_SCHEME_NONE;
    cublasLtMatmulHeuristicResult_t check{};
    if (cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &t.tile, sizeof t.tile) ==
            CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof cluster) ==
            CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &t.splits, sizeof t.splits) ==
            CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &reduction,
                                             sizeof reduction) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulAlgoCheck(lt_, p->desc, p->a, p->b, p->d, p->d, &algo, &check) == CUBLAS_STATUS_SUCCESS &&
        check.workspaceSize <= workspace_bytes_)
      p->algo = algo;
  }
  return p;
}

bool Fp8BlockGemm::available(cublasLtMatmulMatrixScale_t w_mode, cublasLtMatmulMatrixScale_t x_mode, int64_t M,
                             int64_t N, int64_t K, DType out_type, int64_t ld_out, bool decode_tiles) {
  if (M <= 0 || N <= 0) return true;
  if (K % 16 != 0 || (out_type != DType::f32 && out_type != DType::bf16)) return false;
  const auto it = plans_.find(Key{M, N, K, ld_out, static_cast<int>(w_mode), static_cast<int>(x_mode),
                                  static_cast<int>(out_type), decode_tiles});
  return it == plans_.end() || it->second->usable;
}

bool Fp8BlockGemm::matmul(const Fp8BlockOperand& w, const Fp8BlockOperand& x, int64_t M, int64_t N, int64_t K,
                          void* out, DType out_type, int64_t ld_out, bool accumulate, bool decode_tiles) {
  if (M <= 0 || N <= 0) return true;
  if (K % 16 != 0 || (out_type != DType::f32 && out_type != DType::bf16)) return false;
  Plan* p = plan_for(Key{M, N, K, ld_out, static_cast<int>(w.mode), static_cast<int>(x.mode),
                         static_cast<int>(out_type), decode_tiles},
                     w.scales, x.scales);
  if (!p->usable) return false;
  check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w.scales, sizeof w.scales),
           "set w scales");
  check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x.scales, sizeof x.scales),
           "set x scales");
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  const cublasStatus_t st = cublasLtMatmul(lt_, p->desc, &alpha, w.codes, p->a, x.codes, p->b, &beta, out, p->d, out,
                                           p->d, &p->algo, workspace_, workspace_bytes_, stream_);
  // Refused at the call although the heuristic offered an algorithm: never again for this shape.
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) {
    p->usable = false;
    return false;
  }
  check_lt(st, "cublasLtMatmul");
  return true;
}

}  // namespace ds::cuda
