//===- CudaRuntime.cpp - the mgpu* host ABI on the CUDA driver API -------===//
//
// MLIR's gpu-to-llvm lowering turns gpu.binary / gpu.launch_func / gpu.memcpy /
// nvgpu.tma.create.descriptor into calls to mgpu* functions, and Debian ships
// no library that implements them. This one does, with the properties a
// framework integration needs and upstream's wrappers lack:
//  - launches go to the stream the caller bound (flashRuntimeSetStream), so the
//    host code's per-launch StreamCreate/Synchronize/Destroy become no-ops and a
//    call can be timed with events or captured in a CUDA graph;
//  - modules load lazily on first use (never at dlopen) and are cached per
//    context, kernels' attributes are set once;
//  - TMA descriptors are cached by content in a device pool, so a steady state
//    does no allocation or copy per call;
//  - libcuda is dlopen'ed: with no driver, a wrong architecture or a bad pointer
//    the functions record an error string and a status instead of aborting, and
//    further launches on that thread are skipped until the error is cleared.
//
//===----------------------------------------------------------------------===//

#include "flash/Runtime/FlashRuntime.h"

#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <dlfcn.h>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#define FLASH_RT_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

//===----------------------------------------------------------------------===//
// Errors and counters
//===----------------------------------------------------------------------===//

struct ThreadState {
  std::string error;
  int status = FLASH_RT_OK;
  bool bound = false;
  CUstream boundStream = nullptr;
  int device = -1;
  // Runtime-owned stream for unbound mode, created once per thread and context.
  CUcontext ownCtx = nullptr;
  CUstream ownStream = nullptr;
};

thread_local ThreadState tls;

bool verbose() {
  static const bool v = [] {
    const char *e = std::getenv("FLASH_RUNTIME_VERBOSE");
    return e && *e && std::strcmp(e, "0") != 0;
  }();
  return v;
}

// The first error wins: later failures in the same call are its consequences.
__attribute__((format(printf, 2, 3))) void setError(int status, const char *fmt,
                                                    ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (verbose())
    std::fprintf(stderr, "[flash-runtime] %s\n", buf);
  if (tls.status != FLASH_RT_OK)
    return;
  tls.status = status;
  tls.error = buf;
}

enum Counter {
  kModuleLoad,
  kStreamCreate,
  kStreamSync,
  kMemAlloc,
  kLaunch,
  kTensorMapUpload,
  kTensorMapHit,
  kTensorMapParam,
  kNumCounters
};
const char *const kCounterNames[kNumCounters] = {
    "module_load",      "stream_create", "stream_sync",    "mem_alloc",
    "launch",           "tensormap_upload", "tensormap_hit", "tensormap_param"};
std::atomic<int64_t> counters[kNumCounters];
void bump(Counter c) { counters[c].fetch_add(1, std::memory_order_relaxed); }

//===----------------------------------------------------------------------===//
// Driver loading
//===----------------------------------------------------------------------===//

// Each entry binds the exact ABI version that cuda.h maps the name to (e.g.
// cuMemAlloc -> cuMemAlloc_v2), by stringizing after macro expansion.
#define FLASH_STR(x) #x
#define FLASH_XSTR(x) FLASH_STR(x)
#define FLASH_DRIVER_REQUIRED(X)                                               \
  X(cuInit)                                                                    \
  X(cuGetErrorName)                                                            \
  X(cuGetErrorString)                                                          \
  X(cuDriverGetVersion)                                                        \
  X(cuDeviceGet)                                                               \
  X(cuDeviceGetCount)                                                          \
  X(cuDeviceGetName)                                                           \
  X(cuDeviceGetAttribute)                                                      \
  X(cuDevicePrimaryCtxRetain)                                                  \
  X(cuCtxGetCurrent)                                                           \
  X(cuCtxSetCurrent)                                                           \
  X(cuCtxGetDevice)                                                            \
  X(cuModuleLoadData)                                                          \
  X(cuModuleLoadDataEx)                                                        \
  X(cuModuleUnload)                                                            \
  X(cuModuleGetFunction)                                                       \
  X(cuFuncSetAttribute)                                                        \
  X(cuLaunchKernel)                                                            \
  X(cuStreamCreate)                                                            \
  X(cuStreamSynchronize)                                                       \
  X(cuStreamWaitEvent)                                                         \
  X(cuStreamIsCapturing)                                                       \
  X(cuEventCreate)                                                             \
  X(cuEventDestroy)                                                            \
  X(cuEventRecord)                                                             \
  X(cuEventSynchronize)                                                        \
  X(cuMemAlloc)                                                                \
  X(cuMemFree)                                                                 \
  X(cuMemAllocHost)                                                            \
  X(cuMemcpyAsync)                                                             \
  X(cuMemcpyHtoD)                                                              \
  X(cuMemcpyHtoDAsync)                                                         \
  X(cuMemsetD32Async)                                                          \
  X(cuMemsetD16Async)                                                          \
  X(cuMemHostRegister)                                                         \
  X(cuMemHostUnregister)                                                       \
  X(cuPointerGetAttribute)
// Newer entry points: a missing one is an error only when it is used.
#define FLASH_DRIVER_OPTIONAL(X)                                               \
  X(cuLaunchKernelEx)                                                          \
  X(cuTensorMapEncodeTiled)                                                    \
  X(cuMemAllocAsync)                                                           \
  X(cuMemFreeAsync)                                                            \
  X(cuDeviceGetDefaultMemPool)                                                 \
  X(cuMemPoolSetAttribute)                                                     \
  X(cuMemAllocManaged)                                                         \
  X(cuThreadExchangeStreamCaptureMode)                                         \
  X(cuFuncGetParamInfo)

struct Driver {
#define FLASH_DECLARE(fn) decltype(&fn) p_##fn = nullptr;
  FLASH_DRIVER_REQUIRED(FLASH_DECLARE)
  FLASH_DRIVER_OPTIONAL(FLASH_DECLARE)
#undef FLASH_DECLARE
  int status = FLASH_RT_OK;
  std::string error;
  int version = 0;
};

Driver &driver() {
  static Driver d;
  static std::once_flag once;
  std::call_once(once, [] {
    const char *path = std::getenv("FLASH_CUDA_DRIVER");
    if (!path || !*path)
      path = "libcuda.so.1";
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      d.status = FLASH_RT_NO_DRIVER;
      const char *why = dlerror();
      d.error = std::string("CUDA driver not found: cannot load '") + path +
                "' (" + (why ? why : "unknown reason") +
                "); a GPU with the NVIDIA driver is needed to run kernels";
      return;
    }
    std::string missing;
#define FLASH_LOAD(fn)                                                         \
  d.p_##fn = reinterpret_cast<decltype(&fn)>(dlsym(h, FLASH_XSTR(fn)));        \
  if (!d.p_##fn)                                                               \
    missing += std::string(missing.empty() ? "" : ", ") + FLASH_XSTR(fn);
    FLASH_DRIVER_REQUIRED(FLASH_LOAD)
#undef FLASH_LOAD
#define FLASH_LOAD_OPT(fn)                                                     \
  d.p_##fn = reinterpret_cast<decltype(&fn)>(dlsym(h, FLASH_XSTR(fn)));
    FLASH_DRIVER_OPTIONAL(FLASH_LOAD_OPT)
#undef FLASH_LOAD_OPT
    if (!missing.empty()) {
      d.status = FLASH_RT_NO_DRIVER;
      d.error = std::string("CUDA driver '") + path +
                "' is too old or not a CUDA driver: missing " + missing;
      return;
    }
    CUresult r = d.p_cuInit(0);
    if (r != CUDA_SUCCESS) {
      const char *name = nullptr;
      std::string code = "CUDA error " + std::to_string(static_cast<int>(r));
      if (d.p_cuGetErrorName(r, &name) != CUDA_SUCCESS || !name)
        name = code.c_str();
      d.status = (r == CUDA_ERROR_NO_DEVICE || r == CUDA_ERROR_INVALID_DEVICE)
                     ? FLASH_RT_NO_DEVICE
                     : FLASH_RT_NO_DRIVER;
      d.error = std::string("CUDA driver initialization failed: cuInit -> ") +
                name +
                (r == CUDA_ERROR_STUB_LIBRARY
                     ? " (the toolkit's stub libcuda was loaded instead of "
                       "the driver)"
                     : "");
      return;
    }
    d.p_cuDriverGetVersion(&d.version);
  });
  return d;
}

std::string errName(CUresult r) {
  const char *name = nullptr;
  if (driver().p_cuGetErrorName &&
      driver().p_cuGetErrorName(r, &name) == CUDA_SUCCESS && name)
    return name;
  return "CUDA error " + std::to_string(static_cast<int>(r));
}

// Records a driver failure; returns true on success.
bool check(CUresult r, const char *what, int status = FLASH_RT_CUDA_ERROR) {
  if (r == CUDA_SUCCESS)
    return true;
  setError(status, "%s failed: %s", what, errName(r).c_str());
  return false;
}

bool driverReady() {
  Driver &d = driver();
  if (d.status != FLASH_RT_OK) {
    setError(d.status, "%s", d.error.c_str());
    return false;
  }
  return true;
}

#define DRV(fn) driver().p_##fn

//===----------------------------------------------------------------------===//
// Contexts
//===----------------------------------------------------------------------===//

std::mutex ctxMutex;
std::vector<CUcontext> primaryCtx; // by ordinal, retained once, never released

CUcontext primaryContext(int ordinal) {
  std::lock_guard<std::mutex> lock(ctxMutex);
  int count = 0;
  if (!check(DRV(cuDeviceGetCount)(&count), "cuDeviceGetCount",
             FLASH_RT_NO_DEVICE))
    return nullptr;
  if (ordinal < 0 || ordinal >= count) {
    setError(FLASH_RT_NO_DEVICE, "CUDA device %d requested but %d present",
             ordinal, count);
    return nullptr;
  }
  if (primaryCtx.size() < static_cast<size_t>(count))
    primaryCtx.resize(count, nullptr);
  if (!primaryCtx[ordinal]) {
    CUdevice dev;
    CUcontext ctx = nullptr;
    if (!check(DRV(cuDeviceGet)(&dev, ordinal), "cuDeviceGet",
               FLASH_RT_NO_DEVICE) ||
        !check(DRV(cuDevicePrimaryCtxRetain)(&ctx, dev),
               "cuDevicePrimaryCtxRetain", FLASH_RT_NO_DEVICE))
      return nullptr;
    primaryCtx[ordinal] = ctx;
  }
  return primaryCtx[ordinal];
}

// The context every call works in: the device the thread asked for, else the
// context already current (torch's primary context), else device 0's primary.
std::atomic<int> defaultDevice{0};

CUcontext currentContext() {
  if (!driverReady())
    return nullptr;
  CUcontext cur = nullptr;
  if (!check(DRV(cuCtxGetCurrent)(&cur), "cuCtxGetCurrent"))
    return nullptr;
  if (tls.device < 0 && cur)
    return cur;
  CUcontext want =
      primaryContext(tls.device >= 0 ? tls.device : defaultDevice.load());
  if (!want)
    return nullptr;
  if (want != cur && !check(DRV(cuCtxSetCurrent)(want), "cuCtxSetCurrent"))
    return nullptr;
  return want;
}

std::string deviceDescription() {
  CUdevice dev;
  if (DRV(cuCtxGetDevice)(&dev) != CUDA_SUCCESS)
    return "current device";
  char name[256] = "?";
  int major = 0, minor = 0;
  DRV(cuDeviceGetName)(name, sizeof(name), dev);
  DRV(cuDeviceGetAttribute)(&major,
                            CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  DRV(cuDeviceGetAttribute)(&minor,
                            CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  char buf[400];
  std::snprintf(buf, sizeof(buf), "device %d '%s' (sm_%d%d)",
                static_cast<int>(dev), name, major, minor);
  return buf;
}

//===----------------------------------------------------------------------===//
// Modules and functions
//===----------------------------------------------------------------------===//

struct Function {
  CUfunction fn = nullptr;
  std::string name;
  std::atomic<int> smemConfigured{48 * 1024};
  int smemOptin = 0;
  // Parameter sizes in bytes, read from the driver at the first launch that
  // passes a tensor map (see resolveTensorMapParams).
  std::once_flag paramsOnce;
  std::vector<uint32_t> paramSizes;
};

struct Module {
  const void *data = nullptr;
  size_t size = 0;
  bool jit = false;
  int optLevel = 3;
  std::mutex mutex;
  struct Loaded {
    CUcontext ctx;
    CUmodule mod;
    // A module holds a few kernels and the host code asks for one by name
    // at every launch: a scan that compares in place, allocating nothing.
    std::vector<std::pair<std::string, std::unique_ptr<Function>>> fns;
  };
  // A deque: getFunction holds a Loaded* across a release of the mutex,
  // which another context's load must not move.
  std::deque<Loaded> loaded;
};

// What the binary was built for, for messages: ELF cubin, fatbin or PTX text.
std::string describeBinary(const Module &m) {
  const auto *b = static_cast<const unsigned char *>(m.data);
  if (m.jit) { // PTX text, NUL-terminated
    const char *t = std::strstr(static_cast<const char *>(m.data), ".target");
    if (t) {
      char arch[32] = "";
      std::sscanf(t, ".target %31[a-z0-9_]", arch);
      return std::string("PTX for ") + arch;
    }
    return "PTX";
  }
  if (m.size >= 52 && std::memcmp(b, "\x7f"
                                     "ELF",
                                  4) == 0) {
    uint32_t flags;
    std::memcpy(&flags, b + 48, 4);
    // ABI version >= 8 cubins keep the SM number in bits 8..15.
    unsigned sm = b[8] >= 8 ? (flags >> 8) & 0xff : flags & 0xff;
    return "a cubin for sm_" + std::to_string(sm);
  }
  if (m.size >= 4 && b[0] == 0x50 && b[1] == 0xed && b[2] == 0x55 &&
      b[3] == 0xba)
    return "a fatbin";
  return "an unrecognized binary";
}

Module::Loaded *ensureLoaded(Module &m) {
  CUcontext ctx = currentContext();
  if (!ctx)
    return nullptr;
  std::lock_guard<std::mutex> lock(m.mutex);
  for (auto &l : m.loaded)
    if (l.ctx == ctx)
      return &l;
  CUmodule mod = nullptr;
  CUresult r;
  if (m.jit) {
    CUjit_option opts[1] = {CU_JIT_OPTIMIZATION_LEVEL};
    void *vals[1] = {reinterpret_cast<void *>(static_cast<intptr_t>(m.optLevel))};
    r = DRV(cuModuleLoadDataEx)(&mod, m.data, 1, opts, vals);
  } else {
    r = DRV(cuModuleLoadData)(&mod, m.data);
  }
  if (r != CUDA_SUCCESS) {
    bool arch = r == CUDA_ERROR_NO_BINARY_FOR_GPU ||
                r == CUDA_ERROR_INVALID_PTX ||
                r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION ||
                r == CUDA_ERROR_INVALID_IMAGE ||
                r == CUDA_ERROR_INVALID_SOURCE;
    setError(arch ? FLASH_RT_WRONG_ARCH : FLASH_RT_CUDA_ERROR,
             "cannot load the kernel module (%s) on %s: %s%s",
             describeBinary(m).c_str(), deviceDescription().c_str(),
             errName(r).c_str(),
             arch ? "; rebuild it for this device's architecture" : "");
    return nullptr;
  }
  bump(kModuleLoad);
  m.loaded.push_back(Module::Loaded{ctx, mod, {}});
  return &m.loaded.back();
}

Function *getFunction(Module *m, const char *name) {
  if (!m) {
    setError(FLASH_RT_INVALID_ARGUMENT, "kernel '%s' requested from a null module",
             name ? name : "?");
    return nullptr;
  }
  Module::Loaded *l = ensureLoaded(*m);
  if (!l)
    return nullptr;
  std::lock_guard<std::mutex> lock(m->mutex);
  for (auto &[known, fn] : l->fns)
    if (known == name)
      return fn.get();
  CUfunction f = nullptr;
  CUresult r = DRV(cuModuleGetFunction)(&f, l->mod, name);
  if (r != CUDA_SUCCESS) {
    setError(FLASH_RT_CUDA_ERROR, "kernel '%s' not found in its module: %s",
             name, errName(r).c_str());
    return nullptr;
  }
  auto fn = std::make_unique<Function>();
  fn->fn = f;
  fn->name = name;
  CUdevice dev;
  if (DRV(cuCtxGetDevice)(&dev) == CUDA_SUCCESS)
    DRV(cuDeviceGetAttribute)(
        &fn->smemOptin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        dev);
  Function *raw = fn.get();
  l->fns.emplace_back(name, std::move(fn));
  return raw;
}

// Raising the dynamic shared memory limit is a per-function attribute: set it
// once (growing only), not on every launch.
bool configureSmem(Function *f, int32_t smem) {
  if (smem <= f->smemConfigured.load(std::memory_order_relaxed))
    return true;
  if (f->smemOptin && smem > f->smemOptin) {
    setError(FLASH_RT_LAUNCH_FAILED,
             "kernel '%s' needs %d bytes of dynamic shared memory; %s allows "
             "at most %d",
             f->name.c_str(), smem, deviceDescription().c_str(), f->smemOptin);
    return false;
  }
  if (!check(DRV(cuFuncSetAttribute)(
                 f->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem),
             "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
             FLASH_RT_LAUNCH_FAILED))
    return false;
  f->smemConfigured.store(smem, std::memory_order_relaxed);
  return true;
}

bool launchPrologue(void *function, int32_t smem) {
  if (tls.status != FLASH_RT_OK)
    return false; // an earlier step of this call failed: never launch on it
  if (!function) {
    setError(FLASH_RT_LAUNCH_FAILED, "launch of a kernel that failed to load");
    return false;
  }
  if (!currentContext())
    return false;
  return configureSmem(static_cast<Function *>(function), smem);
}

void reportLaunch(CUresult r, Function *f, intptr_t gx, intptr_t gy,
                  intptr_t gz, intptr_t bx, intptr_t by, intptr_t bz,
                  int32_t smem) {
  if (r == CUDA_SUCCESS) {
    bump(kLaunch);
    return;
  }
  setError(FLASH_RT_LAUNCH_FAILED,
           "launch of kernel '%s' (grid %ldx%ldx%ld, block %ldx%ldx%ld, %d B "
           "dynamic shared memory) failed: %s",
           f->name.c_str(), static_cast<long>(gx), static_cast<long>(gy),
           static_cast<long>(gz), static_cast<long>(bx),
           static_cast<long>(by), static_cast<long>(bz), smem, errName(r).c_str());
}

//===----------------------------------------------------------------------===//
// Streams
//===----------------------------------------------------------------------===//

bool isBound(void *stream) {
  return tls.bound && stream == static_cast<void *>(tls.boundStream);
}

CUstream ownStream() {
  CUcontext ctx = currentContext();
  if (!ctx)
    return nullptr;
  if (tls.ownStream && tls.ownCtx == ctx)
    return tls.ownStream;
  CUstream s = nullptr;
  if (!check(DRV(cuStreamCreate)(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate"))
    return nullptr;
  bump(kStreamCreate);
  tls.ownStream = s; // kept for the thread's lifetime
  tls.ownCtx = ctx;
  return s;
}

// The stream any runtime-initiated work (descriptor uploads) belongs to.
CUstream workStream() { return tls.bound ? tls.boundStream : ownStream(); }

//===----------------------------------------------------------------------===//
// TMA descriptors
//===----------------------------------------------------------------------===//

// A TMA kernel takes each CUtensorMap in one of two ways:
// - by value, as a 128-byte grid-constant parameter (what flash-gpu-pipeline's
//   kernels take, flash-tensormap-kernel-params): cuLaunchKernel copies the
//   bytes into the launch, so no device memory, no upload and nothing to keep
//   for a CUDA graph;
// - through an 8-byte device pointer (kernels from the upstream NVVM
//   pipeline): the map is uploaded to a device slot, deduplicated by its 128
//   bytes, that lives for the life of the process (a graph may replay it).
// mgpuTensorMapEncodeTiledMemref encodes into this thread's ring and returns
// the host slot; mgpuLaunchKernel sees which parameters hold a slot and, from
// the kernel's parameter sizes, passes it either way.
struct TensorMapRing {
  // Far more maps than one host function encodes before the launch that
  // takes them.
  static constexpr unsigned kSize = 64;
  CUtensorMap slots[kSize]; // the type carries cuda.h's alignment
  unsigned next = 0;
  bool used = false;
  bool holds(const void *p) const {
    return p >= static_cast<const void *>(slots) &&
           p < static_cast<const void *>(slots + kSize);
  }
  CUtensorMap *take() {
    used = true;
    return &slots[next++ % kSize];
  }
};
// On the heap: operator new honours the alignment cuda.h gives CUtensorMap
// (which cuTensorMapEncodeTiled requires of its output), which a dlopen'ed
// library's TLS block need not.
thread_local std::unique_ptr<TensorMapRing> ringStorage;
TensorMapRing &threadRing() {
  if (!ringStorage)
    ringStorage = std::make_unique<TensorMapRing>();
  return *ringStorage;
}

/// Runs `alloc` with this thread's stream-capture mode relaxed and restores
/// it: the runtime's pools and counters outlive any graph, so allocating them
/// is safe while a stream captures, and relaxed mode lets the calls through.
template <typename F> bool outsideCapture(F &&alloc) {
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (DRV(cuThreadExchangeStreamCaptureMode))
    DRV(cuThreadExchangeStreamCaptureMode)(&mode);
  bool ok = alloc();
  if (DRV(cuThreadExchangeStreamCaptureMode))
    DRV(cuThreadExchangeStreamCaptureMode)(&mode);
  return ok;
}

/// cuMemAlloc of `bytes` for the runtime's own use (see outsideCapture);
/// 0 after setting the error, naming `what`.
CUdeviceptr allocOutsideCapture(size_t bytes, const char *what) {
  CUdeviceptr dev = 0;
  if (!outsideCapture(
          [&] { return check(DRV(cuMemAlloc)(&dev, bytes), what); }))
    return 0;
  bump(kMemAlloc);
  return dev;
}

/// The key of per-stream state: a stream handle is only unique within its
/// context (the legacy and per-thread default streams are in every one).
/// Hashed in place, so a launch's lookup allocates nothing.
struct StreamKey {
  CUcontext ctx;
  CUstream stream;
  bool operator==(const StreamKey &o) const {
    return ctx == o.ctx && stream == o.stream;
  }
};
struct StreamKeyHash {
  size_t operator()(const StreamKey &k) const {
    size_t a = std::hash<const void *>()(k.ctx);
    size_t b = std::hash<const void *>()(k.stream);
    return a ^ (b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2));
  }
};
template <typename T>
using PerStream = std::unordered_map<StreamKey, T, StreamKeyHash>;

// The device copies of maps passed by pointer: deduplicated by content, kept
// for the life of the process.
struct TensorMapCache {
  static constexpr size_t kChunk = 512; // maps per device chunk (64 KiB)
  struct Entry {
    CUdeviceptr dev;
    bool eagerValid; // written by a synchronous copy, not only inside a capture
    CUtensorMap *host; // pinned, immutable copy: source of captured uploads
  };
  std::mutex mutex;
  std::unordered_map<std::string, Entry> map;
  std::vector<std::pair<CUdeviceptr, CUtensorMap *>> chunks;
  size_t used = kChunk;
};

TensorMapCache &tensorMapCache() {
  static TensorMapCache *c = new TensorMapCache; // never destroyed: see dtors
  return *c;
}

void *uploadTensorMap(const CUtensorMap &tm) {
  TensorMapCache &c = tensorMapCache();
  CUstream stream = workStream();
  if (tls.status != FLASH_RT_OK)
    return nullptr;
  CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
  if (!check(DRV(cuStreamIsCapturing)(stream, &cap), "cuStreamIsCapturing"))
    return nullptr;
  bool capturing = cap != CU_STREAM_CAPTURE_STATUS_NONE;

  std::lock_guard<std::mutex> lock(c.mutex);
  std::string key(reinterpret_cast<const char *>(&tm), sizeof(tm));
  auto it = c.map.find(key);
  // A slot written eagerly holds its immutable map for good: eager calls and
  // captures alike just point at it. A slot so far written only inside some
  // capture is rewritten by this call (captured again, or eagerly).
  if (it != c.map.end() && it->second.eagerValid) {
    bump(kTensorMapHit);
    return reinterpret_cast<void *>(it->second.dev);
  }
  TensorMapCache::Entry *e;
  if (it == c.map.end()) {
    if (c.used == TensorMapCache::kChunk) {
      CUdeviceptr dev = allocOutsideCapture(
          TensorMapCache::kChunk * sizeof(CUtensorMap),
          "cuMemAlloc (tensor map pool)");
      void *host = nullptr;
      if (!dev || !outsideCapture([&] {
            return check(DRV(cuMemAllocHost)(&host, TensorMapCache::kChunk *
                                                        sizeof(CUtensorMap)),
                         "cuMemAllocHost (tensor map pool)");
          }))
        return nullptr;
      c.chunks.emplace_back(dev, static_cast<CUtensorMap *>(host));
      c.used = 0;
    }
    auto &chunk = c.chunks.back();
    TensorMapCache::Entry ne{chunk.first + c.used * sizeof(CUtensorMap), false,
                             chunk.second + c.used};
    ++c.used;
    std::memcpy(ne.host, &tm, sizeof(tm));
    e = &c.map.emplace(std::move(key), ne).first->second;
  } else {
    e = &it->second;
  }
  bump(kTensorMapUpload);
  if (capturing) {
    // Recorded as a graph memcpy node from the immutable pinned copy.
    if (!check(DRV(cuMemcpyHtoDAsync)(e->dev, e->host, sizeof(tm), stream),
               "cuMemcpyHtoDAsync (tensor map, captured)"))
      return nullptr;
  } else {
    // Synchronous, so the slot is valid for every stream from now on.
    if (!check(DRV(cuMemcpyHtoD)(e->dev, e->host, sizeof(tm)),
               "cuMemcpyHtoD (tensor map)"))
      return nullptr;
    e->eagerValid = true;
  }
  return reinterpret_cast<void *>(e->dev);
}

// The parameter list a launch hands the driver: `params` itself, or a copy
// with each tensor map of this thread's ring passed as the kernel takes it.
struct LaunchParams {
  static constexpr size_t kInline = 64;
  void *inlinePtrs[kInline];
  CUdeviceptr inlineDev[kInline];
  std::vector<void *> heapPtrs;
  std::vector<CUdeviceptr> heapDev;
  void **params = nullptr;
};

// The kernel's parameter sizes, asked of the driver once. Without
// cuFuncGetParamInfo (drivers before CUDA 12.4, which cannot load a cubin
// from this toolkit's ptxas anyway) every parameter counts as a pointer: the
// maps go through device copies, as kernels from the upstream pipeline take
// them.
const std::vector<uint32_t> &paramSizes(Function *f, size_t n) {
  std::call_once(f->paramsOnce, [&] {
    f->paramSizes.assign(n, sizeof(void *));
    if (!DRV(cuFuncGetParamInfo))
      return;
    for (size_t i = 0; i < n; ++i) {
      size_t offset = 0, size = 0;
      if (DRV(cuFuncGetParamInfo)(f->fn, i, &offset, &size) != CUDA_SUCCESS) {
        f->paramSizes.assign(n, sizeof(void *));
        return;
      }
      f->paramSizes[i] = static_cast<uint32_t>(size);
    }
  });
  return f->paramSizes;
}

bool resolveTensorMapParams(Function *f, void **params, size_t n,
                            LaunchParams &out) {
  out.params = params;
  TensorMapRing &ring = threadRing();
  if (!ring.used || !params || n == 0)
    return true;
  const std::vector<uint32_t> &sizes = paramSizes(f, n);
  if (sizes.size() != n) {
    setError(FLASH_RT_INVALID_ARGUMENT,
             "kernel '%s' launched with %zu parameters, earlier with %zu",
             f->name.c_str(), n, sizes.size());
    return false;
  }
  void **ptrs = out.inlinePtrs;
  CUdeviceptr *dev = out.inlineDev;
  if (n > LaunchParams::kInline) {
    out.heapPtrs.resize(n);
    out.heapDev.resize(n);
    ptrs = out.heapPtrs.data();
    dev = out.heapDev.data();
  }
  bool rewritten = false;
  for (size_t i = 0; i < n; ++i) {
    ptrs[i] = params[i];
    uint32_t size = sizes[i];
    if (size != sizeof(CUtensorMap) && size != sizeof(void *))
      continue;
    void *value;
    std::memcpy(&value, params[i], sizeof(value));
    if (!ring.holds(value)) {
      if (size == sizeof(CUtensorMap)) {
        setError(FLASH_RT_INVALID_ARGUMENT,
                 "parameter %zu of kernel '%s' is a %zu-byte tensor map, but "
                 "the host code passed no map encoded on this thread",
                 i, f->name.c_str(), sizeof(CUtensorMap));
        return false;
      }
      continue;
    }
    rewritten = true;
    if (size == sizeof(CUtensorMap)) {
      ptrs[i] = value; // cuLaunchKernel copies the 128 bytes
      bump(kTensorMapParam);
      continue;
    }
    void *copy = uploadTensorMap(*static_cast<CUtensorMap *>(value));
    if (!copy)
      return false;
    dev[i] = reinterpret_cast<CUdeviceptr>(copy);
    ptrs[i] = &dev[i];
  }
  if (rewritten)
    out.params = ptrs;
  return true;
}

const int kTensorMapElementSize[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};

} // namespace

//===----------------------------------------------------------------------===//
// flashRuntime* C API
//===----------------------------------------------------------------------===//

FLASH_RT_EXPORT void flashRuntimeSetStream(void *stream) {
  tls.bound = true;
  tls.boundStream = static_cast<CUstream>(stream);
}

FLASH_RT_EXPORT void flashRuntimeResetStream(void) {
  tls.bound = false;
  tls.boundStream = nullptr;
}

FLASH_RT_EXPORT int flashRuntimeSetDevice(int ordinal) {
  if (ordinal >= 0 && ordinal == tls.device)
    return FLASH_RT_OK; // the launcher calls this before every call
  if (!driverReady())
    return tls.status;
  if (!primaryContext(ordinal))
    return tls.status;
  tls.device = ordinal;
  return FLASH_RT_OK;
}

FLASH_RT_EXPORT int flashRuntimeBindStream(int ordinal, void *stream) {
  flashRuntimeSetStream(stream);
  return flashRuntimeSetDevice(ordinal);
}

FLASH_RT_EXPORT int flashRuntimeInit(void) {
  if (!currentContext())
    return tls.status != FLASH_RT_OK ? tls.status : FLASH_RT_CUDA_ERROR;
  return FLASH_RT_OK;
}

FLASH_RT_EXPORT const char *flashRuntimeGetLastError(void) {
  return tls.error.c_str();
}

FLASH_RT_EXPORT int flashRuntimeGetStatus(void) { return tls.status; }

FLASH_RT_EXPORT void flashRuntimeClearError(void) {
  tls.status = FLASH_RT_OK;
  tls.error.clear();
}

FLASH_RT_EXPORT int flashRuntimeCall(int ordinal, void *function, int nargs,
                                     void **args) {
  // The host functions take only pointers (memref descriptors, the stream
  // last), so a call through a pointer of the matching arity is the C call.
  if (nargs < 1 || nargs > 16 || !function) {
    setError(FLASH_RT_INVALID_ARGUMENT,
             "flashRuntimeCall: a function and 1 to 16 pointer arguments, the "
             "stream last (got %d)",
             nargs);
    return tls.status;
  }
  if (flashRuntimeBindStream(ordinal, args[nargs - 1]) != FLASH_RT_OK)
    return tls.status;
  using P = void *;
  void **a = args;
  switch (nargs) {
#define FLASH_RT_CALL(N, ...)                                                  \
  case N:                                                                      \
    reinterpret_cast<void (*)(__VA_ARGS__)>(function)
    FLASH_RT_CALL(1, P)(a[0]); break;
    FLASH_RT_CALL(2, P, P)(a[0], a[1]); break;
    FLASH_RT_CALL(3, P, P, P)(a[0], a[1], a[2]); break;
    FLASH_RT_CALL(4, P, P, P, P)(a[0], a[1], a[2], a[3]); break;
    FLASH_RT_CALL(5, P, P, P, P, P)(a[0], a[1], a[2], a[3], a[4]); break;
    FLASH_RT_CALL(6, P, P, P, P, P, P)(a[0], a[1], a[2], a[3], a[4], a[5]);
    break;
    FLASH_RT_CALL(7, P, P, P, P, P, P, P)
    (a[0], a[1], a[2], a[3], a[4], a[5], a[6]);
    break;
    FLASH_RT_CALL(8, P, P, P, P, P, P, P, P)
    (a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
    break;
    FLASH_RT_CALL(9, P, P, P, P, P, P, P, P, P)
    (a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8]);
    break;
    FLASH_RT_CALL(10, P, P, P, P, P, P, P, P, P, P)
    (a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9]);
    break;
    FLASH_RT_CALL(11, P, P, P, P, P, P, P, P, P, P, P)
    (a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10]);
    break;
    FLASH_RT_CALL(12, P, P, P, P, P, P, P, P, P, P, P, P)
    (a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11]);
    break;
    FLASH_RT_CALL(13, P, P, P, P, P, P, P, P, P, P, P, P, P)
    (a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11],
     a[12]);
    break;
    FLASH_RT_CALL(14, P, P, P, P, P, P, P, P, P, P, P, P, P, P)
    (a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11],
     a[12], a[13]);
    break;
    FLASH_RT_CALL(15, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P)
    (a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11],
     a[12], a[13], a[14]);
    break;
    FLASH_RT_CALL(16, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P)
    (a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11],
     a[12], a[13], a[14], a[15]);
    break;
#undef FLASH_RT_CALL
  }
  return tls.status;
}

FLASH_RT_EXPORT int flashRuntimeCheckPointer(const void *ptr,
                                             uint64_t alignment,
                                             const char *what) {
  what = what ? what : "pointer";
  if (!ptr) {
    setError(FLASH_RT_INVALID_ARGUMENT, "%s is a null pointer", what);
    return FLASH_RT_INVALID_ARGUMENT;
  }
  if (alignment && reinterpret_cast<uintptr_t>(ptr) % alignment) {
    setError(FLASH_RT_INVALID_ARGUMENT,
             "%s (%p) is not aligned to %llu bytes", what, ptr,
             static_cast<unsigned long long>(alignment));
    return FLASH_RT_INVALID_ARGUMENT;
  }
  if (!currentContext())
    return tls.status;
  unsigned int type = 0;
  CUresult r = DRV(cuPointerGetAttribute)(
      &type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
      reinterpret_cast<CUdeviceptr>(ptr));
  if (r != CUDA_SUCCESS || type == CU_MEMORYTYPE_HOST) {
    setError(FLASH_RT_INVALID_ARGUMENT,
             "%s (%p) is not device memory known to the CUDA driver", what,
             ptr);
    return FLASH_RT_INVALID_ARGUMENT;
  }
  return FLASH_RT_OK;
}

FLASH_RT_EXPORT int64_t flashRuntimeGetCounter(const char *name) {
  for (int i = 0; i < kNumCounters; ++i)
    if (name && std::strcmp(name, kCounterNames[i]) == 0)
      return counters[i].load();
  return -1;
}

// Split decode kernels size their grid by it on every call: one attribute
// query per device, then a load.
FLASH_RT_EXPORT int32_t flashRuntimeMultiprocessorCount(void) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int32_t> cached[kMaxDevices];
  if (!currentContext())
    return 0;
  CUdevice dev;
  if (!check(DRV(cuCtxGetDevice)(&dev), "cuCtxGetDevice"))
    return 0;
  int ordinal = static_cast<int>(dev);
  if (ordinal >= 0 && ordinal < kMaxDevices)
    if (int32_t n = cached[ordinal].load(std::memory_order_relaxed))
      return n;
  int n = 0;
  if (!check(DRV(cuDeviceGetAttribute)(
                 &n, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev),
             "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)"))
    return 0;
  if (ordinal >= 0 && ordinal < kMaxDevices)
    cached[ordinal].store(n, std::memory_order_relaxed);
  return n;
}

// Persistent kernels take their work items from a counter: one i32 per
// (context, stream), zeroed on the stream before each launch. Launches on
// one stream are ordered, so they never share a count; each stream has its
// own. The counters live in slabs for the life of the process, since a CUDA
// graph may refer to one at any replay.
namespace {
struct WorkCounterSlabs {
  static constexpr size_t kChunk = 1024; // counters per slab (4 KiB)
  std::mutex mutex;
  PerStream<CUdeviceptr> map;
  CUdeviceptr chunk = 0;
  size_t used = kChunk;
};
} // namespace

FLASH_RT_EXPORT void *flashRuntimeWorkCounter(void *stream) {
  using Slabs = WorkCounterSlabs;
  static Slabs *slabs = new Slabs; // never destroyed: see dtors
  if (tls.status != FLASH_RT_OK)
    return nullptr;
  CUcontext ctx = currentContext();
  if (!ctx)
    return nullptr;
  auto s = static_cast<CUstream>(stream);
  CUdeviceptr counter = 0;
  {
    std::lock_guard<std::mutex> lock(slabs->mutex);
    StreamKey key{ctx, s};
    auto it = slabs->map.find(key);
    if (it != slabs->map.end()) {
      counter = it->second;
    } else {
      if (slabs->used == Slabs::kChunk) {
        CUdeviceptr dev = allocOutsideCapture(Slabs::kChunk * sizeof(int32_t),
                                              "cuMemAlloc (work counters)");
        if (!dev)
          return nullptr;
        slabs->chunk = dev;
        slabs->used = 0;
      }
      counter = slabs->chunk + slabs->used++ * sizeof(int32_t);
      slabs->map.emplace(key, counter);
    }
  }
  if (!check(DRV(cuMemsetD32Async)(counter, 0, 1, s),
             "cuMemsetD32Async (work counter)"))
    return nullptr;
  return reinterpret_cast<void *>(counter);
}

namespace {
struct SplitCounterArrays {
  struct Array {
    CUdeviceptr ptr = 0;
    int64_t size = 0;
  };
  std::mutex mutex;
  PerStream<Array> map;
};
} // namespace

FLASH_RT_EXPORT void *flashRuntimeSplitCounters(void *stream, int64_t n) {
  static auto *arrays = new SplitCounterArrays; // never destroyed: see dtors
  if (tls.status != FLASH_RT_OK)
    return nullptr;
  CUcontext ctx = currentContext();
  if (!ctx)
    return nullptr;
  auto s = static_cast<CUstream>(stream);
  std::lock_guard<std::mutex> lock(arrays->mutex);
  SplitCounterArrays::Array &a = arrays->map[StreamKey{ctx, s}];
  if (a.size >= n && a.ptr)
    return reinterpret_cast<void *>(a.ptr);
  // Grown geometrically, so that a growing batch allocates a few times.
  int64_t size = std::max<int64_t>({n, 2 * a.size, 1024});
  CUdeviceptr dev = allocOutsideCapture(size * sizeof(int32_t),
                                        "cuMemAlloc (split counters)");
  if (!dev)
    return nullptr;
  if (!check(DRV(cuMemsetD32Async)(dev, 0, size, s),
             "cuMemsetD32Async (split counters)"))
    return nullptr;
  a.ptr = dev;
  a.size = size;
  return reinterpret_cast<void *>(dev);
}

//===----------------------------------------------------------------------===//
// mgpu* ABI (the signatures MLIR 22's gpu-to-llvm and SelectObjectAttr emit)
//===----------------------------------------------------------------------===//

// Called from the kernel library's global constructor, i.e. at dlopen: record
// the blob and touch no driver, so importing a kernel library never fails.
FLASH_RT_EXPORT void *mgpuModuleLoad(void *data, size_t size) {
  auto *m = new Module;
  m->data = data;
  m->size = size;
  return m;
}

FLASH_RT_EXPORT void *mgpuModuleLoadJIT(void *data, int optLevel) {
  auto *m = new Module;
  m->data = data;
  m->jit = true;
  m->optLevel = optLevel;
  return m;
}

// Runs from the library's destructor, possibly after the driver shut down at
// process exit; failures here are not worth reporting.
FLASH_RT_EXPORT void mgpuModuleUnload(void *module) {
  auto *m = static_cast<Module *>(module);
  if (!m)
    return;
  if (driver().status == FLASH_RT_OK)
    for (auto &l : m->loaded)
      DRV(cuModuleUnload)(l.mod);
  delete m;
}

FLASH_RT_EXPORT void *mgpuModuleGetFunction(void *module, const char *name) {
  if (tls.status != FLASH_RT_OK)
    return nullptr;
  return getFunction(static_cast<Module *>(module), name);
}

FLASH_RT_EXPORT void mgpuLaunchKernel(void *function, intptr_t gridX,
                                      intptr_t gridY, intptr_t gridZ,
                                      intptr_t blockX, intptr_t blockY,
                                      intptr_t blockZ, int32_t smem,
                                      void *stream, void **params,
                                      void **extra, size_t paramsCount) {
  if (!launchPrologue(function, smem))
    return;
  auto *f = static_cast<Function *>(function);
  LaunchParams lp;
  if (!resolveTensorMapParams(f, params, paramsCount, lp))
    return;
  CUresult r = DRV(cuLaunchKernel)(f->fn, gridX, gridY, gridZ, blockX, blockY,
                                   blockZ, smem, static_cast<CUstream>(stream),
                                   lp.params, extra);
  reportLaunch(r, f, gridX, gridY, gridZ, blockX, blockY, blockZ, smem);
}

FLASH_RT_EXPORT void
mgpuLaunchClusterKernel(void *function, intptr_t clusterX, intptr_t clusterY,
                        intptr_t clusterZ, intptr_t gridX, intptr_t gridY,
                        intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                        intptr_t blockZ, int32_t smem, void *stream,
                        void **params, void **extra) {
  if (!launchPrologue(function, smem))
    return;
  auto *f = static_cast<Function *>(function);
  if (!DRV(cuLaunchKernelEx)) {
    setError(FLASH_RT_NO_DRIVER,
             "cluster launch of '%s' needs cuLaunchKernelEx (CUDA >= 12.0)",
             f->name.c_str());
    return;
  }
  CUlaunchAttribute attr;
  attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attr.value.clusterDim.x = static_cast<unsigned>(clusterX);
  attr.value.clusterDim.y = static_cast<unsigned>(clusterY);
  attr.value.clusterDim.z = static_cast<unsigned>(clusterZ);
  CUlaunchConfig cfg;
  std::memset(&cfg, 0, sizeof(cfg));
  cfg.gridDimX = gridX;
  cfg.gridDimY = gridY;
  cfg.gridDimZ = gridZ;
  cfg.blockDimX = blockX;
  cfg.blockDimY = blockY;
  cfg.blockDimZ = blockZ;
  cfg.sharedMemBytes = smem;
  cfg.hStream = static_cast<CUstream>(stream);
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  CUresult r = DRV(cuLaunchKernelEx)(&cfg, f->fn, params, extra);
  reportLaunch(r, f, gridX, gridY, gridZ, blockX, blockY, blockZ, smem);
}

FLASH_RT_EXPORT void *mgpuStreamCreate(void) {
  if (tls.bound)
    return tls.boundStream;
  return ownStream();
}

FLASH_RT_EXPORT void mgpuStreamDestroy(void * /*stream*/) {
  // Bound streams belong to the caller and the own stream is reused.
}

FLASH_RT_EXPORT void mgpuStreamSynchronize(void *stream) {
  if (isBound(stream))
    return; // the caller orders its own stream; syncing would break capture
  if (!driverReady())
    return;
  bump(kStreamSync);
  check(DRV(cuStreamSynchronize)(static_cast<CUstream>(stream)),
        "cuStreamSynchronize (a kernel may have faulted)");
}

FLASH_RT_EXPORT void mgpuStreamWaitEvent(void *stream, void *event) {
  if (!driverReady())
    return;
  check(DRV(cuStreamWaitEvent)(static_cast<CUstream>(stream),
                               static_cast<CUevent>(event), 0),
        "cuStreamWaitEvent");
}

FLASH_RT_EXPORT void *mgpuEventCreate(void) {
  if (!currentContext())
    return nullptr;
  CUevent e = nullptr;
  check(DRV(cuEventCreate)(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  return e;
}

FLASH_RT_EXPORT void mgpuEventDestroy(void *event) {
  if (event && driver().status == FLASH_RT_OK)
    DRV(cuEventDestroy)(static_cast<CUevent>(event));
}

FLASH_RT_EXPORT void mgpuEventSynchronize(void *event) {
  if (!driverReady())
    return;
  bump(kStreamSync);
  check(DRV(cuEventSynchronize)(static_cast<CUevent>(event)),
        "cuEventSynchronize");
}

FLASH_RT_EXPORT void mgpuEventRecord(void *event, void *stream) {
  if (!driverReady())
    return;
  check(DRV(cuEventRecord)(static_cast<CUevent>(event),
                           static_cast<CUstream>(stream)),
        "cuEventRecord");
}

namespace {
// The default memory pool gives its free memory back to the OS at every
// synchronization unless told otherwise (release threshold 0), so a caller
// that waits on each call would pay a physical allocation for the split-KV
// partials every time (tens of microseconds, more than a decode kernel).
// Keep up to kPoolKeepBytes reserved, once per device.
constexpr uint64_t kPoolKeepBytes = 256ull << 20;

void keepPoolAcrossSyncs() {
  constexpr int kMaxDevices = 64;
  static std::atomic<bool> done[kMaxDevices];
  if (!DRV(cuDeviceGetDefaultMemPool) || !DRV(cuMemPoolSetAttribute))
    return;
  CUdevice dev;
  if (DRV(cuCtxGetDevice)(&dev) != CUDA_SUCCESS || dev < 0 ||
      dev >= kMaxDevices || done[dev].load(std::memory_order_relaxed))
    return;
  CUmemoryPool pool;
  if (DRV(cuDeviceGetDefaultMemPool)(&pool, dev) != CUDA_SUCCESS)
    return;
  cuuint64_t keep = kPoolKeepBytes;
  // Best effort: a pool that refuses keeps the driver's default behaviour.
  DRV(cuMemPoolSetAttribute)(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
  done[dev].store(true, std::memory_order_relaxed);
}
} // namespace

// Stream-ordered on a bound stream, so even IR that allocates stays capturable.
FLASH_RT_EXPORT void *mgpuMemAlloc(uint64_t bytes, void *stream,
                                   bool hostShared) {
  if (!currentContext() || bytes == 0)
    return nullptr;
  CUdeviceptr p = 0;
  bump(kMemAlloc);
  if (hostShared) {
    if (!DRV(cuMemAllocManaged)) {
      setError(FLASH_RT_NO_DRIVER, "host-shared gpu.alloc needs cuMemAllocManaged");
      return nullptr;
    }
    check(DRV(cuMemAllocManaged)(&p, bytes, CU_MEM_ATTACH_GLOBAL),
          "cuMemAllocManaged");
  } else if (isBound(stream) && DRV(cuMemAllocAsync)) {
    keepPoolAcrossSyncs();
    check(DRV(cuMemAllocAsync)(&p, bytes, static_cast<CUstream>(stream)),
          "cuMemAllocAsync");
  } else {
    check(DRV(cuMemAlloc)(&p, bytes), "cuMemAlloc");
  }
  return reinterpret_cast<void *>(p);
}

FLASH_RT_EXPORT void mgpuMemFree(void *ptr, void *stream) {
  if (!ptr || !driverReady())
    return;
  if (isBound(stream) && DRV(cuMemFreeAsync))
    check(DRV(cuMemFreeAsync)(reinterpret_cast<CUdeviceptr>(ptr),
                              static_cast<CUstream>(stream)),
          "cuMemFreeAsync");
  else
    check(DRV(cuMemFree)(reinterpret_cast<CUdeviceptr>(ptr)), "cuMemFree");
}

FLASH_RT_EXPORT void mgpuMemcpy(void *dst, void *src, size_t bytes,
                                void *stream) {
  if (tls.status != FLASH_RT_OK || !currentContext())
    return;
  check(DRV(cuMemcpyAsync)(reinterpret_cast<CUdeviceptr>(dst),
                           reinterpret_cast<CUdeviceptr>(src), bytes,
                           static_cast<CUstream>(stream)),
        "cuMemcpyAsync");
}

FLASH_RT_EXPORT void mgpuMemset32(void *dst, unsigned int value, size_t count,
                                  void *stream) {
  if (tls.status != FLASH_RT_OK || !currentContext())
    return;
  check(DRV(cuMemsetD32Async)(reinterpret_cast<CUdeviceptr>(dst), value, count,
                              static_cast<CUstream>(stream)),
        "cuMemsetD32Async");
}

FLASH_RT_EXPORT void mgpuMemset16(void *dst, unsigned short value,
                                  size_t count, void *stream) {
  if (tls.status != FLASH_RT_OK || !currentContext())
    return;
  check(DRV(cuMemsetD16Async)(reinterpret_cast<CUdeviceptr>(dst), value, count,
                              static_cast<CUstream>(stream)),
        "cuMemsetD16Async");
}

FLASH_RT_EXPORT void mgpuMemHostRegisterMemRef(int64_t rank, void *desc,
                                               int64_t elementSizeBytes) {
  if (!currentContext())
    return;
  auto *d = static_cast<int64_t *>(desc); // alloc, aligned, offset, sizes, strides
  int64_t n = 1;
  for (int64_t i = 0; i < rank; ++i)
    n *= d[3 + i];
  char *p = reinterpret_cast<char *>(d[1]) + d[2] * elementSizeBytes;
  check(DRV(cuMemHostRegister)(p, n * elementSizeBytes, 0), "cuMemHostRegister");
}

FLASH_RT_EXPORT void mgpuMemHostUnregisterMemRef(int64_t /*rank*/, void *desc,
                                                 int64_t elementSizeBytes) {
  if (!driverReady())
    return;
  auto *d = static_cast<int64_t *>(desc);
  char *p = reinterpret_cast<char *>(d[1]) + d[2] * elementSizeBytes;
  check(DRV(cuMemHostUnregister)(p), "cuMemHostUnregister");
}

FLASH_RT_EXPORT void mgpuSetDefaultDevice(int32_t device) {
  defaultDevice.store(device);
}

// nvgpu.tma.create.descriptor: `desc` is a ranked memref descriptor, `box` the
// box sizes outermost first (MLIR order); CUDA wants innermost first. Returns
// the encoded CUtensorMap's slot in this thread's ring, which the launch that
// takes it passes by value or through a device copy (see TensorMapRing).
FLASH_RT_EXPORT void *mgpuTensorMapEncodeTiledMemref(
    int64_t rank, void *desc, int64_t dtype, int64_t interleave,
    int64_t swizzle, int64_t l2promo, int64_t oobFill, int64_t *box) {
  if (tls.status != FLASH_RT_OK || !currentContext())
    return nullptr;
  if (!DRV(cuTensorMapEncodeTiled)) {
    setError(FLASH_RT_NO_DRIVER, "TMA descriptors need cuTensorMapEncodeTiled "
                                 "(CUDA >= 12.0 driver)");
    return nullptr;
  }
  if (rank < 1 || rank > 5 || !desc || !box || dtype < 0 ||
      dtype >= static_cast<int64_t>(sizeof(kTensorMapElementSize) /
                                    sizeof(int))) {
    setError(FLASH_RT_INVALID_ARGUMENT,
             "TMA descriptor: unsupported rank %ld or element type %ld",
             static_cast<long>(rank), static_cast<long>(dtype));
    return nullptr;
  }
  auto *d = static_cast<int64_t *>(desc);
  const int64_t *sizes = d + 3, *strides = d + 3 + rank;
  int esize = kTensorMapElementSize[dtype];
  auto base = reinterpret_cast<uintptr_t>(reinterpret_cast<char *>(d[1]) +
                                          d[2] * esize);
  // cuTensorMapEncodeTiled answers all of these with CUDA_ERROR_INVALID_VALUE;
  // name the operand property instead.
  if (!base) {
    setError(FLASH_RT_INVALID_ARGUMENT, "TMA descriptor: null base pointer");
    return nullptr;
  }
  unsigned baseAlign = interleave == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16;
  if (base % baseAlign) {
    setError(FLASH_RT_INVALID_ARGUMENT,
             "TMA descriptor: base address %p is not %u-byte aligned",
             reinterpret_cast<void *>(base), baseAlign);
    return nullptr;
  }
  if (strides[rank - 1] != 1) {
    setError(FLASH_RT_INVALID_ARGUMENT,
             "TMA descriptor: innermost stride is %ld elements, must be 1",
             static_cast<long>(strides[rank - 1]));
    return nullptr;
  }
  cuuint64_t gdim[5], gstride[5];
  cuuint32_t bdim[5], estride[5];
  for (int64_t r = 0; r < rank; ++r) {
    if (sizes[rank - 1 - r] < 1 || box[rank - 1 - r] < 1 ||
        box[rank - 1 - r] > 256) {
      setError(FLASH_RT_INVALID_ARGUMENT,
               "TMA descriptor: dim %ld has size %ld and box %ld (need size "
               ">= 1, 1 <= box <= 256)",
               static_cast<long>(rank - 1 - r),
               static_cast<long>(sizes[rank - 1 - r]),
               static_cast<long>(box[rank - 1 - r]));
      return nullptr;
    }
    gdim[r] = static_cast<cuuint64_t>(sizes[rank - 1 - r]);
    bdim[r] = static_cast<cuuint32_t>(box[rank - 1 - r]);
    estride[r] = 1;
  }
  for (int64_t r = 0; r + 1 < rank; ++r) {
    int64_t bytes = strides[rank - 2 - r] * esize;
    if (bytes % 16 || bytes <= 0) {
      setError(FLASH_RT_INVALID_ARGUMENT,
               "TMA descriptor: stride of dim %ld is %ld bytes, must be a "
               "positive multiple of 16",
               static_cast<long>(rank - 2 - r), static_cast<long>(bytes));
      return nullptr;
    }
    gstride[r] = static_cast<cuuint64_t>(bytes);
  }
  CUtensorMap &tm = *threadRing().take();
  std::memset(&tm, 0, sizeof(tm));
  CUresult r = DRV(cuTensorMapEncodeTiled)(
      &tm, static_cast<CUtensorMapDataType>(dtype),
      static_cast<cuuint32_t>(rank), reinterpret_cast<void *>(base), gdim,
      gstride, bdim, estride, static_cast<CUtensorMapInterleave>(interleave),
      static_cast<CUtensorMapSwizzle>(swizzle),
      static_cast<CUtensorMapL2promotion>(l2promo),
      static_cast<CUtensorMapFloatOOBfill>(oobFill));
  if (r != CUDA_SUCCESS) {
    setError(FLASH_RT_INVALID_ARGUMENT,
             "cuTensorMapEncodeTiled failed: %s (rank %ld, dtype %ld, inner "
             "box %u elements, swizzle %ld)",
             errName(r).c_str(), static_cast<long>(rank), static_cast<long>(dtype),
             bdim[0], static_cast<long>(swizzle));
    return nullptr;
  }
  return &tm;
}
