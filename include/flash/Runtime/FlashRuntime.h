/* C interface of libflash_cuda_runtime: stream binding, errors and counters for the mgpu* host ABI. */
#ifndef FLASH_RUNTIME_FLASHRUNTIME_H
#define FLASH_RUNTIME_FLASHRUNTIME_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes returned by the flashRuntime* functions and by flashRuntimeGetStatus(). */
enum FlashRuntimeStatus {
  FLASH_RT_OK = 0,
  FLASH_RT_NO_DRIVER = 1,        /* libcuda.so.1 missing, a stub, or too old */
  FLASH_RT_NO_DEVICE = 2,        /* driver present but no usable device / ordinal */
  FLASH_RT_WRONG_ARCH = 3,       /* kernel binary not loadable on this device */
  FLASH_RT_INVALID_ARGUMENT = 4, /* null, misaligned, host or malformed operands */
  FLASH_RT_LAUNCH_FAILED = 5,    /* cuLaunchKernel or a launch-time resource refused */
  FLASH_RT_CUDA_ERROR = 6,       /* any other driver error; the message names it */
};

/* Bind the calling thread to `stream` (a CUstream / cudaStream_t, 0 = legacy default
 * stream). While bound, every stream the MLIR host code "creates" is this stream, and
 * the host code's synchronize/destroy calls on it are no-ops: launches are asynchronous
 * on the caller's stream, capturable in CUDA graphs and timeable with events. */
void flashRuntimeSetStream(void *stream);
/* Back to unbound mode: one runtime-owned stream per thread (created once) and the
 * host code's synchronization honoured. */
void flashRuntimeResetStream(void);
/* Device ordinal whose primary context the runtime uses when the thread has no current
 * context (torch makes its context current itself). Returns a status. */
int flashRuntimeSetDevice(int ordinal);
/* flashRuntimeSetStream(stream) and flashRuntimeSetDevice(ordinal) in one call (the
 * per-call binding of a launcher). Returns the status of the device selection. */
int flashRuntimeBindStream(int ordinal, void *stream);
/* One launch of a host function whose arguments are `nargs` pointers (1 to 16:
 * memref descriptors, the stream last): binds the stream args[nargs - 1] and the
 * device as flashRuntimeBindStream does, calls `function`, and returns the
 * thread's status (what a launcher checks), all in one call. */
int flashRuntimeCall(int ordinal, void *function, int nargs, void **args);
/* Load the driver and make a context current; returns a status. Optional: every entry
 * point initializes lazily. */
int flashRuntimeInit(void);

/* First error recorded on this thread since the last clear ("" if none), and its status.
 * While an error is pending on a thread, kernel launches on it are skipped, so a failed
 * descriptor or module never turns into a device fault; clear before each call. */
const char *flashRuntimeGetLastError(void);
int flashRuntimeGetStatus(void);
void flashRuntimeClearError(void);

/* FLASH_RT_OK if `ptr` is device-accessible memory aligned to `alignment` bytes;
 * otherwise records and returns an error naming `what`. */
int flashRuntimeCheckPointer(const void *ptr, uint64_t alignment, const char *what);

/* Process-wide counters of driver work, for tests that prove launches do no per-call
 * stream creation, synchronization or allocation. Names: "module_load", "stream_create",
 * "stream_sync", "mem_alloc", "launch", "tensormap_upload", "tensormap_hit" (maps passed to
 * a kernel through a device copy: uploads and reuses of one), "tensormap_param" (maps passed
 * by value as a grid-constant parameter). -1 if unknown. */
int64_t flashRuntimeGetCounter(const char *name);

/* The current device's SM count (0 without a device), cached per device: the split-KV
 * decode kernels' host code sizes its grid by it. */
int32_t flashRuntimeMultiprocessorCount(void);

/* A device i32 for this (context, stream), zeroed on `stream` (an async
 * memset): the work counter a persistent kernel launched next on that stream
 * hands out its work items from. Kernels built now take theirs from
 * flashRuntimeSplitCounters and leave it zero; this entry stays for cached
 * kernel libraries built before. NULL on failure (the error is recorded, and
 * the launch that follows is skipped). */
void *flashRuntimeWorkCounter(void *stream);

/* At least `n` device i32s for this (context, stream), all zero when the next
 * kernel on `stream` starts: the arrival counters of a split decode whose last
 * CTA per row block merges the splits, and a persistent prefill's work counter
 * and exit count. The kernels that use them leave them zero (the last arrival
 * resets its counter), so only a new or grown array is zeroed (an async memset
 * on `stream`). Earlier arrays stay allocated for the life of the process: a
 * CUDA graph may replay a launch that names one. NULL on failure (the error is
 * recorded, and the launch that follows is skipped). */
void *flashRuntimeSplitCounters(void *stream, int64_t n);

#ifdef __cplusplus
}
#endif

#endif /* FLASH_RUNTIME_FLASHRUNTIME_H */
