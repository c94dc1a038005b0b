"""The jaxpr → MLIR translator's core: types, constants, source locations,
the rule table and the helpers every rule family builds on.

Every jaxpr value becomes a ranked tensor (rank 0 for scalars). Rules are
registered per primitive name with :func:`rule` and receive the
:class:`Translator`, the equation and its operand values; they return one
MLIR value per output. IR is built with the MLIR Python bindings' op
builders, never from text templates. Each op gets the location of the
user's source line of its equation (``file:line:col`` from the jaxpr's
source info), which is how ``report()`` and errors point at user code.
"""

from __future__ import annotations

import functools

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg, tensor

from ..errors import TDFError
from ..vocabulary import TENSOR_VIEW_OPS, element_type_name

__all__ = ["Translator", "UnsupportedPrimitiveError", "TranslationError", "ArgumentError",
           "add_library_path", "remove_library_path", "is_library_file",
           "rule", "RULES", "KEY_RULES",
           "element_type", "tensor_type", "is_float", "is_signed_int", "is_unsigned", "is_bool",
           "signless", "is_key", "physical_aval", "physical_value"]

DYNAMIC = ir.ShapedType.get_dynamic_size()
RULES: dict = {}
#: Primitive name -> the rule ``fn(tr, eqn, args)`` of an equation with a
#: PRNG key array among its values (``key<fry>[S]``, carried as its
#: ``uint32[S, 2]`` key data): registered by ``_random`` for the PRNG
#: primitives and for the primitives that move keys (slices, reshapes,
#: calls, loops). Any other primitive on keys is refused.
KEY_RULES: dict = {}
#: The PRNG implementations whose keys tdf.jax translates.
KEY_IMPLS = ("threefry2x32",)


class UnsupportedPrimitiveError(TDFError):
    """A JAX primitive (or a form of one) the frontend cannot translate."""


class TranslationError(UnsupportedPrimitiveError):
    """A rule failed on a form of its primitive it did not anticipate (an
    internal error, reported with the primitive, its operand types and the
    user's source line instead of the bare Python exception)."""


class ArgumentError(TDFError, TypeError, ValueError):
    """A ``tdf.jax.jit`` function or call given arguments it cannot take
    (also a ``TypeError`` and a ``ValueError``, as the same mistakes raise in
    plain Python or under ``jax.jit``)."""


def rule(*names):
    """Registers the decorated function as the translation of ``names``."""
    def register(fn):
        for name in names:
            RULES[name] = fn
        return fn
    return register


# ---------------------------------------------------------------- dtypes


def _dtype(dtype) -> np.dtype:
    return np.dtype(dtype)


def is_float(dtype) -> bool:
    d = _dtype(dtype)
    return d.kind == "f" or d.name in ("bfloat16",)


def is_bool(dtype) -> bool:
    return _dtype(dtype) == np.bool_


def is_signed_int(dtype) -> bool:
    return _dtype(dtype).kind == "i"


def is_unsigned(dtype) -> bool:
    return _dtype(dtype).kind == "u"


def signless(dtype) -> np.dtype:
    """The dtype of the arrays that hold ``dtype``'s values in compiled code:
    MLIR integers are signless, so an unsigned dtype travels as the signed
    integer of its width (the same bits; the rules take the signedness from
    the jaxpr's avals)."""
    d = _dtype(dtype)
    return np.dtype(f"i{d.itemsize}") if d.kind == "u" else d


def _dtype_name(dtype) -> str:
    try:
        return _dtype(dtype).name
    except TypeError:  # a JAX extended dtype (key<fry>) numpy cannot interpret
        return str(dtype)


@functools.lru_cache(maxsize=256)
def _type_name(dtype) -> str | None:
    """The MLIR element type name of ``dtype`` (None if none)."""
    try:
        return element_type_name(signless(dtype))
    except TypeError:
        return None


def _element_type_name(dtype, where: str) -> str:
    try:
        name = _type_name(dtype)
    except TypeError:  # not hashable: not a dtype
        name = None
    if name is None:
        raise UnsupportedPrimitiveError(
            f"{where}unsupported dtype {_dtype_name(dtype)} (tdf.jax supports "
            f"float16/bfloat16/float32/float64, int8-int64, uint8-uint64 and bool)")
    return name


def element_type(dtype, where: str = "") -> ir.Type:
    """The MLIR element type of a numpy/JAX dtype (``TDFError`` if none);
    unsigned integers are the signless integers of their width."""
    return ir.Type.parse(_element_type_name(dtype, where))


def is_key(dtype) -> bool:
    """Whether ``dtype`` is a typed PRNG key dtype (``key<fry>``)."""
    return not isinstance(dtype, np.dtype) and _is_key(dtype)


@functools.lru_cache(maxsize=64)
def _is_key(dtype) -> bool:
    import jax
    return jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


def physical_aval(aval):
    """``aval``, or for a PRNG key array its key data's (``uint32[S, 2]``
    for ``key<fry>[S]``)."""
    if not is_key(aval.dtype):
        return aval
    from jax._src import core
    if not isinstance(aval, core.ShapedArray):  # a jax.ShapeDtypeStruct
        aval = core.ShapedArray(tuple(aval.shape), aval.dtype)
    return core.physical_aval(aval)


def physical_value(value, aval):
    """(array, aval) of a constant: a PRNG key array's key data."""
    if not is_key(aval.dtype):
        return np.asarray(value), aval
    import jax
    return np.asarray(jax.random.key_data(value)), physical_aval(aval)


def check_dtype(dtype, where: str = "") -> None:
    """Raises ``UnsupportedPrimitiveError`` when tdf.jax cannot represent
    ``dtype`` (PRNG keys: those of :data:`KEY_IMPLS`)."""
    if is_key(dtype):
        impl = getattr(getattr(dtype, "_impl", None), "name", None)
        if impl not in KEY_IMPLS:
            raise UnsupportedPrimitiveError(
                f"{where}unsupported dtype {dtype} (PRNG implementation {impl}; tdf.jax "
                f"translates {', '.join(KEY_IMPLS)} keys)")
        return
    _element_type_name(dtype, where)  # no MLIR type made: a check per variable


def tensor_type(aval, where: str = "") -> ir.RankedTensorType:
    aval = physical_aval(aval)
    shape = tuple(int(s) for s in aval.shape)
    return ir.RankedTensorType.get(shape, element_type(aval.dtype, where))


def bits(dtype) -> int:
    return _dtype(dtype).itemsize * 8


# ---------------------------------------------------------------- source info

#: Directories and files whose frames are library code besides JAX's own,
#: the standard library, tdf and installed packages (site-packages): see
#: :func:`add_library_path`.
_LIBRARY_PATHS: list[str] = []
#: Libraries whose frames are library code wherever they are installed (an
#: editable checkout too), once imported.
_LIBRARY_MODULES = ("flax", "optax", "haiku", "equinox", "chex", "jax", "jaxlib", "numpy",
                    "ml_dtypes", "scipy")


def _path_of(path) -> str:
    import os
    if hasattr(path, "__path__"):  # a package
        path = list(path.__path__)[0]
    elif hasattr(path, "__file__"):  # a module
        path = path.__file__
    return os.path.abspath(os.fspath(path))


def add_library_path(path) -> None:
    """Treats the frames of ``path`` (a directory, a file, or an imported
    module or package) as library code: errors name the innermost frame
    outside library code as the user's line and the library line besides."""
    path = _path_of(path)
    if path not in _LIBRARY_PATHS:
        _LIBRARY_PATHS.append(path)
    _library_roots.cache_clear()


def remove_library_path(path) -> None:
    """Undoes :func:`add_library_path`."""
    path = _path_of(path)
    if path in _LIBRARY_PATHS:
        _LIBRARY_PATHS.remove(path)
    _library_roots.cache_clear()


def _loaded_libraries() -> tuple:
    import sys
    return tuple(name for name in _LIBRARY_MODULES if name in sys.modules)


@functools.lru_cache(maxsize=8)
def _library_roots(loaded: tuple) -> tuple:
    import os
    import site
    import sysconfig
    roots = [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]  # tdf
    paths = sysconfig.get_paths()
    roots += [paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths]
    try:
        roots += list(site.getsitepackages()) + [site.getusersitepackages()]
    except Exception:  # pragma: no cover - a virtualenv's old site module
        pass
    import sys
    for name in loaded:
        for d in getattr(sys.modules[name], "__path__", []):
            roots.append(d)
    roots += _LIBRARY_PATHS
    return tuple(os.path.abspath(r) for r in roots if r)


def is_library_file(filename: str) -> bool:
    """Whether frames of ``filename`` are library code: JAX (and what JAX
    excludes from user frames), the standard library, tdf, installed
    packages (site-packages/dist-packages), flax/optax/... wherever
    imported from, and the paths given to :func:`add_library_path`."""
    import os
    if not filename or filename.startswith("<frozen"):
        return True
    if filename.startswith("<"):  # <stdin>, <string>: the user's
        return False
    try:
        from jax._src import source_info_util
        if not source_info_util.is_user_filename(filename):
            return True
    except Exception:  # pragma: no cover - JAX internals changed
        pass
    path = os.path.abspath(filename)
    parts = path.split(os.sep)
    if "site-packages" in parts or "dist-packages" in parts:
        return True
    for root in _library_roots(_loaded_libraries()):
        if path == root or path.startswith(root.rstrip(os.sep) + os.sep):
            return True
    return False


def user_location(source_info):
    """(file, line, column) of the user's frame of an equation, or None."""
    try:
        from jax._src import source_info_util
        frame = source_info_util.user_frame(source_info.traceback)
    except Exception:  # pragma: no cover - JAX internals changed
        return None
    if frame is None:
        return None
    return frame.file_name, frame.start_line, max(frame.start_column, 0) + 1


def error_locations(source_info):
    """(user, library) locations ``(file, line, column)`` of an equation
    for errors: the innermost frame outside library code
    (:func:`is_library_file`) and, when the equation itself was made in
    library code, its innermost frame outside JAX; either may be None."""
    try:
        from jax._src import source_info_util
        frames = list(source_info_util.user_frames(source_info.traceback))
    except Exception:  # pragma: no cover - JAX internals changed
        return None, None
    user = library = None
    for k, frame in enumerate(frames):
        where = frame.file_name, frame.start_line, max(frame.start_column, 0) + 1
        if not is_library_file(frame.file_name):
            user = where
            break
        if k == 0:
            library = where
    return user, library


def format_where(where) -> str:
    return f"{where[0]}:{where[1]}:{where[2]}" if where else "<unknown location>"


def call_site():
    """(file, line, column) of the innermost frame of the current stack
    outside library code (tdf, JAX, the standard library, installed
    packages: :func:`is_library_file`): the user's call of a
    ``tdf.jax.jit`` function, or None."""
    import sys
    import traceback
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if not is_library_file(name):
            summary = traceback.extract_stack(frame, limit=1)[0]
            return name, frame.f_lineno, (getattr(summary, "colno", None) or 0) + 1
        frame = frame.f_back
    return None


def describe(source_info) -> str:
    where = user_location(source_info)
    return f"{where[0]}:{where[1]}:{where[2]}" if where else "<unknown location>"


# ---------------------------------------------------------------- translator


class Translator:
    """Translates jaxprs equation by equation into the current insertion
    point. ``env`` maps jaxpr variables to MLIR values; nested jaxprs (calls,
    loop bodies, branches) are translated with :meth:`inline`."""

    def __init__(self, filename: str = "<jax>", fallback=None):
        self.filename = filename
        # (file, line, column) for equations without a user frame (the
        # traced function is itself a library function, ``jnp.sort``)
        self.fallback = fallback
        # Float32 convolutions as upstream named ops (the oneDNN route of the
        # CPU pipeline) instead of im2col + a contraction: _conv.
        self.library_convolutions = False
        # Constant tensors built by constant() -> their numpy contents.
        self.constant_arrays: dict = {}
        # Results of x + c / x * c with a constant c -> (kind, x, c):
        # _elementwise's chains of constant operands.
        self.constant_chains: dict = {}
        self.eqn = None
        self.stack: list = []  # the equations being translated, outermost first

    # -- errors and locations ---------------------------------------------

    def _user_location(self):
        """The innermost user source location of the current equation or of
        the calls it is nested in (library functions such as ``jnp.sort``
        run in their own jaxpr, whose equations may have no user frame)."""
        for eqn in reversed(self.stack):
            where = user_location(eqn.source_info)
            if where is not None:
                return where
        return self.fallback

    def error_locations(self):
        """(user, library) locations of an error at the current equation:
        the innermost frame outside library code of the innermost equation
        (or enclosing call) that has one, else the call site; and the
        innermost frame outside JAX of the innermost equation that has one,
        when it is library code (``flax/linen/linear.py``), else None."""
        user = library = None
        for eqn in reversed(self.stack):
            u, lib = error_locations(eqn.source_info)
            if lib is not None and library is None:
                library = lib
            if u is not None:
                user = u
                break
        return user or self.fallback, library

    def located(self, fn, *args):
        """``fn(*args, where)`` with ``where`` the current equation's
        location, computed only when ``fn`` raises (walking the equation's
        traceback costs more than building its op)."""
        try:
            return fn(*args)
        except TDFError:
            return fn(*args, self.where() + ": ")

    def where(self) -> str:
        """``file:line:col`` of the user's line for errors, with the library
        line when the equation was made in library code."""
        user, library = self.error_locations()
        text = format_where(user)
        if library is not None and library != user:
            text += f" (in library code at {format_where(library)})"
        return text

    def _operand_types(self) -> str:
        if self.eqn is None:
            return ""
        ins = ", ".join(_aval_text(v.aval) for v in self.eqn.invars)
        outs = ", ".join(_aval_text(v.aval) for v in self.eqn.outvars)
        return f"({ins or 'no operands'} -> {outs or 'no results'})"

    def _context(self) -> str:
        """`` inside jit(fft) > scan in tdf.jax.jit (float32[4] -> ...)``."""
        outer = [_describe_call(e) for e in self.stack[:-1]]
        types = self._operand_types()
        return ((f" inside {' > '.join(outer)}" if outer else "") + " in tdf.jax.jit"
                + (f" {types}" if types else ""))

    def unsupported(self, what: str) -> UnsupportedPrimitiveError:
        """The error for the current equation's primitive (or ``what``, a
        form of it) having no translation: names the primitive, its operand
        and result types, the user's line and the library line."""
        name = self.eqn.primitive.name if self.eqn is not None else "?"
        return UnsupportedPrimitiveError(
            f"{self.where()}: unsupported JAX primitive '{name}'"
            + (f" ({what})" if what else "")
            + self._context() + "; supported primitives: see docs/Frontend.md")

    def internal(self, err: BaseException) -> TranslationError:
        """A :class:`TranslationError` for ``err``, an unexpected exception
        raised while translating the current equation."""
        name = self.eqn.primitive.name if self.eqn is not None else "?"
        return TranslationError(
            f"{self.where()}: tdf.jax failed to translate JAX primitive '{name}'"
            + self._context() + f": {type(err).__name__}: {err} (an internal error of tdf.jax, "
            "or a form of the primitive it does not handle)")

    def error(self, cls, message: str):
        """``cls(f"{where}: {message}")`` located at the current equation
        (or the call site)."""
        return cls(f"{self.where()}: {message}")

    def location(self, eqn) -> ir.Location:
        where = self._user_location()
        if where is None:
            return ir.Location.name(eqn.primitive.name)
        return ir.Location.file(where[0], where[1], where[2])

    # -- jaxprs -----------------------------------------------------------

    def inline(self, jaxpr, args, consts=()):
        """Translates ``jaxpr`` (a ``Jaxpr`` or ``ClosedJaxpr``) applied to
        ``args`` at the current insertion point; returns its outputs."""
        from jax._src import core as jcore  # not jax.extend: its import loads Pallas (~30 ms)
        if isinstance(jaxpr, jcore.ClosedJaxpr):
            consts = [self.constant(*physical_value(c, v.aval)) for c, v in
                      zip(jaxpr.consts, jaxpr.jaxpr.constvars)]
            jaxpr = jaxpr.jaxpr
        env = {}
        for var, value in zip(jaxpr.constvars, consts):
            env[var] = value
        if len(args) != len(jaxpr.invars):
            raise self.error(TranslationError, f"internal error: jaxpr takes "
                             f"{len(jaxpr.invars)} arguments, got {len(args)}")
        for var, value in zip(jaxpr.invars, args):
            env[var] = value
        from ._constant_fold import fold
        outer = self.eqn
        for eqn in jaxpr.eqns:
            self.eqn = eqn
            self.stack.append(eqn)
            fn = RULES.get(eqn.primitive.name)
            if fn is None:
                raise self.unsupported("")
            self._check_dtypes(eqn)
            try:
                ins = [self._read(env, atom) for atom in eqn.invars]
                with self.location(eqn):
                    outs = fold(self, eqn, ins)
                    if outs is None:
                        outs = self._key_rule(eqn, fn)(self, eqn, ins)
            except (TDFError, MemoryError):
                raise
            except Exception as err:  # a bare error of a rule: name the primitive and line
                raise self.internal(err) from err
            if len(outs) != len(eqn.outvars):
                raise self.internal(ValueError(f"the rule returned {len(outs)} values for "
                                               f"{len(eqn.outvars)} results"))
            self.stack.pop()
            for var, value in zip(eqn.outvars, outs):
                if not isinstance(var, jcore.DropVar):
                    env[var] = value
        self.eqn = outer
        return [self._read(env, atom) for atom in jaxpr.outvars]

    def check_dtypes(self, jaxpr):
        """Raises :meth:`unsupported` (naming the primitive and the source
        line) at the first equation with a dtype tdf cannot represent; the
        jaxprs nested in an equation (``jit``, loop bodies, branches) are
        checked first, so the error names the innermost primitive."""
        outer = self.eqn
        for eqn in jaxpr.eqns:
            self.eqn = eqn
            self.stack.append(eqn)
            for sub in _sub_jaxprs(eqn.params.values()):
                self.check_dtypes(sub)
            self.eqn = eqn
            self._check_dtypes(eqn)
            self.stack.pop()
        self.eqn = outer

    def _check_dtypes(self, eqn):
        for var in list(eqn.invars) + list(eqn.outvars):
            if getattr(var.aval, "dtype", None) is None or not hasattr(var.aval, "shape"):
                raise self.unsupported(f"a value of type {var.aval}")
            try:
                check_dtype(var.aval.dtype)
            except UnsupportedPrimitiveError as err:
                raise self.unsupported(f"dtype {var.aval.dtype}"
                                       + (": a PRNG key of another implementation"
                                          if is_key(var.aval.dtype) else "")) from err

    def _key_rule(self, eqn, fn):
        """``fn``, or the rule of ``eqn`` on PRNG keys (:data:`KEY_RULES`)."""
        keys = [v.aval.dtype for v in list(eqn.invars) + list(eqn.outvars) if is_key(v.aval.dtype)]
        if not keys:
            return fn
        key_rule = KEY_RULES.get(eqn.primitive.name)
        if key_rule is None:
            raise self.unsupported(f"dtype {keys[0]}: this primitive on PRNG keys")
        return key_rule

    def _read(self, env, atom):
        from jax._src import core as jcore  # not jax.extend: its import loads Pallas (~30 ms)
        if isinstance(atom, jcore.Literal):
            return self.constant(*physical_value(atom.val, atom.aval))
        return env[atom]

    # -- constants ----------------------------------------------------------

    def scalar_attr(self, value, etype):
        if isinstance(etype, (ir.F32Type, ir.F64Type, ir.F16Type, ir.BF16Type)):
            return ir.FloatAttr.get(etype, float(value))
        width = ir.IntegerType(etype).width
        value = int(value)
        if width == 1:
            value = 1 if value else 0
        elif value >= (1 << (width - 1)):
            value -= 1 << width
        return ir.IntegerAttr.get(etype, value)

    def const(self, value, etype):
        """A scalar ``arith.constant`` of element type ``etype``."""
        return arith.ConstantOp(etype, self.scalar_attr(value, etype)).result

    def const_index(self, value: int):
        return arith.ConstantOp(ir.IndexType.get(), ir.IntegerAttr.get(ir.IndexType.get(), int(value))).result

    def constant(self, array, aval):
        """A tensor constant holding ``array`` with ``aval``'s type."""
        ttype = self.located(tensor_type, aval)
        array = original = np.asarray(array).astype(aval.dtype)
        flat = array.reshape(-1)
        if flat.size == 0 or np.all(flat == flat[0]) or (is_float(aval.dtype) and np.all(np.isnan(flat))):
            first = self.const(flat[0] if flat.size else 0, ttype.element_type)
            # Splats as scalars: no memref.global, and rank-0 constants
            # fold into element-wise bodies.
            if ttype.rank == 0:
                return self._remember(self.from_scalar(first), original)
            return self._remember(self.fill(first, ttype.shape), original)
        else:
            if flat.size > 1 << 16:
                raise self.unsupported(f"a constant of {flat.size} elements (pass it as an argument)")
            if array.dtype.name in ("bfloat16", "float16"):
                array = array.view(np.uint16)
            elif array.dtype.kind == "u":
                array = array.view(signless(array.dtype))
            attr = ir.DenseElementsAttr.get(np.ascontiguousarray(array), type=ttype)
        return self._remember(arith.ConstantOp(ttype, attr).result, original)

    def _remember(self, value, array):
        """``value``, a constant, with its contents for constant folding
        (:mod:`._constant_fold`)."""
        self.constant_arrays[value] = array
        return value

    # -- scalars and tensors ------------------------------------------------

    def extract(self, value, indices=()):
        """The scalar at ``indices`` (default: of a rank-0 tensor)."""
        return tensor.ExtractOp(value, list(indices)).result

    def from_scalar(self, scalar):
        return tensor.FromElementsOp(ir.RankedTensorType.get((), scalar.type), [scalar]).result

    def empty(self, shape, etype):
        return tensor.EmptyOp(list(shape), etype).result

    def fill(self, scalar, shape):
        out = self.empty(shape, scalar.type)
        return linalg.fill(scalar, outs=[out])

    def index_of(self, scalar):
        """An integer scalar as an ``index``."""
        if isinstance(scalar.type, ir.IndexType):
            return scalar
        if ir.IntegerType(scalar.type).width == 1:
            scalar = arith.ExtUIOp(ir.IntegerType.get_signless(8), scalar).result
        return arith.IndexCastOp(ir.IndexType.get(), scalar).result

    def signed_index(self, scalar, dtype):
        """Integer index ``scalar`` of ``dtype`` as a signed integer with the
        same range checks: an unsigned index is zero-extended to ``i64``
        (``uint64`` saturates at ``2**63 - 1``, out of range either way)."""
        if not is_unsigned(dtype):
            return scalar
        i64 = ir.IntegerType.get_signless(64)
        if ir.IntegerType(scalar.type).width < 64:
            return arith.ExtUIOp(i64, scalar).result
        return arith.MinUIOp(scalar, self.const((1 << 63) - 1, i64)).result

    def clamp_index(self, scalar, low: int, high: int):
        """``index`` value of integer ``scalar`` clamped to ``[low, high]``
        (clamped before the cast so no wide value wraps)."""
        etype = scalar.type
        lo = self.const(low, etype)
        hi = self.const(high, etype) if high < (1 << (ir.IntegerType(etype).width - 1)) else None
        v = arith.MaxSIOp(scalar, lo).result
        if hi is not None:
            v = arith.MinSIOp(v, hi).result
        return self.index_of(v)

    # -- linalg.generic -----------------------------------------------------

    def generic(self, inputs, input_maps, inits, init_maps, iterators, body, rank=None):
        """A ``linalg.generic``: ``body(*block_args)`` builds the region
        (block arguments: one scalar per input and init) and returns the
        yielded scalars. Maps are lists of affine expressions (ints are
        constants) over ``rank`` loop dimensions."""
        if rank is None:
            rank = len(iterators)
        maps = [self._map(m, rank) for m in list(input_maps) + list(init_maps)]
        iters = ir.ArrayAttr.get([ir.Attribute.parse(f"#linalg.iterator_type<{it}>")
                                  for it in iterators])
        op = linalg.GenericOp([v.type for v in inits], list(inputs), list(inits),
                              ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]), iters)
        types = [ir.RankedTensorType(v.type).element_type for v in list(inputs) + list(inits)]
        block = op.regions[0].blocks.append(*types)
        with ir.InsertionPoint(block):
            results = body(*block.arguments)
            linalg.YieldOp(list(results))
        return list(op.results)

    @staticmethod
    def _map(exprs, rank):
        out = []
        for e in exprs:
            if isinstance(e, int):
                out.append(ir.AffineConstantExpr.get(e))
            else:
                out.append(e)
        return ir.AffineMap.get(rank, 0, out)

    @staticmethod
    def dims(rank):
        return [ir.AffineDimExpr.get(i) for i in range(rank)]

    def elementwise(self, out_aval, args, fn, out_etype=None):
        """Applies the scalar function ``fn`` element-wise; rank-0 operands
        and size-1 dimensions broadcast implicitly (as jaxprs allow)."""
        shape = tuple(int(s) for s in out_aval.shape)
        etype = out_etype or self.located(element_type, out_aval.dtype)
        if not shape:
            return self.from_scalar(fn(*[self.extract(a) for a in args]))
        rank = len(shape)
        dims = self.dims(rank)
        tensors, maps, slots = [], [], []
        for a in args:
            t = ir.RankedTensorType(a.type)
            if t.rank == 0 and self._is_constant(a):
                slots.append(("const", self.extract(a)))
                continue
            if t.rank == 0:
                maps.append([])
            elif tuple(t.shape) == shape:
                maps.append(dims)
            else:
                maps.append([0 if (s == 1 and shape[i] != 1) else dims[i]
                             for i, s in enumerate(t.shape)])
            slots.append(("arg", len(tensors)))
            tensors.append(a)
        init = self.empty(shape, etype)

        def body(*block_args):
            scalars = [v if kind == "const" else block_args[v] for kind, v in slots]
            return [fn(*scalars)]

        return self.generic(tensors, maps, [init], [dims], ["parallel"] * rank, body)[0]

    @staticmethod
    def _is_constant(value) -> bool:
        owner = value.owner
        if isinstance(owner, ir.Block):
            return False
        if owner.name == "tensor.from_elements":
            inner = owner.operands[0].owner
            return not isinstance(inner, ir.Block) and inner.name == "arith.constant"
        return owner.name == "arith.constant"

    # -- shapes -------------------------------------------------------------

    def reshape(self, value, shape):
        """``value`` reshaped to ``shape`` (row-major), through
        ``tensor.collapse_shape``/``expand_shape`` (views of ``value``)."""
        t = ir.RankedTensorType(value.type)
        shape = tuple(int(s) for s in shape)
        if tuple(t.shape) == shape:
            return value
        etype = t.element_type
        if t.rank == 0:
            flat = tensor.ExpandShapeOp(ir.RankedTensorType.get((1,), etype), value, [],
                                        [], [1]).result
        elif t.rank == 1:
            flat = value
        else:
            flat = tensor.CollapseShapeOp(ir.RankedTensorType.get((int(np.prod(t.shape)),), etype),
                                          value, [list(range(t.rank))]).result
        if len(shape) == 0:
            return tensor.CollapseShapeOp(ir.RankedTensorType.get((), etype), flat, []).result
        if len(shape) == 1:
            return flat
        return tensor.ExpandShapeOp(ir.RankedTensorType.get(shape, etype), flat,
                                    [list(range(len(shape)))], [], list(shape)).result

    def unaliased_copy(self, update, dest):
        """``update`` itself, or a fresh copy of it when it is a view of the
        same storage as ``dest`` (an in-place write of ``dest`` would read
        its own output: ``dynamic_update_slice(y, y[:3], (1,))``)."""
        if _view_root(update) != _view_root(dest):
            return update
        t = ir.RankedTensorType(update.type)
        if t.rank == 0:
            return self.from_scalar(self.extract(update))
        dims = self.dims(t.rank)
        init = self.empty(t.shape, t.element_type)
        return self.generic([update], [dims], [init], [dims], ["parallel"] * t.rank,
                            lambda a, _o: [a])[0]

    def extract_slice(self, source, offsets, sizes, strides=None, result_shape=None):
        """``tensor.extract_slice``: ``offsets`` are ints or ``index`` values;
        ``result_shape`` (rank-reduced) defaults to ``sizes``."""
        strides = strides or [1] * len(sizes)
        dyn, static = self._mixed(offsets)
        etype = ir.RankedTensorType(source.type).element_type
        rtype = ir.RankedTensorType.get(tuple(result_shape if result_shape is not None else sizes), etype)
        return tensor.ExtractSliceOp(rtype, source, dyn, [], [], static, list(sizes),
                                     list(strides)).result

    def insert_slice(self, source, dest, offsets, sizes, strides=None):
        strides = strides or [1] * len(sizes)
        dyn, static = self._mixed(offsets)
        return tensor.InsertSliceOp(source, dest, dyn, [], [], static, list(sizes),
                                    list(strides)).result

    @staticmethod
    def _mixed(values):
        dyn, static = [], []
        for v in values:
            if isinstance(v, (int, np.integer)):
                static.append(int(v))
            else:
                static.append(DYNAMIC)
                dyn.append(v)
        return dyn, static


def _aval_text(aval) -> str:
    """``float32[3,4]`` (``Ref{float32[3]}`` for a ref) for messages."""
    inner = getattr(aval, "inner_aval", None)
    if inner is not None:
        return f"Ref{{{_aval_text(inner)}}}"
    dtype, shape = getattr(aval, "dtype", None), getattr(aval, "shape", None)
    if dtype is None or shape is None:
        return str(aval)
    return f"{_dtype_name(dtype)}[{','.join(str(d) for d in shape)}]"


def _describe_call(eqn) -> str:
    """``jit(fft)`` for a call equation with a name, else the primitive."""
    name = eqn.params.get("name")
    return f"{eqn.primitive.name}({name})" if isinstance(name, str) else eqn.primitive.name


def _sub_jaxprs(values):
    """The jaxprs among equation parameter ``values`` (``jit``'s ``jaxpr``,
    ``cond``'s ``branches``, ...)."""
    for value in values:
        if isinstance(value, (list, tuple)):
            yield from _sub_jaxprs(value)
        elif hasattr(value, "eqns"):
            yield value
        elif hasattr(getattr(value, "jaxpr", None), "eqns"):
            yield value.jaxpr


def _view_root(value):
    """The value whose storage ``value`` is a view of."""
    while True:
        owner = value.owner
        if isinstance(owner, ir.Block) or owner.name not in TENSOR_VIEW_OPS:
            return value
        value = owner.operands[0]
