// GEMM out = x · wᵀ (+ out) through OpenBLAS. The output columns (rows of w) are split over
// the thread pool and each slice is one single-threaded OpenBLAS call, so there is one set of
// threads on the machine instead of OpenBLAS's spinning pool competing with ours. A few rows
// (decode steps) go through sgemv row by row: sgemm would first pack all of w, which costs
// as much as the product itself when x has one or two rows.
#include <cblas.h>

#include <algorithm>

#include "kernels/cpu/ops.h"

namespace ds::kernels::cpu {

void gemm(ThreadPool& pool, const Tensor& x, const Tensor& w, Tensor& out, bool accumulate) {
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  if (m == 0 || n == 0) return;
  const float* xs = x.data_as<const float>();
  const float* ws = w.data_as<const float>();
  float* os = out.data_as<float>();
  const float beta = accumulate ? 1.0f : 0.0f;
  if (k == 0) {
    if (!accumulate) std::fill(os, os + m * n, 0.0f);
    return;
  }
  // Below ~0.5 MFLOP a second thread costs more than it saves.
  const int64_t threads = (m * n * k < (int64_t{1} << 19)) ? 1 : pool.size();
  const int64_t slice = std::max<int64_t>(16, ((n + threads - 1) / threads + 15) / 16 * 16);
  constexpr int64_t kGemvRows = 2;
  pool.parallel_for(n, slice, [&](int64_t begin, int64_t end) {
    if (m <= kGemvRows) {
      for (int64_t r = 0; r < m; ++r)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<blasint>(end - begin), static_cast<blasint>(k),
                    1.0f, ws + begin * k, static_cast<blasint>(k), xs + r * k, 1, beta, os + r * n + begin, 1);
      return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m),
                static_cast<blasint>(end - begin), static_cast<blasint>(k), 1.0f, xs,
                static_cast<blasint>(k), ws + begin * k, static_cast<blasint>(k), beta,
                os + begin, static_cast<blasint>(n));
  });
}

}  // namespace ds::kernels::cpu
