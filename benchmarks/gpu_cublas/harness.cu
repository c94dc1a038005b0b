// Device check of tdf_gpu_contract (python/src/GpuRuntime.cpp), the runtime
// function of the GPU path's cuBLAS route, on a machine with a GPU and the
// CUDA toolkit but without tdf's Python environment: each layout the pass
// emits (row-major, x @ w.T, a transposed A with a column-major C that
// accumulates, strided batches, a shared B, bf16 q @ k.T into f32, f64, a
// mat-vec) against a float64 reference on the host, then the time of one
// 4096^3 call (context sync, GEMM, stream sync). From the repository root:
//
//   nvcc -std=c++17 -O1 benchmarks/gpu_cublas/harness.cu -o /tmp/h -ldl
//   TDF_CUBLAS_LIBRARY=/path/to/libcublas.so.13 /tmp/h
//
// Exit status: the number of failed checks.
#include "../../python/src/GpuRuntime.cpp"
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cmath>
#include <cstdio>
#include <random>
#include <chrono>

static int failures = 0;
enum { TF32 = 0, TF64 = 1, TBF16 = 2 };

struct HDim { int kind; int64_t size, sa, sb, sc; };

template <typename In, typename Out>
void check(const char *name, int itype, int ctype, std::vector<HDim> dims, bool accumulate,
           int64_t na, int64_t nb, int64_t nc) {
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  std::vector<In> A(na), B(nb);
  std::vector<Out> C(nc);
  for (auto &x : A) x = In(dist(rng));
  for (auto &x : B) x = In(dist(rng));
  for (auto &x : C) x = Out(dist(rng));
  std::vector<Out> C0 = C;
  In *dA, *dB; Out *dC;
  cudaMalloc(&dA, na * sizeof(In)); cudaMalloc(&dB, nb * sizeof(In)); cudaMalloc(&dC, nc * sizeof(Out));
  cudaMemcpy(dA, A.data(), na * sizeof(In), cudaMemcpyHostToDevice);
  cudaMemcpy(dB, B.data(), nb * sizeof(In), cudaMemcpyHostToDevice);
  cudaMemcpy(dC, C.data(), nc * sizeof(Out), cudaMemcpyHostToDevice);
  int64_t flags = itype | itype << 4 | ctype << 8 | int64_t(accumulate) << 12;
  for (size_t d = 0; d < dims.size(); ++d) flags |= int64_t(dims[d].kind) << (16 + 2 * d);
  int64_t s[6][4] = {{0}};
  for (size_t d = 0; d < dims.size(); ++d) { s[d][0] = dims[d].size; s[d][1] = dims[d].sa; s[d][2] = dims[d].sb; s[d][3] = dims[d].sc; }
  tdf_gpu_contract(flags, int64_t(dA), 0, int64_t(dB), 0, int64_t(dC), 0, int64_t(dims.size()),
                   s[0][0], s[0][1], s[0][2], s[0][3], s[1][0], s[1][1], s[1][2], s[1][3],
                   s[2][0], s[2][1], s[2][2], s[2][3], s[3][0], s[3][1], s[3][2], s[3][3],
                   s[4][0], s[4][1], s[4][2], s[4][3], s[5][0], s[5][1], s[5][2], s[5][3]);
  if (!state.error.empty()) { printf("FAIL %s: %s\n", name, state.error.c_str()); state.error.clear(); ++failures; return; }
  cudaMemcpy(C.data(), dC, nc * sizeof(Out), cudaMemcpyDeviceToHost);
  // reference: iterate over all index tuples
  std::vector<double> R(nc);
  for (int64_t i = 0; i < nc; ++i) R[i] = accumulate ? double(C0[i]) : 0.0;
  std::vector<char> touched(nc, 0);
  int64_t total = 1; for (auto &d : dims) total *= d.size;
  for (int64_t t = 0; t < total; ++t) {
    int64_t rem = t, oa = 0, ob = 0, oc = 0;
    for (int d = int(dims.size()) - 1; d >= 0; --d) {
      int64_t i = rem % dims[d].size; rem /= dims[d].size;
      oa += i * dims[d].sa; ob += i * dims[d].sb; oc += i * dims[d].sc;
    }
    R[oc] += double(float(A[oa])) * double(float(B[ob])); touched[oc] = 1;
  }
  double worst = 0;
  for (int64_t i = 0; i < nc; ++i) {
    double want = touched[i] ? R[i] : double(C0[i]);
    worst = std::max(worst, std::fabs(double(C[i]) - want) / (1 + std::fabs(want)));
  }
  double tol = ctype == TF64 ? 1e-12 : 1e-4;
  printf("%s %s: max rel err %.3g\n", worst <= tol ? "ok  " : "FAIL", name, worst);
  if (worst > tol) ++failures;
  cudaFree(dA); cudaFree(dB); cudaFree(dC);
}

int main() {
  const int M = 1, N = 2, K = 3, Bt = 0;
  int64_t m = 67, n = 45, k = 130;
  // row-major A[m,k], B[k,n], C[m,n]
  check<float, float>("f32 nn", TF32, TF32, {{M, m, k, 0, n}, {N, n, 0, 1, 1}, {K, k, 1, n, 0}}, false, m * k, k * n, m * n);
  // B stored transposed: B[n,k]
  check<float, float>("f32 x@w.T", TF32, TF32, {{M, m, k, 0, n}, {N, n, 0, k, 1}, {K, k, 1, 1, 0}}, false, m * k, n * k, m * n);
  // A stored transposed A[k,m], C column-major C[n,m], accumulate
  check<float, float>("f32 a.T, C col-major, acc", TF32, TF32, {{M, m, 1, 0, 1}, {N, n, 0, 1, m}, {K, k, m, n, 0}}, true, k * m, k * n, n * m);
  // batched: A[b,m,k], B[b,k,n], C[b,m,n]
  int64_t b = 5;
  check<float, float>("f32 batched", TF32, TF32, {{Bt, b, m * k, k * n, m * n}, {M, m, k, 0, n}, {N, n, 0, 1, 1}, {K, k, 1, n, 0}}, false, b * m * k, b * k * n, b * m * n);
  // batched with B broadcast (batch stride 0)
  check<float, float>("f32 batched, B shared", TF32, TF32, {{Bt, b, m * k, 0, m * n}, {M, m, k, 0, n}, {N, n, 0, 1, 1}, {K, k, 1, n, 0}}, false, b * m * k, k * n, b * m * n);
  // bf16 inputs, f32 result, attention-like q@k.T: q[b,m,k], kk[b,n,k]
  check<__nv_bfloat16, float>("bf16 q@k.T batched", TBF16, TF32, {{Bt, b, m * k, n * k, m * n}, {M, m, k, 0, n}, {N, n, 0, k, 1}, {K, k, 1, 1, 0}}, false, b * m * k, b * n * k, b * m * n);
  // f64 batched accumulate
  check<double, double>("f64 batched acc", TF64, TF64, {{Bt, b, m * k, k * n, m * n}, {M, m, k, 0, n}, {N, n, 0, 1, 1}, {K, k, 1, n, 0}}, true, b * m * k, b * k * n, b * m * n);
  // mat-vec: A[m,k] x[k] -> y[m]
  check<float, float>("f32 matvec", TF32, TF32, {{M, m, k, 0, 1}, {K, k, 1, 1, 0}}, false, m * k, k, m);
  // Throughput of one call (context sync, GEMM, stream sync), 4096^3.
  for (int bf = 0; bf < 2; ++bf) {
    int64_t S = 4096;
    size_t es = bf ? 2 : 4;
    void *dA, *dB, *dC;
    cudaMalloc(&dA, S * S * es); cudaMalloc(&dB, S * S * es); cudaMalloc(&dC, S * S * 4);
    cudaMemset(dA, 0, S * S * es); cudaMemset(dB, 0, S * S * es);
    int it = bf ? TBF16 : TF32;
    int64_t flags = it | it << 4 | TF32 << 8 | int64_t(M) << 16 | int64_t(N) << 18 | int64_t(K) << 20;
    auto call = [&] {
      tdf_gpu_contract(flags, int64_t(dA), 0, int64_t(dB), 0, int64_t(dC), 0, 3, S, S, 0, S, S, 0, 1, 1,
                       S, 1, S, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    };
    call(); call();
    cudaDeviceSynchronize();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) call();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 20;
    printf("%s 4096^3 through tdf_gpu_contract: %.3f ms, %.1f TFLOP/s (%s)\n", bf ? "bf16->f32" : "f32",
           s * 1e3, 2.0 * S * S * S / s / 1e12, state.error.empty() ? "no error" : state.error.c_str());
    cudaFree(dA); cudaFree(dB); cudaFree(dC);
  }
  printf("%d failures\n", failures);
  return failures != 0;
}
