"""``tdf.jax``: run JAX functions with tdf, in place.

::

    import tdf.jax
    f = tdf.jax.jit(fun, donate_argnums=(0,), static_argnums=())
    out = f(*args)                 # numpy (pytrees) in, numpy pytree out, JAX's structure
    low = f.lower(*args)           # the imported program of this input signature
    print(low.as_text())           # linalg/tensor/arith/math/scf MLIR, {tdf.donate} on donated args
    prog = low.compile()           # a tdf.compiler.Program; prog.report() lists in-place decisions

The function is traced with ``jax.make_jaxpr`` and every jaxpr equation is
translated with the MLIR Python builders (element-wise ops, shape ops,
reductions, ``dot_general``, indexing, control flow: see
``docs/Frontend.md``). Semantics are JAX's eager ones: clamped dynamic
slices, dropped out-of-range scatter windows, accumulating scatter-add,
JAX's argmax ties/NaNs and integer division. A primitive without a
translation raises :class:`UnsupportedPrimitiveError` (a ``tdf.TDFError``)
naming the primitive and the user's source line.
"""

from . import (  # noqa: F401  (register rules)
    _bits,
    _control,
    _conv,
    _cumulative,
    _elementwise,
    _indexing,
    _random,
    _reduce,
    _shape,
    _sort,
    _special,
    _window,
)
from ._api import JitFunction, Lowered, StrictInplaceError, jit
from ._builder import RULES, UnsupportedPrimitiveError

__all__ = ["jit", "JitFunction", "Lowered", "StrictInplaceError", "UnsupportedPrimitiveError",
           "supported_primitives"]


def supported_primitives() -> list[str]:
    """The names of the JAX primitives ``tdf.jax.jit`` translates."""
    return sorted(RULES)
