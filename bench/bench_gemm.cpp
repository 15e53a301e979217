// bench_gemm [--lib PATH]... [--threads N] [--reps N] [--tokens N] [--embd C] [--vocab V]
// Times cblas_sgemm of one or more BLAS libraries on the exact GEMMs of one training step of a
// GPT of that shape (default: configs/bench_cpu_small.json, N = 8 x 256 tokens, C 256, V 256):
// the forward GEMMs (bias folded in with beta 1, the LM head with W transposed), the input-
// gradient GEMMs (dout @ W^T), and the weight-gradient GEMMs (inp^T @ dout), each with beta 1
// (accumulate: what the step does today) and beta 0 (write first), plus a 1024^3 square GEMM as
// the machine's practical fp32 peak. Libraries are loaded with dlopen (default: the one headwise
// links), so one process compares them shape by shape, alternating A B A B. Prints a Markdown
// table of GFLOP/s (median of --reps timed calls after one warm-up call).
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

namespace {

// The CBLAS enums' values (cblas.h), so no header of any one library is needed.
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                         int);

struct Lib {
  std::string path;
  SgemmFn sgemm = nullptr;
};

struct Shape {
  std::string name;
  bool ta, tb;
  int m, n, k;
  float beta;
};

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "error: %s\n", msg.c_str());
  std::exit(1);
}

int parse_int(const char* flag, const char* v) {
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (!*v || *end || x < 1 || x > (1 << 20)) die(std::string(flag) + " needs a positive integer, got '" + v + "'");
  return int(x);
}

Lib load(const std::string& path) {
  // RTLD_DEEPBIND: the library's own symbols first, so two BLAS libraries in one process do not
  // resolve into each other.
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!h) die("--lib " + path + ": " + dlerror());
  auto* f = reinterpret_cast<SgemmFn>(dlsym(h, "cblas_sgemm"));
  if (!f) die("--lib " + path + ": no cblas_sgemm in it");
  return {path, f};
}

double seconds_of(const Lib& lib, const Shape& s, std::vector<float>& a, std::vector<float>& b,
                  std::vector<float>& c) {
  const int lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
  const auto t0 = std::chrono::steady_clock::now();
  lib.sgemm(kRowMajor, s.ta ? kTrans : kNoTrans, s.tb ? kTrans : kNoTrans, s.m, s.n, s.k, 1.0f, a.data(), lda,
            b.data(), ldb, s.beta, c.data(), s.n);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> paths;
  int threads = 1, reps = 7, tokens = 2048, C = 256, V = 256;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) die("option " + a + " needs a value (see the comment at the top of bench/bench_gemm.cpp)");
    const char* v = argv[++i];
    if (a == "--lib") paths.push_back(v);
    else if (a == "--threads") threads = parse_int("--threads", v);
    else if (a == "--reps") reps = parse_int("--reps", v);
    else if (a == "--tokens") tokens = parse_int("--tokens", v);
    else if (a == "--embd") C = parse_int("--embd", v);
    else if (a == "--vocab") V = parse_int("--vocab", v);
    else die("unknown option " + a);
  }
  if (paths.empty()) paths.push_back(HEADWISE_BLAS_LIBRARY);
  // Every library's own thread setting, read when it loads.
  const std::string t = std::to_string(threads);
  for (const char* var : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS", "MKL_NUM_THREADS"})
    setenv(var, t.c_str(), 1);
  std::vector<Lib> libs;
  for (const auto& p : paths) libs.push_back(load(p));

  const int N = tokens;
  // The step's dense layers as (name, in, out).
  const std::vector<std::tuple<const char*, int, int>> layers = {
      {"qkv", C, 3 * C}, {"attn proj", C, C}, {"fc", C, 4 * C}, {"fc proj", 4 * C, C}};
  std::vector<Shape> shapes;
  // Forward: out[N,O] = inp[N,I] @ W[I,O]; the LM head uses wte [V,C] transposed.
  for (auto [name, i, o] : layers)
    shapes.push_back({std::string("fwd ") + name, false, false, N, o, i, 1.0f});
  shapes.push_back({"fwd lm head", false, true, N, V, C, 0.0f});
  // Input gradient: dinp[N,I] += dout[N,O] @ W^T.
  for (auto [name, i, o] : layers)
    shapes.push_back({std::string("dinp ") + name, false, true, N, i, o, 1.0f});
  shapes.push_back({"dinp lm head", false, false, N, C, V, 1.0f});
  // Weight gradient: dW[I,O] += inp^T @ dout, accumulated (beta 1) and written first (beta 0).
  for (float beta : {1.0f, 0.0f}) {
    for (auto [name, i, o] : layers)
      shapes.push_back({std::string("dW ") + name + (beta == 0 ? " b0" : ""), true, false, i, o, N, beta});
    shapes.push_back({std::string("dW lm head") + (beta == 0 ? " b0" : ""), true, false, V, C, N, beta});
  }
  shapes.push_back({"peak 1024^3", false, false, 1024, 1024, 1024, 0.0f});

  std::printf("threads %d, median of %d calls, GFLOP/s\n\n| gemm | ta tb | M N K | beta |", threads, reps);
  for (const auto& l : libs) std::printf(" %s |", l.path.substr(l.path.find_last_of('/') + 1).c_str());
  std::printf("\n|---|---|---|---|");
  for (size_t i = 0; i < libs.size(); ++i) std::printf("---|");
  std::printf("\n");
  for (const auto& s : shapes) {
    std::vector<float> a(size_t(s.m) * size_t(s.k), 0.01f), b(size_t(s.k) * size_t(s.n), 0.02f),
        c(size_t(s.m) * size_t(s.n), 0.0f);
    std::vector<std::vector<double>> secs(libs.size());
    for (size_t l = 0; l < libs.size(); ++l) seconds_of(libs[l], s, a, b, c);  // warm-up
    for (int r = 0; r < reps; ++r)  // alternate the libraries call by call: drift hits all alike
      for (size_t l = 0; l < libs.size(); ++l) secs[l].push_back(seconds_of(libs[l], s, a, b, c));
    std::printf("| %s | %c %c | %d %d %d | %g |", s.name.c_str(), s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.m, s.n, s.k,
                double(s.beta));
    for (auto& v : secs) {
      std::sort(v.begin(), v.end());
      std::printf(" %.1f |", 2.0 * s.m * s.n * double(s.k) / v[v.size() / 2] / 1e9);
    }
    std::printf("\n");
  }
  return 0;
}
