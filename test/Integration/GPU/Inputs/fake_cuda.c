/* A stand-in libcuda for testing libflash_cuda_runtime without a GPU: every driver
 * entry point the runtime binds, recording what it was asked to do (which stream a
 * launch went to, how many streams were created or synchronized, copies, ...). */
#include <cuda.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct FakeStats {
  int64_t launches, stream_creates, stream_syncs, module_loads, func_set_attr;
  int64_t mem_allocs, htod_sync, htod_async, tensormap_encodes;
  uintptr_t last_launch_stream, last_htod_async_stream;
  /* The first 8 bytes of each of the last launch's first 4 parameters (with sizes set). */
  uint64_t last_launch_param_words[4];
  /* Async 32-bit memsets: how many, and the last one's pointer, count, value and stream. */
  int64_t memsets;
  uintptr_t last_memset_ptr;
  uint64_t last_memset_n;
  uint32_t last_memset_value;
  uintptr_t last_memset_stream;
};
static struct FakeStats stats;
/* Every kernel's parameter sizes, as cuFuncGetParamInfo reports them: 8 bytes each
 * (pointers and i64 scalars, what memref descriptors expand to) unless set. */
static size_t paramSizes[64];
static int numParamSizes;
void fakeSetParamSizes(const size_t *sizes, int n) {
  numParamSizes = n < 64 ? n : 64;
  for (int i = 0; i < numParamSizes; ++i) paramSizes[i] = sizes[i];
}
/* grid.x of every launch, in order (the split decode's split count). */
static unsigned launchGridX[256];
void fakeLaunchGridX(unsigned *out, int n) {
  for (int i = 0; i < n && i < stats.launches && i < 256; ++i) out[i] = launchGridX[i];
}
static int failModuleLoad;
static uintptr_t capturingStream;

struct FakeStats *fakeStats(void) { return &stats; }
void fakeFailModuleLoad(int on) { failModuleLoad = on; }
void fakeSetCapturingStream(uintptr_t s) { capturingStream = s; }

static CUcontext theCtx = (CUcontext)0x1000;
static CUcontext current;

CUresult CUDAAPI cuInit(unsigned int f) { (void)f; return CUDA_SUCCESS; }
CUresult CUDAAPI cuGetErrorName(CUresult r, const char **s) {
  *s = r == CUDA_ERROR_NO_BINARY_FOR_GPU ? "CUDA_ERROR_NO_BINARY_FOR_GPU" : "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorString(CUresult r, const char **s) { return cuGetErrorName(r, s); }
CUresult CUDAAPI cuDriverGetVersion(int *v) { *v = 13000; return CUDA_SUCCESS; }
CUresult CUDAAPI cuDeviceGet(CUdevice *d, int o) { *d = o; return CUDA_SUCCESS; }
CUresult CUDAAPI cuDeviceGetCount(int *c) { *c = 1; return CUDA_SUCCESS; }
CUresult CUDAAPI cuDeviceGetName(char *n, int len, CUdevice d) {
  (void)d; strncpy(n, "Fake H200", len); return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
  (void)d;
  *v = a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR ? 9
     : a == CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN ? 232448
     : a == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT ? 132 : 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
  (void)d; *c = theCtx; return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxGetCurrent(CUcontext *c) { *c = current; return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxSetCurrent(CUcontext c) { current = c; return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxGetDevice(CUdevice *d) { *d = 0; return CUDA_SUCCESS; }
CUresult CUDAAPI cuModuleLoadData(CUmodule *m, const void *img) {
  (void)img;
  if (failModuleLoad) return CUDA_ERROR_NO_BINARY_FOR_GPU;
  stats.module_loads++; *m = (CUmodule)0x2000; return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *m, const void *img, unsigned n, CUjit_option *o, void **v) {
  (void)n; (void)o; (void)v; return cuModuleLoadData(m, img);
}
CUresult CUDAAPI cuModuleUnload(CUmodule m) { (void)m; return CUDA_SUCCESS; }
CUresult CUDAAPI cuModuleGetFunction(CUfunction *f, CUmodule m, const char *n) {
  (void)m; *f = (CUfunction)(uintptr_t)(0x3000 + strlen(n)); return CUDA_SUCCESS;
}
CUresult CUDAAPI cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) {
  (void)f; (void)a; (void)v; stats.func_set_attr++; return CUDA_SUCCESS;
}
CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                unsigned by, unsigned bz, unsigned smem, CUstream s, void **p, void **e) {
  (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)smem; (void)e;
  if (stats.launches < 256) launchGridX[stats.launches] = gx;
  stats.launches++; stats.last_launch_stream = (uintptr_t)s;
  /* Only with sizes set: the count of parameters is unknown otherwise. */
  for (int i = 0; i < 4; ++i) {
    stats.last_launch_param_words[i] = 0;
    if (p && i < numParamSizes && paramSizes[i] >= 8)
      memcpy(&stats.last_launch_param_words[i], p[i], 8);
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuFuncGetParamInfo(CUfunction f, size_t i, size_t *offset, size_t *size) {
  (void)f;
  if (numParamSizes && (int)i >= numParamSizes) return CUDA_ERROR_INVALID_VALUE;
  *size = numParamSizes ? paramSizes[i] : 8;
  *offset = 0;
  for (size_t k = 0; k < i; ++k) *offset += numParamSizes ? paramSizes[k] : 8;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamCreate(CUstream *s, unsigned f) {
  (void)f; stats.stream_creates++; *s = (CUstream)(uintptr_t)(0x5000 + stats.stream_creates);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamSynchronize(CUstream s) { (void)s; stats.stream_syncs++; return CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamWaitEvent(CUstream s, CUevent e, unsigned f) { (void)s; (void)e; (void)f; return CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *st) {
  *st = capturingStream && (uintptr_t)s == capturingStream ? CU_STREAM_CAPTURE_STATUS_ACTIVE
                                                          : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventCreate(CUevent *e, unsigned f) { (void)f; *e = (CUevent)0x6000; return CUDA_SUCCESS; }
CUresult CUDAAPI cuEventDestroy(CUevent e) { (void)e; return CUDA_SUCCESS; }
CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s) { (void)e; (void)s; return CUDA_SUCCESS; }
CUresult CUDAAPI cuEventSynchronize(CUevent e) { (void)e; return CUDA_SUCCESS; }
CUresult CUDAAPI cuMemAlloc(CUdeviceptr *p, size_t n) {
  stats.mem_allocs++; *p = (CUdeviceptr)malloc(n); return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemFree(CUdeviceptr p) { free((void *)p); return CUDA_SUCCESS; }
CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s) {
  (void)s; return cuMemAlloc(p, n ? n : 1);
}
CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr p, CUstream s) { (void)s; return cuMemFree(p); }
CUresult CUDAAPI cuMemAllocHost(void **p, size_t n) { *p = malloc(n); return CUDA_SUCCESS; }
CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
  (void)d; (void)s; (void)n; (void)st; return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr d, const void *s, size_t n) {
  stats.htod_sync++; memcpy((void *)d, s, n); return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr d, const void *s, size_t n, CUstream st) {
  stats.htod_async++; stats.last_htod_async_stream = (uintptr_t)st; memcpy((void *)d, s, n);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, CUstream s) {
  stats.memsets++; stats.last_memset_ptr = (uintptr_t)d; stats.last_memset_n = n;
  stats.last_memset_value = v; stats.last_memset_stream = (uintptr_t)s;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream s) {
  (void)d; (void)v; (void)n; (void)s; return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemHostRegister(void *p, size_t n, unsigned f) { (void)p; (void)n; (void)f; return CUDA_SUCCESS; }
CUresult CUDAAPI cuMemHostUnregister(void *p) { (void)p; return CUDA_SUCCESS; }
CUresult CUDAAPI cuPointerGetAttribute(void *v, CUpointer_attribute a, CUdeviceptr p) {
  (void)a; *(unsigned *)v = p < 0x100000 ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap *m, CUtensorMapDataType t, cuuint32_t rank, void *addr,
                                        const cuuint64_t *dim, const cuuint64_t *stride,
                                        const cuuint32_t *box, const cuuint32_t *es,
                                        CUtensorMapInterleave il, CUtensorMapSwizzle sw,
                                        CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  (void)stride; (void)es; (void)il; (void)l2; (void)oob;
  stats.tensormap_encodes++;
  memset(m, 0, sizeof(*m));
  uint64_t words[4] = {(uint64_t)(uintptr_t)addr, dim[0] | ((uint64_t)rank << 48),
                       box[0] | ((uint64_t)t << 32), (uint64_t)sw};
  memcpy(m, words, sizeof(words));
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *m) { (void)m; return CUDA_SUCCESS; }
