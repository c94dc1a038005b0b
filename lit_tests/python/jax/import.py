# RUN: %python %s | FileCheck %s
"""The IR tdf.jax.jit imports for the primitives whose semantics need care:
clamped dynamic slices, guarded scatter windows, scan/while carries as loop
arguments, argmax ties/NaN and the copy of an update that aliases its
destination."""

import jax.numpy as jnp
import numpy as np
from jax import lax

import tdf.jax


def run(f):
    print("\nTEST:", f.__name__)
    f()
    return f


def show(fun, *args, donate=()):
    print(tdf.jax.jit(fun, donate_argnums=donate).lower(*args).as_text())


# CHECK-LABEL: TEST: at_set_is_a_guarded_insert_slice
# CHECK: func.func @main(%[[CACHE:[^:]*]]: tensor<2x8x4xf32> {tdf.donate}, %[[ROW:[^:]*]]: tensor<2x4xf32>, %[[POS:[^:]*]]: tensor<i32>)
# CHECK: %[[OK:.*]] = arith.andi
# CHECK: %[[CLAMPED:.*]] = arith.minsi %{{.*}}, %c7_i32
# CHECK: %[[START:.*]] = arith.index_cast %[[CLAMPED]]
# CHECK: scf.if %[[OK]] -> (tensor<2x8x4xf32>)
# CHECK: tensor.insert_slice %[[ROW]] into %[[CACHE]][0, %[[START]], 0] [2, 1, 4] [1, 1, 1] : tensor<2x4xf32> into tensor<2x8x4xf32>
# CHECK: } else {
# CHECK-NEXT: scf.yield %[[CACHE]]
@run
def at_set_is_a_guarded_insert_slice():
    show(lambda c, r, p: c.at[:, p].set(r), np.zeros((2, 8, 4), np.float32),
         np.zeros((2, 4), np.float32), np.int32(3), donate=(0,))


# CHECK-LABEL: TEST: dynamic_update_slice_clamps_its_start
# CHECK: %[[LOW:.*]] = arith.maxsi %{{.*}}, %{{.*}} : i32
# CHECK: %[[HIGH:.*]] = arith.minsi %[[LOW]], %c5_i32 : i32
# CHECK: %[[START:.*]] = arith.index_cast %[[HIGH]] : i32 to index
# CHECK-NOT: scf.if
# CHECK: tensor.insert_slice %{{.*}} into %{{.*}}[%[[START]]] [3] [1]
@run
def dynamic_update_slice_clamps_its_start():
    show(lambda x, u, i: lax.dynamic_update_slice(x, u, (i,)), np.zeros(8, np.float32),
         np.ones(3, np.float32), np.int32(9))


# CHECK-LABEL: TEST: update_aliasing_its_destination_is_copied
# CHECK: %[[Y:.*]] = linalg.generic
# CHECK: %[[VIEW:.*]] = tensor.extract_slice %[[Y]][0] [3] [1]
# CHECK: %[[COPY:.*]] = linalg.generic {{.*}} ins(%[[VIEW]] : tensor<3xf32>)
# CHECK: tensor.insert_slice %[[COPY]] into %[[Y]][%{{.*}}] [3] [1]
@run
def update_aliasing_its_destination_is_copied():
    def fn(x):
        y = x + 1
        return lax.dynamic_update_slice(y, y[:3], (1,))
    show(fn, np.arange(4, dtype=np.float32))


# CHECK-LABEL: TEST: scan_carries_are_iter_args
# CHECK: func.func @main(%[[INIT:[^:]*]]: tensor<4xf32>, %[[XS:[^:]*]]: tensor<5x4xf32>)
# CHECK: %[[EMPTY:.*]] = tensor.empty() : tensor<5x4xf32>
# CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[C:.*]] = %[[INIT]], %[[YS:.*]] = %[[EMPTY]]) -> (tensor<4xf32>, tensor<5x4xf32>)
# CHECK: %[[X:.*]] = tensor.extract_slice %[[XS]][%[[I]], 0] [1, 4] [1, 1] : tensor<5x4xf32> to tensor<4xf32>
# CHECK: %[[NEXT:.*]] = linalg.generic {{.*}} ins(%[[C]], %[[X]] :
# CHECK: %[[Y:.*]] = linalg.generic {{.*}} ins(%[[C]], %[[X]] :
# CHECK: %[[YS2:.*]] = tensor.insert_slice %[[Y]] into %[[YS]][%[[I]], 0] [1, 4] [1, 1] : tensor<4xf32> into tensor<5x4xf32>
# CHECK: scf.yield %[[NEXT]], %[[YS2]]
@run
def scan_carries_are_iter_args():
    show(lambda c, xs: lax.scan(lambda a, x: (a + x, a * x), c, xs), np.zeros(4, np.float32),
         np.ones((5, 4), np.float32))


# CHECK-LABEL: TEST: while_state_is_scf_while_arguments
# CHECK: func.func @main(%[[CACHE:[^:]*]]: tensor<6xf32> {tdf.donate})
# CHECK: scf.while (%[[I:.*]] = %{{.*}}, %[[C:.*]] = %[[CACHE]]) : (tensor<i32>, tensor<6xf32>) -> (tensor<i32>, tensor<6xf32>)
# CHECK: scf.condition(%{{.*}}) %[[I]], %[[C]] : tensor<i32>, tensor<6xf32>
# CHECK: } do {
# CHECK: scf.if
# CHECK: tensor.insert_slice %{{.*}} into %[[C2:.*]][%{{.*}}] [1] [1]
@run
def while_state_is_scf_while_arguments():
    def fn(cache):
        body = lambda s: (s[0] + 1, s[1].at[s[0]].set(1.0))
        return lax.while_loop(lambda s: s[0] < 3, body, (0, cache))[1]
    show(fn, np.zeros(6, np.float32), donate=(0,))


# CHECK-LABEL: TEST: argmax_takes_strictly_greater_or_first_nan
# CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
# CHECK: ^bb0(%[[IN:.*]]: f32, %[[BEST:.*]]: f32, %[[BEST_I:.*]]: i32):
# CHECK: %[[GREATER:.*]] = arith.cmpf ogt, %[[IN]], %[[BEST]]
# CHECK: %[[IN_NAN:.*]] = arith.cmpf uno, %[[IN]], %[[IN]]
# CHECK: %[[BEST_OK:.*]] = arith.cmpf ord, %[[BEST]], %[[BEST]]
# CHECK: %[[FIRST_NAN:.*]] = arith.andi %[[IN_NAN]], %[[BEST_OK]]
# CHECK: %[[TAKE:.*]] = arith.ori %[[GREATER]], %[[FIRST_NAN]]
# CHECK: linalg.index 1
# CHECK: arith.select %[[TAKE]], %[[IN]], %[[BEST]]
@run
def argmax_takes_strictly_greater_or_first_nan():
    show(lambda x: jnp.argmax(x, 1), np.zeros((2, 5), np.float32))
