/* The CBLAS the project calls (cblas_sgemm, cblas_sgemv, openblas_set_num_threads), in plain C,
 * packed by bench/bundle.py as the bundle's libopenblas.so.0 in place of Debian's OpenBLAS.
 *
 * Why: a bundle travels to the GPU machine beside the working tree under the device tool's
 * 64 MB limit, and Debian's OpenBLAS (every CPU's kernels) with its Fortran runtime is about
 * 5 MB of it compressed. On the GPU machine the CPU engine only serves as the oracle of the
 * CUDA tests on the tiny fixtures, where speed does not matter; no study times the CPU there.
 * Correctness: the study harness_selftest (CTest, CI) runs refcheck on the bundled CPU build,
 * through this library, against the HF float64 reference.
 */
#include <stddef.h>

enum { RowMajor = 101, ColMajor = 102 };
enum { NoTrans = 111, Trans = 112, ConjTrans = 113 };

void openblas_set_num_threads(int n) { (void)n; }

/* Row-major C[M x N] = alpha * op(A) * op(B) + beta * C. */
static void gemm_rows(int ta, int tb, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
                      int ldb, float beta, float* C, int ldc) {
  for (int i = 0; i < M; ++i) {
    float* c = C + (size_t)i * ldc;
    for (int j = 0; j < N; ++j) c[j] = beta == 0.0f ? 0.0f : beta * c[j];
    if (tb == NoTrans) {
      /* c[i, :] += a(i, k) * B[k, :]: rows of B are contiguous. */
      for (int k = 0; k < K; ++k) {
        const float a = alpha * (ta == NoTrans ? A[(size_t)i * lda + k] : A[(size_t)k * lda + i]);
        const float* b = B + (size_t)k * ldb;
        for (int j = 0; j < N; ++j) c[j] += a * b[j];
      }
    } else {
      /* c[i, j] += dot(a(i, :), B[j, :]): rows of B are contiguous over k. */
      for (int j = 0; j < N; ++j) {
        const float* b = B + (size_t)j * ldb;
        float s = 0.0f;
        if (ta == NoTrans) {
          const float* a = A + (size_t)i * lda;
          for (int k = 0; k < K; ++k) s += a[k] * b[k];
        } else {
          for (int k = 0; k < K; ++k) s += A[(size_t)k * lda + i] * b[k];
        }
        c[j] += alpha * s;
      }
    }
  }
}

void cblas_sgemm(int order, int ta, int tb, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
                 int ldb, float beta, float* C, int ldc) {
  ta = ta == ConjTrans ? Trans : ta;
  tb = tb == ConjTrans ? Trans : tb;
  if (order == RowMajor)
    gemm_rows(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else /* column-major C is row-major C^T = op(B)^T op(A)^T */
    gemm_rows(tb, ta, N, M, K, alpha, B, ldb, A, lda, beta, C, ldc);
}

void cblas_sgemv(int order, int trans, int M, int N, float alpha, const float* A, int lda, const float* x, int incx,
                 float beta, float* y, int incy) {
  trans = trans == ConjTrans ? Trans : trans;
  /* A column-major M x N matrix is a row-major N x M one, transposed. */
  int rows = M, cols = N, t = trans;
  if (order == ColMajor) {
    rows = N;
    cols = M;
    t = trans == NoTrans ? Trans : NoTrans;
  }
  const int ny = t == NoTrans ? rows : cols;
  for (int i = 0; i < ny; ++i) y[(size_t)i * incy] = beta == 0.0f ? 0.0f : beta * y[(size_t)i * incy];
  if (t == NoTrans) {
    for (int i = 0; i < rows; ++i) {
      const float* a = A + (size_t)i * lda;
      float s = 0.0f;
      for (int j = 0; j < cols; ++j) s += a[j] * x[(size_t)j * incx];
      y[(size_t)i * incy] += alpha * s;
    }
  } else {
    for (int i = 0; i < rows; ++i) {
      const float* a = A + (size_t)i * lda;
      const float xi = alpha * x[(size_t)i * incx];
      for (int j = 0; j < cols; ++j) y[(size_t)j * incy] += a[j] * xi;
    }
  }
}
