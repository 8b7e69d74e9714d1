"""flash_mlir.compile through the C API: outputs, options, and errors that
carry the MLIR diagnostics."""
import pytest

import flash_mlir
from flash_mlir import FlashError

ATTN = """
func.func @attn(%q: tensor<2x12x16xf32>, %k: tensor<2x9x16xf32>,
                %v: tensor<2x9x8xf32>, %o: tensor<2x12x8xf32>) -> tensor<2x12x8xf32> {
  %r = flash.attention ins(%q, %k, %v : tensor<2x12x16xf32>, tensor<2x9x16xf32>,
           tensor<2x9x8xf32>) outs(%o : tensor<2x12x8xf32>) scale(0.25)
         -> tensor<2x12x8xf32>
  return %r : tensor<2x12x8xf32>
}
"""


def test_version_and_registry():
    # Cache keys use the package's version without loading the compiler: it must
    # be the compiler's.
    assert flash_mlir.version().startswith("flash-mlir %s " % flash_mlir.__version__)
    assert "MLIR 22" in flash_mlir.version()
    assert flash_mlir.is_registered("flash-decompose-attention")
    assert flash_mlir.is_registered("flash-cpu-pipeline")
    assert not flash_mlir.is_registered("flash-no-such-pass")


def test_parse_only_round_trips():
    text = flash_mlir.compile(ATTN, pipeline=None)
    assert "flash.attention" in text and "scale(0.25)" in text


def test_decompose_removes_the_op():
    text = flash_mlir.compile(ATTN, pipeline="flash-decompose-attention")
    assert "flash.attention" not in text
    assert "tensor<2x12x9xf32>" in text  # the materialised score matrix


def test_keyword_options_reach_the_pipeline():
    tiled = flash_mlir.compile(ATTN, pipeline="flash-tile-attention", block_q=4, block_kv=3)
    assert "flash.attention" not in tiled
    assert "tensor<4x3xf32>" in tiled  # a block_q x block_kv score tile
    default = flash_mlir.compile(ATTN, pipeline="flash-tile-attention")
    assert "tensor<4x3xf32>" not in default


def test_textual_pipeline_and_path(tmp_path):
    path = tmp_path / "attn.mlir"
    path.write_text(ATTN)
    text = flash_mlir.compile(path, pipeline="builtin.module(flash-decompose-attention,canonicalize)")
    assert "flash.attention" not in text
    assert flash_mlir.compile(str(path), pipeline=None).count("flash.attention") == 1


def test_lowered_outputs():
    llvm = flash_mlir.compile(ATTN, pipeline="flash-cpu-pipeline", output="llvm", parallel=False)
    assert "define " in llvm and "@attn" in llvm
    obj = flash_mlir.compile(ATTN, pipeline="flash-cpu-pipeline", output="object", parallel=False)
    assert isinstance(obj, bytes) and obj[:4] == b"\x7fELF"
    asm = flash_mlir.compile(ATTN, pipeline="flash-cpu-pipeline", output="assembly",
                             parallel=False)
    assert "attn:" in asm


def test_bytecode_round_trip():
    bc = flash_mlir.compile(ATTN, pipeline=None, output="bytecode")
    assert bc[:4] == b"ML\xefR"
    assert "flash.attention" in flash_mlir.compile(bc, pipeline=None)


def test_parse_error_carries_location_and_message():
    with pytest.raises(FlashError) as e:
        flash_mlir.compile("func.func @f(%a: tensor<4xf32>) {\n  return %a\n}\n", pipeline=None)
    msg = str(e.value)
    assert "<input>:2:" in msg and "error:" in msg


def test_verifier_error_names_the_operands():
    bad = ATTN.replace("tensor<2x9x8xf32>", "tensor<2x5x8xf32>")
    with pytest.raises(FlashError) as e:
        flash_mlir.compile(bad, pipeline=None)
    msg = str(e.value)
    assert "'value' sequence length Lk = 5 does not match 'key' sequence length Lk = 9" in msg
    assert e.value.diagnostics.startswith("<input>:")


def test_unknown_pipeline_and_option():
    with pytest.raises(FlashError, match="'flash-nope' is not a registered pass"):
        flash_mlir.compile(ATTN, pipeline="flash-nope")
    with pytest.raises(FlashError, match="no such option bogus"):
        flash_mlir.compile(ATTN, pipeline="flash-cpu-pipeline", bogus=1)
    with pytest.raises(ValueError):
        flash_mlir.compile(ATTN, pipeline="canonicalize,cse", block_q=2)


def test_emission_errors_are_exceptions():
    with pytest.raises(FlashError, match="no gpu.binary"):
        flash_mlir.compile(ATTN, pipeline=None, output="ptx")
    with pytest.raises(FlashError, match="translation to LLVM IR failed"):
        flash_mlir.compile(ATTN, pipeline=None, output="object")
    with pytest.raises(ValueError):
        flash_mlir.compile(ATTN, pipeline=None, output="exe")


RAISE = """
func.func @batch_matmul_transposed_maps_softmax(%q: tensor<2x10x16xf32>, %k: tensor<2x12x16xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x10x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<2x10x12xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %s = linalg.batch_matmul indexing_maps = [
      affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>]
      ins(%q, %k : tensor<2x10x16xf32>, tensor<2x12x16xf32>) outs(%f0 : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %c = arith.constant 0.25 : f32
  %e1 = tensor.empty() : tensor<2x10x12xf32>
  %ss = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>],
      iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x10x12xf32>) outs(%e1 : tensor<2x10x12xf32>) {
  ^bb0(%x: f32, %o: f32):
    %m = arith.mulf %x, %c : f32
    linalg.yield %m : f32
  } -> tensor<2x10x12xf32>
  %e2 = tensor.empty() : tensor<2x10x12xf32>
  %p = linalg.softmax dimension(2) ins(%ss : tensor<2x10x12xf32>) outs(%e2 : tensor<2x10x12xf32>) -> tensor<2x10x12xf32>
  %e3 = tensor.empty() : tensor<2x10x8xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x10x12xf32>, tensor<2x12x8xf32>) outs(%f3 : tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %o : tensor<2x10x8xf32>
}
"""


def test_raise_by_name_alone_or_in_a_module_pipeline():
    # flash-raise-attention visits every function of the op it runs on, so it
    # can be named alone, next to module passes, or nested on func.func.
    text = flash_mlir.compile(RAISE, pipeline="flash-raise-attention")
    assert "flash.attention" in text and "linalg.softmax" not in text
    text = flash_mlir.compile(RAISE, pipeline="flash-raise-attention", remarks=True)
    assert "flash.attention" in text
    text = flash_mlir.compile(RAISE, pipeline="flash-raise-attention,cse")
    assert "flash.attention" in text and "linalg.softmax" not in text
    text = flash_mlir.compile(RAISE, pipeline="func.func(flash-raise-attention),flash-cpu-pipeline")
    assert "llvm.func @batch_matmul_transposed_maps_softmax" in text
