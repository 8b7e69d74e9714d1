/*===- flash-c/Flash.h - C API of flash-mlir ---------------------*- C -*-===*\
|*                                                                            *|
|* A small C interface for embedding flash-mlir where C++ and CMake do not    *|
|* reach (Python through ctypes, other languages, build systems): parse IR,   *|
|* run a registered pass pipeline with options, and get back the lowered IR,  *|
|* LLVM IR, a host object file or assembly, or the PTX / cubin of a GPU       *|
|* module. Every failure is reported as a string carrying the MLIR            *|
|* diagnostics; no function aborts the process.                               *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/
#ifndef FLASH_C_FLASH_H
#define FLASH_C_FLASH_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define FLASH_CAPI_EXPORTED __declspec(dllexport)
#else
#define FLASH_CAPI_EXPORTED __attribute__((visibility("default")))
#endif

/* Bumped whenever a declaration in this header changes meaning. */
#define FLASH_CAPI_VERSION 1

/* An owned byte string. `data` is NUL-terminated for convenience, but object
 * files and cubins contain NULs: use `size`. Release with flashStringDestroy. */
typedef struct {
  char *data;
  size_t size;
} FlashString;

typedef enum {
  FLASH_SUCCESS = 0,
  FLASH_FAILURE = 1,
} FlashStatus;

typedef enum {
  FLASH_OUTPUT_MLIR = 0,      /* the module as MLIR text */
  FLASH_OUTPUT_LLVM_IR = 1,   /* translated to LLVM IR text (module in the llvm dialect) */
  FLASH_OUTPUT_OBJECT = 2,    /* host relocatable, position-independent object file */
  FLASH_OUTPUT_ASSEMBLY = 3,  /* host assembly */
  FLASH_OUTPUT_PTX = 4,       /* PTX of the first gpu.binary (gpu-module-to-binary{format=isa}) */
  FLASH_OUTPUT_CUBIN = 5,     /* cubin of the first gpu.binary (gpu-module-to-binary{format=bin}) */
  FLASH_OUTPUT_BYTECODE = 6,  /* the module as MLIR bytecode */
} FlashOutputKind;

/* A context with every upstream dialect and extension, the flash dialect and
 * all LLVM IR translations registered. Not thread-safe: use one per thread. */
typedef struct FlashContext FlashContext;
/* A parsed module owned by its context. */
typedef struct FlashModule FlashModule;

/* "flash-mlir <version> (MLIR <llvm version>)"; static storage. */
FLASH_CAPI_EXPORTED const char *flashVersion(void);

/* "<triple>/<cpu>" of the host that OBJECT and ASSEMBLY target, including
 * the CPU (so callers caching objects can key on it); static storage. */
FLASH_CAPI_EXPORTED const char *flashHostTarget(void);

/* Registers every upstream and flash pass and pipeline with the global
 * registry (idempotent; every function below calls it). */
FLASH_CAPI_EXPORTED void flashRegisterAllPasses(void);

/* 1 when `name` is a registered pass or pass pipeline, else 0. */
FLASH_CAPI_EXPORTED int flashIsRegisteredPass(const char *name);

FLASH_CAPI_EXPORTED FlashContext *flashContextCreate(void);
/* Destroys the context and every module still alive in it. */
FLASH_CAPI_EXPORTED void flashContextDestroy(FlashContext *context);

/* Parses MLIR text or bytecode (`size` bytes; `name` labels diagnostics and
 * may be NULL) and verifies it. Returns NULL and sets `*error` on failure. */
FLASH_CAPI_EXPORTED FlashModule *flashModuleParse(FlashContext *context,
                                                  const char *data,
                                                  size_t size,
                                                  const char *name,
                                                  FlashString *error);
FLASH_CAPI_EXPORTED void flashModuleDestroy(FlashModule *module);

/* Runs a pass pipeline on the module in place.
 *   pipeline: a registered pass or pipeline name ("flash-cpu-pipeline"), or
 *             a textual pipeline, anchored on builtin.module
 *             ("builtin.module(canonicalize,cse)" or just "canonicalize,cse").
 *             A single pass restricted to another op (flash-raise-attention
 *             on func.func) is nested into that op.
 *   options:  NULL or "" for defaults, else the options of the named pass or
 *             pipeline, space-separated: "block-q=32 reference=true".
 * On failure the module may be partly transformed. */
FLASH_CAPI_EXPORTED FlashStatus flashModuleRunPipeline(FlashModule *module,
                                                       const char *pipeline,
                                                       const char *options,
                                                       FlashString *error);

/* Produces `kind` from the module. `optLevel` (0-3) is the LLVM optimization
 * level for LLVM_IR, OBJECT and ASSEMBLY and ignored otherwise. */
FLASH_CAPI_EXPORTED FlashStatus flashModuleEmit(FlashModule *module,
                                                FlashOutputKind kind,
                                                int optLevel, FlashString *out,
                                                FlashString *error);

/* parse + run pipeline + emit in one call, in a fresh module of `context`. */
FLASH_CAPI_EXPORTED FlashStatus
flashCompile(FlashContext *context, const char *data, size_t size,
             const char *name, const char *pipeline, const char *options,
             FlashOutputKind kind, int optLevel, FlashString *out,
             FlashString *error);

/* Frees the string's storage (NULL-safe) and resets it to empty. */
FLASH_CAPI_EXPORTED void flashStringDestroy(FlashString *string);

#ifdef __cplusplus
}
#endif

#endif /* FLASH_C_FLASH_H */
