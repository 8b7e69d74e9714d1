/*===- capi.c - exercises the flash-mlir C API from plain C --------------===*/
/* Prints what each call returned; capi.mlir checks it with FileCheck. */
#include "flash-c/Flash.h"

#include <stdio.h>
#include <string.h>

static const char *kAttention =
    "func.func @attn(%q: tensor<2x10x16xf32>, %k: tensor<2x7x16xf32>,\n"
    "                %v: tensor<2x7x8xf32>, %o: tensor<2x10x8xf32>)\n"
    "    -> tensor<2x10x8xf32> {\n"
    "  %r = flash.attention ins(%q, %k, %v : tensor<2x10x16xf32>,\n"
    "          tensor<2x7x16xf32>, tensor<2x7x8xf32>)\n"
    "        outs(%o : tensor<2x10x8xf32>) scale(0.25)\n"
    "        -> tensor<2x10x8xf32>\n"
    "  return %r : tensor<2x10x8xf32>\n"
    "}\n";

/* D of the key (15) does not match the query's (16). */
static const char *kInvalid =
    "func.func @bad(%q: tensor<10x16xf32>, %k: tensor<7x15xf32>,\n"
    "               %v: tensor<7x8xf32>, %o: tensor<10x8xf32>) -> tensor<10x8xf32> {\n"
    "  %r = flash.attention ins(%q, %k, %v : tensor<10x16xf32>, tensor<7x15xf32>,\n"
    "          tensor<7x8xf32>) outs(%o : tensor<10x8xf32>) scale(0.25)\n"
    "        -> tensor<10x8xf32>\n"
    "  return %r : tensor<10x8xf32>\n"
    "}\n";

static const char *kToLLVM =
    "flash-decompose-attention,one-shot-bufferize{bufferize-function-boundaries},"
    "convert-linalg-to-loops,lower-affine,convert-scf-to-cf,"
    "expand-strided-metadata,finalize-memref-to-llvm,convert-math-to-llvm,"
    "convert-to-llvm,reconcile-unrealized-casts";

static void report(const char *what, FlashStatus status, FlashString *out,
                   FlashString *error) {
  printf("== %s: %s\n", what, status == FLASH_SUCCESS ? "success" : "failure");
  if (error && error->data)
    printf("%s\n", error->data);
  flashStringDestroy(out);
  flashStringDestroy(error);
}

int main(void) {
  FlashString out = {0}, error = {0};
  FlashStatus status;

  // CHECK-LABEL: == version
  // CHECK-NEXT: flash-mlir {{[0-9.]+}} (MLIR 22.
  printf("== version\n%s\n", flashVersion());
  // CHECK: registered: 1 1 0
  printf("registered: %d %d %d\n",
         flashIsRegisteredPass("flash-decompose-attention"),
         flashIsRegisteredPass("canonicalize"),
         flashIsRegisteredPass("no-such-pass"));

  FlashContext *ctx = flashContextCreate();

  // CHECK-LABEL: == parse error: failure
  // CHECK-NEXT: bad.mlir:1:13: error: expected non-function type
  FlashModule *m = flashModuleParse(ctx, "func.func @f(", 13, "bad.mlir", &error);
  report("parse error", m ? FLASH_SUCCESS : FLASH_FAILURE, NULL, &error);

  // CHECK-LABEL: == verifier: failure
  // CHECK-NEXT: invalid.mlir:3:{{[0-9]+}}: error: 'flash.attention' op 'key' head dim D = 15 does not match 'query' head dim D = 16
  m = flashModuleParse(ctx, kInvalid, strlen(kInvalid), "invalid.mlir", &error);
  report("verifier", m ? FLASH_SUCCESS : FLASH_FAILURE, NULL, &error);

  m = flashModuleParse(ctx, kAttention, strlen(kAttention), "attn.mlir", &error);
  // CHECK-LABEL: == parse: success
  report("parse", m ? FLASH_SUCCESS : FLASH_FAILURE, NULL, &error);

  // CHECK-LABEL: == unknown pipeline: failure
  // CHECK-NEXT: flash: 'flash-nope' is not a registered pass or pass pipeline
  status = flashModuleRunPipeline(m, "flash-nope", NULL, &error);
  report("unknown pipeline", status, NULL, &error);

  // CHECK-LABEL: == bad option: failure
  // CHECK: no-such-option
  status = flashModuleRunPipeline(m, "canonicalize", "no-such-option=1", &error);
  report("bad option", status, NULL, &error);

  /* No gpu.binary in a CPU module. */
  // CHECK-LABEL: == ptx: failure
  // CHECK-NEXT: flash: the module has no gpu.binary to take PTX from
  status = flashModuleEmit(m, FLASH_OUTPUT_PTX, 0, &out, &error);
  report("ptx", status, &out, &error);

  /* Still flash.attention on tensors: translation must fail with a diagnostic. */
  // CHECK-LABEL: == object before lowering: failure
  // CHECK: flash: translation to LLVM IR failed
  status = flashModuleEmit(m, FLASH_OUTPUT_OBJECT, 2, &out, &error);
  report("object before lowering", status, &out, &error);

  // CHECK-LABEL: == options: success
  status = flashModuleRunPipeline(m, "canonicalize", "max-iterations=3 region-simplify=disabled", &error);
  report("options", status, NULL, &error);

  // CHECK-LABEL: == mlir: success
  // CHECK-NEXT: flash.attention
  status = flashModuleEmit(m, FLASH_OUTPUT_MLIR, 0, &out, &error);
  printf("== mlir: %s\n%s\n", status == FLASH_SUCCESS ? "success" : "failure",
         out.data && strstr(out.data, "flash.attention") ? "flash.attention" : "missing");
  report("-", status, &out, &error);

  // CHECK-LABEL: == lower: success
  status = flashModuleRunPipeline(m, kToLLVM, NULL, &error);
  report("lower", status, NULL, &error);

  // CHECK-LABEL: == llvm ir: success
  // CHECK-NEXT: define {{.*}} @attn(
  status = flashModuleEmit(m, FLASH_OUTPUT_LLVM_IR, 2, &out, &error);
  printf("== llvm ir: %s\n", status == FLASH_SUCCESS ? "success" : "failure");
  if (out.data) {
    const char *def = strstr(out.data, "define ");
    printf("%.*s\n", def ? (int)strcspn(def, "\n") : 0, def ? def : "");
  }
  report("-", status, &out, &error);

  // CHECK-LABEL: == object: success
  // CHECK-NEXT: ELF 1
  status = flashModuleEmit(m, FLASH_OUTPUT_OBJECT, 2, &out, &error);
  printf("== object: %s\n", status == FLASH_SUCCESS ? "success" : "failure");
  printf("ELF %d\n", out.size > 4 && memcmp(out.data, "\x7f" "ELF", 4) == 0);
  report("-", status, &out, &error);

  // CHECK-LABEL: == one call: success
  status = flashCompile(ctx, kAttention, strlen(kAttention), NULL, kToLLVM,
                        NULL, FLASH_OUTPUT_ASSEMBLY, 1, &out, &error);
  printf("== one call: %s\n", status == FLASH_SUCCESS ? "success" : "failure");
  // CHECK-NEXT: assembly has attn: 1
  printf("assembly has attn: %d\n", out.data && strstr(out.data, "attn:") != NULL);
  report("-", status, &out, &error);

  // CHECK-LABEL: == one call, bad input: failure
  // CHECK-NEXT: <input>:1:1: error:
  status = flashCompile(ctx, "garbage", 7, NULL, kToLLVM, NULL,
                        FLASH_OUTPUT_OBJECT, 2, &out, &error);
  report("one call, bad input", status, &out, &error);

  flashModuleDestroy(m);

  // LLVM's instruction selection has no x86 lowering for an NVVM intrinsic and
  // reports a fatal error: it must come back as a string, and the context is
  // retired.
  // CHECK-LABEL: == fatal: failure
  // CHECK-NEXT: flash: internal error: {{.*}}Cannot select
  static const char *kNVVMOnHost =
      "llvm.func @tid() -> i32 {\n"
      "  %0 = nvvm.read.ptx.sreg.tid.x : i32\n"
      "  llvm.return %0 : i32\n"
      "}\n";
  status = flashCompile(ctx, kNVVMOnHost, strlen(kNVVMOnHost), NULL, NULL,
                        NULL, FLASH_OUTPUT_OBJECT, 0, &out, &error);
  report("fatal", status, &out, &error);
  // CHECK-LABEL: == after fatal: failure
  // CHECK-NEXT: flash: this context hit an internal error earlier
  m = flashModuleParse(ctx, kAttention, strlen(kAttention), NULL, &error);
  report("after fatal", m ? FLASH_SUCCESS : FLASH_FAILURE, NULL, &error);
  flashContextDestroy(ctx);

  // A fresh context works again.
  // CHECK-LABEL: == new context: success
  ctx = flashContextCreate();
  status = flashCompile(ctx, kAttention, strlen(kAttention), NULL,
                        "flash-decompose-attention", NULL, FLASH_OUTPUT_MLIR,
                        0, &out, &error);
  report("new context", status, &out, &error);
  flashContextDestroy(ctx);
  // CHECK: == done
  printf("== done\n");
  return 0;
}
