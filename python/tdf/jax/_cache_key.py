"""The compilation cache's key of a ``tdf.jax.jit`` program, computed from
the traced jaxpr instead of the translated MLIR text.

A cache hit (:mod:`tdf.cache`) skips tdf's pipeline and LLVM; keyed by the
text, it would still pay for translating the jaxpr to MLIR and printing it,
which for large programs costs more than tracing. So ``Lowered.compile``
hands :func:`tdf.compile` a :class:`tdf.cache.Source`: this key, and the
text to make only on a miss.

The key is a SHA-256 of everything the translation (``_build_module``)
reads: the jaxpr with its constants' contents, every equation's primitive,
parameters, operand and result types and user source location (the
locations the program text carries), literal values bit for bit, the
donation of each input leaf and how each output leaf is produced, the
function's name and call site (the fallback location), the whole JAX
configuration (``jax.config.values``: x64, the PRNG flags...) and the JAX
version. tdf's own sources are in :func:`tdf.cache.toolchain_fingerprint`.

A parameter value whose meaning its ``repr`` may not carry (an object of an
unknown class printed with its address) makes the program *unkeyable*: it is
then keyed by its text, as ``tdf.compile`` keys any program (and so is one
the key fails on in any other way). Typed PRNG key arrays are keyed by their
key data and key type. Python
callables in parameters (the rules of ``custom_jvp``/``custom_vjp``, thunks)
are left out: the translator inlines the primal jaxpr and never calls them.
"""

from __future__ import annotations

import enum
import functools
import hashlib

import numpy as np

from ._builder import user_location

__all__ = ["program_key"]


@functools.cache
def _jax():
    from jax._src import core
    from jax._src import linear_util as lu
    return core, lu


class Unkeyable(Exception):
    """A value the key cannot represent faithfully."""


class _Writer:
    def __init__(self, avals: dict | None = None):
        self.h = hashlib.sha256()
        self.jaxprs: dict[int, str] = {}  # id(jaxpr) -> digest (shared sub-jaxprs)
        self.keep: list = []  # the jaxprs whose ids are memoized stay alive meanwhile
        self.avals: dict = {} if avals is None else avals  # (type, dtype, shape, weak) -> text

    def put(self, text: str) -> None:
        data = text.encode("utf-8", "surrogatepass")
        self.h.update(len(data).to_bytes(8, "little"))
        self.h.update(data)

    # -- values -----------------------------------------------------------

    def array(self, value) -> str:
        try:
            a = np.asarray(value)
        except TypeError:  # a typed PRNG key array: its key data
            import jax
            dtype = getattr(value, "dtype", None)
            if dtype is None or not jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
                raise Unkeyable(f"a {type(value).__name__} without an array value") from None
            return f"key({dtype},{self.array(jax.random.key_data(value))})"
        if a.dtype.hasobject:
            raise Unkeyable("an object array")
        data = a.tobytes()
        digest = data.hex() if len(data) <= 32 else hashlib.sha256(data).hexdigest()
        return f"array({a.dtype.name}/{a.dtype.str},{a.shape},{digest})"

    def value(self, v) -> str:
        core, lu = _jax()
        t = type(v)
        if v is None or t in (bool, int, float, complex, str, bytes):
            return repr(v)  # float reprs round-trip exactly
        if isinstance(v, (core.Jaxpr, core.ClosedJaxpr)):
            return self.jaxpr(v)
        if isinstance(v, tuple):  # NamedTuples (dimension numbers) by their type too
            return f"{t.__qualname__}({','.join(self.value(x) for x in v)})"
        if isinstance(v, list):
            return f"[{','.join(self.value(x) for x in v)}]"
        if isinstance(v, dict):
            items = sorted((self.value(k), self.value(x)) for k, x in v.items())
            return "{" + ",".join(f"{k}:{x}" for k, x in items) + "}"
        if isinstance(v, (set, frozenset)):
            return "set(" + ",".join(sorted(self.value(x) for x in v)) + ")"
        if isinstance(v, enum.Enum):
            return f"{t.__module__}.{t.__qualname__}.{v.name}"
        if isinstance(v, (np.ndarray, np.generic)) or hasattr(v, "__array__") and \
                hasattr(v, "dtype") and hasattr(v, "shape"):
            return self.array(v)
        if isinstance(v, (np.dtype, type)):
            return f"{type(v).__name__}:{v}"
        if isinstance(v, core.AbstractValue):
            return self.aval(v)
        if callable(v) or isinstance(v, lu.WrappedFun):
            return "<callable>"  # custom_jvp/vjp rules, thunks: never called
        text = repr(v)
        if " at 0x" in text or "object at" in text:
            raise Unkeyable(f"a {t.__module__}.{t.__qualname__} parameter")
        return f"{t.__module__}.{t.__qualname__}:{text}"

    def aval(self, aval) -> str:
        ident = (type(aval), getattr(aval, "dtype", None), getattr(aval, "shape", None),
                 bool(getattr(aval, "weak_type", False)))
        text = self.avals.get(ident)
        if text is None:
            text = self.avals[ident] = f"{ident[0].__name__}({ident[1]},{ident[2]},{int(ident[3])})"
        return text

    # -- jaxprs -----------------------------------------------------------

    def jaxpr(self, jaxpr) -> str:
        """The digest of a Jaxpr or ClosedJaxpr (constants included)."""
        core = _jax()[0]
        digest = self.jaxprs.get(id(jaxpr))
        if digest is not None:
            return digest
        sub = _Writer(self.avals)
        sub.jaxprs, sub.keep = self.jaxprs, self.keep
        if isinstance(jaxpr, core.ClosedJaxpr):
            sub.put("consts:" + ",".join(sub.array(c) for c in jaxpr.consts))
            sub.put(sub.jaxpr(jaxpr.jaxpr))
        else:
            sub.body(jaxpr)
        digest = "jaxpr:" + sub.h.hexdigest()
        self.keep.append(jaxpr)
        self.jaxprs[id(jaxpr)] = digest
        return digest

    def body(self, jaxpr) -> None:
        core = _jax()[0]
        names: dict = {}

        def var(v) -> str:
            if isinstance(v, core.Literal):
                return f"lit({self.array(v.val)}:{self.aval(v.aval)})"
            if isinstance(v, core.DropVar):
                return f"_:{self.aval(v.aval)}"
            name = names.get(v)
            if name is None:
                name = names[v] = f"v{len(names)}:{self.aval(v.aval)}"
            return name

        self.put("constvars:" + ",".join(var(v) for v in jaxpr.constvars))
        self.put("invars:" + ",".join(var(v) for v in jaxpr.invars))
        for eqn in jaxpr.eqns:
            params = ",".join(f"{k}={self.value(eqn.params[k])}" for k in sorted(eqn.params))
            self.put(f"{eqn.primitive.name}[{params}]({','.join(var(v) for v in eqn.invars)})"
                     f"->({','.join(var(v) for v in eqn.outvars)})"
                     f"@{user_location(eqn.source_info)}"
                     f"!{sorted(map(repr, eqn.effects)) if eqn.effects else ''}")
        self.put("outvars:" + ",".join(var(v) for v in jaxpr.outvars))


def program_key(sig, name: str, where, library: bool = False) -> str | None:
    """The key of the program ``_build_module(sig, name, where, library)``
    makes, or None when it cannot be keyed faithfully (:class:`Unkeyable`)."""
    import jax
    import jaxlib
    w = _Writer()
    try:
        w.put(f"tdf.jax program: jax {jax.__version__} jaxlib {jaxlib.__version__}")
        w.put(repr(sorted((k, w.value(v)) for k, v in jax.config.values.items())))
        w.put(f"name {name!r} at {where!r} library convolutions {library}")
        w.put("in " + ",".join(w.aval(a) for a in sig.in_avals))
        w.put(f"donated {list(map(bool, sig.donated))}")
        w.put("outputs " + ",".join(
            f"{kind}:{w.array(value) if kind == 'literal' else value}"
            for kind, value in sig.outputs))
        w.put("out " + ",".join(w.aval(a) for a in sig.out_avals))
        for field in ("result_pairs", "python_pairs"):
            w.put(f"{field} {getattr(sig, field, None)!r}")
        w.put(w.jaxpr(sig.closed))
    except Unkeyable:
        return None
    except Exception:  # noqa: BLE001 - never fail a compile: key the program by its text
        return None
    return w.h.hexdigest()
