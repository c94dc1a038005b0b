"""A generator of random kernels and the tdf programs calling them, with a
numpy reference (helper of ``tests/test_kernel_fuzz.py``).

A *kernel* is a ``func.func`` on memrefs in destination-passing style
(``inputs..., outputs...``) whose body is a random sequence of linalg ops:

* ``linalg.generic`` with random indexing maps -- identity, permutations,
  reversed and constant indices, broadcasts of lower-rank inputs, rank-0
  scalars (a ``memref<f32>`` parameter or an ``f32`` constant operand) --
  parallel or with a reduction dimension, several outputs, payloads that
  read an output written by an earlier op (or the op's own accumulator);
* named ops: ``linalg.add/sub/mul/max/negf/copy/transpose/matmul/fill``.

The body is always well defined out of place: an output is read only after
an earlier op wrote all of it, inputs are never written, and no op reads an
output it writes through another map. Kernels may carry ``tdf.elementwise``
at random (the body decides: a contradicting attribute must only warn).

A *program* is a public ``@main`` calling one or more kernels through
``tdf.call`` on tensors, chaining results, sometimes passing one value as
several operands, with random ``{tdf.donate}`` arguments and results that
may include arguments and intermediate values (so liveness matters).

``Program.reference(args)`` runs the same semantics with numpy: each call
gets fresh NaN-filled outputs, each op is interpreted point by point in
loop order (what ``convert-linalg-to-loops`` does). Values are small
integers, so float32 arithmetic is exact and in place on/off must agree
bit for bit.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field

import numpy as np

F32 = np.float32
BINARY = {  # payload op -> (mlir op, float32 function with the op's NaN rules)
    "add": ("arith.addf", lambda a, b: F32(a) + F32(b)),
    "sub": ("arith.subf", lambda a, b: F32(a) - F32(b)),
    "mul": ("arith.mulf", lambda a, b: F32(a) * F32(b)),
    "max": ("arith.maximumf", lambda a, b: np.maximum(F32(a), F32(b))),
    "min": ("arith.minimumf", lambda a, b: np.minimum(F32(a), F32(b))),
}
NAMED_BINARY = {"linalg.add": np.add, "linalg.sub": np.subtract, "linalg.mul": np.multiply,
                "linalg.max": np.maximum}
NAMED_UNARY = {"linalg.negf": np.negative, "linalg.copy": lambda a: a.copy()}


def mtype(shape) -> str:
    return "memref<" + "".join(f"{n}x" for n in shape) + "f32>"


def ttype(shape) -> str:
    return "tensor<" + "".join(f"{n}x" for n in shape) + "f32>"


# -- indexing maps -----------------------------------------------------------
# A map is a list of result expressions over the iteration dims:
# ("d", k) -> d_k, ("rev", k, n) -> n - 1 - d_k, ("c", c) -> constant c.

def map_text(ndims: int, exprs) -> str:
    dims = ", ".join(f"d{k}" for k in range(ndims))
    out = []
    for e in exprs:
        if e[0] == "d":
            out.append(f"d{e[1]}")
        elif e[0] == "rev":
            out.append(f"-d{e[1]} + {e[2] - 1}")
        else:
            out.append(str(e[1]))
    return f"affine_map<({dims}) -> ({', '.join(out)})>"


def map_apply(exprs, point) -> tuple:
    idx = []
    for e in exprs:
        if e[0] == "d":
            idx.append(point[e[1]])
        elif e[0] == "rev":
            idx.append(e[2] - 1 - point[e[1]])
        else:
            idx.append(e[1])
    return tuple(idx)


def shape_preserving_perm(rng, shape) -> list[int]:
    """A random permutation ``p`` with ``shape[p[i]] == shape[i]``."""
    perm = list(range(len(shape)))
    for size in set(shape):
        dims = [i for i, n in enumerate(shape) if n == size]
        shuffled = list(dims)
        rng.shuffle(shuffled)
        for d, s in zip(dims, shuffled):
            perm[d] = s
    return perm


# -- kernels -------------------------------------------------------------------

@dataclass
class Op:
    """One op of a kernel body: its MLIR lines and a numpy interpreter."""

    lines: list
    run: object  # run(buffers: dict[param index -> np.ndarray]) -> None
    name: str


@dataclass
class Kernel:
    name: str
    in_shapes: list
    out_shapes: list
    ops: list = field(default_factory=list)
    elementwise_attr: bool = False

    @property
    def params(self) -> list:
        return self.in_shapes + self.out_shapes

    def text(self) -> str:
        params = ", ".join(f"%p{i}: {mtype(s)}" for i, s in enumerate(self.params))
        attrs = " attributes {tdf.elementwise}" if self.elementwise_attr else ""
        body = "\n".join("  " + line for op in self.ops for line in op.lines)
        return f"func.func private @{self.name}({params}){attrs} {{\n{body}\n  return\n}}\n"

    def reference(self, inputs) -> list:
        """The outputs, computed in float32 in loop order. Reading an output
        element no earlier op wrote raises (a generator bug: the compiled
        kernel would read uninitialised memory)."""
        buffers = Buffers({i: np.array(x, dtype=np.float32, copy=True)
                           for i, x in enumerate(inputs)})
        n = len(self.in_shapes)
        for j, shape in enumerate(self.out_shapes):
            buffers[n + j] = np.zeros(shape, dtype=np.float32)
            buffers.written[n + j] = np.zeros(shape, dtype=bool)
        with np.errstate(all="ignore"):  # overflow to inf and inf - inf are float32 semantics
            for op in self.ops:
                op.run(buffers)
        assert all(buffers.written[n + j].all() for j in range(len(self.out_shapes))), \
            f"@{self.name} leaves an output element unwritten"
        return [buffers[n + j] for j in range(len(self.out_shapes))]


class Buffers(dict):
    """Kernel parameter buffers; ``written`` tracks which output elements
    have been written (inputs are absent from it)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.written = {}

    def read(self, param, index=None):
        mask = self.written.get(param)
        if mask is not None:
            ok = mask.all() if index is None else mask[index]
            assert ok, f"reads output parameter #{param} before it is written"
        return self[param] if index is None else self[param][index]

    def write(self, param, index, value) -> None:
        if index is None:
            self[param][...] = value
        else:
            self[param][index] = value
        if param in self.written:
            if index is None:
                self.written[param][...] = True
            else:
                self.written[param][index] = True


def _run_generic(buffers, ins, out_params, out_maps, exprs, dims) -> None:
    """Reference semantics of a fuzzed ``linalg.generic`` on ``buffers``."""
    for point in itertools.product(*[range(n) for n in dims]):
        args = []
        for kind, value, amap in ins:
            if kind == "const":
                args.append(F32(value))
            else:
                args.append(buffers.read(value, map_apply(amap, point)))
        old = [buffers[p][map_apply(m, point)] for p, m in zip(out_params, out_maps)]
        for k, (p, m) in enumerate(zip(out_params, out_maps)):
            if uses_old(exprs, k):
                buffers.read(p, map_apply(m, point))
        new = [evaluate(e, args, old) for e in exprs]
        for p, m, v in zip(out_params, out_maps, new):
            buffers.write(p, map_apply(m, point), F32(v))


class KernelBuilder:
    """Builds one random kernel (see the module docstring for the rules)."""

    def __init__(self, rng, name: str, shape, counter):
        self.rng = rng
        self.name = name
        self.shape = tuple(shape)
        self.rank = len(shape)
        self.counter = counter  # fresh SSA names across the kernel
        n_in = int(rng.integers(1, 4))
        n_out = int(rng.integers(1, 3))
        in_shapes = []
        for _ in range(n_in):
            roll = rng.random()
            if roll < 0.7 or self.rank == 1 and roll < 0.85:
                in_shapes.append(self.shape)
            elif roll < 0.85 and self.rank >= 2:
                in_shapes.append(self.shape[1:])  # broadcast along d0
            else:
                in_shapes.append(())  # a rank-0 scalar parameter
        self.kernel = Kernel(name, in_shapes, [self.shape] * n_out,
                             elementwise_attr=bool(rng.random() < 0.3))
        self.n_in = n_in
        self.written: set = set()  # output params fully written so far

    def fresh(self, prefix: str) -> str:
        self.counter[0] += 1
        return f"%{prefix}{self.counter[0]}"

    # operands -----------------------------------------------------------
    def full_params(self, exclude=()) -> list:
        """Params of the full shape that may be read: inputs, and outputs
        already written (not in ``exclude``)."""
        found = [i for i, s in enumerate(self.kernel.in_shapes) if s == self.shape]
        found += [self.n_in + j for j in sorted(self.written) if self.n_in + j not in exclude]
        return found

    def read_map(self, param: int, reduction: bool, identity_only: bool):
        """A random map reading ``param`` in an op over ``rank`` (+1) dims."""
        shape = self.kernel.params[param]
        if len(shape) == 0:
            return []
        if len(shape) < self.rank:  # broadcast of the trailing dims
            return [("d", k) for k in range(self.rank - len(shape), self.rank)]
        exprs = [("d", k) for k in range(self.rank)]
        if identity_only:
            return exprs
        roll = self.rng.random()
        if roll < 0.45:
            return exprs
        if roll < 0.6:
            perm = shape_preserving_perm(self.rng, self.shape)
            return [("d", perm[k]) for k in range(self.rank)]
        if roll < 0.75:
            k = int(self.rng.integers(self.rank))
            exprs[k] = ("rev", k, self.shape[k])
            return exprs
        if roll < 0.87:
            k = int(self.rng.integers(self.rank))
            exprs[k] = ("c", int(self.rng.integers(self.shape[k])))
            return exprs
        if reduction:  # read along the reduction dim instead of the last one
            exprs[-1] = ("d", self.rank)
        return exprs

    def write_map(self) -> list:
        """A bijective map onto the full shape: the identity or a
        permutation (a bare dim per loop, so linalg can infer the bounds)."""
        exprs = [("d", k) for k in range(self.rank)]
        if self.rng.random() < 0.7:
            return exprs
        perm = shape_preserving_perm(self.rng, self.shape)
        return [("d", perm[k]) for k in range(self.rank)]

    # ops ------------------------------------------------------------------
    def add_generic(self, outs: list[int], reduction: bool) -> None:
        """``linalg.generic`` writing output params ``outs`` (indices into
        the outputs). A reduction has one output, already written, that it
        accumulates into."""
        out_params = [self.n_in + j for j in outs]
        ins, reduction, reads_old = self._generic_inputs(outs, out_params, reduction)
        ndims = self.rank + (1 if reduction else 0)
        out_maps = [[("d", k) for k in range(self.rank)] if reduction else self.write_map()
                    for _ in outs]
        # An op that reads an output it writes does so with the same map.
        fixed = []
        for kind, param, amap in ins:
            if kind == "param" and param in out_params:
                amap = out_maps[out_params.index(param)]
            fixed.append((kind, param, amap))
        ins = fixed
        names = [self.fresh("in") for _ in ins]
        olds = [self.fresh("out") for _ in outs]
        exprs = []
        for j in outs:
            leaves = [("arg", k) for k in range(len(ins))] + ([("old", outs.index(j))] if reads_old[j] else [])
            expr = self.random_expr(leaves, depth=2)
            if reduction:
                expr = ("add", ("old", outs.index(j)), expr)
            exprs.append(expr)
        body: list[str] = []
        results = [self._emit(e, names, olds, body) for e in exprs]
        lines, operand_names = [], []
        for kind, value, _ in ins:
            if kind == "const":
                cname = self.fresh("c")
                lines.append(f"{cname} = arith.constant {value:.1f} : f32")
                operand_names.append((cname, "f32"))
            else:
                operand_names.append((f"%p{value}", mtype(self.kernel.params[value])))
        maps = [map_text(ndims, amap) for _, _, amap in ins] + [map_text(ndims, m) for m in out_maps]
        iters = ", ".join(['"parallel"'] * self.rank + (['"reduction"'] if reduction else []))
        ins_text = ", ".join(n for n, _ in operand_names)
        ins_types = ", ".join(t for _, t in operand_names)
        outs_text = ", ".join(f"%p{p}" for p in out_params)
        outs_types = ", ".join(mtype(self.shape) for _ in out_params)
        args = ", ".join(f"{n}: f32" for n in names + olds)
        lines.append(f"linalg.generic {{indexing_maps = [{', '.join(maps)}], iterator_types = [{iters}]}}")
        lines.append(f"    ins({ins_text} : {ins_types}) outs({outs_text} : {outs_types}) {{")
        lines.append(f"^bb0({args}):")
        lines += body
        lines.append(f"  linalg.yield {', '.join(results)} : {', '.join('f32' for _ in results)}")
        lines.append("}")
        dims = list(self.shape) + ([self.shape[-1]] if reduction else [])
        run = functools.partial(_run_generic, ins=ins, out_params=out_params, out_maps=out_maps,
                                exprs=exprs, dims=dims)
        self.kernel.ops.append(Op(lines, run, "linalg.generic"))
        self.written.update(outs)

    def _generic_inputs(self, outs, out_params, reduction: bool):
        """``(ins, reduction, reads_old)`` of a ``linalg.generic`` writing
        ``outs``: its inputs (kind, param or constant value, map), whether
        it still is a reduction (it needs an input read along the reduction
        dimension), and which outputs its payload reads."""
        rng = self.rng
        reads_old = {j: (j in self.written) and (reduction or rng.random() < 0.4) for j in outs}
        ins = []  # (kind, param or constant value, map)
        for _ in range(int(rng.integers(1, 4))):
            roll = rng.random()
            if roll < 0.15:
                ins.append(("const", float(rng.integers(-2, 3)), []))
                continue
            choices = list(range(self.n_in)) + [self.n_in + j for j in sorted(self.written)]
            param = int(rng.choice(choices))
            writes_it = param in out_params
            ins.append(("param", param, self.read_map(param, reduction, identity_only=writes_it)))
        if reduction and not any(("d", self.rank) in amap for kind, _, amap in ins if kind == "param"):
            # The reduction dimension's size comes from an input read along it.
            along = [p for p in self.full_params(exclude=out_params)]
            if not along:
                reduction = False
                reads_old = {j: j in self.written and rng.random() < 0.4 for j in outs}
            else:
                param = int(rng.choice(along))
                amap = [("d", k) for k in range(self.rank - 1)] + [("d", self.rank)]
                ins.append(("param", param, amap))
        return ins, reduction, reads_old

    def _emit(self, expr, names, olds, body) -> str:
        """The payload value of ``expr`` (ops appended to ``body``)."""
        if expr[0] == "arg":
            return names[expr[1]]
        if expr[0] == "old":
            return olds[expr[1]]
        if expr[0] == "neg":
            a = self._emit(expr[1], names, olds, body)
            name = self.fresh("v")
            body.append(f"  {name} = arith.negf {a} : f32")
            return name
        a, b = self._emit(expr[1], names, olds, body), self._emit(expr[2], names, olds, body)
        name = self.fresh("v")
        body.append(f"  {name} = {BINARY[expr[0]][0]} {a}, {b} : f32")
        return name

    def random_expr(self, leaves, depth: int):
        rng = self.rng
        if depth == 0 or rng.random() < 0.3:
            leaf = leaves[int(rng.integers(len(leaves)))]
            return ("neg", leaf) if rng.random() < 0.15 else leaf
        op = str(rng.choice(sorted(BINARY)))
        return (op, self.random_expr(leaves, depth - 1), self.random_expr(leaves, depth - 1))

    def _named_kinds(self, j: int) -> list[str]:
        """The kinds of named linalg op that may write output ``j``."""
        kinds = ["binary", "unary", "fill"]
        if self.rank >= 2:
            kinds.append("transpose")
        if self.rank == 2 and self.shape[0] == self.shape[1] and j in self.written:
            kinds.append("matmul")
        return kinds

    def add_named(self, j: int) -> bool:
        """A named linalg op writing output ``j``; False when none fits."""
        rng = self.rng
        out = self.n_in + j
        readable = self.full_params()
        if not readable:
            return False
        kind = str(rng.choice(self._named_kinds(j)))
        m = mtype(self.shape)
        if kind == "binary":
            name = str(rng.choice(sorted(NAMED_BINARY)))
            a, b = int(rng.choice(readable)), int(rng.choice(readable))
            line = f"{name} ins(%p{a}, %p{b} : {m}, {m}) outs(%p{out} : {m})"

            def run(buffers, f=NAMED_BINARY[name], a=a, b=b):
                buffers.write(out, None, f(buffers.read(a), buffers.read(b)))
        elif kind == "unary":
            name = str(rng.choice(sorted(NAMED_UNARY)))
            a = int(rng.choice(readable))
            line = f"{name} ins(%p{a} : {m}) outs(%p{out} : {m})"

            def run(buffers, f=NAMED_UNARY[name], a=a):
                buffers.write(out, None, f(buffers.read(a)))
        elif kind == "fill":
            name = "linalg.fill"
            value = float(rng.integers(-2, 3))
            cname = self.fresh("c")
            self.kernel.ops.append(Op([f"{cname} = arith.constant {value:.1f} : f32"],
                                      lambda buffers: None, "arith.constant"))
            line = f"linalg.fill ins({cname} : f32) outs(%p{out} : {m})"

            def run(buffers, value=value):
                buffers.write(out, None, F32(value))
        elif kind == "transpose":
            name = "linalg.transpose"
            others = [p for p in readable if p != out]
            if not others:
                return False
            a = int(rng.choice(others))
            perm = shape_preserving_perm(rng, self.shape)
            line = (f"linalg.transpose ins(%p{a} : {m}) outs(%p{out} : {m}) "
                    f"permutation = [{', '.join(map(str, perm))}]")

            def run(buffers, a=a, perm=perm):
                buffers.write(out, None, np.transpose(buffers.read(a), perm))
        else:
            name = "linalg.matmul"
            others = [p for p in readable if p != out]
            if not others:
                return False
            a, b = int(rng.choice(others)), int(rng.choice(others))
            line = f"linalg.matmul ins(%p{a}, %p{b} : {m}, {m}) outs(%p{out} : {m})"

            def run(buffers, a=a, b=b):
                # Loop order (i, j, k): out[i, j] += a[i, k] * b[k, j], in float32.
                acc = buffers.read(out).copy()
                left, right = buffers.read(a), buffers.read(b)
                for k in range(left.shape[1]):
                    acc = acc + left[:, k:k + 1] * right[k:k + 1, :]
                buffers.write(out, None, acc)
        self.kernel.ops.append(Op([line], run, name))
        self.written.add(j)
        return True

    def build(self) -> Kernel:
        rng = self.rng
        n_out = len(self.kernel.out_shapes)
        for _ in range(int(rng.integers(1, 4))):
            roll = rng.random()
            if roll < 0.3 and self.full_params():
                if self.add_named(int(rng.integers(n_out))):
                    continue
            written = sorted(self.written)
            if roll > 0.85 and written:
                self.add_generic([int(rng.choice(written))], reduction=True)
                continue
            count = 2 if n_out == 2 and rng.random() < 0.3 else 1
            outs = sorted(rng.choice(n_out, size=count, replace=False).tolist())
            self.add_generic(outs, reduction=False)
        for j in range(n_out):  # every output is written
            if j not in self.written:
                self.add_generic([j], reduction=False)
        return self.kernel


def uses_old(exprs, k: int) -> bool:
    """Does one of ``exprs`` read the old value of output ``k``?"""
    def walk(e):
        if e[0] == "old":
            return e[1] == k
        if e[0] == "arg":
            return False
        return any(walk(x) for x in e[1:])
    return any(walk(e) for e in exprs)


def evaluate(expr, args, old):
    if expr[0] == "arg":
        return args[expr[1]]
    if expr[0] == "old":
        return old[expr[1]]
    if expr[0] == "neg":
        return -F32(evaluate(expr[1], args, old))
    return BINARY[expr[0]][1](evaluate(expr[1], args, old), evaluate(expr[2], args, old))


# -- programs ------------------------------------------------------------------

@dataclass
class Program:
    name: str
    kernels: list
    arg_shapes: list
    donated: list
    text: str
    calls: list  # (kernel, operand value indices, result value indices)
    results: list  # value indices returned

    def reference(self, args) -> list:
        values = [np.array(a, dtype=np.float32, copy=True) for a in args]
        for kernel, operands, _ in self.calls:
            values += kernel.reference([values[v] for v in operands])
        return [values[v] for v in self.results]


def random_program(rng, name: str) -> Program:
    """One random ``@name`` function and its kernels (see the module doc)."""
    rank = int(rng.choice([1, 2, 2, 3]))
    if rng.random() < 0.5:
        side = int(rng.integers(2, 5))
        shape = (side,) * rank
    else:
        shape = tuple(int(n) for n in rng.integers(2, 5, size=rank))
    counter = [0]
    kernels = [KernelBuilder(rng, f"{name}_k{k}", shape, counter).build()
               for k in range(int(rng.integers(1, 3)))]
    values = []  # (shape, text name)
    arg_shapes, donated = [], []
    lines, calls = [], []

    def new_arg(shape):
        index = len(arg_shapes)
        arg_shapes.append(shape)
        donated.append(bool(rng.random() < 0.6))
        values.append((shape, f"%a{index}"))
        return len(values) - 1

    # Arguments come first in the value list: create them lazily but keep
    # their indices stable by numbering values as they are created.
    for c in range(int(rng.integers(1, 4))):
        kernel = kernels[int(rng.integers(len(kernels)))]
        operands = []
        for shape_in in kernel.in_shapes:
            fits = [v for v, (s, _) in enumerate(values) if s == shape_in]
            if fits and rng.random() < 0.75:
                recent = fits[-3:]
                operands.append(int(rng.choice(recent)))
            else:
                operands.append(new_arg(shape_in))
        results = []
        names = []
        for j, shape_out in enumerate(kernel.out_shapes):
            values.append((shape_out, f"%r{c}_{j}"))
            results.append(len(values) - 1)
            names.append(f"%r{c}_{j}")
        in_types = ", ".join(ttype(kernel.in_shapes[k]) for k in range(len(operands)))
        out_types = ", ".join(ttype(s) for s in kernel.out_shapes)
        lhs = ", ".join(names)
        rtypes = out_types if len(names) == 1 else f"({out_types})"
        lines.append(f"  {lhs} = tdf.call @{kernel.name}({', '.join(values[v][1] for v in operands)}) "
                     f": ({in_types}) -> {rtypes}")
        calls.append((kernel, operands, results))
    last = calls[-1][2]
    extra = [int(rng.integers(len(values))) for _ in range(int(rng.integers(0, 3)))]
    returned = list(dict.fromkeys(last + extra))
    params = ", ".join(f"%a{i}: {ttype(s)}" + (" {tdf.donate}" if d else "")
                       for i, (s, d) in enumerate(zip(arg_shapes, donated)))
    rtypes = ", ".join(ttype(values[v][0]) for v in returned)
    text = "".join(k.text() for k in kernels)
    text += (f"func.func @{name}({params}) -> ({rtypes}) {{\n" + "\n".join(lines) + "\n"
             f"  return {', '.join(values[v][1] for v in returned)} : {rtypes}\n}}\n")
    # The reference numbers values as: arguments first, then call results in
    # order. Map the generation order onto that.
    arg_values = [v for v, (_, n) in enumerate(values) if n.startswith("%a")]
    res_values = [v for v, (_, n) in enumerate(values) if not n.startswith("%a")]
    position = {v: i for i, v in enumerate(arg_values + res_values)}
    calls = [(k, [position[v] for v in ops], [position[v] for v in res]) for k, ops, res in calls]
    return Program(name, kernels, arg_shapes, donated, text, calls,
                   [position[v] for v in returned])


def random_inputs(rng, program: Program) -> list:
    return [rng.integers(-3, 4, size=s).astype(np.float32) for s in program.arg_shapes]
