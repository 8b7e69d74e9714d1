/*===- capi-consumer.c - flash-mlir from C through the installed C API ----===*/
#include "flash-c/Flash.h"

#include <stdio.h>
#include <string.h>

int main(void) {
  static const char *ir =
      "func.func @attn(%q: tensor<100x64xf32>, %k: tensor<70x64xf32>,\n"
      "                %v: tensor<70x48xf32>, %o: tensor<100x48xf32>)\n"
      "    -> tensor<100x48xf32> {\n"
      "  %r = flash.attention ins(%q, %k, %v : tensor<100x64xf32>,\n"
      "          tensor<70x64xf32>, tensor<70x48xf32>)\n"
      "        outs(%o : tensor<100x48xf32>) scale(0.125) -> tensor<100x48xf32>\n"
      "  return %r : tensor<100x48xf32>\n"
      "}\n";
  FlashContext *ctx = flashContextCreate();
  FlashString out = {0}, error = {0};
  FlashStatus status =
      flashCompile(ctx, ir, strlen(ir), "attn.mlir", "flash-decompose-attention",
                   NULL, FLASH_OUTPUT_MLIR, 0, &out, &error);
  int ok = status == FLASH_SUCCESS && !strstr(out.data, "flash.attention");
  if (status != FLASH_SUCCESS)
    fprintf(stderr, "%s", error.data);
  flashStringDestroy(&out);
  flashStringDestroy(&error);
  flashContextDestroy(ctx);
  printf("c api: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
