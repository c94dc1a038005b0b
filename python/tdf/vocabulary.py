"""The names and tables tdf's passes, compiler, runtime and frontends share.

One home for each fact that several modules need to agree on:

- the **attribute names** tdf reads and writes on functions, arguments and
  ops (``tdf.donate``, ``tdf.elementwise``, ...);
- the **op tables**: tensor ops whose result is a view of operand #0, memref
  view ops, destination-style tensor ops and the operand they update;
- the **element types**: the numpy dtype of every MLIR element type a
  compiled function takes or returns, the scalar types passed by value;
- the **byte sizes** of element and shaped types, as the lowered code
  allocates them (:func:`element_nbytes`, :func:`static_nbytes`);
- the **runtime ABI**: the functions of the tdf runtime that compiled code
  calls (``tdf_rt_bounds_error``, ...) and their arity, and the layout of
  the run-time check site table.

It imports nothing from tdf, so that both ``tdf`` and ``tdf.passes`` can
import it without cycles.
"""

from __future__ import annotations

import functools
import math

import ml_dtypes
import numpy as np
from mlir import ir

__all__ = [
    "DONATE_ATTR", "OUTLINED_ATTR", "WRITABLE_ATTR", "ACCESS_ATTR", "INPLACE_OPERANDS_ATTR", "RETURNED_ARGS_ATTR",
    "ELEMENTWISE_ATTR", "INPLACE_OK_ATTR", "INPLACE_VARIANT_ATTR", "INPLACE_OF_ATTR",
    "INPLACE_INDICES_ATTR", "STRIDED_OF_ATTR", "TRANSFER_ATTR", "RUNTIME_SITES_ATTR",
    "EMIT_C_INTERFACE_ATTR", "MEMORY_PLAN_ATTR", "ARENA_ATTR", "ASSUME_UNALIASED", "TENSOR_VIEW_OPS", "MEMREF_VIEW_OPS",
    "DEST_OPERAND", "DTYPES", "SCALAR_TYPES", "element_type_name", "element_nbytes",
    "static_nbytes", "BOUNDS_ERROR", "ALLOC_ERROR", "CONTRACT", "GPU_CONTRACT", "GPU_MEM_ALLOC", "GPU_MEM_FREE",
    "PARALLEL_FOR", "PARALLEL_BODY_ATTR", "SORT", "CONV", "CPU_ONLY_FUNCTIONS", "RUNTIME_FUNCTIONS",
    "SITE_SEPARATOR",
]

# ---------------------------------------------------------------- runtime ABI

#: The tdf runtime's failure functions that run-time checks call
#: (``python/src/Runtime.cpp``): a failed bounds check, a failed allocation.
BOUNDS_ERROR = "tdf_rt_bounds_error"
ALLOC_ERROR = "tdf_rt_alloc_error"
#: The BLAS route of contractions (``tdf-contractions-to-blas``,
#: ``python/src/Blas.cpp``): flags, three (pointer, offset) pairs, the rank
#: and (size, three strides) for each of up to six loop dimensions.
CONTRACT = "tdf_rt_contract"
#: The oneDNN route of named float32 convolutions
#: (``tdf-convolutions-to-dnnl``, ``python/src/Convolution.cpp``): flags and
#: the address of an i64 descriptor.
CONV = "tdf_rt_conv"
#: The cuBLAS route of contractions on the GPU path
#: (``tdf-contractions-to-cublas``, ``python/src/GpuRuntime.cpp``): the same
#: parameters, device pointers; defined in GPU programs' engines.
GPU_CONTRACT = "tdf_gpu_contract"
#: Device buffers from the runtime's stream-ordered pool
#: (``tdf-gpu-pooled-alloc``): MLIR's ``mgpuMemAlloc``/``mgpuMemFree``
#: arguments.
GPU_MEM_ALLOC = "tdf_gpu_mem_alloc"
GPU_MEM_FREE = "tdf_gpu_mem_free"
#: The thread pool (``python/src/Parallel.cpp``): ``(task, context, n)`` runs
#: ``task(context, t)`` for t in [0, n) on the caller and the pool's workers,
#: each with the caller's floating-point mode (``tdf-launch-parallel``; two
#: pointers and an i64).
PARALLEL_FOR = "tdf_rt_parallel_for"
#: The stable sort permutation of ``sort``/``top_k`` (``tdf.jax``,
#: ``python/src/Sort.cpp``): a kernel on memrefs, ``(memref<?x?x?xi64>
#: keys, memref<?x?xi64> perm)``, called through ``tdf.call``; its memrefs
#: are passed as expanded descriptors (16 parameters). CPU only.
SORT = "tdf_rt_sort"
#: Runtime kernels that exist only on the CPU (the GPU path refuses calls of
#: them): name → what calls them.
CPU_ONLY_FUNCTIONS = {SORT: "sort/top_k of tdf.jax.jit"}
#: The functions the tdf runtime defines in every engine (``tdf_gpu_contract``:
#: in GPU programs' engines): name → number of i64 parameters
#: (they return nothing; ``tdf_rt_sort``, ``tdf_rt_parallel_for``: see above).
RUNTIME_FUNCTIONS = {BOUNDS_ERROR: 5, ALLOC_ERROR: 2, CONTRACT: 32, CONV: 2, GPU_CONTRACT: 32,
                     PARALLEL_FOR: 3, SORT: 16}
#: Separates the fields of an entry of the run-time site table
#: (``RUNTIME_SITES_ATTR``: ``kind, function, op, location, dimension``).
SITE_SEPARATOR = "\x1f"

# ----------------------------------------------------------------- attributes

#: Function attribute of a parallel loop's launch declaration
#: (``tdf-outline-parallel``): the function running one task.
PARALLEL_BODY_ATTR = "tdf.parallel_body"
#: Argument attribute: the caller hands the argument's buffer over; the
#: function may update it in place (and return it).
DONATE_ATTR = "tdf.donate"
#: Function attribute of a function ``tdf-outline-deep-nests`` made: its
#: donated parameters carry no JAX pairing contract (``tdf-verify-inplace``'s
#: donation check and ``Report.pairings`` skip it).
OUTLINED_ATTR = "tdf.outlined"
#: One-Shot Bufferize's argument attribute: may the buffer be written.
WRITABLE_ATTR = "bufferization.writable"
#: One-Shot Bufferize's inferred access of an argument ("read", "write", ...).
ACCESS_ATTR = "bufferization.access"
#: One-Shot Bufferize's analysis result per op ("true"/"false"/"none" per operand).
INPLACE_OPERANDS_ATTR = "__inplace_operands_attr__"
#: Function attribute: per original result, the donated argument it was (or -1).
RETURNED_ARGS_ATTR = "tdf.returned_args"
#: Function attribute: the figures of ``tdf-plan-memory``'s plan (arena bytes,
#: lifetime lower bound, planned and kept allocations, ...).
MEMORY_PLAN_ATTR = "tdf.memory_plan"
#: Allocation attribute: the arena (or a result's bytes) of ``tdf-plan-memory``.
ARENA_ATTR = "tdf.arena"
#: Kernel attribute: the body is one parallel loop (any operand may be written
#: in place of any input it reads at the same index).
ELEMENTWISE_ATTR = "tdf.elementwise"
#: Kernel attribute: the (output, input) pairs that may share a buffer.
INPLACE_OK_ATTR = "tdf.inplace_ok"
#: Kernel attribute naming the in-place variant to call instead.
INPLACE_VARIANT_ATTR = "tdf.inplace_variant"
#: On a generated in-place variant: the kernel it was made from ...
INPLACE_OF_ATTR = "tdf.inplace_of"
#: ... and the in-place indices it implements.
INPLACE_INDICES_ATTR = "tdf.inplace_indices"
#: On a generated strided-layout variant: the kernel it was made from.
STRIDED_OF_ATTR = "tdf.strided_of"
#: On a ``gpu.memcpy``: ``"h2d"`` or ``"d2h"`` (a host<->device transfer).
TRANSFER_ATTR = "tdf.transfer"
#: Module attribute: the table of run-time check sites.
RUNTIME_SITES_ATTR = "tdf.runtime_sites"
#: Function attribute: emit the ``_mlir_ciface_`` C interface.
EMIT_C_INTERFACE_ATTR = "llvm.emit_c_interface"

# ------------------------------------------------------------------ op tables

#: The op whose result is its operand, promised not to alias anything else.
ASSUME_UNALIASED = "tdf.assume_unaliased"

#: Tensor ops whose result is a view of (shares the storage of) operand #0.
TENSOR_VIEW_OPS = frozenset({
    "tensor.extract_slice", "tensor.expand_shape", "tensor.collapse_shape",
    "tensor.reshape", "tensor.cast", "tensor.bitcast",
})

#: Memref ops whose result is a view of operand #0.
MEMREF_VIEW_OPS = frozenset({
    "memref.cast", "memref.subview", "memref.reinterpret_cast",
    "memref.expand_shape", "memref.collapse_shape", "memref.view",
    "memref.transpose", "memref.extract_strided_metadata",
})

#: Destination-style tensor ops: result 0 is operand ``DEST_OPERAND[name]``
#: updated (bufferized, they write into that operand's buffer).
DEST_OPERAND = {
    "tensor.insert_slice": 1,
    "tensor.insert": 1,
    "tensor.scatter": 1,
    "tensor.parallel_insert_slice": 1,
}

# -------------------------------------------------------------- element types

#: MLIR element type (as printed) -> numpy dtype of the arrays that hold it.
DTYPES = {
    "f64": np.dtype(np.float64),
    "f32": np.dtype(np.float32),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "i64": np.dtype(np.int64),
    "i32": np.dtype(np.int32),
    "i16": np.dtype(np.int16),
    "i8": np.dtype(np.int8),
    "i1": np.dtype(np.bool_),
    "index": np.dtype(np.int64),
}

#: Scalar types an entry function takes or returns by value.
SCALAR_TYPES = ("index", "i64", "i32", "i16", "i8", "i1", "f32", "f64")

# numpy dtype name -> MLIR element type (``index`` is no array's own type).
_ELEMENT_OF_DTYPE = {dtype.name: name for name, dtype in DTYPES.items() if name != "index"}


@functools.lru_cache(maxsize=256)
def element_type_name(dtype) -> str | None:
    """The MLIR element type (as printed) of numpy ``dtype``, or None when
    tdf has none for it (a frontend asks once per value it builds:
    ``np.dtype(...).name`` is microseconds, so the answer is kept)."""
    return _ELEMENT_OF_DTYPE.get(np.dtype(dtype).name)


# ----------------------------------------------------------------- byte sizes


def _padded(nbytes: int) -> int:
    """Bytes one element occupies in an array of them: LLVM's alloc size
    (the store size rounded up to the ABI alignment, a power of two up to
    16 bytes on the targets tdf lowers to)."""
    align = 1
    while align < nbytes and align < 16:
        align *= 2
    return (nbytes + align - 1) // align * align


def element_nbytes(element) -> int | None:
    """Bytes one element of type ``element`` (an ``ir.Type``) takes in
    memory, as the lowered code allocates it; None when unknown.

    ``i1`` takes one byte: both the CPU and the NVVM lowering store i1
    memrefs as i8 (``tdf-widen-i1-memrefs``), as numpy stores bool.
    ``index`` takes 8 bytes (64-bit targets). Other integers and floats take
    their width rounded up to whole bytes and to their alignment (``i24``:
    4, ``i33``: 8, ``f80``: 16); ``complex<T>`` twice ``T``; a vector its elements
    rounded up to its alignment."""
    if isinstance(element, ir.IndexType):
        return 8
    if isinstance(element, ir.ComplexType):
        inner = element_nbytes(ir.ComplexType(element).element_type)
        return None if inner is None else 2 * inner
    if isinstance(element, ir.VectorType):
        vector = ir.VectorType(element)
        inner = element_nbytes(vector.element_type)
        if inner is None or not vector.has_static_shape:
            return None
        return _padded(math.prod(vector.shape) * inner)
    width = getattr(element, "width", None)
    if width is None:
        try:  # a float type the bindings return undowncast (f80, f128)
            width = ir.FloatType(element).width
        except (TypeError, ValueError):
            return None
    if not isinstance(width, int) or width <= 0:
        return None
    return _padded((width + 7) // 8)


def static_nbytes(shaped) -> int | None:
    """Bytes of a statically shaped memref/tensor type (an ``ir.Type``):
    elements times :func:`element_nbytes`. None when a dimension is dynamic
    or the element size is unknown."""
    shaped = ir.ShapedType(shaped)
    if not shaped.has_rank or not shaped.has_static_shape:
        return None
    size = element_nbytes(shaped.element_type)
    if size is None:
        return None
    return math.prod(shaped.shape) * size
