"""The CPU runtime of compiled tdf programs: argument specs, the call
wrappers (native, ``tdf._tdf.NativeEntry`` in ``python/src/Runtime.cpp``),
memref descriptors for measurements and the allocation counter.

A compiled entry function ``@f`` is called through the packed wrapper of its C
interface (``_mlir_ciface_f``, emitted because the compiler marks entry
functions ``llvm.emit_c_interface``): every tensor argument is passed as a
pointer to a ranked memref descriptor that points straight at the numpy
array's data (no copy), scalars by value, and results come back in a result
struct of descriptors and scalars (a single scalar result by value). Scalar
results are returned as numpy scalars of their dtype. :class:`EntryFunction` is a Python subclass of
the native class: the call (checks, descriptors on the C stack, the call with
the GIL released, result arrays) is C++; unusual arguments and every error
message go through its Python methods. Calls are thread-safe (per-call state),
and failures of the compiled run-time checks (``tdf-bounds-checks``,
``tdf-alloc-checks``) come back as ``IndexError``/``MemoryError`` through a
longjmp to the call's trampoline (see ``docs/Runtime.md``).

Conventions (see ``docs/Runtime.md``):

- a **donated** argument (``tdf.donate``) is updated in place; a result that
  is that updated argument is returned as the very same numpy array object.
  It must be a writeable, C-contiguous array of the exact dtype and shape, and
  must not overlap any other argument (``ValueError`` otherwise);
- a **non-donated** argument is never written. A non-contiguous array is
  copied into a contiguous one first (correct result, one copy);
- every other result is a fresh numpy array that owns its memory (freed with
  the C allocator when the array is garbage collected);
- wrong argument count, dtype or shape raise ``TypeError``/``ValueError``
  naming the function and the argument;
- a dynamic dimension (``tensor<?x8xf32>``) takes the argument's size at call
  time (sizes and strides written per call); a dynamic result's sizes are
  those of the descriptor the compiled code returns.

Allocation counting (``tdf.compile(..., count_allocations=True)``): the
program is lowered with ``finalize-memref-to-llvm{use-generic-functions}``, so
every heap allocation and deallocation of the compiled code calls
``_mlir_memref_to_llvm_alloc``/``_aligned_alloc``/``_free``;
:class:`AllocationCounter` defines those three symbols for that program's
engine (ctypes callbacks around ``malloc``/``aligned_alloc``/``free``) and
counts calls, bytes, live and peak live bytes. Result arrays that own a
counted buffer free it through the counter too. Programs compiled without
counting use the plain ``malloc``/``free`` lowering: no cost.
"""

from __future__ import annotations

import ctypes
import ctypes.util

import ml_dtypes
import numpy as np
from mlir import ir  # (loads the MLIR libraries the extension links, before it)

from . import _tdf
from .errors import CompileError
from .passes.ir_utils import arg_dicts, function_type, sym_name
from .vocabulary import DONATE_ATTR, DTYPES, SCALAR_TYPES

__all__ = [
    "DTYPES",
    "TensorSpec",
    "ScalarSpec",
    "value_spec",
    "signature",
    "EntryFunction",
    "memref_descriptor_type",
    "AllocationCounter",
    "AllocationStats",
    "register_runtime_symbols",
]

# MLIR scalar type → (ctypes type, Python kind, integer bits).
_SCALARS = {
    "f64": (ctypes.c_double, float, 0),
    "f32": (ctypes.c_float, float, 0),
    "i64": (ctypes.c_int64, int, 64),
    "i32": (ctypes.c_int32, int, 32),
    "i16": (ctypes.c_int16, int, 16),
    "i8": (ctypes.c_int8, int, 8),
    "i1": (ctypes.c_bool, bool, 1),
    "index": (ctypes.c_int64, int, 64),
}

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
_free = _libc.free
_free.argtypes = [ctypes.c_void_p]
_free.restype = None

_malloc = _libc.malloc
_malloc.argtypes = [ctypes.c_size_t]
_malloc.restype = ctypes.c_void_p
_aligned_alloc = _libc.aligned_alloc
_aligned_alloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
_aligned_alloc.restype = ctypes.c_void_p

_DESCRIPTOR_TYPES: dict[int, type] = {}


class AllocationStats:
    """Run-time allocations of a compiled program since the last reset:
    ``calls`` (allocations made), ``frees``, ``bytes`` (total bytes
    allocated), ``live_bytes`` (allocated by the compiled code and not yet
    freed, including buffers still owned by result arrays) and
    ``peak_bytes`` (the highest ``live_bytes`` since the reset)."""

    __slots__ = ("calls", "frees", "bytes", "live_bytes", "peak_bytes")

    def __init__(self, calls, frees, bytes_, live_bytes, peak_bytes):
        self.calls = calls
        self.frees = frees
        self.bytes = bytes_
        self.live_bytes = live_bytes
        self.peak_bytes = peak_bytes

    def as_dict(self) -> dict:
        """The fields as a plain dict (JSON-able)."""
        return {k: getattr(self, k) for k in self.__slots__}

    def __eq__(self, other):
        return isinstance(other, AllocationStats) and self.as_dict() == other.as_dict()

    def __repr__(self):
        return ("AllocationStats(" + ", ".join(f"{k}={getattr(self, k)}" for k in self.__slots__)
                + ")")


class AllocationCounter:
    """Counting definitions of ``_mlir_memref_to_llvm_alloc``,
    ``_mlir_memref_to_llvm_aligned_alloc`` and ``_mlir_memref_to_llvm_free``
    for one ExecutionEngine (call :meth:`register` before
    ``engine.initialize()``). Memory comes from the C allocator, so buffers
    stay compatible with ``free``; :meth:`free` is what result arrays call."""

    _ALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t)
    _ALIGNED = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t)
    _FREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

    def __init__(self):
        self._sizes: dict[int, int] = {}
        self._live = 0
        self.reset()
        # The callbacks must live as long as the engine: the counter is kept
        # by the program and by every entry function.
        self._alloc_cb = self._ALLOC(self._alloc)
        self._aligned_cb = self._ALIGNED(self._aligned)
        self._free_cb = self._FREE(self.free)

    def register(self, engine) -> None:
        """Defines the three generic allocation symbols in ``engine``."""
        for name, cb in (("_mlir_memref_to_llvm_alloc", self._alloc_cb),
                         ("_mlir_memref_to_llvm_aligned_alloc", self._aligned_cb),
                         ("_mlir_memref_to_llvm_free", self._free_cb)):
            engine.raw_register_runtime(name, ctypes.cast(cb, ctypes.c_void_p))

    def reset(self) -> None:
        """Zeroes calls, frees and bytes; the peak restarts at the current
        live bytes (buffers still alive stay tracked)."""
        self._calls = 0
        self._frees = 0
        self._bytes = 0
        self._peak = self._live

    def stats(self) -> AllocationStats:
        """The counters since the last :meth:`reset`."""
        return AllocationStats(self._calls, self._frees, self._bytes, self._live, self._peak)

    def _note(self, pointer, size):
        if pointer:
            self._sizes[pointer] = size
            self._calls += 1
            self._bytes += size
            self._live += size
            if self._live > self._peak:
                self._peak = self._live
        return pointer

    def _alloc(self, size):
        return self._note(_malloc(size), size)

    def _aligned(self, alignment, size):
        # aligned_alloc wants a size that is a multiple of the alignment.
        rounded = (size + alignment - 1) // alignment * alignment
        return self._note(_aligned_alloc(alignment, max(rounded, alignment)), size)

    def free(self, pointer) -> None:
        """Frees a buffer (counted when this counter allocated it)."""
        if pointer:
            size = self._sizes.pop(pointer, None)
            if size is not None:
                self._live -= size
                self._frees += 1
            _free(pointer)


def memref_descriptor_type(rank: int) -> type:
    """The ctypes struct of a ranked memref descriptor (allocated pointer,
    aligned pointer, offset, sizes[rank], strides[rank]); one class per rank."""
    cls = _DESCRIPTOR_TYPES.get(rank)
    if cls is None:
        fields = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p),
                  ("offset", ctypes.c_int64)]
        if rank:
            fields += [("sizes", ctypes.c_int64 * rank), ("strides", ctypes.c_int64 * rank)]
        cls = type(f"MemRefDescriptor{rank}D", (ctypes.Structure,), {"_fields_": fields})
        _DESCRIPTOR_TYPES[rank] = cls
    return cls


class TensorSpec:
    """A tensor parameter or result: shape, numpy dtype, MLIR type text and
    (for parameters) whether it is donated. A dynamic dimension (``?``) is
    ``-1`` in ``shape``: its size is taken from the argument at call time (a
    result's from the descriptor the compiled code returns); ``nbytes`` and
    ``strides`` are then None."""

    __slots__ = ("shape", "dtype", "type_text", "donated", "nbytes", "strides")

    def __init__(self, shape, dtype, type_text, donated=False):
        self.shape = tuple(-1 if int(s) < 0 else int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.type_text = type_text
        self.donated = bool(donated)
        if self.dynamic:
            self.nbytes = self.strides = None
            return
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        self.strides = _row_major(self.shape)

    @property
    def dynamic(self) -> bool:
        """True when some dimension is dynamic."""
        return any(s < 0 for s in self.shape)

    def matches(self, shape) -> bool:
        """True when an array of ``shape`` fits: same rank, every static
        dimension equal."""
        return len(shape) == len(self.shape) and all(
            want < 0 or have == want for have, want in zip(shape, self.shape))

    def shape_text(self) -> str:
        """The shape with ``?`` for dynamic dimensions (for messages)."""
        return "(" + ", ".join("?" if s < 0 else str(s) for s in self.shape) + \
            ("," if len(self.shape) == 1 else "") + ")"

    def __repr__(self):
        return f"TensorSpec({self.type_text}{', donated' if self.donated else ''})"


class ScalarSpec:
    """A scalar parameter or result (index, integer, i1 or float) passed by
    value. A scalar result comes back as a numpy scalar of its dtype
    (``np.int32``, ``np.float32``, ``np.bool_``; ``index`` is ``np.int64``)."""

    __slots__ = ("type_text", "ctype", "kind", "bits")

    def __init__(self, type_text):
        self.type_text = type_text
        self.ctype, self.kind, self.bits = _SCALARS[type_text]

    def convert(self, value):
        """``value`` as the Python number passed for this type. Raises
        ``TypeError`` (with the message only) for a value of another kind (a
        bool for a number, a float for an integer) and ``ValueError`` for an
        integer that does not fit."""
        if self.kind is float:
            if isinstance(value, (bool, np.bool_)) or \
                    not isinstance(value, (int, float, np.integer, np.floating)):
                raise TypeError(f"expected a number, got {type(value).__name__}")
            return float(value)
        if self.kind is bool:
            if not isinstance(value, (bool, np.bool_)):
                raise TypeError(f"expected a bool, got {type(value).__name__}")
            return bool(value)
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"expected an integer, got {type(value).__name__}")
        value = int(value)
        low, high = -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1
        if not low <= value <= high:
            raise ValueError(f"{value} does not fit in {self.type_text}")
        return value

    def __repr__(self):
        return f"ScalarSpec({self.type_text})"


def _unsupported(where, type_) -> CompileError:
    """The error for a parameter/result type the CPU call path cannot pass:
    names the function, the argument/result and the type."""
    return CompileError(f"{where}: unsupported type {type_} (an entry function's arguments and "
                        f"results must be ranked tensors of {', '.join(DTYPES)}, or scalars "
                        f"of type {', '.join(SCALAR_TYPES)})")


def value_spec(type_, where: str, donated: bool = False):
    """A :class:`TensorSpec` for a ranked tensor type, a :class:`ScalarSpec`
    for a scalar of :data:`tdf.vocabulary.SCALAR_TYPES`; ``CompileError``
    naming ``where`` (``"@f argument #0"``) and the type otherwise."""
    if isinstance(type_, ir.RankedTensorType):
        t = ir.RankedTensorType(type_)
        element = str(t.element_type)
        if element not in DTYPES:
            raise CompileError(f"{where}: unsupported element type {element} in {type_} "
                               f"(supported: {', '.join(DTYPES)})")
        return TensorSpec(t.shape, DTYPES[element], str(type_), donated)
    if str(type_) in SCALAR_TYPES:
        return ScalarSpec(str(type_))
    raise _unsupported(where, type_)


def signature(func) -> tuple[list, list]:
    """The specs of the parameters (donated: ``tdf.donate``) and of the
    results of ``func.func`` op ``func``."""
    name = sym_name(func)
    ftype = function_type(func)
    dicts = arg_dicts(func)
    params = [value_spec(t, f"@{name} argument #{i}", DONATE_ATTR in dicts[i])
              for i, t in enumerate(ftype.inputs)]
    results = [value_spec(t, f"@{name} result #{i}") for i, t in enumerate(ftype.results)]
    return params, results


def _row_major(shape) -> tuple:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


_SCALAR_CODES = {"f64": "d", "f32": "f", "i64": "q", "index": "q", "i32": "i", "i16": "h",
                 "i8": "b", "i1": "?"}


_RUNTIME_SYMBOLS = dict(_tdf.runtime_symbols())


def register_runtime_symbols(engine) -> None:
    """Defines the functions compiled run-time checks call
    (``tdf_rt_bounds_error``, ``tdf_rt_alloc_error``) in ``engine``; call
    before ``engine.initialize()``."""
    for name, address in _RUNTIME_SYMBOLS.items():
        engine.raw_register_runtime(name, ctypes.c_void_p(address))


def _fill_static(desc, spec: TensorSpec, shape=None) -> None:
    desc.offset = 0
    shape = spec.shape if shape is None else tuple(shape)
    for i, (size, stride) in enumerate(zip(shape, _row_major(shape))):
        desc.sizes[i] = size
        desc.strides[i] = stride


_FREE_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class EntryFunction(_tdf.NativeEntry):
    """A callable compiled entry function: ``fn(*arrays_and_scalars)``.

    ``params`` are :class:`TensorSpec`/:class:`ScalarSpec` per argument,
    ``results`` the :class:`TensorSpec`/:class:`ScalarSpec` of every
    original result (a scalar result is returned as a numpy scalar) and
    ``returned_args[i]`` the donated argument that result ``i`` is (or -1):
    such results are not returned by the compiled code, the caller's array is
    returned instead. ``address`` is the address of the packed wrapper of the
    ``_mlir_ciface_`` function (what ``ExecutionEngine.raw_lookup`` returns).
    ``keepalive`` is held for as long as the function lives (the engine).
    ``free`` frees a result buffer the compiled code allocated (default: the
    C ``free``; an :class:`AllocationCounter`'s ``free`` when counting).
    ``sites`` is the program's table of run-time check sites
    (``(kind, function, op, location, dimension)``, see
    ``passes/_runtime_sites.py``), used to word ``IndexError``/``MemoryError``.
    ``shared_state=True`` (only for measuring) makes calls share one set of
    descriptors under a lock instead of per-call descriptors on the stack.

    The call itself is native (``tdf._tdf.NativeEntry``, ``python/src/Runtime.cpp``):
    argument checks, descriptors, the call (GIL released) and result arrays are
    C++; only unusual arguments (a subclass, a non-contiguous array to copy, a
    numpy scalar) and every error message go through the Python methods below.
    """

    def __init__(self, name, params, results, returned_args, address, keepalive=None,
                 free=None, sites=(), shared_state=False):
        self.name = name
        self.params = list(params)
        self.results = list(results)
        self.returned_args = list(returned_args)
        self.address = int(address)
        self._keepalive = keepalive
        self._free = free if free is not None else _free
        free_address = 0
        if free is not None:
            owner = getattr(free, "__self__", None)
            if isinstance(owner, AllocationCounter):
                callback = owner._free_cb
            else:
                callback = _FREE_CALLBACK(free)
            self._free_callback = callback  # kept alive with the function
            free_address = ctypes.cast(callback, ctypes.c_void_p).value
        native_params = []
        for spec in self.params:
            if isinstance(spec, TensorSpec):
                native_params.append(("tensor", spec.dtype, spec.shape, spec.donated))
            else:
                native_params.append(("scalar", _SCALAR_CODES.get(spec.type_text, "x")))
        native_results = []
        for r, a in zip(self.results, self.returned_args):
            if isinstance(r, ScalarSpec):
                native_results.append((int(a), DTYPES[r.type_text], (), "scalar"))
            else:
                native_results.append((int(a), r.dtype, r.shape, "tensor"))
        super().__init__(name, self.address, native_params, native_results, free_address,
                         [tuple(site) for site in sites], shared_state)
        self._tensor_indices = [i for i, s in enumerate(self.params) if isinstance(s, TensorSpec)]
        self._donated_indices = [i for i in self._tensor_indices if self.params[i].donated]

    # -- argument checks (the native call's slow path and messages) --------

    def _error(self, index, message, kind=ValueError):
        return kind(f"@{self.name}: argument #{index} ({self.params[index].type_text}"
                    f"{', donated' if getattr(self.params[index], 'donated', False) else ''}): {message}")

    def _check_array(self, index, spec, value):
        """Returns the array to pass (possibly a contiguous copy) or raises."""
        if not spec.shape and not isinstance(value, np.ndarray):
            value = self._rank0_array(index, spec, value)
        if not isinstance(value, np.ndarray):
            raise self._error(index, f"expected a numpy array, got {type(value).__name__}", TypeError)
        if value.dtype != spec.dtype:
            raise self._error(index, f"expected dtype {spec.dtype}, got {value.dtype}", TypeError)
        if not spec.matches(value.shape):
            raise self._error(index, f"expected shape {spec.shape_text() if spec.dynamic else spec.shape}, "
                                     f"got {value.shape}")
        if not value.flags.c_contiguous:
            if spec.donated:
                raise self._error(index, "a donated array must be C-contiguous to be updated in place "
                                         "(pass np.ascontiguousarray(x) and use the returned array)")
            value = np.ascontiguousarray(value)
        if spec.donated and not value.flags.writeable:
            raise self._error(index, "a donated array must be writeable")
        return value

    def _rank0_array(self, index, spec, value):
        """A numpy or Python scalar for a rank-0 tensor parameter, as a 0-d
        array of the parameter's dtype (``TypeError`` for a value of another
        kind, ``ValueError`` for an integer that does not fit)."""
        kind = spec.dtype.kind
        if isinstance(value, (bool, np.bool_)):
            ok = kind == "b"
        elif isinstance(value, (int, np.integer)):
            ok = kind in "iuf" or spec.dtype == ml_dtypes.bfloat16
            if ok and kind in "iu":
                info = np.iinfo(spec.dtype)
                if not info.min <= int(value) <= info.max:
                    raise self._error(index, f"{value} does not fit in {spec.dtype}")
        elif isinstance(value, (float, np.floating)):
            ok = kind == "f" or spec.dtype == ml_dtypes.bfloat16
        else:
            return value
        if not ok:
            raise self._error(index, f"expected a {spec.dtype} scalar, got "
                                     f"{type(value).__name__}", TypeError)
        return np.asarray(value, dtype=spec.dtype)

    def _check_scalar(self, index, spec, value):
        try:
            return spec.convert(value)
        except (TypeError, ValueError) as err:
            raise self._error(index, str(err), type(err)) from None

    def _slow_argument(self, index, value):
        """Native slow path of a tensor argument: the array to pass."""
        return self._check_array(index, self.params[index], value)

    def _slow_scalar(self, index, value):
        """Native slow path of a scalar argument: the bytes of its C value."""
        spec = self.params[index]
        return bytes(spec.ctype(self._check_scalar(index, spec, value)))

    def _raise_overlap(self, index, other):
        raise self._error(index, f"a donated array must not share memory with argument #{other}")

    # -- measurement helpers --------------------------------------------------

    @property
    def _cfunc(self):
        """The packed C interface as a ctypes function (benchmarks' floor)."""
        return ctypes.CFUNCTYPE(None, ctypes.c_void_p)(self.address)

    def packed_arguments(self, *args):
        """A ctypes ``void *[]`` of the packed interface for ``args`` (no
        checks; the arrays must stay alive): ``fn._cfunc(fn.packed_arguments(x))``
        is the bare compiled call that benchmarks compare the call path with.
        Result buffers of such calls are leaked."""
        jit_results = [r for r, a in zip(self.results, self.returned_args) if a < 0]

        def ctype(r):
            return r.ctype if isinstance(r, ScalarSpec) else memref_descriptor_type(len(r.shape))

        slots = []
        by_value = len(jit_results) == 1 and isinstance(jit_results[0], ScalarSpec)
        if len(jit_results) == 1:
            result = ctype(jit_results[0])()
        elif jit_results:
            fields = [(f"r{i}", ctype(r)) for i, r in enumerate(jit_results)]
            result = type("results", (ctypes.Structure,), {"_fields_": fields})()
        else:
            result = None
        if result is not None and not by_value:
            slots.append(ctypes.pointer(ctypes.pointer(result)))
        for spec, value in zip(self.params, args):
            if isinstance(spec, TensorSpec):
                desc = memref_descriptor_type(len(spec.shape))()
                if spec.shape:
                    _fill_static(desc, spec, value.shape)
                desc.allocated = desc.aligned = value.__array_interface__["data"][0]
                slots.append(ctypes.pointer(ctypes.pointer(desc)))
            else:
                slots.append(ctypes.pointer(spec.ctype(value)))
        if by_value:
            # A single scalar result is returned by value: the packed
            # wrapper stores it through the slot after the arguments.
            slots.append(ctypes.pointer(result))
        packed = (ctypes.c_void_p * max(1, len(slots)))(*[ctypes.cast(p, ctypes.c_void_p) for p in slots])
        packed._tdf_keep = (slots, result, args)
        return packed

    def __repr__(self):
        return f"<tdf entry @{self.name}({', '.join(map(repr, self.params))})>"
