// RUN: tdf-opt %s --split-input-file --tdf-donate | FileCheck %s --check-prefix=ATTRS
// RUN: tdf-opt %s --split-input-file --pass-pipeline="builtin.module(tdf-donate, one-shot-bufferize{%one_shot_options}, canonicalize, cse)" | FileCheck %s --check-prefix=BUF
// RUN: tdf-opt %s --tdf-donate --mlir-pass-statistics 2>&1 >/dev/null | FileCheck %s --check-prefix=STATS

// A donated KV cache: the row update writes the argument's buffer directly.
// ATTRS-LABEL: func.func @donated_cache_updated_in_place
// ATTRS-SAME: %{{.*}}: tensor<4x8xf32> {bufferization.writable = true, tdf.donate}
// ATTRS-SAME: %{{.*}}: tensor<1x8xf32> {bufferization.writable = false}
// ATTRS-SAME: %{{.*}}: index)
// BUF-LABEL: func.func @donated_cache_updated_in_place
// BUF-SAME: (%[[CACHE:[^:]*]]: memref<4x8xf32>{{.*}}, %[[ROW:[^:]*]]: memref<1x8xf32>, %[[POS:[^:]*]]: index)
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: %[[SLOT:.*]] = memref.subview %[[CACHE]][%[[POS]], 0] [1, 8] [1, 1]
// BUF: memref.copy %[[ROW]], %[[SLOT]]
// BUF-NOT: memref.copy
// BUF: return %[[CACHE]]
// STATS: tdf-donate
// STATS-DAG: (S) 2 donated
// STATS-DAG: (S) 3 readonly
// STATS-DAG: (S) 1 unusable
func.func @donated_cache_updated_in_place(%cache: tensor<4x8xf32> {tdf.donate}, %row: tensor<1x8xf32>, %pos: index) -> tensor<4x8xf32> {
  %updated = tensor.insert_slice %row into %cache[%pos, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<4x8xf32>
  return %updated : tensor<4x8xf32>
}

// -----

// Without donation the caller's cache is never written: the whole tensor is
// copied and the row is written into the copy.
// ATTRS-LABEL: func.func @negative_cache_not_donated
// ATTRS-SAME: %{{.*}}: tensor<4x8xf32> {bufferization.writable = false}
// BUF-LABEL: func.func @negative_cache_not_donated
// BUF-SAME: (%[[CACHE:[^:]*]]: memref<4x8xf32>{{.*}}, %[[ROW:[^:]*]]: memref<1x8xf32>, %[[POS:[^:]*]]: index)
// BUF: %[[COPY:.*]] = memref.alloc() {{.*}} : memref<4x8xf32>
// BUF: memref.copy %[[CACHE]], %[[COPY]]
// BUF: %[[SLOT:.*]] = memref.subview %[[COPY]][%[[POS]], 0]
// BUF: memref.copy %[[ROW]], %[[SLOT]]
// BUF: return %[[COPY]]
func.func @negative_cache_not_donated(%cache: tensor<4x8xf32>, %row: tensor<1x8xf32>, %pos: index) -> tensor<4x8xf32> {
  %updated = tensor.insert_slice %row into %cache[%pos, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<4x8xf32>
  return %updated : tensor<4x8xf32>
}

// -----

// A donated argument that no result has the type of and nothing updates.
// ATTRS-LABEL: func.func @unusable_donation
// ATTRS-SAME: %{{.*}}: tensor<4xf32> {bufferization.writable = true, tdf.donate}
func.func @unusable_donation(%x: tensor<4xf32> {tdf.donate}) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8xf32>
  return %e : tensor<8xf32>
}

// -----

// Kernel declarations (memref parameters) are left alone.
// ATTRS-LABEL: func.func private @kernel
// ATTRS-SAME: (memref<4xf32>, memref<4xf32>)
// ATTRS-NOT: bufferization.writable
func.func private @kernel(memref<4xf32>, memref<4xf32>)
