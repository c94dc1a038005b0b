"""MLIR text builders for the kernels the corpus programs call: element-wise
``func.func`` kernels on memrefs in destination-passing style, with linalg
bodies and the ``tdf.elementwise`` attribute."""

from __future__ import annotations

BINARY = {"add": "linalg.add", "sub": "linalg.sub", "mul": "linalg.mul", "max": "linalg.max"}
UNARY = {"exp": "linalg.exp", "log": "linalg.log", "neg": "linalg.negf"}


def memref(shape: str) -> str:
    return f"memref<{shape}>"


def binary(name: str, op: str, shape: str, inplace: bool = False) -> str:
    """``@name(a, b, out)``, or ``@name(a, b)`` writing into ``a`` when ``inplace``."""
    m = memref(shape)
    out = "%a" if inplace else "%out"
    params = f"%a: {m}, %b: {m}" + ("" if inplace else f", %out: {m}")
    return (f"func.func private @{name}({params}) attributes {{tdf.elementwise}} {{\n"
            f"  {BINARY[op]} ins(%a, %b : {m}, {m}) outs({out} : {m})\n"
            f"  return\n}}\n")


def unary(name: str, op: str, shape: str) -> str:
    m = memref(shape)
    return (f"func.func private @{name}(%a: {m}, %out: {m}) attributes {{tdf.elementwise}} {{\n"
            f"  {UNARY[op]} ins(%a : {m}) outs(%out : {m})\n"
            f"  return\n}}\n")


def relu(name: str, shape: str) -> str:
    """max(x, 0) as a linalg.generic (any rank)."""
    m = memref(shape)
    rank = shape.count("x")
    dims = ", ".join(f"d{i}" for i in range(rank))
    ident = f"affine_map<({dims}) -> ({dims})>"
    iters = ", ".join(['"parallel"'] * rank)
    element = shape.rsplit("x", 1)[1]
    return (f"func.func private @{name}(%a: {m}, %out: {m}) attributes {{tdf.elementwise}} {{\n"
            f"  %zero = arith.constant 0.0 : {element}\n"
            f"  linalg.generic {{indexing_maps = [{ident}, {ident}], iterator_types = [{iters}]}}\n"
            f"      ins(%a : {m}) outs(%out : {m}) {{\n"
            f"  ^bb0(%x: {element}, %o: {element}):\n"
            f"    %r = arith.maximumf %x, %zero : {element}\n"
            f"    linalg.yield %r : {element}\n"
            f"  }}\n  return\n}}\n")
