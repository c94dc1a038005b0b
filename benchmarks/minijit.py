"""The benchmarks' own copy of the CPU pipeline, with allocation counting.

Why this exists: the benchmarks need two things the product's runtime does not
have to offer -- (1) a build of the *same* program with in-place turned off
everywhere (One-Shot Bufferize ``copy-before-write``: every write copies), and
(2) a count of the bytes the compiled code allocates at run time. (2) is done
by lowering ``memref.alloc`` with ``finalize-memref-to-llvm{use-generic-functions}``
and registering counting ``_mlir_memref_to_llvm_alloc``/``free`` callbacks
with the ExecutionEngine. These builds are used for *byte counts* (static from
the bufferized IR and dynamic from the callbacks) and, when ``tdf.compile`` is
not available, also for timing (the JSON records which backend timed what).

    prog = compile_text(text, inplace=True, count_allocs=True)
    out = prog.call("step", cache, new, 3)      # numpy in, numpy out
    prog.alloc_stats                            # {'calls', 'bytes', 'peak', 'live'}
    prog.static                                 # allocs/copies/bytes in the bufferized IR
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import weakref

import numpy as np
from mlir import ir
from mlir.execution_engine import ExecutionEngine
from mlir.runtime import get_ranked_memref_descriptor, make_nd_memref_descriptor

import tdf
from tdf.passes import get_all_passes

__all__ = ["compile_text", "UnsupportedProgram", "MiniProgram", "static_alloc_stats", "has_pass", "shared_libs"]

_LIBC = ctypes.CDLL(ctypes.util.find_library("c"))
_LIBC.malloc.restype = ctypes.c_void_p
_LIBC.malloc.argtypes = [ctypes.c_size_t]
_LIBC.free.argtypes = [ctypes.c_void_p]
_LIBC.aligned_alloc.restype = ctypes.c_void_p
_LIBC.aligned_alloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]

_ELT = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64,
        "index": np.int64, "i8": np.int8, "f16": np.float16}


def _names(items) -> set:
    return {getattr(x, "argument", x) for x in items}


def has_pass(name: str) -> bool:
    """True when a tdf pass or pipeline called ``name`` is registered."""
    from tdf.passes import get_all_pipelines
    return name in _names(get_all_passes()) or name in _names(get_all_pipelines())


def shared_libs() -> list[str]:
    """Paths of the MLIR C runner utils shipped with the tools wheel."""
    import importlib.util
    spec = importlib.util.find_spec("mlir")
    roots = list(spec.submodule_search_locations or [])
    libs = []
    for root in roots:
        for name in ("libmlir_c_runner_utils.so", "libmlir_runner_utils.so"):
            p = os.path.join(root, "lib", name)
            if os.path.exists(p):
                libs.append(p)
    return libs


_OWN_ONE_SHOT = ("one-shot-bufferize{bufferize-function-boundaries "
                 "function-boundary-type-conversion=identity-layout-map}")
_OWN_DEALLOC = ["expand-realloc", "ownership-based-buffer-deallocation", "canonicalize",
                "buffer-deallocation-simplification", "bufferization-lower-deallocations",
                "cse", "canonicalize"]
_OWN_LOWER = ["convert-linalg-to-loops", "lower-affine", "convert-vector-to-scf",
              "convert-scf-to-cf", "expand-strided-metadata", "lower-affine",
              "convert-vector-to-llvm", "finalize-memref-to-llvm", "convert-math-to-libm",
              "convert-math-to-llvm", "convert-arith-to-llvm", "convert-index-to-llvm",
              "convert-func-to-llvm", "convert-cf-to-llvm", "reconcile-unrealized-casts"]


def _product_pieces():
    """(one-shot pass text, bufferize pass list, lowering pass list) of the
    product's ``tdf-bufferize``/``tdf-lower-to-cpu`` when they are installed,
    else this module's equivalent lists."""
    try:
        from tdf.passes import pipelines as pl
        buf = [p.strip() for p in pl.bufferize_pipeline({"dealloc": True}).split(", ")]
        return pl.ONE_SHOT, buf, list(pl.LOWER_TO_LLVM)
    except Exception:
        return _OWN_ONE_SHOT, ["tdf-donate", _OWN_ONE_SHOT, "canonicalize", "cse"] + _OWN_DEALLOC, \
            list(_OWN_LOWER)


def _pipelines(inplace: bool, copy_all: bool, count_allocs: bool, insert_inplace: bool = True):
    """(stage 1, stage 2): stage 1 ends right after bufferization (where the
    static counts are taken), stage 2 is deallocation + lowering to LLVM."""
    one_shot, buf, lower = _product_pieces()
    if copy_all:
        buf = [p.replace(one_shot, one_shot[:-1] + " copy-before-write}") for p in buf]
    split = next((i for i, p in enumerate(buf)
                  if p.startswith("tdf-unown-opaque-results") or p == "expand-realloc"), len(buf))
    stage1, dealloc = buf[:split], buf[split:]
    if inplace and insert_inplace and has_pass("tdf-insert-inplace"):
        stage1 = ["tdf-insert-inplace"] + stage1
    if count_allocs:
        lower = [p + "{use-generic-functions}" if p == "finalize-memref-to-llvm" else p
                 for p in lower]
    return ", ".join(stage1), ", ".join(dealloc), ", ".join(lower)


def _nbytes(memref_type) -> int | None:
    t = ir.MemRefType(memref_type)
    if not t.has_static_shape:
        return None
    n = 1
    for d in t.shape:
        n *= d
    width = t.element_type.width if hasattr(t.element_type, "width") else 64
    return n * max(1, width // 8)


def _in_loop(op) -> bool:
    p = op.parent
    while p is not None and p.name != "func.func":
        if p.name in ("scf.for", "scf.while", "scf.parallel", "scf.forall"):
            return True
        p = p.parent
    return False


def static_alloc_stats(module: ir.Module, func_names=None) -> dict:
    """Allocation and copy counts of bufferized IR (per public function body).

    Returns ``{"allocs", "alloc_bytes", "allocs_in_loops", "copies",
    "copy_bytes"}``: ``memref.alloc``/``alloca`` ops and their static byte
    sizes, how many of them sit inside a loop (executed once per iteration),
    and ``memref.copy``/``linalg.copy`` ops with the bytes they move.
    """
    stats = {"allocs": 0, "alloc_bytes": 0, "allocs_in_loops": 0, "copies": 0, "copy_bytes": 0}

    def visit(op):
        name = op.name
        if name in ("memref.alloc", "memref.alloca"):
            stats["allocs"] += 1
            stats["alloc_bytes"] += _nbytes(op.results[0].type) or 0
            if _in_loop(op):
                stats["allocs_in_loops"] += 1
        elif name in ("memref.copy", "linalg.copy"):
            stats["copies"] += 1
            stats["copy_bytes"] += _nbytes(op.operands[0].type) or 0
        return ir.WalkResult.ADVANCE

    for fn in module.body.operations:
        if fn.operation.name != "func.func":
            continue
        if "sym_visibility" in fn.attributes:
            continue  # kernels: their own bodies are not the program's allocations
        if func_names and ir.StringAttr(fn.attributes["sym_name"]).value not in func_names:
            continue
        fn.operation.walk(visit)
    return stats


class UnsupportedProgram(RuntimeError):
    """The program cannot be lowered by this pipeline without aborting."""


class _AllocCounter:
    """Counting allocator behind ``_mlir_memref_to_llvm_alloc``/``free``."""

    ALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t)
    ALIGNED = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t)
    FREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

    def __init__(self):
        self.sizes: dict[int, int] = {}
        self.reset()
        self.alloc_cb = self.ALLOC(self._alloc)
        self.aligned_cb = self.ALIGNED(self._aligned)
        self.free_cb = self.FREE(self._free)

    def reset(self):
        """Zero the counters (live blocks from earlier calls stay tracked)."""
        self.calls = 0
        self.bytes = 0
        self.live = sum(self.sizes.values())
        self.peak = self.live
        self.base = self.live

    def _note(self, ptr, size):
        if ptr:
            self.sizes[ptr] = size
            self.calls += 1
            self.bytes += size
            self.live += size
            self.peak = max(self.peak, self.live)
        return ptr

    def _alloc(self, size):
        return self._note(_LIBC.malloc(size), size)

    def _aligned(self, align, size):
        size_r = (size + align - 1) // align * align
        return self._note(_LIBC.aligned_alloc(align, size_r), size)

    def _free(self, ptr):
        if ptr:
            self.live -= self.sizes.pop(ptr, 0)
            _LIBC.free(ptr)

    def stats(self) -> dict:
        """``calls``, ``bytes`` (total allocated), ``peak`` (above the level at reset)."""
        return {"calls": self.calls, "bytes": self.bytes, "peak": self.peak - self.base}


_DESC_TYPES: dict = {}


def _desc_type(rank: int):
    """A ranked memref descriptor struct with plain ``c_void_p`` pointers
    (same layout as MLIR's; one class per rank, built once)."""
    t = _DESC_TYPES.get(rank)
    if t is None:
        fields = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p),
                  ("offset", ctypes.c_longlong)]
        if rank:
            fields += [("shape", ctypes.c_longlong * rank), ("strides", ctypes.c_longlong * rank)]
        t = _DESC_TYPES[rank] = type(f"MemRef{rank}D", (ctypes.Structure,), {"_fields_": fields})
    return t


class _Sig:
    """Argument/result kinds of one public function after bufferization."""

    def __init__(self, fn):
        ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
        self.args = [self._kind(t) for t in ftype.inputs]
        self.results = [self._kind(t) for t in ftype.results]
        self.outputs = [("res", k) for k in range(len(self.results))]

    def set_outputs(self, returned_args, dropped_now):
        """Map the original results to ("arg", j) -- the j-th argument,
        updated in place -- or ("res", k) -- the k-th remaining result."""
        n_mid = len(self.results) + len(dropped_now)
        mid, k = [], 0
        for i in range(n_mid):
            if i in dropped_now:
                mid.append(("arg", dropped_now[i]))
            else:
                mid.append(("res", k))
                k += 1
        if returned_args:
            it = iter(mid)
            self.outputs = [("arg", j) if j >= 0 else next(it) for j in returned_args]
        else:
            self.outputs = mid

    @staticmethod
    def _kind(t):
        if isinstance(t, ir.MemRefType) or str(t).startswith("memref<"):
            mt = ir.MemRefType(t)
            return ("memref", tuple(mt.shape), _ELT[str(mt.element_type)])
        return ("scalar", None, _ELT.get(str(t), np.float32))


def _drop_arg_results(fn) -> dict:
    """Remove the results that return an entry-block argument unchanged.

    A public function returning its (donated) argument would otherwise get a
    ``bufferization.clone`` of it from the deallocation pipeline (ownership
    of an argument is unknown), i.e. a full copy per call. Returns
    ``{result index: argument index}`` for the removed results; the caller
    gets the argument's array back for them (it was updated in place).
    """
    block = fn.regions[0].blocks[0]
    ret = None
    for op in block.operations:
        ret = op
    dropped, kept = {}, []
    for i, v in enumerate(ret.operands):
        if isinstance(v.owner, ir.Block) and v.owner == block:
            dropped[i] = ir.BlockArgument(v).arg_number
        else:
            kept.append(v)
    if not dropped:
        return {}
    ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
    with ir.InsertionPoint(ret), ret.location:
        ir.Operation.create("func.return", operands=kept)
    ret.erase()
    new_type = ir.FunctionType.get(list(ftype.inputs), [v.type for v in kept])
    fn.attributes["function_type"] = ir.TypeAttr.get(new_type)
    return dropped


class MiniProgram:
    """A JIT-compiled module; :meth:`call` runs one of its public functions."""

    def __init__(self, engine, sigs, counter, static, buffer_ir):
        self.engine = engine
        self.sigs = sigs
        self.counter = counter
        self.static = static
        self.buffer_ir = buffer_ir
        self._funcs = {}

    @property
    def alloc_stats(self) -> dict:
        """Run-time allocation counters since the last :meth:`reset_counts`."""
        return self.counter.stats() if self.counter else {}

    def reset_counts(self):
        """Zero the run-time allocation counters."""
        if self.counter:
            self.counter.reset()

    def _func(self, name):
        f = self._funcs.get(name)
        if f is None:
            f = self._funcs[name] = self.engine.lookup(name)
        return f

    def prepare(self, name, *args):
        """Build every descriptor once and return ``(invoke, fetch)``: ``invoke()``
        is the bare ctypes call (no per-call work), ``fetch()`` the results."""
        sig = self.sigs[name]
        if len(args) != len(sig.args):
            raise TypeError(f"{name} expects {len(sig.args)} arguments, got {len(args)}")
        keep, ptrs, results = [], [], []
        for kind, shape, dtype in sig.results:
            if kind != "memref":
                raise TypeError("only memref results are supported")
            desc = make_nd_memref_descriptor(len(shape), np.ctypeslib.as_ctypes_type(dtype))()
            results.append(desc)
            keep.append(desc)
            ptrs.append(ctypes.pointer(ctypes.pointer(desc)))
        arrays = []
        for (kind, shape, dtype), a in zip(sig.args, args):
            if kind == "memref":
                a = np.asarray(a)
                if a.dtype != dtype or a.shape != shape or not a.flags.c_contiguous:
                    raise TypeError(f"{name}: expected a contiguous {shape} {np.dtype(dtype)} array, "
                                    f"got {a.shape} {a.dtype}")
                arrays.append(a)
                d = get_ranked_memref_descriptor(a)
                keep.append(d)
                ptrs.append(ctypes.pointer(ctypes.pointer(d)))
            else:
                c = np.ctypeslib.as_ctypes_type(dtype)(a)
                keep.append(c)
                ptrs.append(ctypes.pointer(c))
        packed = (ctypes.c_void_p * len(ptrs))()
        for i, p in enumerate(ptrs):
            packed[i] = ctypes.cast(p, ctypes.c_void_p)
        func = self._func(name)
        keep.append(packed)

        def invoke():
            func(packed)

        def fetch():
            return [args[j] if where == "arg" else self._to_numpy(results[j], sig.results[j], arrays)
                    for where, j in sig.outputs]

        invoke._keep = keep
        return invoke, fetch

    def _to_numpy(self, desc, sig, inputs):
        _, shape, dtype = sig
        ptr = desc.aligned if isinstance(desc.aligned, int) else \
            ctypes.cast(desc.aligned, ctypes.c_void_p).value
        for a in inputs:  # a result equivalent to a (donated) input: that array
            if isinstance(a, np.ndarray) and a.ctypes.data == ptr and a.shape == shape:
                return a
        n = int(np.prod(shape))
        buf = (ctypes.c_byte * (n * np.dtype(dtype).itemsize)).from_address(ptr)
        out = np.frombuffer(buf, dtype=dtype).reshape(shape)
        allocated = desc.allocated if isinstance(desc.allocated, int) else \
            ctypes.cast(desc.allocated, ctypes.c_void_p).value
        counter = self.counter
        if counter is not None:
            weakref.finalize(buf, counter._free, allocated)
        else:
            weakref.finalize(buf, _LIBC.free, allocated)
        return out

    def fast(self, name):
        """A cached-call entry point for ``name``: descriptor structs, packed
        argument array and the function pointer are built once; a call only
        checks each array (dtype, shape, contiguity) and stores its data
        pointer. This is what the per-call path can be cut to (see the
        call_overhead benchmark)."""
        sig = self.sigs[name]
        func = self._func(name)
        descs, slots, setters = [], [], []
        for kind, shape, dtype in sig.results:
            d = _desc_type(len(shape))()
            descs.append(d)
            slots.append(ctypes.pointer(ctypes.pointer(d)))
        arg_descs = []
        for kind, shape, dtype in sig.args:
            if kind == "memref":
                d = _desc_type(len(shape))()
                d.offset = 0
                stride = 1
                for i in reversed(range(len(shape))):
                    d.shape[i] = shape[i]
                    d.strides[i] = stride
                    stride *= shape[i]
                arg_descs.append(d)
                slots.append(ctypes.pointer(ctypes.pointer(d)))
            else:
                c = np.ctypeslib.as_ctypes_type(dtype)()
                arg_descs.append(c)
                slots.append(ctypes.pointer(c))
        packed = (ctypes.c_void_p * len(slots))()
        for i, p in enumerate(slots):
            packed[i] = ctypes.cast(p, ctypes.c_void_p)
        specs = [(k, sh, np.dtype(dt), d) for (k, sh, dt), d in zip(sig.args, arg_descs)]
        outputs = sig.outputs
        res_specs = sig.results

        def call(*args):
            if len(args) != len(specs):
                raise TypeError(f"{name} expects {len(specs)} arguments, got {len(args)}")
            for (kind, shape, dtype, d), a in zip(specs, args):
                if kind == "memref":
                    if a.__class__ is not np.ndarray or a.dtype != dtype or a.shape != shape \
                            or not a.flags.c_contiguous:
                        raise TypeError(f"{name}: expected a contiguous {shape} {dtype} array")
                    d.allocated = d.aligned = a.__array_interface__["data"][0]
                else:
                    d.value = a
            func(packed)
            outs = [args[j] if where == "arg" else
                    self._to_numpy(descs[j], res_specs[j], args) for where, j in outputs]
            return outs[0] if len(outs) == 1 else outs

        call._keep = (descs, arg_descs, slots, packed)
        return call

    def call(self, name, *args):
        """Run ``name`` on numpy arrays / Python scalars; returns the results
        (one array, or a list). Builds descriptors on every call."""
        invoke, fetch = self.prepare(name, *args)
        invoke()
        outs = fetch()
        return outs[0] if len(outs) == 1 else outs


def compile_text(text: str, inplace: bool = True, copy_all: bool = False,
                 count_allocs: bool = False, opt_level: int = 3,
                 insert_inplace: bool = True) -> MiniProgram:
    """Parse ``text``, bufferize with the product's ``tdf-bufferize`` passes,
    lower to LLVM and JIT it.

    ``inplace``: run ``tdf-insert-inplace`` first (when it is registered and
    ``insert_inplace`` is true).
    ``copy_all``: One-Shot Bufferize ``copy-before-write`` -- every write
    copies, nothing runs in place (the "in-place off" baseline of a purely
    functional execution). ``count_allocs`` routes heap allocations through
    counting callbacks (slower calls; use a separate build for timing)."""
    ctx = tdf.Context()
    with ctx, ir.Location.unknown():
        module = tdf.parse(text, ctx)
        stage1, dealloc, lower = _pipelines(inplace, copy_all, count_allocs, insert_inplace)
        tdf.run_pipeline(module, f"builtin.module({stage1})")
        buffer_ir = str(module)
        static = static_alloc_stats(module)
        sigs = {}
        for fn in module.body.operations:
            if fn.operation.name == "func.func" and "sym_visibility" not in fn.attributes \
                    and len(fn.regions[0].blocks):
                returned = []
                if "tdf.returned_args" in fn.attributes:  # set by tdf-drop-donated-results
                    returned = list(ir.DenseI64ArrayAttr(fn.attributes["tdf.returned_args"]))
                mine = _drop_arg_results(fn)
                sig = _Sig(fn)
                sig.set_outputs(returned, mine)
                sigs[ir.StringAttr(fn.attributes["sym_name"]).value] = sig
                fn.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
            if fn.operation.name == "func.func" and "arg_attrs" in fn.attributes:
                del fn.attributes["arg_attrs"]  # tdf.donate is only valid on tensors
        tdf.run_pipeline(module, f"builtin.module({dealloc})")
        if "xi1>" in str(module):
            # finalize-memref-to-llvm asserts (aborts the process) on stores to
            # i1 memrefs, which the generic deallocation helper creates.
            raise UnsupportedProgram("deallocation needs i1 memrefs (the generic dealloc helper), "
                                     "which finalize-memref-to-llvm cannot lower (it aborts)")
        tdf.run_pipeline(module, f"builtin.module({lower})")
        engine = ExecutionEngine(module, opt_level=opt_level, shared_libs=shared_libs())
        counter = None
        if count_allocs:
            counter = _AllocCounter()
            engine.raw_register_runtime("_mlir_memref_to_llvm_alloc",
                                        ctypes.cast(counter.alloc_cb, ctypes.c_void_p))
            engine.raw_register_runtime("_mlir_memref_to_llvm_aligned_alloc",
                                        ctypes.cast(counter.aligned_cb, ctypes.c_void_p))
            engine.raw_register_runtime("_mlir_memref_to_llvm_free",
                                        ctypes.cast(counter.free_cb, ctypes.c_void_p))
        engine.initialize()
        prog = MiniProgram(engine, sigs, counter, static, buffer_ir)
        prog._ctx = ctx
        prog._module = module
        return prog
