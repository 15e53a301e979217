// cuBLASLt opened on first use (dlopen) instead of linked. Loading libcublasLt costs ~210 MB of
// resident memory in every process that links it, before main (an empty program linked with
// -lcublasLt peaks at 211 MB: the loader applies its 353,000 relocations), and most headwise
// runs (generate, eval, CPU training, the tests) never call it. Each entry point below has the
// header's signature (its declaration is in scope, so a mismatch does not compile) and forwards
// to the library's own. When the library cannot be opened, every call returns
// CUBLAS_STATUS_NOT_INITIALIZED and the status strings say why, so the backend's usual status
// check (cuda_check.hpp) prints one error naming the library and the loader's reason.
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <string>

#define HW_STR2(x) #x
#define HW_STR(x) HW_STR2(x)

namespace {

constexpr const char* kLibrary = "libcublasLt.so." HW_STR(CUBLAS_VER_MAJOR);

struct Library {
  void* handle = nullptr;
  std::string why;  // the loader's message when handle is null
};

// The loader's search path first (LD_LIBRARY_PATH, the binary's RUNPATH, ld.so.cache); then the
// folder libcudart came from, where the toolkit and the pip wheels' layouts alike keep it.
const Library& library() {
  static const Library lib = [] {
    Library l;
    l.handle = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
    if (l.handle) return l;
    l.why = dlerror();
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&cudaGetDeviceCount), &info) != 0 && info.dli_fname != nullptr) {
      std::string dir = info.dli_fname;
      dir = dir.substr(0, dir.find_last_of('/') + 1);
      if (!dir.empty()) l.handle = dlopen((dir + kLibrary).c_str(), RTLD_NOW | RTLD_LOCAL);
    }
    if (!l.handle) l.why = std::string("cannot open ") + kLibrary + " (cuBLASLt, which the CUDA backend's GEMMs need): " + l.why;
    return l;
  }();
  return lib;
}

template <class Fn>
Fn* entry(const char* name) {
  const Library& l = library();
  return l.handle ? reinterpret_cast<Fn*>(dlsym(l.handle, name)) : nullptr;
}

}  // namespace

// Each forwarder looks its symbol up once; a missing symbol reads as a library that did not load.
#define HW_LT_FORWARD(name, params, args)                                      \
  cublasStatus_t CUBLASWINAPI name params {                                    \
    static auto* const fn = entry<cublasStatus_t CUBLASWINAPI params>(#name);  \
    return fn ? fn args : CUBLAS_STATUS_NOT_INITIALIZED;                       \
  }

HW_LT_FORWARD(cublasLtCreate, (cublasLtHandle_t * handle), (handle))
HW_LT_FORWARD(cublasLtDestroy, (cublasLtHandle_t handle), (handle))
HW_LT_FORWARD(cublasLtMatmul,
              (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
               cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta,
               const void* C, cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
               const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspaceSize, cudaStream_t stream),
              (handle, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace, workspaceSize,
               stream))
HW_LT_FORWARD(cublasLtMatmulAlgoConfigGetAttribute,
              (const cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoConfigAttributes_t attr, void* buf,
               size_t sizeInBytes, size_t* sizeWritten),
              (algo, attr, buf, sizeInBytes, sizeWritten))
HW_LT_FORWARD(cublasLtMatmulAlgoGetHeuristic,
              (cublasLtHandle_t handle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
               cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
               cublasLtMatmulPreference_t preference, int requestedAlgoCount,
               cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int* returnAlgoCount),
              (handle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, preference, requestedAlgoCount,
               heuristicResultsArray, returnAlgoCount))
HW_LT_FORWARD(cublasLtMatmulDescCreate,
              (cublasLtMatmulDesc_t * matmulDesc, cublasComputeType_t computeType, cudaDataType_t scaleType),
              (matmulDesc, computeType, scaleType))
HW_LT_FORWARD(cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t matmulDesc), (matmulDesc))
HW_LT_FORWARD(cublasLtMatmulDescSetAttribute,
              (cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr, const void* buf,
               size_t sizeInBytes),
              (matmulDesc, attr, buf, sizeInBytes))
HW_LT_FORWARD(cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t * pref), (pref))
HW_LT_FORWARD(cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t pref), (pref))
HW_LT_FORWARD(cublasLtMatmulPreferenceSetAttribute,
              (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
               size_t sizeInBytes),
              (pref, attr, buf, sizeInBytes))
HW_LT_FORWARD(cublasLtMatrixLayoutCreate,
              (cublasLtMatrixLayout_t * matLayout, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld),
              (matLayout, type, rows, cols, ld))
HW_LT_FORWARD(cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t matLayout), (matLayout))

#undef HW_LT_FORWARD

// The status texts: the library's own, or why it is not there.
const char* CUBLASWINAPI cublasLtGetStatusName(cublasStatus_t status) {
  static auto* const fn = entry<const char* CUBLASWINAPI(cublasStatus_t)>("cublasLtGetStatusName");
  return fn ? fn(status) : library().why.c_str();
}

const char* CUBLASWINAPI cublasLtGetStatusString(cublasStatus_t status) {
  static auto* const fn = entry<const char* CUBLASWINAPI(cublasStatus_t)>("cublasLtGetStatusString");
  return fn ? fn(status) : library().why.c_str();
}
