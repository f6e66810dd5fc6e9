// GEMMs at the shapes of a transformer's linear layers: Y [m, n] = X [m, k] W [n, k]^T, FP16 or
// BF16 in and out, FP32 accumulation (what a framework's nn.Linear runs).
// Versions:
//   v1  cublasGemmEx (cuBLAS picks the algorithm).
//   v2  cublasLtMatmul with the first algorithm of cuBLASLt's heuristic and a 32 MiB workspace.
#include "kernels/cuda_common.cuh"

namespace kvsim::kernels::cuda {

namespace {

// Column-major view used by both: Y^T [n x m] = op(W)^T ... i.e. C = W^T(op T) * X^T, with
// W [k x n] ld k transposed, X^T [k x m] ld k, Y^T [n x m] ld n.
void run_v1(const GemmShape& s, Precision p, const void* x, const void* w, void* y) {
  const float one = 1.0f, zero = 0.0f;
  const cudaDataType_t t = cuda_dtype(p);
  CUBLAS_CHECK(cublasGemmEx(cublas_handle(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(s.n),
                            static_cast<int>(s.m), static_cast<int>(s.k), &one, w, t,
                            static_cast<int>(s.k), x, t, static_cast<int>(s.k), &zero, y, t,
                            static_cast<int>(s.n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// Owns the cuBLASLt descriptors of one call.
struct LtDescs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtDescs() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

void run_v2(const GemmShape& s, Precision p, const void* x, const void* w, void* y) {
  const cudaDataType_t t = cuda_dtype(p);
  LtDescs d;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&d.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans = CUBLAS_OP_T;
  CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof trans));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.a, t, static_cast<uint64_t>(s.k),
                                          static_cast<uint64_t>(s.n), s.k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.b, t, static_cast<uint64_t>(s.k),
                                          static_cast<uint64_t>(s.m), s.k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.c, t, static_cast<uint64_t>(s.n),
                                          static_cast<uint64_t>(s.m), s.n));
  size_t ws_bytes = 0;
  void* ws = cublaslt_workspace(&ws_bytes);
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&d.pref));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(cublaslt_handle(), d.op, d.a, d.b, d.c, d.c, d.pref,
                                              1, &result, &found));
  if (found == 0) throw CudaError("cublasLt: no algorithm for gemm " + s.describe());
  const float one = 1.0f, zero = 0.0f;
  CUBLAS_CHECK(cublasLtMatmul(cublaslt_handle(), d.op, &one, w, d.a, x, d.b, &zero, y, d.c, y, d.c,
                              &result.algo, ws, ws_bytes, nullptr));
}

}  // namespace

void gemm(int version, const GemmShape& s, Precision p, const void* x, const void* w, void* y) {
  s.validate();
  switch (version) {
    case 1: return run_v1(s, p, x, w, y);
    case 2: return run_v2(s, p, x, w, y);
    default: throw_bad_version("gemm", version);
  }
}

}  // namespace kvsim::kernels::cuda
