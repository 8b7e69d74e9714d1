// RUN: flash-opt %s -split-input-file --flash-expand-float-conversions | FileCheck %s
// RUN: flash-opt %s -split-input-file --flash-expand-float-conversions --canonicalize | FileCheck %s --check-prefix=FOLD
// RUN: flash-opt %s -split-input-file --flash-expand-float-conversions=types=bf16 | FileCheck %s --check-prefix=BF16
// RUN: not flash-opt %s -split-input-file --flash-expand-float-conversions=types=f8E4M3 2>&1 | FileCheck %s --check-prefix=BAD

// Every conversion between bf16/f16 and f32/f64 becomes integer arithmetic.
// CHECK-LABEL: func.func @all
// CHECK-NOT: {{arith\.(truncf|extf).*(bf16|f16)}}
// CHECK: math.ctlz
// CHECK-NOT: {{arith\.(truncf|extf).*(bf16|f16)}}
// CHECK-NOT: {{arith\.(truncf|extf).*(bf16|f16)}}
// CHECK: return
// BF16-LABEL: func.func @all
// BF16-NOT: arith.truncf {{.*}} to bf16
// BF16: arith.truncf %{{.*}} : f32 to f16
// BF16: arith.truncf %{{.*}} : f64 to f16
// BF16: arith.extf %{{.*}} : f16 to f32
// BF16-NOT: bf16 to f32
// BAD: unsupported type 'f8E4M3' in types= (expected bf16 or f16)
func.func @all(%x: f32, %y: f64, %h: f16, %b: bf16, %v: vector<4xf32>, %w: vector<4xbf16>)
    -> (bf16, f16, f16, bf16, f32, f32, f64, vector<4xbf16>, vector<4xf32>, f64) {
  %0 = arith.truncf %x : f32 to bf16
  %1 = arith.truncf %x : f32 to f16
  %2 = arith.truncf %y : f64 to f16
  %3 = arith.truncf %y : f64 to bf16
  %4 = arith.extf %h : f16 to f32
  %5 = arith.extf %b : bf16 to f32
  %6 = arith.extf %h : f16 to f64
  %7 = arith.truncf %v : vector<4xf32> to vector<4xbf16>
  %8 = arith.extf %w : vector<4xbf16> to vector<4xf32>
  // Conversions between wide types are left alone.
  %9 = arith.extf %x : f32 to f64
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9
      : bf16, f16, f16, bf16, f32, f32, f64, vector<4xbf16>, vector<4xf32>, f64
}

// -----

// The expansion folds on constants to the values IEEE rounding gives: a
// signalling NaN becomes quiet with its sign, ties go to even (also in the
// subnormal range), overflow gives infinity, a NaN keeps its payload's high
// bits, and extension is exact.
// FOLD-LABEL: func.func @values
// FOLD-DAG: arith.constant 0xFFC0 : bf16
// FOLD-DAG: arith.constant 1.000000e+00 : bf16
// FOLD-DAG: arith.constant 1.015630e+00 : bf16
// FOLD-DAG: arith.constant 0.000000e+00 : bf16
// FOLD-DAG: arith.constant 0x7C00 : f16
// FOLD-DAG: arith.constant 1.192090e-07 : f16
// FOLD-DAG: arith.constant 0x7FFF : f16
// FOLD-DAG: arith.constant 5.96046448E-8 : f32
// FOLD-DAG: arith.constant 0xFF810000 : f32
// FOLD-NOT: arith.truncf
// FOLD-NOT: arith.extf
func.func @values() -> (bf16, bf16, bf16, bf16, f16, f16, f16, f32, f32) {
  %snan = arith.constant 0xFF800001 : f32
  %tie = arith.constant 1.00390625 : f32
  %tieup = arith.constant 1.01171875 : f32
  %subtie = arith.constant 0x00008000 : f32
  %big = arith.constant 65520.0 : f32
  %hsubtie = arith.constant 8.940696716308594e-08 : f32
  %nan = arith.constant 0x7FFFFFFF : f32
  %a = arith.truncf %snan : f32 to bf16
  %b = arith.truncf %tie : f32 to bf16
  %c = arith.truncf %tieup : f32 to bf16
  %d = arith.truncf %subtie : f32 to bf16
  %e = arith.truncf %big : f32 to f16
  %f = arith.truncf %hsubtie : f32 to f16
  %g = arith.truncf %nan : f32 to f16
  %hs = arith.constant 0x0001 : f16
  %x = arith.extf %hs : f16 to f32
  %hb = arith.constant 0xFF81 : bf16
  %y = arith.extf %hb : bf16 to f32
  return %a, %b, %c, %d, %e, %f, %g, %x, %y : bf16, bf16, bf16, bf16, f16, f16, f16, f32, f32
}
