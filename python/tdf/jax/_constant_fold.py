"""Constant folding at translation, as XLA folds constants.

An equation whose operands are all constants (literals, constant arrays and
what this module folded before) and whose float result comes from an
operation that is exact in IEEE arithmetic -- ``add sub mul div neg max
min``, ``convert_element_type``, ``iota`` and the shape primitives
``broadcast_in_dim reshape squeeze concatenate`` -- is evaluated in numpy
in the result's dtype (bfloat16 through ``ml_dtypes``: computed in float32
and rounded, as XLA:CPU computes it) and, when every element of the result
is the same, becomes that splat constant. XLA folds such subgraphs before
its algebraic simplifier combines constants, so the constants tdf's chains
of constant operands (``_elementwise``) see are jax.jit's: ``uniform``'s
``(bits - 1) * (max - min) + min`` with constant bounds has ``max - min`` =
1 in float16, the product drops, and ``(bits - 1) + tiny`` is
``bits + (-1 + tiny)`` = ``bits - 1`` in float16, as in jax.jit. Folded
values keep subnormals, as XLA's evaluator does. Results that are not
splats are left to the program (a dense float16/bfloat16 constant array
is not a form the pipeline builds elsewhere), as are results of more than
65,536 elements.
"""

from __future__ import annotations

import numpy as np

from ._builder import is_float, is_key

__all__ = ["fold"]

_BINARY = {"add": np.add, "add_any": np.add, "sub": np.subtract, "mul": np.multiply,
           "div": np.divide, "max": np.maximum, "min": np.minimum}
_MAX_ELEMENTS = 1 << 16


def _dtype(var):
    dtype = getattr(getattr(var, "aval", None), "dtype", None)
    if dtype is None or is_key(dtype):
        return None
    return np.dtype(dtype)


def _value(tr, v):
    found = tr.constant_arrays.get(v)
    if found is not None:
        return found
    from ._elementwise import _splat_float  # noqa: PLC0415 - _elementwise imports _builder
    splat = _splat_float(v)
    return None if splat is None else np.asarray(splat)


def _evaluate(name, params, operands, out):
    if name in _BINARY:
        a, b = (np.asarray(x).astype(out) for x in operands)
        return _BINARY[name](a, b)
    if name == "neg":
        return np.negative(np.asarray(operands[0]).astype(out))
    if name == "convert_element_type":
        return np.asarray(operands[0]).astype(out)
    if name == "broadcast_in_dim":
        shape, dims = tuple(params["shape"]), tuple(params["broadcast_dimensions"])
        a = np.asarray(operands[0])
        expanded = [1] * len(shape)
        for i, d in enumerate(dims):
            expanded[d] = a.shape[i]
        return np.broadcast_to(a.reshape(expanded), shape).astype(out)
    if name == "reshape" and params.get("dimensions") is None:
        return np.asarray(operands[0]).reshape(tuple(params["new_sizes"])).astype(out)
    if name == "squeeze":
        return np.squeeze(np.asarray(operands[0]), axis=tuple(params["dimensions"])).astype(out)
    if name == "concatenate":
        return np.concatenate([np.asarray(x) for x in operands],
                              axis=params["dimension"]).astype(out)
    return None


def fold(tr, eqn, ins):
    """The constant results of ``eqn`` when it folds (see the module
    docstring), else None."""
    name = eqn.primitive.name
    if len(eqn.outvars) != 1:
        return None
    if name not in _BINARY and name not in ("neg", "convert_element_type", "broadcast_in_dim",
                                            "reshape", "squeeze", "concatenate", "iota"):
        return None
    out = _dtype(eqn.outvars[0])
    if out is None or not is_float(out):
        return None
    aval = eqn.outvars[0].aval
    shape = tuple(int(s) for s in aval.shape)
    if int(np.prod(shape)) > _MAX_ELEMENTS:
        return None
    if name == "iota":
        dim = int(eqn.params["dimension"])
        line = np.arange(shape[dim]).astype(out)
        expanded = [1] * len(shape)
        expanded[dim] = shape[dim]
        result = np.broadcast_to(line.reshape(expanded), shape)
    else:
        kinds = [_dtype(v) for v in eqn.invars]
        if not ins or any(k is None or k.kind not in "fiub" for k in kinds):
            return None
        if name in _BINARY or name == "neg":
            if any(k != out for k in kinds):
                return None
        operands = []
        for v, kind in zip(ins, kinds):
            value = _value(tr, v)
            if value is None:
                return None
            operands.append(np.asarray(value).astype(kind))
        with np.errstate(all="ignore"):
            result = _evaluate(name, eqn.params, operands, out)
        if result is None or tuple(result.shape) != shape:
            if result is None or np.asarray(result).size != 1:
                return None
            result = np.broadcast_to(result, shape)
    result = np.asarray(result, dtype=out)
    flat = result.reshape(-1)
    if flat.size and not (np.all(flat == flat[0]) or np.all(np.isnan(flat))):
        return None  # only splats: a dense constant would be a new array in the module
    return [tr.constant(result, aval)]
