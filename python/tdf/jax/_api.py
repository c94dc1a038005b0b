"""``tdf.jax.jit`` and its ``Lowered`` stage: tracing, argument/result
conversion, the per-signature cache and ``strict`` checking.

A call traces ``fun`` with ``jax.make_jaxpr`` (once per input signature:
tree structure, shapes, dtypes, Python-scalar-ness and static arguments),
translates the jaxpr into a ``func.func @main`` (see :mod:`._builder`),
compiles it with :func:`tdf.compile` and runs it on the flattened numpy
leaves. Donated leaves carry ``{tdf.donate}``; a donated numpy array of the
traced dtype that is writeable and C-contiguous is updated in place and a
result that is the updated argument is that very array.
"""

from __future__ import annotations

import threading

import numpy as np
from mlir import ir
from mlir.dialects import func

from ..errors import TDFError
from ..passes.analysis.donation import PAIRS_ATTR, pair_by_type
from ..vocabulary import DEST_OPERAND, DONATE_ATTR
from . import _refs
from ._builder import (
    ArgumentError,
    Translator,
    UnsupportedPrimitiveError,
    call_site,
    format_where,
    is_key,
    physical_aval,
    physical_value,
    signless,
    tensor_type,
)

__all__ = ["jit", "JitFunction", "Lowered", "StrictInplaceError"]

_PY_SCALARS = (bool, int, float, complex)
#: numpy dtype kinds that are not JAX arrays: objects, strings, dates
_NOT_ARRAYS = "OUSMm"
#: The Python ints JAX takes as (weakly typed) arguments, by jax_enable_x64.
_INT_RANGE = {False: (-(1 << 31), (1 << 31) - 1), True: (-(1 << 63), (1 << 63) - 1)}


def _x64() -> bool:
    from jax._src import config
    return bool(config.enable_x64.value)

# Updates that strict=True requires in place: every destination-style tensor op.
_UPDATE_OPS = frozenset(DEST_OPERAND)


class StrictInplaceError(TDFError):
    """``strict=True`` and an update (``.at[]``, ``dynamic_update_slice``,
    scatter) would copy its operand instead of running in place."""


def _at() -> str:
    """``file:line:col: `` of the user's call (for argument errors), or ''."""
    where = call_site()
    return f"{format_where(where)}: " if where else ""


def _check_arity(fun, args, name) -> None:
    """:class:`ArgumentError` when ``fun`` cannot take ``args`` (instead of
    the ``TypeError`` Python raises inside the trace)."""
    import inspect
    try:
        signature = inspect.signature(fun)
    except (TypeError, ValueError):  # a builtin without a signature: the trace says
        return
    try:
        signature.bind(*args)
    except TypeError as err:
        raise ArgumentError(f"{_at()}{name}: {err}") from None


def _normalize_argnums(value, name):
    if value is None:
        return ()
    if isinstance(value, int):
        value = (value,)
    try:
        out = tuple(int(v) for v in value)
    except TypeError:
        raise ArgumentError(f"{_at()}{name} must be an int or a sequence of ints, "
                            f"got {value!r}") from None
    return out


class _Signature:
    """Everything derived from one trace: the jaxpr, trees, avals, donation
    per leaf and how each output is produced."""

    def __init__(self, closed, in_tree, out_tree, out_avals, donated, static_args,
                 ref_leaves=(), ref_consts=(), discharged=False):
        self.closed = closed
        self.discharged = discharged  # refs functionalized (see _refs)
        # jax.Ref leaves (donated; closed-over refs are leaves after the
        # arguments): the last len(ref_leaves) outputs are their final values
        self.ref_leaves = list(ref_leaves)
        self.ref_consts = list(ref_consts)
        self.in_tree = in_tree
        self.out_tree = out_tree
        self.out_avals = out_avals
        self.donated = donated
        self.static_args = static_args
        jaxpr = closed.jaxpr
        self.in_avals = [v.aval for v in jaxpr.invars]
        # PRNG key arrays (arguments, constants, results) cross as key data
        self.consts = [physical_value(c, v.aval)[0] for c, v in zip(closed.consts, jaxpr.constvars)]
        self.runtime_consts = [c.view(signless(c.dtype)) if c.dtype.kind == "u" else c
                               for c in self.consts]
        # Each output is ("result", k) of the compiled function, ("arg", i)
        # of the flattened inputs, ("const", i) of the closed jaxpr's consts
        # or ("literal", value).
        from jax._src import core as jcore  # not jax.extend: its import loads Pallas (~30 ms)
        positions = {v: i for i, v in enumerate(jaxpr.invars)}
        const_positions = {v: i for i, v in enumerate(jaxpr.constvars)}
        self.outputs, self.results = [], []
        seen = {}
        for atom in jaxpr.outvars:
            if isinstance(atom, jcore.Literal):
                self.outputs.append(("literal", np.asarray(atom.val, dtype=atom.aval.dtype)))
            elif atom in positions and not donated[positions[atom]]:
                # A non-donated argument is never written: copy it in Python.
                # A donated one is a result of the compiled function, so the
                # program knows its old value is still needed.
                self.outputs.append(("arg", positions[atom]))
            elif atom in const_positions:
                self.outputs.append(("const", const_positions[atom]))
            elif atom in seen:
                self.outputs.append(("dup", seen[atom]))
            else:
                seen[atom] = len(self.results)
                self.outputs.append(("result", len(self.results)))
                self.results.append(atom)
        # JAX's donation pairing over every output leaf: a compiled result
        # carries its pair (tdf.donation_pairs); another output (a literal, a
        # constant, a copied argument, a duplicate) is written into its
        # donated leaf in Python, as XLA writes it into the donated buffer.
        n_user = len(out_avals) - len(self.ref_leaves)
        free = [d and i not in self.ref_leaves for i, d in enumerate(donated)]
        pairs = pair_by_type([_pair_key(a) for a in self.in_avals], free,
                             [_pair_key(a) for a in out_avals[:n_user]]) + self.ref_leaves
        self.result_pairs = [-1] * len(self.results)
        self.python_pairs = []
        for k, ((kind, value), leaf) in enumerate(zip(self.outputs, pairs)):
            if leaf >= 0 and kind == "result":
                self.result_pairs[value] = leaf
            elif leaf >= 0:
                self.python_pairs.append((k, leaf))


class Lowered:
    """The imported program of one input signature: :meth:`as_text` is the
    MLIR, :meth:`compile` the :class:`tdf.compiler.Program`."""

    def __init__(self, signature: _Signature, module: ir.Module | None, context, name: str,
                 where=None):
        self._signature = signature
        # Translated on first use, per convolution strategy (see
        # library_convolutions): a compilation cache hit never is.
        self._modules: dict[bool, tuple] = {}
        if module is not None:
            self._modules[library_convolutions({})] = (module, context)
        self._where = where  # the call site: the fallback location of the translation
        # Held while the module or its context is in use (translation,
        # printing, a copy compiled in the same context): a tdf.Context is
        # single-threaded.
        self._lock = threading.RLock()
        self.name = name
        self._compiled: dict[tuple, object] = {}  # (strict, options) -> compiled program
        self._default = None

    @property
    def translated(self) -> bool:
        """Whether the jaxpr was translated to MLIR (a compilation cache
        hit never translates it)."""
        return bool(self._modules)

    def _built(self, library: bool | None = None) -> ir.Module:
        """The imported module; ``library``: convolutions as named ops for
        the oneDNN route (default: what ``compile()`` with default options
        gets, :func:`library_convolutions`)."""
        return self._built_in(library)[0]

    def _built_in(self, library: bool | None = None) -> tuple:
        if library is None:
            library = library_convolutions({})
        with self._lock:
            if library not in self._modules:
                self._modules[library] = _build_module(self._signature, self.name,
                                                       self._where, library)
            return self._modules[library]

    def as_text(self, debug_info: bool = False, **options) -> str:
        """The imported MLIR (``func.func @main``; ``debug_info`` adds the
        user source locations of every op) that :meth:`compile` with
        ``options`` compiles."""
        with self._lock:
            module = self._built(library_convolutions(options))
            return module.operation.get_asm(enable_debug_info=debug_info)

    def _copy(self, library: bool):
        """A copy of the imported module for one compile
        (:class:`tdf.compiler.OwnedModule`): the ops cloned in this
        Lowered's context, with their locations -- what printing the module
        with its debug info and parsing the text gives, without either."""
        from ..compiler import OwnedModule
        with self._lock:
            module, context = self._built_in(library)
            with context:
                copy = ir.Module.create(module.operation.location)
                for attr in module.operation.attributes:
                    copy.operation.attributes[attr.name] = attr.attr
                at = ir.InsertionPoint(copy.body)
                for op in module.body.operations:
                    op.operation.clone(ip=at)
            return OwnedModule(copy)

    def _program_input(self, options: dict):
        """What :func:`tdf.compile` gets: a copy of the module
        (:meth:`_copy`), with the compilation cache on as a
        :class:`tdf.cache.Source` keyed by the jaxpr
        (:mod:`tdf.jax._cache_key`), translated and copied only on a cache
        miss; the text for a program the cache keys by its text (an
        unkeyable jaxpr) and for other targets."""
        from .. import cache
        if options.get("target", "cpu") != "cpu":
            return self.as_text(debug_info=True, **options)
        library = library_convolutions(options)
        if cache.cache_dir() is not None:
            from ._cache_key import program_key
            key = program_key(self._signature, self.name, self._where, library)
            if key is None:
                return self.as_text(debug_info=True, **options)
            # The Source's "text" is the module copy: tdf.compile gets
            # it back from the cache's lookup on a miss.
            return cache.Source(key, lambda: self._copy(library))
        return self._copy(library)

    def compile(self, strict: bool = False, **options):
        """Compiles with :func:`tdf.compile` (``options`` are passed on);
        ``strict=True`` raises :class:`StrictInplaceError` when an update
        (``.at[]``, ``dynamic_update_slice``, scatter) would copy its
        operand, naming the user's source line. One compile at a time per
        signature: the copy compiles in this Lowered's context."""
        key = (bool(strict), tuple(sorted(options.items())))
        program = self._compiled.get(key)
        if program is None:
            with self._lock:
                program = self._compiled.get(key)
                if program is None:
                    program = self._compile(strict, options)
                    self._compiled[key] = program
        return program

    def _compile(self, strict: bool, options: dict):
        from ..compiler import compile as tdf_compile
        program = tdf_compile(self._program_input(options), filename=self.name, **options)
        if strict:
            _check_strict(program, self._signature)
        return program


def _pair_key(aval):
    """JAX pairs a donated leaf with an output of the same shape and dtype."""
    return tuple(aval.shape), aval.dtype


def _check_strict(program, sig=None):
    report = program.report()
    bad = [d for d in report.decisions if not d.inplace and d.op in _UPDATE_OPS]
    if bad:
        lines = "\n".join(f"  {d.location}: {d.op} copies its destination ({d.reason})"
                          for d in bad)
        raise StrictInplaceError(f"strict=True: {len(bad)} update(s) would run out of place "
                                 f"(donate the argument or drop other uses of the updated "
                                 f"value):\n{lines}")
    missed = [p for p in report.pairings if not p.inplace and p.function == "main"]
    if missed:
        names = _leaf_names(sig)
        lines = "\n".join(
            f"  donated {names[0].get(p.argument, f'argument #{p.argument}')} ({p.type}) -> "
            f"{names[1].get(p.result, f'result #{p.result}')} at {p.location}: {p.reason}"
            for p in missed)
        raise StrictInplaceError(
            f"strict=True: {len(missed)} donated leaf(s) not updated in place (a result with "
            f"the shape and dtype of a donated leaf is computed in its buffer, as JAX does):"
            f"\n{lines}")


def _leaf_names(sig):
    """({compiled argument: 'leaf args[1]['mu']'}, {compiled result: 'output
    leaf [0]'}) for messages."""
    if sig is None:
        return {}, {}
    import jax
    paths = jax.tree_util.tree_flatten_with_path(
        jax.tree_util.tree_unflatten(sig.in_tree, list(range(sig.in_tree.num_leaves))))[0]
    dynamic = [i for i in range(len(sig.in_tree.children()) + len(sig.static_args))
               if i not in sig.static_args]
    args = {}
    for leaf, (path, _) in enumerate(paths):
        first, rest = path[0], path[1:]
        position = dynamic[first.idx] if hasattr(first, "idx") else first
        args[leaf] = f"leaf args[{position}]{jax.tree_util.keystr(tuple(rest))}"
    out_paths = jax.tree_util.tree_flatten_with_path(
        jax.tree_util.tree_unflatten(sig.out_tree, list(range(sig.out_tree.num_leaves))))[0]
    results = {}
    for k, (kind, value) in enumerate(sig.outputs):
        if kind == "result" and value not in results and k < len(out_paths):
            results[value] = f"output leaf {jax.tree_util.keystr(out_paths[k][0]) or '#0'}"
    return args, results


def library_convolutions(options: dict) -> bool:
    """Whether a program compiled with ``options`` (:func:`tdf.compile`'s)
    gets its float32 convolutions as upstream named ops, which the CPU
    pipeline's ``tdf-convolutions-to-dnnl`` runs through oneDNN's
    convolution primitive: for the CPU, with the BLAS route on and oneDNN
    loaded. Otherwise they are built as im2col + one contraction
    (``tdf.jax._conv``): a named convolution the route does not take
    becomes plain loops."""
    from .. import blas as _blas
    if options.get("target", "cpu") != "cpu":
        return False
    blas = options.get("blas")
    if blas is False or not _blas.available():
        return False
    return bool(_blas.onednn_path())


def _load_libraries(options: dict) -> None:
    """Loads the contraction libraries (:mod:`tdf.blas`) before the first
    trace, when ``options`` (:func:`tdf.compile`'s) may use them; the compile
    would load them anyway, after the trace. Loading oneDNN starts the
    thread that makes its GEMM kernels (``python/src/Blas.cpp``, ``warmUp``),
    which then overlaps the trace and the compile or cache lookup instead of
    the first call."""
    from .. import blas as _blas
    if options.get("target", "cpu") == "cpu" and options.get("blas") is not False:
        _blas.available()


def _build_module(sig: _Signature, name: str, where=None, library: bool = False):
    from ..context import Context
    ctx = Context()
    with ctx, ir.Location.unknown(ctx):
        module = ir.Module.create()
        tr = Translator(name, fallback=where)
        tr.library_convolutions = library
        tr.check_dtypes(sig.closed.jaxpr)
        at = f"{format_where(where)}: {name}: "
        arg_types = [tensor_type(a, f"{at}argument leaf #{i}: ") for i, a in enumerate(sig.in_avals)]
        const_types = [tensor_type(v.aval, f"{at}constant: ") for v in sig.closed.jaxpr.constvars]
        result_types = [tensor_type(v.aval, f"{at}result leaf #{i}: ")
                        for i, v in enumerate(sig.results)]
        with ir.InsertionPoint(module.body):
            fn = func.FuncOp("main", ir.FunctionType.get(arg_types + const_types, result_types))
            attrs = []
            for donated in list(sig.donated) + [False] * len(const_types):
                attrs.append(ir.DictAttr.get({DONATE_ATTR: ir.UnitAttr.get()} if donated else {}))
            fn.arg_attrs = ir.ArrayAttr.get(attrs)
            if any(sig.donated):
                fn.attributes[PAIRS_ATTR] = ir.DenseI64ArrayAttr.get(sig.result_pairs)
            block = fn.add_entry_block()
            with ir.InsertionPoint(block):
                n = len(arg_types)
                args = list(block.arguments)
                jaxpr = sig.closed.jaxpr
                env_outs = tr.inline(jaxpr.replace(outvars=list(sig.results)), args[:n],
                                     consts=args[n:])
                # A result returned twice by the function would alias: the
                # duplicates are copies made in Python (see _Signature).
                func.ReturnOp(env_outs)
        if sig.discharged:  # a ref's read and write of one slice share the offsets
            _refs.share_index_computations(module)
        try:
            module.operation.verify()
        except ir.MLIRError as err:  # pragma: no cover - a rule built invalid IR
            raise TDFError(f"{format_where(where)}: {name}: internal error: the imported "
                           f"module does not verify: {err}") from None
    return module, ctx


class JitFunction:
    """What :func:`jit` returns: call it like ``fun``; :meth:`lower` gives
    the imported program of one signature."""

    def __init__(self, fun, donate_argnums=(), static_argnums=(), **compile_options):
        if not callable(fun):
            raise ArgumentError(f"{_at()}tdf.jax.jit expects a callable, got {type(fun).__name__}")
        self.fun = fun
        self.donate_argnums = _normalize_argnums(donate_argnums, "donate_argnums")
        self.static_argnums = _normalize_argnums(static_argnums, "static_argnums")
        overlap = set(self.donate_argnums) & set(self.static_argnums)
        if overlap:
            raise ArgumentError(f"{_at()}argument(s) {sorted(overlap)} cannot be both static "
                                f"and donated")
        self.compile_options = dict(compile_options)
        self._cache = {}
        self._splits = {}
        self._lock = threading.Lock()
        self.__name__ = getattr(fun, "__name__", "fun")
        self.__doc__ = getattr(fun, "__doc__", None)
        self.__wrapped__ = fun

    # -- signatures ---------------------------------------------------------

    def _split(self, args):
        n = len(args)
        split = self._splits.get(n)
        if split is None:
            for k in self.static_argnums + self.donate_argnums:
                if not -n <= k < n:
                    raise ArgumentError(f"{_at()}{self.__name__}: argnum {k} out of range for "
                                        f"{n} argument(s)")
            static = frozenset(k % n for k in self.static_argnums)
            donate = frozenset(k % n for k in self.donate_argnums)
            split = self._splits[n] = (static, donate)
        return split

    def _key(self, args):
        """(cache key, flattened dynamic leaves): the key holds the tree
        structure, each leaf's shape and dtype (or Python scalar type) and
        the static arguments."""
        import jax
        static, _ = self._split(args)
        if static:
            dynamic = tuple(a for i, a in enumerate(args) if i not in static)
        else:
            dynamic = args
        leaves, tree = jax.tree_util.tree_flatten(dynamic)
        leaf_keys: list = []
        refs: list = []
        for leaf in leaves:
            cls = type(leaf)
            if cls is np.ndarray:
                if leaf.dtype.kind in _NOT_ARRAYS:
                    self._leaf_dtype(len(leaf_keys), leaf.dtype)
                leaf_keys.append((leaf.shape, leaf.dtype))
            elif cls in _PY_SCALARS or isinstance(leaf, np.generic):
                if cls is int and not _INT_RANGE[_x64()][0] <= leaf <= _INT_RANGE[_x64()][1]:
                    raise ArgumentError(
                        f"{_at()}{self.__name__}: input leaf #{len(leaf_keys)} is the Python int "
                        f"{leaf}, outside the range of "
                        f"{'int64' if _x64() else 'int32 (jax_enable_x64 is off)'}")
                leaf_keys.append(cls)
            elif _refs.is_ref(leaf):
                # a jax.Ref: donated, updated in its own buffer (see _refs)
                if any(leaf is r for r in refs):
                    first = next(k for k, other in enumerate(leaves) if other is leaf)
                    raise ArgumentError(f"{_at()}{self.__name__}: the same jax.Ref is passed "
                                        f"twice (as input leaves #{first} and "
                                        f"#{len(leaf_keys)}); pass each ref once")
                refs.append(leaf)
                leaf_keys.append(("ref", tuple(leaf.shape),
                                  self._leaf_dtype(len(leaf_keys), leaf.dtype)))
            else:
                dtype = getattr(leaf, "dtype", None)
                shape = getattr(leaf, "shape", None)
                if dtype is None or shape is None:
                    try:
                        array = np.asarray(leaf)
                    except Exception as err:
                        raise ArgumentError(f"{_at()}{self.__name__}: input leaf #{len(leaf_keys)} "
                                            f"({type(leaf).__name__}) is not an array: "
                                            f"{err}") from None
                    dtype, shape = array.dtype, array.shape
                leaf_keys.append((tuple(shape), self._leaf_dtype(len(leaf_keys), dtype, leaf)))
        statics = ()
        if static:
            statics = []
            for i in sorted(static):
                try:
                    hash(args[i])
                except TypeError:
                    raise ArgumentError(f"{_at()}{self.__name__}: static argument #{i} must be "
                                        f"hashable, got {type(args[i]).__name__}") from None
                statics.append((i, args[i]))
            statics = tuple(statics)
        return (len(args), tree, tuple(leaf_keys), statics, _prng_flags()), leaves

    def _leaf_dtype(self, index, dtype, leaf=None):
        """``dtype`` as a numpy dtype, or a typed PRNG key's dtype
        (``key<fry>``); another extended JAX dtype raises
        :class:`UnsupportedPrimitiveError`, a leaf that is no array
        (strings, objects, dates) :class:`ArgumentError`."""
        if is_key(dtype):
            return dtype
        try:
            dtype = np.dtype(dtype)
        except TypeError:
            raise UnsupportedPrimitiveError(
                f"{_at()}{self.__name__}: argument leaf #{index} has dtype {dtype}, which "
                f"tdf.jax.jit does not support (extended dtypes other than PRNG keys: see "
                f"docs/Frontend.md)") from None
        if dtype.kind in _NOT_ARRAYS:
            what = type(leaf).__name__ if leaf is not None else "array"
            raise ArgumentError(
                f"{_at()}{self.__name__}: input leaf #{index} ({what} of dtype {dtype}) is "
                f"not a numeric array: tdf.jax.jit takes arrays of numbers or bools "
                f"(mark other arguments static with static_argnums)")
        return dtype

    def _signature(self, args, name=None, where=None):
        import jax
        static, donate = self._split(args)
        _check_arity(self.fun, args, self.__name__)
        closed, out_shape = jax.make_jaxpr(self.fun, static_argnums=tuple(sorted(static)),
                                           return_shape=True)(*args)
        # refs (jax.new_ref, jax.Ref arguments) become values (see _refs)
        pure = _refs.functionalize(closed, name or self.__name__, where)
        dynamic = [(i, a) for i, a in enumerate(args) if i not in static]
        donated = []
        for i, a in dynamic:
            donated += [i in donate] * len(jax.tree_util.tree_leaves(a))
        donated += [False] * len(pure.ref_consts)
        for leaf in pure.ref_leaves:  # a ref is updated in its own buffer
            donated[leaf] = True
        out_leaves, out_tree = jax.tree_util.tree_flatten(out_shape)
        out_leaves += [v.aval for v in pure.closed.jaxpr.outvars[len(out_leaves):]]
        in_tree = jax.tree_util.tree_structure(tuple(a for _, a in dynamic))
        return _Signature(pure.closed, in_tree, out_tree, out_leaves, donated, static,
                          pure.ref_leaves, pure.ref_consts, pure.discharged)

    def _positional(self, args, kwargs):
        """Keyword arguments bound to their positions (argnums count them)."""
        import inspect
        try:
            bound = inspect.signature(self.fun).bind(*args, **kwargs)
        except (TypeError, ValueError) as err:
            raise ArgumentError(f"{_at()}{self.__name__}: {err}") from None
        if bound.kwargs:
            raise ArgumentError(f"{_at()}{self.__name__}: keyword-only arguments "
                            f"({', '.join(bound.kwargs)}) are not supported by tdf.jax.jit; "
                            f"pass them positionally or close over them")
        return bound.args

    def lower(self, *args, **kwargs) -> Lowered:
        """The :class:`Lowered` program for these arguments' signature."""
        if kwargs:
            args = self._positional(args, kwargs)
        lowered = self._lowered(args, self._key(args)[0])
        lowered._built()  # translation errors are raised here
        return lowered

    def program(self, *args, **kwargs):
        """The :class:`tdf.compiler.Program` that calls with these arguments'
        signature run (compiled with this function's compile options): its
        ``report()``, ``memory_analysis()`` and, with
        ``count_allocations=True``, ``allocation_stats()``."""
        if kwargs:
            args = self._positional(args, kwargs)
        return self._lowered(args, self._key(args)[0]).compile(**self.compile_options)

    def _lowered(self, args, key) -> Lowered:
        entry = self._cache.get(key)
        if entry is None:
            with self._lock:
                entry = self._cache.get(key)
                if entry is None:
                    _load_libraries(self.compile_options)
                    name = f"<tdf.jax.jit:{self.__name__}>"
                    where = call_site()
                    sig = self._signature(args, name, where)
                    entry = Lowered(sig, None, None, name, where)
                    self._cache[key] = entry
        return entry

    # -- calls --------------------------------------------------------------

    def __call__(self, *args, **kwargs):
        import jax
        if kwargs:
            args = self._positional(args, kwargs)
        key, leaves = self._key(args)
        lowered = self._lowered(args, key)
        sig = lowered._signature
        program = lowered._default
        if program is None:
            program = lowered._default = lowered.compile(**self.compile_options)
        leaves, refs = _refs.pass_buffers(leaves, sig)  # a jax.Ref leaf: its own buffer
        arrays, passed, unsigned = self._inputs(leaves, sig)
        raw = program.main(*passed, *sig.runtime_consts)
        if raw is None:
            raw = ()
        elif type(raw) is not tuple:
            raw = (raw,)
        outs = []
        for (kind, value), aval in zip(sig.outputs, sig.out_avals):
            if kind == "result":
                out = raw[value]
                if out.dtype != aval.dtype and not is_key(aval.dtype):
                    # an unsigned result: the caller's own array when it is a
                    # donated argument updated in place, else a view
                    caller = unsigned.get(id(out))
                    out = out.view(aval.dtype) if caller is None else caller
            elif kind == "dup":
                out = outs[sig.outputs.index(("result", value))].copy()
            elif kind == "arg":
                out = np.array(arrays[value])
            elif kind == "const":
                out = np.array(sig.consts[value])
            else:
                out = np.array(value)
            if is_key(aval.dtype):
                out = _wrap_key(out, aval)
            elif out.shape != aval.shape:
                out = out.reshape(aval.shape)
            outs.append(out)
        for k, leaf in sig.python_pairs:
            _into_donated(outs, k, arrays[leaf])
        outs = _refs.finish(refs, outs)  # the refs' final values stored in place
        return jax.tree_util.tree_unflatten(sig.out_tree, outs)

    def _inputs(self, leaves, sig):
        """(the leaves as arrays of the traced dtypes, the arrays passed to
        the compiled code, {id(passed view): caller's unsigned array})."""
        arrays, passed, unsigned = [], [], {}
        for i, (leaf, aval, donated) in enumerate(zip(leaves, sig.in_avals, sig.donated)):
            if is_key(aval.dtype):
                leaf, aval = _key_data(self.__name__, i, leaf, aval)
            dtype = aval.dtype
            if type(leaf) is np.ndarray and leaf.dtype == dtype and leaf.flags.c_contiguous \
                    and (leaf.flags.writeable or not donated):
                array = leaf
            elif donated:
                array = np.array(leaf, dtype=dtype, order="C")
            else:
                array = np.asarray(leaf, dtype=dtype, order="C")
            if array.shape != aval.shape:
                raise ArgumentError(f"{_at()}{self.__name__}: input leaf #{i} has shape "
                                    f"{array.shape}, traced with {tuple(aval.shape)}")
            arrays.append(array)
            if array.dtype.kind == "u":
                # Compiled code holds unsigned values as signed integers of
                # the same width (the same bits, a view: donation stays in place).
                view = array.view(signless(array.dtype))
                unsigned[id(view)] = array
                array = view
            passed.append(array)
        return arrays, passed, unsigned


def _into_donated(outs, k, target) -> None:
    """Output ``k`` (made in Python) is written into ``target``, the donated
    leaf JAX pairs it with, unless another output may share its memory."""
    out = outs[k]
    if (type(out) is np.ndarray and type(target) is np.ndarray and out.dtype == target.dtype
            and out.shape == target.shape and target.flags.writeable
            and target.flags.c_contiguous
            and not any(np.may_share_memory(target, o) for o in outs
                        if type(o) is np.ndarray)):
        np.copyto(target, out)
        outs[k] = target


def _prng_flags():
    """The PRNG configuration a translation depends on
    (``jax_threefry_partitionable``): part of the signature."""
    from jax._src import config
    return config.threefry_partitionable.value


def _key_data(name, index, leaf, aval):
    """(the key data of key array argument ``leaf``, its aval)."""
    import jax
    try:
        data = jax.random.key_data(leaf)
    except (TypeError, ValueError):  # pragma: no cover - the signature has the key dtype
        raise ArgumentError(f"{_at()}{name}: input leaf #{index} must be a PRNG key array of dtype "
                        f"{aval.dtype}, got {type(leaf).__name__}") from None
    return np.asarray(data), physical_aval(aval)


def _wrap_key(data, aval):
    """A key array of ``aval`` (``key<fry>[S]``) around key data ``data``."""
    import jax
    phys = physical_aval(aval)
    data = np.asarray(data).view(phys.dtype).reshape(phys.shape)
    return jax.random.wrap_key_data(data, impl=aval.dtype._impl.name)


def jit(fun=None, *, donate_argnums=(), static_argnums=(), **compile_options):
    """Compiles the JAX function ``fun`` with tdf (see the module docstring
    of :mod:`tdf.jax`). Usable as ``tdf.jax.jit(fun, ...)`` or as a decorator
    (``@tdf.jax.jit`` / ``@functools.partial(tdf.jax.jit, donate_argnums=0)``).
    ``compile_options`` go to :func:`tdf.compile` (``count_allocations=True``,
    ``plan_memory=False``, ``num_threads=1``, ...); :meth:`JitFunction.program`
    gives the compiled program of a call's arguments::

        step = tdf.jax.jit(train_step, donate_argnums=0, count_allocations=True)
        state = step(state, batch)                 # the user's own pytrees
        step.program(state, batch).allocation_stats().peak_bytes"""
    if fun is None:
        return lambda f: JitFunction(f, donate_argnums, static_argnums, **compile_options)
    return JitFunction(fun, donate_argnums, static_argnums, **compile_options)

