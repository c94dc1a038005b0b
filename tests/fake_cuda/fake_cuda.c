/* A stand-in for the CUDA driver (libcuda.so.1) and cuBLAS (libcublas.so.13)
 * that runs on the host, for tests/test_gpu_fake_driver.py: "device memory"
 * is host memory, copies are memcpy, kernels are counted but not run, and
 * cublasGemmEx / cublasGemmStridedBatchedEx compute column-major GEMMs on
 * the host (f32, f64, bf16 inputs of f32). It lets a machine without a GPU
 * run everything of a GPU program but its kernels: the exported library's
 * loading, argument and result marshalling, transfers, tdf's device pool
 * and the cuBLAS layouts tdf_gpu_contract chooses. Built twice by the test,
 * as libcuda.so.1 (FAKE_DRIVER) and as libcublas.so.13 (FAKE_CUBLAS).
 * Counters are read through fake_counters(). FAKE_CUBLAS_STATUS (an
 * environment variable) makes every GEMM fail with that status. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef FAKE_DRIVER
typedef unsigned long long dptr;
static long
    counters[8]; /* alloc, free, async alloc, async free, launch, pool set */
long *fake_counters(void) { return counters; }
static int token;
int cuInit(unsigned f) { return 0; }
int cuDeviceGet(int *d, int i) {
  *d = 0;
  return 0;
}
int cuDeviceGetCount(int *c) {
  *c = 1;
  return 0;
}
int cuDeviceGetAttribute(int *v, int a, int d) {
  *v = 1;
  return 0;
}
int cuDevicePrimaryCtxRetain(void **c, int d) {
  *c = &token;
  return 0;
}
int cuCtxPushCurrent_v2(void *c) { return 0; }
int cuCtxPopCurrent_v2(void **c) {
  if (c)
    *c = &token;
  return 0;
}
int cuCtxSynchronize(void) { return 0; }
int cuGetErrorName(int e, const char **s) {
  *s = "FAKE_ERROR";
  return 0;
}
int cuGetErrorString(int e, const char **s) {
  *s = "fake error";
  return 0;
}
int cuStreamCreate(void **s, unsigned f) {
  *s = &token;
  return 0;
}
int cuStreamDestroy_v2(void *s) { return 0; }
int cuStreamSynchronize(void *s) { return 0; }
int cuStreamWaitEvent(void *s, void *e, unsigned f) { return 0; }
int cuEventCreate(void **e, unsigned f) {
  *e = &token;
  return 0;
}
int cuEventDestroy_v2(void *e) { return 0; }
int cuEventRecord(void *e, void *s) { return 0; }
int cuEventSynchronize(void *e) { return 0; }
int cuModuleLoadData(void **m, const void *image) {
  *m = &token;
  return 0;
}
int cuModuleLoadDataEx(void **m, const void *image, unsigned n, void *o,
                       void **v) {
  *m = &token;
  return 0;
}
int cuModuleUnload(void *m) { return 0; }
int cuModuleGetFunction(void **f, void *m, const char *name) {
  *f = &token;
  return 0;
}
int cuFuncSetAttribute(void *f, int a, int v) { return 0; }
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                   unsigned by, unsigned bz, unsigned shared, void *s,
                   void **params, void **extra) {
  counters[4]++;
  return 0;
}
int cuLaunchKernelEx(const void *config, void *f, void **params, void **extra) {
  counters[4]++;
  return 0;
}
int cuMemAlloc_v2(dptr *p, size_t n) {
  counters[0]++;
  *p = (dptr)malloc(n ? n : 1);
  return 0;
}
int cuMemAllocManaged(dptr *p, size_t n, unsigned f) {
  counters[0]++;
  *p = (dptr)malloc(n ? n : 1);
  return 0;
}
int cuMemFree_v2(dptr p) {
  counters[1]++;
  free((void *)p);
  return 0;
}
int cuMemAllocAsync(dptr *p, size_t n, void *s) {
  counters[2]++;
  *p = (dptr)malloc(n ? n : 1);
  return 0;
}
int cuMemFreeAsync(dptr p, void *s) {
  counters[3]++;
  free((void *)p);
  return 0;
}
int cuDeviceGetDefaultMemPool(void **pool, int d) {
  *pool = &token;
  return 0;
}
int cuMemPoolSetAttribute(void *pool, int attribute, void *value) {
  counters[5]++;
  return 0;
}
int cuMemHostRegister_v2(void *p, size_t n, unsigned f) { return 0; }
int cuMemHostUnregister(void *p) { return 0; }
int cuMemcpy(dptr d, dptr s, size_t n) {
  memcpy((void *)d, (void *)s, n);
  return 0;
}
int cuMemcpyAsync(dptr d, dptr s, size_t n, void *st) {
  memcpy((void *)d, (void *)s, n);
  return 0;
}
int cuMemsetD16Async(dptr d, unsigned short v, size_t n, void *s) {
  for (size_t i = 0; i < n; ++i)
    ((unsigned short *)d)[i] = v;
  return 0;
}
int cuMemsetD32Async(dptr d, unsigned v, size_t n, void *s) {
  for (size_t i = 0; i < n; ++i)
    ((unsigned *)d)[i] = v;
  return 0;
}
int cuTensorMapEncodeTiled(void) { return 1; }
#endif

#ifdef FAKE_CUBLAS
enum { R32F = 0, R64F = 1, R16BF = 14 };
static int handle;
static double load(const void *p, int type, long i) {
  if (type == R64F)
    return ((const double *)p)[i];
  if (type == R32F)
    return ((const float *)p)[i];
  uint32_t bits = (uint32_t)((const uint16_t *)p)[i] << 16; /* bf16 */
  float f;
  memcpy(&f, &bits, 4);
  return f;
}
static void store(void *p, int type, long i, double v) {
  if (type == R64F)
    ((double *)p)[i] = v;
  else
    ((float *)p)[i] = (float)v;
}
static int status(void) {
  const char *s = getenv("FAKE_CUBLAS_STATUS");
  return s ? atoi(s) : 0;
}
int cublasCreate_v2(void **h) {
  *h = &handle;
  return 0;
}
int cublasSetStream_v2(void *h, void *s) { return 0; }
const char *cublasGetStatusString(int s) { return "CUBLAS_STATUS_FAKE"; }
/* C = alpha op(A) op(B) + beta C, column-major, one matrix. */
static void gemm(int ta, int tb, int m, int n, int k, const void *alpha,
                 const void *a, int atype, int lda, const void *b, int btype,
                 int ldb, const void *beta, void *c, int ctype, int ldc) {
  double al = ctype == R64F ? *(const double *)alpha : *(const float *)alpha;
  double be = ctype == R64F ? *(const double *)beta : *(const float *)beta;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      double sum = 0;
      for (int l = 0; l < k; ++l)
        sum += load(a, atype, ta ? (long)i * lda + l : (long)l * lda + i) *
               load(b, btype, tb ? (long)l * ldb + j : (long)j * ldb + l);
      long at = (long)j * ldc + i;
      store(c, ctype, at, al * sum + (be != 0 ? be * load(c, ctype, at) : 0));
    }
}
static int size(int type) { return type == R64F ? 8 : type == R32F ? 4 : 2; }
int cublasGemmEx(void *h, int ta, int tb, int m, int n, int k,
                 const void *alpha, const void *a, int atype, int lda,
                 const void *b, int btype, int ldb, const void *beta, void *c,
                 int ctype, int ldc, int compute, int algo) {
  if (status())
    return status();
  gemm(ta, tb, m, n, k, alpha, a, atype, lda, b, btype, ldb, beta, c, ctype,
       ldc);
  return 0;
}
int cublasGemmStridedBatchedEx(void *h, int ta, int tb, int m, int n, int k,
                               const void *alpha, const void *a, int atype,
                               int lda, long long sa, const void *b, int btype,
                               int ldb, long long sb, const void *beta, void *c,
                               int ctype, int ldc, long long sc, int batch,
                               int compute, int algo) {
  if (status())
    return status();
  for (int i = 0; i < batch; ++i)
    gemm(ta, tb, m, n, k, alpha, (const char *)a + i * sa * size(atype), atype,
         lda, (const char *)b + i * sb * size(btype), btype, ldb, beta,
         (char *)c + i * sc * size(ctype), ctype, ldc);
  return 0;
}
#endif
