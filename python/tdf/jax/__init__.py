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
JAX's argmax ties/NaNs and integer division. Refs (``jax.new_ref``,
``r[i] += y``, ``jax.Ref`` arguments) are functionalized first and updated
in place (:mod:`._refs`). A primitive without a translation raises
:class:`UnsupportedPrimitiveError` (a ``tdf.TDFError``) naming the innermost
primitive, its operand types and the user's source line (with the library
line when it was made in library code: :func:`add_library_path`); bad
arguments raise :class:`ArgumentError`.
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
from ._builder import (
    RULES,
    ArgumentError,
    TranslationError,
    UnsupportedPrimitiveError,
    add_library_path,
    is_library_file,
    remove_library_path,
)
from ._refs import REF_PRIMITIVES

__all__ = ["jit", "JitFunction", "Lowered", "StrictInplaceError", "UnsupportedPrimitiveError",
           "TranslationError", "ArgumentError", "add_library_path", "remove_library_path",
           "is_library_file", "supported_primitives"]


def supported_primitives() -> list[str]:
    """The names of the JAX primitives ``tdf.jax.jit`` translates (the ref
    primitives through their functionalization)."""
    return sorted(set(RULES) | set(REF_PRIMITIVES))
