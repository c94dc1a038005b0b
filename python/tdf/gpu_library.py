"""Calls a GPU program exported as a shared library
(:meth:`tdf.gpu.GPUProgram.export_library`), without MLIR and without the
rest of tdf: this file imports only the standard library and numpy
(``ml_dtypes`` for bf16 arrays), so it can be copied to a machine that has
a GPU and Python but neither MLIR's wheels nor tdf, and imported from there
(``importlib``, or next to the caller).

::

    lib = load_library("build/libmlp.so")      # reads build/libmlp.json
    y = lib.mlp(x, w1, b1, w2, b2)              # numpy in, numpy out

The manifest beside the library (``<stem>.json``) gives each entry
function's arguments and result; a call checks the arguments against it
(count, dtype, shape, C-contiguity; scalars by range) before anything runs,
passes each array as a memref descriptor to ``_mlir_ciface_<name>``, and
returns each result as a new array, or the argument itself when the result
is a donated argument's buffer, updated in place (several results: a
tuple). The same marshalling serves tdf.gpu's in-process calls
(:func:`array_descriptor`, :func:`results_struct`, :func:`take_results`).
A failure of tdf's GPU runtime in the call
(a cuBLAS GEMM, a pool allocation) raises :class:`GPULibraryError` after
the call.

The libraries it needs (``libmlir_cuda_runtime.so``, and
``libtdf_gpu_runtime.so`` when it calls cuBLAS or uses tdf's device pool)
are found through the
library's run path (the directories it was exported from), or in
``search_dirs``, which :func:`load_library` loads them from first. A
machine without ``libcuda.so.1`` or without a device gets a
:class:`GPULibraryError` before the library is loaded.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os

import numpy as np

__all__ = ["load_library", "GPULibrary", "GPULibraryError", "MANIFEST_FORMAT", "array_descriptor",
           "results_struct", "take_results", "free_results"]

#: The ``format`` field of a manifest this loader reads.
MANIFEST_FORMAT = "tdf-gpu-library/1"

# element type -> numpy dtype name (bf16: ml_dtypes, imported when used)
_DTYPES = {"f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16",
           "i64": "int64", "i32": "int32", "i16": "int16", "i8": "int8", "i1": "bool",
           "index": "int64"}
# scalar type -> (ctypes type, kind, bits)
_SCALARS = {"index": (ctypes.c_int64, int, 64), "i64": (ctypes.c_int64, int, 64),
            "i32": (ctypes.c_int32, int, 32), "i16": (ctypes.c_int16, int, 16),
            "i8": (ctypes.c_int8, int, 8), "i1": (ctypes.c_bool, bool, 1),
            "f32": (ctypes.c_float, float, 32), "f64": (ctypes.c_double, float, 64)}


class GPULibraryError(RuntimeError):
    """An exported GPU library cannot be loaded or a call of it failed."""


def _dtype(element: str) -> np.dtype:
    if element == "bf16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(_DTYPES[element])


@functools.cache
def _descriptor_type(rank: int):
    """MLIR's ranked memref descriptor of ``rank`` (the C interface's
    struct: allocated, aligned, offset, sizes, strides); one class per rank
    (making a ctypes class costs ~10 us, paid once, not per argument and
    call)."""
    return type(f"MemRef{rank}D", (ctypes.Structure,), {"_fields_": [
        ("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p),
        ("offset", ctypes.c_int64), ("sizes", ctypes.c_int64 * rank),
        ("strides", ctypes.c_int64 * rank)]})


def _check_device() -> None:
    """``GPULibraryError`` unless libcuda loads, initializes and sees a
    device (checked before the library's constructors load its kernels)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as err:
        raise GPULibraryError(f"no CUDA GPU here: the CUDA driver library libcuda.so.1 cannot "
                              f"be loaded ({err})") from None
    count = ctypes.c_int(0)
    status = cuda.cuInit(0)
    if status == 0:
        status = cuda.cuDeviceGetCount(ctypes.byref(count))
    if status != 0 or count.value < 1:
        raise GPULibraryError(f"no CUDA GPU here: cuInit/cuDeviceGetCount returned {status}, "
                              f"{count.value} device(s)")


def array_descriptor(array: np.ndarray):
    """The memref descriptor of a C-contiguous numpy ``array`` (it points
    into the array: keep the array alive while it is used)."""
    desc = _descriptor_type(array.ndim)()
    desc.allocated = desc.aligned = array.ctypes.data
    desc.offset = 0
    for d in range(array.ndim):
        desc.sizes[d] = array.shape[d]
        desc.strides[d] = array.strides[d] // max(array.itemsize, 1)
    return desc


def results_struct(results: list):
    """What the C interface of a function with ``results`` (manifest
    entries, tensors only) writes its results to: one descriptor, or a
    struct of one descriptor per result."""
    return _results_type(tuple(len(spec["shape"]) for spec in results))()


@functools.cache
def _results_type(ranks: tuple):
    types = [_descriptor_type(rank) for rank in ranks]
    if len(types) == 1:
        return types[0]
    return type("Results", (ctypes.Structure,),
                {"_fields_": [(f"r{i}", t) for i, t in enumerate(types)]})


def _descriptors(struct, count: int) -> list:
    return [struct] if count == 1 else [getattr(struct, f"r{i}") for i in range(count)]


def free_results(struct, count: int, args, free) -> None:
    """Frees (``free``: libc's) the host buffers of the results in
    ``struct`` that are no argument's buffer (a failed call's results)."""
    owned = {a.ctypes.data for a in args if isinstance(a, np.ndarray)}
    for allocated in {d.allocated for d in _descriptors(struct, count) if d.allocated}:
        if allocated not in owned:
            free(ctypes.c_void_p(allocated))


def take_results(struct, results: list, args, free):
    """The results a call wrote to ``struct``: each a new numpy array (its
    host buffer copied, then freed with ``free``), or the argument whose
    buffer it is (a donated argument, updated in place); one value, or a
    tuple for several results."""
    values = []
    for desc, spec in zip(_descriptors(struct, len(results)), results):
        same = [a for a in args if isinstance(a, np.ndarray) and a.ctypes.data == desc.aligned]
        if same:
            values.append(same[0])
            continue
        dtype, shape = _dtype(spec["element"]), tuple(spec["shape"])
        out = np.empty(shape, dtype)
        count = int(np.prod(shape, dtype=np.int64))
        if count:
            strides = [int(desc.strides[d]) for d in range(len(shape))]
            span = 1 + sum((n - 1) * st for n, st in zip(shape, strides))
            source = np.ctypeslib.as_array(
                ctypes.cast(desc.aligned + desc.offset * dtype.itemsize,
                            ctypes.POINTER(ctypes.c_uint8)), (span * dtype.itemsize,))
            out[...] = np.lib.stride_tricks.as_strided(
                source.view(dtype), shape, [st * dtype.itemsize for st in strides])
        values.append(out)
    free_results(struct, len(results), args, free)
    return values[0] if len(values) == 1 else tuple(values)


class _Function:
    """An entry function of a :class:`GPULibrary` (numpy in, numpy out)."""

    def __init__(self, library, name: str, spec: dict):
        self.library = library
        self.name = name
        self.arguments = spec["arguments"]
        self.results = spec["results"]
        self._symbol = getattr(library.handle, f"_mlir_ciface_{name}")
        self._symbol.restype = None

    def _scalar(self, index: int, type_: str, value):
        ctype, kind, bits = _SCALARS[type_]
        where = f"argument #{index} of @{self.name} ({type_})"
        if kind is bool:
            if not isinstance(value, (bool, np.bool_)):
                raise TypeError(f"{where}: expected a bool, got {type(value).__name__}")
            return ctype(bool(value))
        if isinstance(value, (bool, np.bool_)) or not isinstance(
                value, (int, np.integer) if kind is int else (int, float, np.integer, np.floating)):
            raise TypeError(f"{where}: expected {'an integer' if kind is int else 'a number'}, "
                            f"got {type(value).__name__}")
        if kind is int and not -(1 << (bits - 1)) <= int(value) < (1 << (bits - 1)):
            raise ValueError(f"{where}: {int(value)} does not fit in {type_}")
        return ctype(kind(value))

    def __call__(self, *args):
        if len(args) != len(self.arguments):
            raise TypeError(f"@{self.name} takes {len(self.arguments)} arguments, got {len(args)}")
        packed, keep = [], []
        for index, (arg, spec) in enumerate(zip(args, self.arguments)):
            if "scalar" in spec:
                packed.append(self._scalar(index, spec["scalar"], arg))
                continue
            want, shape = _dtype(spec["element"]), tuple(spec["shape"])
            if not isinstance(arg, np.ndarray) or arg.dtype != want or arg.shape != shape:
                got = f"{arg.dtype}{list(arg.shape)}" if isinstance(arg, np.ndarray) \
                    else type(arg).__name__
                raise TypeError(f"argument #{index} of @{self.name} must be {want}{list(shape)}, "
                                f"got {got}")
            if not arg.flags["C_CONTIGUOUS"]:
                raise TypeError(f"argument #{index} of @{self.name} must be C-contiguous")
            keep.append(array_descriptor(arg))
            packed.append(ctypes.pointer(keep[-1]))
        struct = results_struct(self.results) if self.results else None
        if struct is not None:
            packed.insert(0, ctypes.pointer(struct))
        self.library.take_error()  # none is pending: a failed call raised
        self._symbol(*packed)
        failure = self.library.take_error()
        free = self.library.libc.free
        if failure:
            if struct is not None:
                free_results(struct, len(self.results), args, free)
            raise GPULibraryError(f"@{self.name}: {failure}")
        return None if struct is None else take_results(struct, self.results, args, free)


class GPULibrary:
    """An exported GPU program loaded into this process: each entry
    function is a callable attribute; ``manifest`` is the manifest read."""

    def __init__(self, path: str, search_dirs=()):
        manifest_path = os.path.splitext(path)[0] + ".json"
        try:
            with open(manifest_path) as f:
                manifest = json.load(f)
        except (OSError, ValueError) as err:
            raise GPULibraryError(f"cannot read the manifest of {path}: {err}") from None
        if manifest.get("format") != MANIFEST_FORMAT:
            raise GPULibraryError(f"{manifest_path}: not a {MANIFEST_FORMAT} manifest "
                                  f"(format {manifest.get('format')!r})")
        self.manifest = manifest
        _check_device()
        self._preloaded = []
        for name in manifest.get("needs", []):
            for folder in search_dirs:
                candidate = os.path.join(folder, name)
                if os.path.exists(candidate):
                    self._preloaded.append(ctypes.CDLL(candidate, mode=ctypes.RTLD_GLOBAL))
                    break
        try:
            self.handle = ctypes.CDLL(os.path.abspath(path))
        except OSError as err:
            raise GPULibraryError(f"cannot load {path}: {err} (the libraries it needs: "
                                  f"{', '.join(manifest.get('needs', []))}; pass their "
                                  f"folders as search_dirs)") from None
        self.libc = ctypes.CDLL(None)
        self.libc.free.argtypes = [ctypes.c_void_p]
        self._take = None
        if "libtdf_gpu_runtime.so" in manifest.get("needs", []):
            self._take = self.handle.tdf_gpu_take_error
            self._take.restype = ctypes.c_int64
            self._take.argtypes = [ctypes.c_char_p, ctypes.c_int64]
        self.functions = list(manifest["functions"])
        for name, spec in manifest["functions"].items():
            setattr(self, name, _Function(self, name, spec))

    def take_error(self) -> str:
        """The failure tdf's GPU runtime recorded on this thread in the last
        call ('' when none), cleared."""
        if self._take is None:
            return ""
        buffer = ctypes.create_string_buffer(4096)
        length = self._take(buffer, len(buffer))
        return buffer.value.decode(errors="replace") if length else ""


def load_library(path: str, search_dirs=()) -> GPULibrary:
    """Loads the exported GPU library ``path`` and its manifest
    (``<stem>.json``); ``search_dirs``: folders to load the libraries it
    needs from first (see the module docstring)."""
    return GPULibrary(path, search_dirs)
