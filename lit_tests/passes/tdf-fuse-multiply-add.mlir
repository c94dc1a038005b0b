// RUN: tdf-opt %s --split-input-file --tdf-fuse-multiply-add | FileCheck %s
// RUN: tdf-opt %s --split-input-file --tdf-fuse-multiply-add --mlir-pass-statistics 2>&1 >/dev/null | FileCheck %s --check-prefix=STATS

// Contractable multiply-adds become llvm.intr.fma (LLVM would fuse them at
// -O2 only); the product's side follows LLVM's DAG combiner: the left
// operand first. Subtractions negate the addend or the product's first
// factor.

// CHECK-LABEL: llvm.func @pairs
// CHECK-SAME:  (%[[A:.*]]: f32, %[[B:.*]]: f32, %[[C:.*]]: f32, %[[V:.*]]: vector<4xf64>, %[[W:.*]]: vector<4xf64>)
// CHECK:       %[[S0:.*]] = llvm.intr.fma(%[[A]], %[[B]], %[[C]]) : (f32, f32, f32) -> f32
// CHECK:       %[[S1:.*]] = llvm.intr.fma(%[[A]], %[[C]], %[[B]]) : (f32, f32, f32) -> f32
// CHECK:       %[[NC:.*]] = llvm.fneg %[[C]] : f32
// CHECK:       %[[S2:.*]] = llvm.intr.fma(%[[B]], %[[C]], %[[NC]]) : (f32, f32, f32) -> f32
// CHECK:       %[[NB:.*]] = llvm.fneg %[[B]] : f32
// CHECK:       %[[S3:.*]] = llvm.intr.fma(%[[NB]], %[[A]], %[[C]]) : (f32, f32, f32) -> f32
// CHECK:       %[[S4:.*]] = llvm.intr.fma(%[[V]], %[[W]], %[[W]]) : (vector<4xf64>, vector<4xf64>, vector<4xf64>) -> vector<4xf64>
// CHECK-NOT:   llvm.fmul
// CHECK:       llvm.return
llvm.func @pairs(%a: f32, %b: f32, %c: f32, %v: vector<4xf64>, %w: vector<4xf64>) -> !llvm.struct<(f32, f32, f32, f32, vector<4xf64>)> {
  %m0 = llvm.fmul %a, %b {fastmathFlags = #llvm.fastmath<contract>} : f32
  %s0 = llvm.fadd %m0, %c {fastmathFlags = #llvm.fastmath<contract>} : f32
  %m1 = llvm.fmul %a, %c {fastmathFlags = #llvm.fastmath<contract>} : f32
  %s1 = llvm.fadd %b, %m1 {fastmathFlags = #llvm.fastmath<contract>} : f32
  %m2 = llvm.fmul %b, %c {fastmathFlags = #llvm.fastmath<contract>} : f32
  %s2 = llvm.fsub %m2, %c {fastmathFlags = #llvm.fastmath<contract>} : f32
  %m3 = llvm.fmul %b, %a {fastmathFlags = #llvm.fastmath<contract>} : f32
  %s3 = llvm.fsub %c, %m3 {fastmathFlags = #llvm.fastmath<contract>} : f32
  %m4 = llvm.fmul %v, %w {fastmathFlags = #llvm.fastmath<contract>} : vector<4xf64>
  %s4 = llvm.fadd %m4, %w {fastmathFlags = #llvm.fastmath<contract>} : vector<4xf64>
  %u = llvm.mlir.undef : !llvm.struct<(f32, f32, f32, f32, vector<4xf64>)>
  %r0 = llvm.insertvalue %s0, %u[0] : !llvm.struct<(f32, f32, f32, f32, vector<4xf64>)>
  %r1 = llvm.insertvalue %s1, %r0[1] : !llvm.struct<(f32, f32, f32, f32, vector<4xf64>)>
  %r2 = llvm.insertvalue %s2, %r1[2] : !llvm.struct<(f32, f32, f32, f32, vector<4xf64>)>
  %r3 = llvm.insertvalue %s3, %r2[3] : !llvm.struct<(f32, f32, f32, f32, vector<4xf64>)>
  %r4 = llvm.insertvalue %s4, %r3[4] : !llvm.struct<(f32, f32, f32, f32, vector<4xf64>)>
  llvm.return %r4 : !llvm.struct<(f32, f32, f32, f32, vector<4xf64>)>
}

// -----

// Two products: the left one fuses, the right one is the addend.

// CHECK-LABEL: llvm.func @two_products
// CHECK-SAME:  (%[[A:.*]]: f32, %[[B:.*]]: f32)
// CHECK:       %[[R:.*]] = llvm.fmul %[[B]], %[[B]] {fastmathFlags = #llvm.fastmath<contract>} : f32
// CHECK:       %[[S:.*]] = llvm.intr.fma(%[[A]], %[[A]], %[[R]])
// CHECK:       llvm.return %[[S]]
llvm.func @two_products(%a: f32, %b: f32) -> f32 {
  %l = llvm.fmul %a, %a {fastmathFlags = #llvm.fastmath<contract>} : f32
  %r = llvm.fmul %b, %b {fastmathFlags = #llvm.fastmath<contract>} : f32
  %s = llvm.fadd %l, %r {fastmathFlags = #llvm.fastmath<contract>} : f32
  llvm.return %s : f32
}

// -----

// negative_: a product with another use, a product or a sum without
// `contract`, and a product in another block stay as they are, flags and
// all.

// CHECK-LABEL: llvm.func @negative_not_fused
// CHECK-NOT:   llvm.intr.fma
// CHECK:       %[[M0:.*]] = llvm.fmul %{{.*}}, %{{.*}} {fastmathFlags = #llvm.fastmath<contract>} : f32
// CHECK:       llvm.fadd %[[M0]], %{{.*}} {fastmathFlags = #llvm.fastmath<contract>} : f32
// CHECK:       llvm.fmul %[[M0]], %{{.*}} : f32
// CHECK:       %[[M1:.*]] = llvm.fmul %{{.*}}, %{{.*}} : f32
// CHECK:       llvm.fadd %[[M1]], %{{.*}} {fastmathFlags = #llvm.fastmath<contract>} : f32
// CHECK:       %[[M2:.*]] = llvm.fmul %{{.*}}, %{{.*}} {fastmathFlags = #llvm.fastmath<nnan, contract>} : f32
// CHECK:       llvm.fadd %[[M2]], %{{.*}} {fastmathFlags = #llvm.fastmath<afn>} : f32
// CHECK:       %[[M3:.*]] = llvm.fmul
// CHECK:       llvm.br ^bb1
// CHECK:       ^bb1:
// CHECK:       llvm.fadd %[[M3]], %{{.*}} {fastmathFlags = #llvm.fastmath<contract>} : f32
llvm.func @negative_not_fused(%a: f32, %b: f32, %c: f32) -> f32 {
  %m0 = llvm.fmul %a, %b {fastmathFlags = #llvm.fastmath<contract>} : f32
  %s0 = llvm.fadd %m0, %c {fastmathFlags = #llvm.fastmath<contract>} : f32
  %t0 = llvm.fmul %m0, %s0 : f32
  %m1 = llvm.fmul %a, %c : f32
  %s1 = llvm.fadd %m1, %t0 {fastmathFlags = #llvm.fastmath<contract>} : f32
  %m2 = llvm.fmul %b, %c {fastmathFlags = #llvm.fastmath<nnan, contract>} : f32
  %s2 = llvm.fadd %m2, %s1 {fastmathFlags = #llvm.fastmath<afn>} : f32
  %m3 = llvm.fmul %a, %s2 {fastmathFlags = #llvm.fastmath<contract>} : f32
  llvm.br ^bb1
^bb1:
  %s3 = llvm.fadd %m3, %b {fastmathFlags = #llvm.fastmath<contract>} : f32
  llvm.return %s3 : f32
}

// Two products: the one LLVM's Reassociate puts first fuses. It orders a
// commutative op's operands by rank (a later argument ranks higher, a
// product one above its higher factor): a*b + a*a is fma(a, a, a*b), and
// c*a + b*b is fma(b, b, c*a); equal ranks (b*c + c*b) keep their order.
// CHECK-LABEL: llvm.func @ranked_products
// CHECK-SAME:  (%[[A:.*]]: f32, %[[B:.*]]: f32, %[[C:.*]]: f32)
// CHECK:       %[[AB:.*]] = llvm.fmul %[[A]], %[[B]]
// CHECK:       llvm.intr.fma(%[[A]], %[[A]], %[[AB]])
// CHECK:       %[[CA:.*]] = llvm.fmul %[[C]], %[[A]]
// CHECK:       llvm.intr.fma(%[[B]], %[[B]], %[[CA]])
// CHECK:       %[[CB:.*]] = llvm.fmul %[[C]], %[[B]]
// CHECK:       llvm.intr.fma(%[[B]], %[[C]], %[[CB]])
llvm.func @ranked_products(%a: f32, %b: f32, %c: f32) -> !llvm.struct<(f32, f32, f32)> {
  %ab = llvm.fmul %a, %b {fastmathFlags = #llvm.fastmath<contract>} : f32
  %aa = llvm.fmul %a, %a {fastmathFlags = #llvm.fastmath<contract>} : f32
  %s0 = llvm.fadd %ab, %aa {fastmathFlags = #llvm.fastmath<contract>} : f32
  %ca = llvm.fmul %c, %a {fastmathFlags = #llvm.fastmath<contract>} : f32
  %bb = llvm.fmul %b, %b {fastmathFlags = #llvm.fastmath<contract>} : f32
  %s1 = llvm.fadd %ca, %bb {fastmathFlags = #llvm.fastmath<contract>} : f32
  %bc = llvm.fmul %b, %c {fastmathFlags = #llvm.fastmath<contract>} : f32
  %cb = llvm.fmul %c, %b {fastmathFlags = #llvm.fastmath<contract>} : f32
  %s2 = llvm.fadd %bc, %cb {fastmathFlags = #llvm.fastmath<contract>} : f32
  %u = llvm.mlir.undef : !llvm.struct<(f32, f32, f32)>
  %r0 = llvm.insertvalue %s0, %u[0] : !llvm.struct<(f32, f32, f32)>
  %r1 = llvm.insertvalue %s1, %r0[1] : !llvm.struct<(f32, f32, f32)>
  %r2 = llvm.insertvalue %s2, %r1[2] : !llvm.struct<(f32, f32, f32)>
  llvm.return %r2 : !llvm.struct<(f32, f32, f32)>
}

// -----

// Statistics per split: five, one, three, none.
// STATS: (S) 5 fused - multiply-adds fused into llvm.intr.fma
// STATS: (S) 1 fused - multiply-adds fused into llvm.intr.fma
// STATS: (S) 3 fused - multiply-adds fused into llvm.intr.fma
// STATS: (S) 0 fused - multiply-adds fused into llvm.intr.fma
