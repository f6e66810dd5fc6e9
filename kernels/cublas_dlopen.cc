// cuBLAS and cuBLASLt loaded at run time, for the relocatable bundle (KVSIM_STATIC_CUDA=ON,
// validate/bundle.sh). This toolkit ships cuBLAS only as shared libraries (libcublasLt.so.13 alone
// is ~540 MB, far over what a bundle can carry), and a GPU node has its own CUDA toolkit. So in
// that build the kernels link these forwarding definitions instead of libcublas: each one opens
// the libraries on first use and calls the real function. Nothing needs cuBLAS until a cuBLAS
// kernel (native attention, gemm) runs: the binaries start, the CPU backend and the other CUDA
// kernels work on a machine without it.
//
// Where the libraries are looked for, in order: $KVSIM_CUBLAS_DIR; the binary's RUNPATH
// ($ORIGIN/../lib: a bundle may carry them), LD_LIBRARY_PATH and the loader's cache (plain
// soname); $CUDA_HOME/lib64, $CUDA_PATH/lib64; /usr/local/cuda/lib64 and
// /usr/local/cuda/targets/x86_64-linux/lib. When none works, every call returns
// CUBLAS_STATUS_NOT_INITIALIZED and the first one prints, once, every place tried.
//
// The definitions repeat the headers' declarations (included below), so a signature that drifts
// from the toolkit's fails to compile, and a cuBLAS function the kernels start using without a
// line here fails to link in the bundle build.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace {

constexpr const char* kLtName = "libcublasLt.so." KVSIM_CUBLAS_SOVERSION;
constexpr const char* kBlasName = "libcublas.so." KVSIM_CUBLAS_SOVERSION;

struct Libraries {
  void* lt = nullptr;
  void* blas = nullptr;
  std::string tried;
};

std::vector<std::string> candidate_dirs() {
  std::vector<std::string> dirs;
  if (const char* d = std::getenv("KVSIM_CUBLAS_DIR"); d && *d) dirs.emplace_back(d);
  dirs.emplace_back("");  // plain soname: RUNPATH, LD_LIBRARY_PATH, ld.so.cache
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* d = std::getenv(var); d && *d) dirs.push_back(std::string(d) + "/lib64");
  }
  dirs.emplace_back("/usr/local/cuda/lib64");
  dirs.emplace_back("/usr/local/cuda/targets/x86_64-linux/lib");
  return dirs;
}

// Opens libcublasLt first (RTLD_GLOBAL), so libcublas's own dependency on it is met by the copy
// already loaded, from the same folder.
const Libraries& libraries() {
  static Libraries libs;
  static std::once_flag once;
  std::call_once(once, [] {
    for (const std::string& dir : candidate_dirs()) {
      const std::string lt = dir.empty() ? kLtName : dir + "/" + kLtName;
      const std::string blas = dir.empty() ? kBlasName : dir + "/" + kBlasName;
      void* hl = dlopen(lt.c_str(), RTLD_NOW | RTLD_GLOBAL);
      void* hb = hl ? dlopen(blas.c_str(), RTLD_NOW | RTLD_GLOBAL) : nullptr;
      if (hl && hb) {
        libs.lt = hl;
        libs.blas = hb;
        return;
      }
      const char* err = dlerror();
      libs.tried += "\n  " + (dir.empty() ? std::string("(loader search path)") : dir) + ": " +
                    (err ? err : "not found");
      if (hb) dlclose(hb);
      if (hl) dlclose(hl);
    }
    std::fprintf(stderr,
                 "kvsim: cannot load cuBLAS (%s, %s); the cuBLAS kernels (native, gemm) fail "
                 "with CUBLAS_STATUS_NOT_INITIALIZED. Tried:%s\n  Set KVSIM_CUBLAS_DIR to the "
                 "folder that holds them (a CUDA toolkit's lib64, or the nvidia/.../lib "
                 "folder of PyTorch's cuBLAS wheel).\n",
                 kBlasName, kLtName, libs.tried.c_str());
  });
  return libs;
}

template <typename Fn>
Fn resolve(bool lt, const char* name) {
  const Libraries& l = libraries();
  void* h = lt ? l.lt : l.blas;
  return h ? reinterpret_cast<Fn>(dlsym(h, name)) : nullptr;
}

}  // namespace

// KVSIM_FORWARD(LT, RET, NAME, (PARAMS), (ARGS), FAIL): defines NAME to call the loaded library's
// NAME, or return FAIL when it could not be loaded.
#define KVSIM_FORWARD(LT, RET, NAME, PARAMS, ARGS, FAIL) \
  extern "C" RET CUBLASWINAPI NAME PARAMS {              \
    using Fn = RET(CUBLASWINAPI*) PARAMS;                \
    static const Fn fn = resolve<Fn>(LT, #NAME);         \
    return fn ? fn ARGS : FAIL;                          \
  }

constexpr cublasStatus_t kNotLoaded = CUBLAS_STATUS_NOT_INITIALIZED;

// ---- cuBLAS ------------------------------------------------------------------------------------
KVSIM_FORWARD(false, cublasStatus_t, cublasCreate_v2, (cublasHandle_t * handle), (handle),
              kNotLoaded)
KVSIM_FORWARD(false, cublasStatus_t, cublasDestroy_v2, (cublasHandle_t handle), (handle),
              kNotLoaded)
KVSIM_FORWARD(false, cublasStatus_t, cublasGetProperty, (libraryPropertyType type, int* value),
              (type, value), kNotLoaded)
KVSIM_FORWARD(false, const char*, cublasGetStatusString, (cublasStatus_t status), (status),
              "cuBLAS not loaded (see the message above)")
KVSIM_FORWARD(false, cublasStatus_t, cublasGemmEx,
              (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
               int n, int k, const void* alpha, const void* A, cudaDataType Atype, int lda,
               const void* B, cudaDataType Btype, int ldb, const void* beta, void* C,
               cudaDataType Ctype, int ldc, cublasComputeType_t computeType, cublasGemmAlgo_t algo),
              (handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype,
               ldc, computeType, algo),
              kNotLoaded)
KVSIM_FORWARD(false, cublasStatus_t, cublasGemmStridedBatchedEx,
              (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
               int n, int k, const void* alpha, const void* A, cudaDataType Atype, int lda,
               long long int strideA, const void* B, cudaDataType Btype, int ldb,
               long long int strideB, const void* beta, void* C, cudaDataType Ctype, int ldc,
               long long int strideC, int batchCount, cublasComputeType_t computeType,
               cublasGemmAlgo_t algo),
              (handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb,
               strideB, beta, C, Ctype, ldc, strideC, batchCount, computeType, algo),
              kNotLoaded)

// ---- cuBLASLt ----------------------------------------------------------------------------------
KVSIM_FORWARD(true, cublasStatus_t, cublasLtCreate, (cublasLtHandle_t * lightHandle), (lightHandle),
              kNotLoaded)
KVSIM_FORWARD(true, cublasStatus_t, cublasLtDestroy, (cublasLtHandle_t lightHandle), (lightHandle),
              kNotLoaded)
KVSIM_FORWARD(true, cublasStatus_t, cublasLtMatmul,
              (cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void* alpha,
               const void* A, cublasLtMatrixLayout_t Adesc, const void* B,
               cublasLtMatrixLayout_t Bdesc, const void* beta, const void* C,
               cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
               const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspaceSizeInBytes,
               cudaStream_t stream),
              (lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo,
               workspace, workspaceSizeInBytes, stream),
              kNotLoaded)
KVSIM_FORWARD(true, cublasStatus_t, cublasLtMatmulAlgoGetHeuristic,
              (cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
               cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
               cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
               cublasLtMatmulPreference_t preference, int requestedAlgoCount,
               cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int* returnAlgoCount),
              (lightHandle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, preference,
               requestedAlgoCount, heuristicResultsArray, returnAlgoCount),
              kNotLoaded)
KVSIM_FORWARD(true, cublasStatus_t, cublasLtMatmulDescCreate,
              (cublasLtMatmulDesc_t * matmulDesc, cublasComputeType_t computeType,
               cudaDataType_t scaleType),
              (matmulDesc, computeType, scaleType), kNotLoaded)
KVSIM_FORWARD(true, cublasStatus_t, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t matmulDesc),
              (matmulDesc), kNotLoaded)
KVSIM_FORWARD(true, cublasStatus_t, cublasLtMatmulDescSetAttribute,
              (cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
               const void* buf, size_t sizeInBytes),
              (matmulDesc, attr, buf, sizeInBytes), kNotLoaded)
KVSIM_FORWARD(true, cublasStatus_t, cublasLtMatmulPreferenceCreate,
              (cublasLtMatmulPreference_t * pref), (pref), kNotLoaded)
KVSIM_FORWARD(true, cublasStatus_t, cublasLtMatmulPreferenceDestroy,
              (cublasLtMatmulPreference_t pref), (pref), kNotLoaded)
KVSIM_FORWARD(true, cublasStatus_t, cublasLtMatmulPreferenceSetAttribute,
              (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
               const void* buf, size_t sizeInBytes),
              (pref, attr, buf, sizeInBytes), kNotLoaded)
KVSIM_FORWARD(true, cublasStatus_t, cublasLtMatrixLayoutCreate,
              (cublasLtMatrixLayout_t * matLayout, cudaDataType type, uint64_t rows, uint64_t cols,
               int64_t ld),
              (matLayout, type, rows, cols, ld), kNotLoaded)
KVSIM_FORWARD(true, cublasStatus_t, cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t matLayout),
              (matLayout), kNotLoaded)
