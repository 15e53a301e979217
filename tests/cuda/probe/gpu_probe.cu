// The first step of scripts/gpu_check.sh, seconds long: can this machine run headwise's CUDA code
// at all? Each check prints one line ("probe: NAME: ok ..." or "probe: NAME: FAILED: why", with
// the CUDA/cuBLASLt/NCCL error's own name and text), and the last line is one JSON object the
// check's table reads. Exit 0 when every check passed, 1 otherwise; a failed check does not stop
// the ones after it that can still run.
//   1. the runtime: cudaGetDeviceCount, driver and runtime versions, the device's name, compute
//      capability, multiprocessors, memory and opt-in shared memory per block (what the attention
//      kernels ask for with cudaFuncSetAttribute);
//   2. one tiny kernel, launched and read back;
//   3. one fp32 GEMM through headwise's own cuBLASLt layer (the CUDA backend's matmul_forward)
//      against a host loop in double;
//   4. NCCL: a one-rank communicator and an all-reduce of one float.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headwise/core/device_memory.hpp"
#include "headwise/kernels/cuda_backend.hpp"

namespace {

nlohmann::json report = nlohmann::json::object();
bool all_ok = true;

void passed(const char* name, const std::string& detail = "") {
  std::printf("probe: %s: ok%s%s\n", name, detail.empty() ? "" : " ", detail.c_str());
  report[name] = detail.empty() ? "ok" : "ok " + detail;
}
void failed(const char* name, const std::string& why) {
  std::printf("probe: %s: FAILED: %s\n", name, why.c_str());
  report[name] = "FAILED: " + why;
  all_ok = false;
}
std::string cuda_text(cudaError_t e) { return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")"; }

__global__ void write_indices(int* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = 3 * i + 1;
}

bool probe_runtime() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  int driver = 0, runtime = 0;
  (void)cudaDriverGetVersion(&driver);
  (void)cudaRuntimeGetVersion(&runtime);
  report["driver_api"] = driver;
  report["runtime_api"] = runtime;
  if (e != cudaSuccess) {
    failed("runtime", "cudaGetDeviceCount: " + cuda_text(e) + "; driver API " + std::to_string(driver) +
                          ", runtime " + std::to_string(runtime));
    return false;
  }
  if (n == 0) {
    failed("runtime", "cudaGetDeviceCount found no device");
    return false;
  }
  cudaDeviceProp p{};
  if (const cudaError_t pe = cudaGetDeviceProperties(&p, 0); pe != cudaSuccess) {
    failed("runtime", "cudaGetDeviceProperties: " + cuda_text(pe));
    return false;
  }
  int optin = 0;
  (void)cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
  report["device"] = p.name;
  report["sm"] = std::to_string(p.major) + "." + std::to_string(p.minor);
  report["multiprocessors"] = p.multiProcessorCount;
  report["memory_mib"] = p.totalGlobalMem >> 20;
  report["optin_smem_bytes"] = optin;
  passed("runtime", std::string(p.name) + ", sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " +
                        std::to_string(p.multiProcessorCount) + " SMs, " + std::to_string(p.totalGlobalMem >> 20) +
                        " MiB, opt-in shared memory " + std::to_string(optin) + " B/block, driver API " +
                        std::to_string(driver) + ", runtime " + std::to_string(runtime));
  return true;
}

void probe_kernel() {
  constexpr int n = 1000;
  int* d = nullptr;
  cudaError_t e = cudaMalloc(&d, n * sizeof(int));
  if (e != cudaSuccess) return failed("kernel", "cudaMalloc: " + cuda_text(e));
  write_indices<<<(n + 255) / 256, 256>>>(d, n);
  e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  std::vector<int> h(n, -1);
  if (e == cudaSuccess) e = cudaMemcpy(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost);
  (void)cudaFree(d);
  if (e != cudaSuccess) return failed("kernel", "launch or copy back: " + cuda_text(e));
  for (int i = 0; i < n; ++i)
    if (h[size_t(i)] != 3 * i + 1) return failed("kernel", "element " + std::to_string(i) + " reads " + std::to_string(h[size_t(i)]));
  passed("kernel");
}

// D[M,O] = A[M,I] @ W[I,O] through the CUDA backend (cuBLASLt), fp32 and bf16, against doubles.
void probe_gemm() {
  try {
    const int64_t M = 64, I = 96, O = 128;
    std::vector<float> a(size_t(M * I)), w(size_t(I * O));
    for (size_t i = 0; i < a.size(); ++i) a[i] = float((i * 37 % 101) - 50) / 50.f;
    for (size_t i = 0; i < w.size(); ++i) w[i] = float((i * 53 % 89) - 44) / 44.f;
    std::vector<double> ref(size_t(M * O), 0.0);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t o = 0; o < O; ++o)
        for (int64_t i = 0; i < I; ++i) ref[size_t(m * O + o)] += double(a[size_t(m * I + i)]) * w[size_t(i * O + o)];
    const auto be = hw::make_cuda_backend({.tf32 = false});
    auto upload = [](const std::vector<float>& v) {
      float* d = static_cast<float*>(hw::device::alloc(v.size() * sizeof(float), "gpu_probe"));
      hw::device::copy_to_device(d, v.data(), v.size() * sizeof(float));
      return d;
    };
    float *da = upload(a), *dw = upload(w), *dd = upload(std::vector<float>(size_t(M * O), 0.f));
    be->matmul_forward(dd, da, dw, nullptr, M, I, O, false);
    be->synchronize();
    std::vector<float> got(size_t(M * O));
    hw::device::copy_to_host(got.data(), dd, got.size() * sizeof(float));
    double err = 0, scale = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      err = std::max(err, std::fabs(got[i] - ref[i]));
      scale = std::max(scale, std::fabs(ref[i]));
    }
    for (float* p : {da, dw, dd}) hw::device::free(p);
    if (!(err / scale <= 1e-5)) return failed("cublaslt", "fp32 GEMM relative error " + std::to_string(err / scale));
    passed("cublaslt", "fp32 64x96x128 relative error " + std::to_string(err / scale));
  } catch (const std::exception& ex) {
    failed("cublaslt", ex.what());
  }
}

void probe_nccl() {
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) return failed("nccl", std::string("ncclGetUniqueId: ") + ncclGetErrorString(r));
  ncclComm_t comm = nullptr;
  r = ncclCommInitRank(&comm, 1, id, 0);
  if (r != ncclSuccess) return failed("nccl", std::string("ncclCommInitRank: ") + ncclGetErrorString(r));
  float* d = nullptr;
  const float one = 1.5f;
  float back = 0.f;
  cudaError_t e = cudaMalloc(&d, sizeof(float));
  if (e == cudaSuccess) e = cudaMemcpy(d, &one, sizeof(float), cudaMemcpyHostToDevice);
  if (e == cudaSuccess) r = ncclAllReduce(d, d, 1, ncclFloat, ncclSum, comm, nullptr);
  if (e == cudaSuccess && r == ncclSuccess) e = cudaMemcpy(&back, d, sizeof(float), cudaMemcpyDeviceToHost);
  (void)cudaFree(d);
  int version = 0;
  (void)ncclGetVersion(&version);
  (void)ncclCommDestroy(comm);
  if (r != ncclSuccess) return failed("nccl", std::string("ncclAllReduce: ") + ncclGetErrorString(r));
  if (e != cudaSuccess) return failed("nccl", "device memory around the all-reduce: " + cuda_text(e));
  if (back != one) return failed("nccl", "a one-rank all-reduce of 1.5 gave " + std::to_string(back));
  report["nccl_version"] = version;
  passed("nccl", "version " + std::to_string(version) + ", one-rank all-reduce");
}

}  // namespace

int main() {
  if (probe_runtime()) {
    probe_kernel();
    probe_gemm();
    probe_nccl();
  }
  report["ok"] = all_ok;
  std::printf("%s\n", report.dump().c_str());
  return all_ok ? 0 : 1;
}
