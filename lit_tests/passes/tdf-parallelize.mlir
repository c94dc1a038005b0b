// RUN: tdf-opt %s --tdf-parallelize | FileCheck %s
// RUN: tdf-opt %s --pass-pipeline="builtin.module(tdf-parallelize{threads=3 min-elements=8})" | FileCheck %s --check-prefix=THREE
// RUN: tdf-opt %s --pass-pipeline="builtin.module(tdf-parallelize{threads=1})" | FileCheck %s --check-prefix=ONE
// RUN: tdf-opt %s --pass-pipeline="builtin.module(tdf-parallelize{min-chunk-work=262144})" | FileCheck %s --check-prefix=LOW
// RUN: not tdf-opt %s --pass-pipeline="builtin.module(tdf-parallelize{threads=0})" 2>&1 | FileCheck %s --check-prefix=BADOPT

// BADOPT: error: threads, min-elements and min-chunk-work must be positive, got 0, 262144 and 1048576
// ONE-NOT: scf.parallel

// 512 x 512 = 262144 iterations: two chunks of 256 rows (a static size:
// 2 divides 512), each a subview of every operand, the op itself unchanged
// inside.
// CHECK-LABEL: func.func @exp_rows
// CHECK-SAME:    (%[[X:[^:]+]]: memref<512x512xf32>, %[[Y:[^:]+]]: memref<512x512xf32>)
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[C2:.*]] = arith.constant 2 : index
// CHECK:         scf.parallel (%[[T:.*]]) = (%[[C0]]) to (%[[C2]]) step
// CHECK:           %[[C256:.*]] = arith.constant 256 : index
// CHECK:           %[[LO:.*]] = arith.muli %[[T]], %[[C256]] : index
// CHECK:           %[[XS:.*]] = memref.subview %[[X]][%[[LO]], 0] [256, 512] [1, 1] : memref<512x512xf32> to memref<256x512xf32, strided<[512, 1], offset: ?>>
// CHECK:           %[[YS:.*]] = memref.subview %[[Y]][%[[LO]], 0] [256, 512] [1, 1]
// CHECK:           linalg.generic {{.*}} ins(%[[XS]] : {{.*}}) outs(%[[YS]] : {{.*}})
// CHECK:             math.exp
// CHECK:           scf.reduce
// Three chunks of 512 rows: ceil(512 / 3) = 171 rows, the last one 170 (a
// dynamic size, the minimum of 171 and what is left).
// THREE-LABEL: func.func @exp_rows
// THREE:         %[[THREE:.*]] = arith.constant 3 : index
// THREE:         scf.parallel (%[[T:.*]]) = (%{{.*}}) to (%[[THREE]])
// THREE:           %[[LO:.*]] = arith.muli %[[T]], %{{.*}} : index
// THREE:           %[[LEN:.*]] = arith.minsi
// THREE:           memref.subview %{{.*}}[%[[LO]], 0] [%[[LEN]], 512] [1, 1] : memref<512x512xf32> to memref<?x512xf32, strided<[512, 1], offset: ?>>
func.func @exp_rows(%x: memref<512x512xf32>, %y: memref<512x512xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<512x512xf32>) outs(%y : memref<512x512xf32>) {
  ^bb0(%a: f32, %o: f32):
    %l = math.exp %a : f32
    linalg.yield %l : f32
  }
  return
}

// A row reduction is cut along its rows (each row's sum stays in one chunk);
// a broadcast input without the row loop is passed whole. Work: 2 MiB read
// plus two flops on each of 512K iterations, 3 MiB: two chunks.
// CHECK-LABEL: func.func @row_sums
// CHECK:         scf.parallel
// CHECK:           %[[XS:.*]] = memref.subview %{{.*}}[%{{.*}}, 0] [256, 1024]
// CHECK:           %[[SS:.*]] = memref.subview %{{.*}}[%{{.*}}] [256] [1]
// CHECK:           linalg.generic {{.*}} ins(%[[XS]], %{{[^ ]+}} : {{.*}}, memref<1024xf32>) outs(%[[SS]] :
func.func @row_sums(%x: memref<512x1024xf32>, %w: memref<1024xf32>, %s: memref<512xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x, %w : memref<512x1024xf32>, memref<1024xf32>) outs(%s : memref<512xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  return
}

// Left alone: small; a reduction outermost; a body that calls a function;
// an in-place op whose input is its output through another map (a
// transpose into itself: chunks would race); dynamic sizes.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT:     scf.parallel
func.func private @g(f32) -> f32
func.func @left_alone(%small: memref<64x64xf32>, %x: memref<1024x1024xf32>, %v: memref<1024xf32>,
                      %d: memref<?x?xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      outs(%small : memref<64x64xf32>) {
  ^bb0(%o: f32):
    %n = arith.negf %o : f32
    linalg.yield %n : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<1024x1024xf32>) outs(%v : memref<1024xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      outs(%x : memref<1024x1024xf32>) {
  ^bb0(%o: f32):
    %r = func.call @g(%o) : (f32) -> f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<1024x1024xf32>) outs(%x : memref<1024x1024xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      outs(%d : memref<?x?xf32>) {
  ^bb0(%o: f32):
    %n = arith.negf %o : f32
    linalg.yield %n : f32
  }
  return
}

// A non-strided layout map: no subview of it can be taken; left alone.
// CHECK-LABEL: func.func @non_strided
// CHECK-NOT:     scf.parallel
func.func @non_strided(%x: memref<1024x1024xf32, affine_map<(d0, d1) -> (d1 floordiv 2, d0, d1 mod 2)>>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      outs(%x : memref<1024x1024xf32, affine_map<(d0, d1) -> (d1 floordiv 2, d0, d1 mod 2)>>) {
  ^bb0(%o: f32):
    %n = arith.negf %o : f32
    linalg.yield %n : f32
  }
  return
}

// Too little work for two chunks: the first stage of a whole-array sum of
// 256K floats (1 MiB read, one add per element: 1.25 MiB of work), alone in
// its function, stays one loop (on two threads it took 1.35-1.5x the
// one-thread time). With `min-chunk-work` lowered to 256 KiB it is cut.
// CHECK-LABEL: func.func @negative_cheap_sum
// CHECK-NOT:     scf.parallel
// CHECK:         linalg.generic
// CHECK-SAME:      ins(%{{.*}} : memref<16x16384xf32>)
// CHECK-NOT:     scf.parallel
// CHECK:         return
// LOW-LABEL:   func.func @negative_cheap_sum
// LOW:           scf.parallel
// LOW:             arith.addf
func.func @negative_cheap_sum(%x: memref<16x16384xf32>, %p: memref<16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<16x16384xf32>) outs(%p : memref<16xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  }
  return
}

// The same cheap sum beside an exp-sum (5 MiB of work): the function's
// work pays for two chunks, and every loop of it is cut (the workers, woken
// by the first, spin between the loops).
// CHECK-LABEL: func.func @cheap_sum_beside_exp
// CHECK:         scf.parallel
// CHECK:           arith.addf
// CHECK:         scf.parallel
// CHECK:           math.exp
func.func @cheap_sum_beside_exp(%x: memref<16x16384xf32>, %p: memref<16xf32>, %q: memref<16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<16x16384xf32>) outs(%p : memref<16xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<16x16384xf32>) outs(%q : memref<16xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %e = math.exp %a : f32
    %r = arith.addf %acc, %e : f32
    linalg.yield %r : f32
  }
  return
}

// A GEMM left to tdf-vectorize-contractions (16x256x256: 2^20 iterations)
// is cut along its rows into two chunks of 8, a static size that pass
// vectorizes.
// CHECK-LABEL: func.func @gemm_rows
// CHECK:         scf.parallel
// CHECK:           memref.subview {{.*}} [8, 256] [1, 1] : memref<16x256xf32> to memref<8x256xf32, strided<[256, 1], offset: ?>>
// CHECK:           linalg.contract {{.*}} ins({{.*}} : memref<8x256xf32, strided<[256, 1], offset: ?>>, memref<256x256xf32>) outs({{.*}} : memref<8x256xf32, strided<[256, 1], offset: ?>>)
func.func @gemm_rows(%a: memref<16x256xf32>, %b: memref<256x256xf32>, %c: memref<16x256xf32>) {
  linalg.contract indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                   affine_map<(m, n, k) -> (k, n)>,
                                   affine_map<(m, n, k) -> (m, n)>]
      ins(%a, %b : memref<16x256xf32>, memref<256x256xf32>) outs(%c : memref<16x256xf32>)
  return
}

// 15 rows in two chunks would be 8 and 7 rows (a dynamic size, which
// tdf-vectorize-contractions does not take): the GEMM is not cut.
// CHECK-LABEL: func.func @negative_gemm_uneven_rows
// CHECK-NOT:     scf.parallel
// CHECK:         linalg.matmul ins({{.*}} : memref<15x256xf32>, memref<256x256xf32>)
func.func @negative_gemm_uneven_rows(%a: memref<15x256xf32>, %b: memref<256x256xf32>,
                                     %c: memref<15x256xf32>) {
  linalg.matmul ins(%a, %b : memref<15x256xf32>, memref<256x256xf32>) outs(%c : memref<15x256xf32>)
  return
}

// Two slots of one planned arena: A at bytes [0, 131072) and C at [131072,
// 262144) share no byte, so the GEMM is cut; C at 65536 overlaps A (read
// through another map), so that one is not.
// CHECK-LABEL: func.func @gemm_arena_slots
// CHECK:         scf.parallel
// CHECK:           linalg.contract
// CHECK-NOT:     scf.parallel
// CHECK:         linalg.contract {{.*}} outs({{.*}} : memref<64x512xf32>)
func.func @gemm_arena_slots(%b: memref<512x512xf32>) {
  %arena = memref.alloc() : memref<262144xi8>
  %c0 = arith.constant 0 : index
  %c65536 = arith.constant 65536 : index
  %c131072 = arith.constant 131072 : index
  %a = memref.view %arena[%c0][] : memref<262144xi8> to memref<64x512xf32>
  %c = memref.view %arena[%c131072][] : memref<262144xi8> to memref<64x512xf32>
  linalg.contract indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                   affine_map<(m, n, k) -> (k, n)>,
                                   affine_map<(m, n, k) -> (m, n)>]
      ins(%a, %b : memref<64x512xf32>, memref<512x512xf32>) outs(%c : memref<64x512xf32>)
  %d = memref.view %arena[%c65536][] : memref<262144xi8> to memref<64x512xf32>
  linalg.contract indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                   affine_map<(m, n, k) -> (k, n)>,
                                   affine_map<(m, n, k) -> (m, n)>]
      ins(%a, %b : memref<64x512xf32>, memref<512x512xf32>) outs(%d : memref<64x512xf32>)
  return
}
