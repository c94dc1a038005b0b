"""MLIR (tdf) program generators for every benchmark workload.

Each generator returns the textual module of one workload at one size. The
programs are written the way a user writes them: pure dataflow (``tdf.call``,
``tensor.insert_slice``), with the cache/table arguments marked
``{tdf.donate}``. Whether they then run in place is decided by the compiler
(``tdf.compile(..., inplace=True/False)``), never by the program text.

Kernels follow tdf's destination-passing convention: a
``func.func`` on memrefs with parameters ``(inputs..., outputs...)`` and no
results; element-wise kernels carry the unit attribute ``tdf.elementwise``.

Workloads:

* :func:`kv_step` -- write one token's K/V rows into a donated cache
  ``[heads, seq, dim]`` (or ``[layers, heads, seq, dim]``) at position ``%pos``.
* :func:`kv_loop` -- ``steps`` decode steps inside one compiled ``scf.for``.
* :func:`ew_chain` -- a chain of ``n`` element-wise kernel calls on a large
  1-D tensor (alternating ``x*1.0001`` and ``x+0.5``).
* :func:`log_concat` -- a log-concat: ``parts`` computed parts
  (``log`` of each input) written into one ``[parts, n]`` result.
* :func:`embed_update` -- add ``k`` update rows into a donated embedding
  table ``[vocab, dim]`` at given row indices.
* :func:`scaling_chain` -- a generated function of ~``n_ops`` ops for the
  compile-time scaling measurement.
* :func:`trivial` -- the smallest callable (one element-wise add on 4 floats)
  for the per-call overhead measurement.
"""

from __future__ import annotations

__all__ = [
    "kv_step",
    "kv_loop",
    "ew_chain",
    "log_concat",
    "embed_update",
    "scaling_chain",
    "trivial",
]


def _shape(dims) -> str:
    return "x".join(str(d) for d in dims)


def _t(dims, elt="f32") -> str:
    return f"tensor<{_shape(dims)}x{elt}>"


def _m(dims, elt="f32") -> str:
    return f"memref<{_shape(dims)}x{elt}>"


def kv_step(heads: int, seq: int, dim: int, layers: int | None = None) -> str:
    """One decode step: ``cache[..., :, pos, :] = new`` on a donated cache.

    Signature: ``@step(%cache {tdf.donate}, %new, %pos: index) -> cache``
    where ``%cache`` is ``[heads, seq, dim]`` (or ``[layers, heads, seq,
    dim]`` when ``layers`` is given) and ``%new`` the same with ``seq = 1``.
    """
    lead = [layers] if layers else []
    cache = _t(lead + [heads, seq, dim])
    new = _t(lead + [heads, 1, dim])
    rank = len(lead) + 3
    offs = ", ".join(["0"] * (rank - 2) + ["%pos", "0"])
    sizes = ", ".join(str(d) for d in lead + [heads, 1, dim])
    strides = ", ".join(["1"] * rank)
    return f"""
func.func @step(%cache: {cache} {{tdf.donate}}, %new: {new}, %pos: index) -> {cache} {{
  %updated = tensor.insert_slice %new into %cache[{offs}] [{sizes}] [{strides}] : {new} into {cache}
  return %updated : {cache}
}}
"""


def kv_loop(heads: int, seq: int, dim: int, steps: int,
            layers: int | None = None) -> str:
    """``steps`` decode steps in one compiled loop.

    Signature: ``@loop(%cache {tdf.donate}, %news, %pos0: index) -> cache``;
    ``%news`` is ``[steps, (layers,) heads, 1, dim]``; step ``t`` writes
    ``%news[t]`` at position ``%pos0 + t``.
    """
    lead = [layers] if layers else []
    cache = _t(lead + [heads, seq, dim])
    one = _t(lead + [heads, 1, dim])
    news = _t([steps] + lead + [heads, 1, dim])
    rank = len(lead) + 3
    zeros_n = ", ".join(["0"] * rank)
    sizes_n = ", ".join(["1"] + [str(d) for d in lead + [heads, 1, dim]])
    strides_n = ", ".join(["1"] * (rank + 1))
    offs = ", ".join(["0"] * (rank - 2) + ["%p", "0"])
    sizes = ", ".join(str(d) for d in lead + [heads, 1, dim])
    strides = ", ".join(["1"] * rank)
    return f"""
func.func @loop(%cache: {cache} {{tdf.donate}}, %news: {news}, %pos0: index) -> {cache} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cn = arith.constant {steps} : index
  %out = scf.for %t = %c0 to %cn step %c1 iter_args(%acc = %cache) -> ({cache}) {{
    %row = tensor.extract_slice %news[%t, {zeros_n}] [{sizes_n}] [{strides_n}] : {news} to {one}
    %p = arith.addi %pos0, %t : index
    %next = tensor.insert_slice %row into %acc[{offs}] [{sizes}] [{strides}] : {one} into {cache}
    scf.yield %next : {cache}
  }}
  return %out : {cache}
}}
"""


def _ew_kernel(name: str, n: int, op: str, cst: str) -> str:
    """A 1-D element-wise kernel ``out[i] = in[i] <op> cst`` (DPS, memrefs)."""
    m = _m([n])
    return f"""
func.func @{name}(%in: {m}, %out: {m}) attributes {{tdf.elementwise}} {{
  %c = arith.constant {cst} : f32
  linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                  iterator_types = ["parallel"]}}
      ins(%in : {m}) outs(%out : {m}) {{
  ^bb0(%a: f32, %o: f32):
    %r = arith.{op} %a, %c : f32
    linalg.yield %r : f32
  }}
  return
}}
"""


def ew_chain(n: int, calls: int, donate: bool = False) -> str:
    """``calls`` chained element-wise kernel calls on a ``[n]`` f32 tensor.

    Signature: ``@chain(%x) -> tensor``. ``%x`` not donated: the first call
    must allocate, every later one may reuse the dead intermediate (or, with
    kernel fusion, the fused loop writes one fresh result); ``donate``:
    ``%x {tdf.donate}``, so the whole chain may run in ``%x``'s storage.
    """
    t = _t([n])
    lines = []
    cur = "%x"
    for i in range(calls):
        k = "@scale" if i % 2 == 0 else "@shift"
        lines.append(f"  %v{i} = tdf.call {k}({cur}) : ({t}) -> {t}")
        cur = f"%v{i}"
    body = "\n".join(lines)
    return (_ew_kernel("scale", n, "mulf", "1.000100e+00")
            + _ew_kernel("shift", n, "addf", "5.000000e-01")
            + f"""
func.func @chain(%x: {t}{" {tdf.donate}" if donate else ""}) -> {t} {{
{body}
  return {cur} : {t}
}}
""")


def log_concat(parts: int, n: int) -> str:
    """A log-concat: ``result[i, :] = log(y_i)`` for ``parts`` inputs.

    Written functionally: ``z_i = tdf.call @log(y_i)`` then each ``z_i`` is
    inserted into a ``tensor.empty`` of shape ``[parts, n]``. Signature:
    ``@concat(%y0, ..., %y{parts-1}) -> tensor<parts x n>``.
    """
    t = _t([n])
    row = _t([1, n])
    out = _t([parts, n])
    m = _m([n])
    args = ", ".join(f"%y{i}: {t}" for i in range(parts))
    lines = [f"  %e = tensor.empty() : {out}"]
    cur = "%e"
    for i in range(parts):
        lines.append(f"  %z{i} = tdf.call @log({'%'}y{i}) : ({t}) -> {t}")
        lines.append(f"  %r{i} = tensor.expand_shape %z{i} [[0, 1]] output_shape [1, {n}]"
                     f" : {t} into {row}")
        lines.append(f"  %c{i} = tensor.insert_slice %r{i} into {cur}[{i}, 0] [1, {n}] [1, 1]"
                     f" : {row} into {out}")
        cur = f"%c{i}"
    body = "\n".join(lines)
    return f"""
func.func @log(%in: {m}, %out: {m}) attributes {{tdf.elementwise}} {{
  linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                  iterator_types = ["parallel"]}}
      ins(%in : {m}) outs(%out : {m}) {{
  ^bb0(%a: f32, %o: f32):
    %r = math.log %a : f32
    linalg.yield %r : f32
  }}
  return
}}

func.func @concat({args}) -> {out} {{
{body}
  return {cur} : {out}
}}
"""


def embed_update(vocab: int, dim: int, k: int) -> str:
    """Sparse embedding update on a donated table: ``table[idx[j]] += upd[j]``.

    Signature: ``@update(%table {tdf.donate}, %idx: tensor<k x index>,
    %upd: tensor<k x dim>) -> table``; the loop reads row ``idx[j]``, adds
    the update and writes it back with ``tensor.insert_slice``.
    """
    tab = _t([vocab, dim])
    upd = _t([k, dim])
    idx = _t([k], "index")
    row = _t([1, dim])
    return f"""
func.func @update(%table: {tab} {{tdf.donate}}, %idx: {idx}, %upd: {upd}) -> {tab} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %ck = arith.constant {k} : index
  %out = scf.for %j = %c0 to %ck step %c1 iter_args(%acc = %table) -> ({tab}) {{
    %r = tensor.extract %idx[%j] : {idx}
    %old = tensor.extract_slice %acc[%r, 0] [1, {dim}] [1, 1] : {tab} to {row}
    %u = tensor.extract_slice %upd[%j, 0] [1, {dim}] [1, 1] : {upd} to {row}
    %init = tensor.empty() : {row}
    %sum = linalg.add ins(%old, %u : {row}, {row}) outs(%init : {row}) -> {row}
    %next = tensor.insert_slice %sum into %acc[%r, 0] [1, {dim}] [1, 1] : {row} into {tab}
    scf.yield %next : {tab}
  }}
  return %out : {tab}
}}
"""


def scaling_chain(n_ops: int, width: int = 16) -> str:
    """A generated function of about ``n_ops`` ops for compile-time scaling.

    About ``n_ops * 16 / 19`` kernel calls (``tdf.call`` of element-wise kernels on
    ``[width]`` tensors) over four interleaved chains, every eighth call
    reading a value of another chain (so liveness is not trivially
    last-use-is-next-op), plus ``tensor.extract_slice`` views and
    ``tdf.assume_unaliased`` ops for the alias analysis. The op count of the
    function body is returned by :func:`count_ops` in the harness.
    """
    t = _t([width])
    m = _m([width])
    lines = []
    heads = ["%a", "%b", "%c", "%d"]
    calls = max(4, n_ops * 16 // 19)  # 19 ops per 16 calls (views, assume_unaliased)
    i = 0
    for j in range(calls):
        chain = j % 4
        src = heads[chain]
        if j % 8 == 7:
            other = heads[(chain + 1) % 4]
            lines.append(f"  %s{i} = tdf.call @add2({src}, {other}) : ({t}, {t}) -> {t}")
        else:
            lines.append(f"  %s{i} = tdf.call @inc({src}) : ({t}) -> {t}")
        new = f"%s{i}"
        i += 1
        if j % 16 == 5:
            lines.append(f"  %s{i} = tensor.extract_slice {new}[0] [{width // 2}] [1] : {t} to "
                         f"{_t([width // 2])}")
            lines.append(f"  %s{i + 1} = tdf.call @sum_half(%s{i}) : ({_t([width // 2])}) -> {t}")
            new = f"%s{i + 1}"
            i += 2
        elif j % 16 == 11:
            lines.append(f"  %s{i} = tdf.assume_unaliased {new} : {t}")
            new = f"%s{i}"
            i += 1
        heads[chain] = new
    lines.append(f"  %r0 = tdf.call @add2({heads[0]}, {heads[1]}) : ({t}, {t}) -> {t}")
    lines.append(f"  %r1 = tdf.call @add2({heads[2]}, {heads[3]}) : ({t}, {t}) -> {t}")
    lines.append(f"  %r2 = tdf.call @add2(%r0, %r1) : ({t}, {t}) -> {t}")
    body = "\n".join(lines)
    mh = _m([width // 2])
    return f"""
func.func private @inc(%in: {m}, %out: {m}) attributes {{tdf.elementwise}}
func.func private @add2(%x: {m}, %y: {m}, %out: {m}) attributes {{tdf.elementwise}}
func.func private @sum_half(%in: {mh}, %out: {m})

func.func @big(%a: {t}, %b: {t}, %c: {t}, %d: {t}) -> {t} {{
{body}
  return %r2 : {t}
}}
"""


def trivial() -> str:
    """The smallest useful callable: ``@tiny(%x) -> x + 1`` on ``tensor<4xf32>``."""
    return """
func.func @tiny(%x: tensor<4xf32>) -> tensor<4xf32> {
  %one = arith.constant dense<1.0> : tensor<4xf32>
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.add ins(%x, %one : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
"""
