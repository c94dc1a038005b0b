"""Every op of the upstream ``math`` dialect compiles for the CPU and agrees
with numpy (float64 references rounded to the tested type) on wide ranges
including edge values: +-0, subnormals, the largest finite values, +-inf,
NaN, and out-of-domain inputs (negative for log/sqrt, |x| > 1 for asin, ...).

Tolerances are in units in the last place (ulp) of the reference rounded to
the tested type. They are the documented accuracy of the lowering
(docs/Codegen.md): libm / LLVM intrinsics within :data:`LIBM_ULPS`, and the
f32 polynomial approximations of ``tdf-math-approximation`` within
:data:`APPROX_ULPS` (measured maxima, with the measured values in the doc).
NaN must be NaN, infinities must be exact, and so must every result of a
rounding, comparison, sign or integer op.
"""

from __future__ import annotations

import math
import zlib
from fractions import Fraction

import numpy as np
import pytest

import tdf
from tdf import jit_symbols
from tdf.passes import pipelines
from tdf.passes.pipelines import APPROXIMATED_OPS

N = 4096

# Accuracy of the libm / LLVM-intrinsic lowering (glibc's documented maxima
# are <= 4 ulp for these in f32 and f64; 1/sqrt rounds twice).
LIBM_ULPS = 4.0
# f32 ops lowered to polynomials by tdf-math-approximation: documented bound
# 4 ulp (measured maxima 1.0-3.8 ulp, per op in docs/Codegen.md).
APPROX_ULPS = {op: 4.0 for op in APPROXIMATED_OPS}
EXACT = {"absf", "ceil", "floor", "round", "roundeven", "trunc", "copysign", "clampf",
         "isfinite", "isinf", "isnan", "isnormal"}

UNARY_F = {
    "absf": np.abs, "acos": np.arccos, "acosh": np.arccosh, "asin": np.arcsin,
    "asinh": np.arcsinh, "atan": np.arctan, "atanh": np.arctanh, "cbrt": np.cbrt,
    "ceil": np.ceil, "cos": np.cos, "cosh": np.cosh,
    "erf": np.vectorize(math.erf, otypes=[np.float64]),
    "erfc": np.vectorize(math.erfc, otypes=[np.float64]),
    "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "floor": np.floor, "log": np.log,
    "log10": np.log10, "log1p": np.log1p, "log2": np.log2,
    "round": lambda x: np.trunc(x) + np.where(np.abs(x - np.trunc(x)) >= 0.5, np.sign(x), 0.0),
    "roundeven": np.rint, "rsqrt": lambda x: 1.0 / np.sqrt(x), "sin": np.sin,
    "sinh": np.sinh, "sqrt": np.sqrt, "tan": np.tan, "tanh": np.tanh, "trunc": np.trunc,
}
BINARY_F = {"atan2": np.arctan2, "copysign": np.copysign, "powf": np.power}
PREDICATES = {
    "isfinite": np.isfinite, "isinf": np.isinf, "isnan": np.isnan,
    "isnormal": None,  # per type, below
}
FTYPES = {"f32": np.float32, "f64": np.float64}
ITYPES = {"i32": np.int32, "i64": np.int64}


def _specials(dtype):
    info = np.finfo(dtype)
    tiny, sub = float(info.tiny), float(info.smallest_subnormal)
    values = [0.0, -0.0, sub, -sub, tiny / 3, -tiny / 3, tiny, -tiny, 1e-30, 1e-7, 0.5, -0.5,
              1.0, -1.0, 0.999, -0.999, 1.001, 2.0, -2.0, math.pi, -math.pi, 10.0, 88.5, 89.0,
              -87.5, -104.0, 710.0, 1e4, 1e10, -1e10, 1e30, float(info.max), -float(info.max),
              math.inf, -math.inf, math.nan, 2.5, -2.5, 3.5, 0.49999997]
    return np.array(values, dtype=dtype)


def _inputs(dtype, seed=0, lo=-40.0, hi=40.0):
    """Edge values, a uniform range, and log-uniform magnitudes of both signs."""
    rng = np.random.default_rng(seed)
    info = np.finfo(dtype)
    spec = _specials(dtype)
    n = N - spec.size
    lin = rng.uniform(lo, hi, n // 2)
    exps = rng.uniform(math.log2(float(info.smallest_subnormal)), math.log2(float(info.max)), n - n // 2)
    logu = np.exp2(exps) * rng.choice([-1.0, 1.0], exps.size)
    return np.concatenate([spec, lin.astype(dtype), logu.astype(dtype)]).astype(dtype)


def ulp_error(got, ref64, dtype):
    """|got - ref| in ulps of ref rounded to dtype; 0 where both are the same
    NaN/inf, inf where exactly one is non-finite (or NaN-ness differs)."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref64, dtype=np.float64)
    with np.errstate(all="ignore"):
        ref_t = ref.astype(dtype)
        spacing = np.abs(np.spacing(ref_t.astype(dtype))).astype(np.float64)
        err = np.abs(got - ref) / spacing
    both_nan = np.isnan(got) & np.isnan(ref)
    same_inf = np.isinf(got) & np.isinf(ref_t) & (np.sign(got) == np.sign(ref_t))
    # A reference beyond the type's range rounds to inf: the result must too.
    mismatch = (np.isnan(got) != np.isnan(ref)) | (np.isinf(got) != np.isinf(ref_t))
    err = np.where(both_nan | same_inf, 0.0, err)
    err = np.where(mismatch & ~both_nan, np.inf, err)
    return err


def _elementwise_fn(name, body, in_types, out_types):
    """A public function applying ``body`` element-wise with linalg.generic."""
    n = len(in_types)
    args = ", ".join(f"%a{i}: tensor<{N}x{t}>" for i, t in enumerate(in_types))
    maps = ", ".join(["affine_map<(i) -> (i)>"] * (n + len(out_types)))
    block = ", ".join([f"%x{i}: {t}" for i, t in enumerate(in_types)]
                      + [f"%o{j}: {t}" for j, t in enumerate(out_types)])
    ins = ", ".join(f"%a{i}" for i in range(n))
    in_t = ", ".join(f"tensor<{N}x{t}>" for t in in_types)
    outs_t = [f"tensor<{N}x{t}>" for t in out_types]
    empties = "\n".join(f"  %e{j} = tensor.empty() : {t}" for j, t in enumerate(outs_t))
    outs = ", ".join(f"%e{j}" for j in range(len(out_types)))
    ys = ", ".join(f"%y{j}" for j in range(len(out_types)))
    yts = ", ".join(out_types)
    return f"""
func.func @{name}({args}) -> ({', '.join(outs_t)}) {{
{empties}
  %r:{len(out_types)} = linalg.generic {{indexing_maps = [{maps}], iterator_types = ["parallel"]}}
      ins({ins} : {in_t}) outs({outs} : {', '.join(outs_t)}) {{
  ^bb0({block}):
    {body}
    linalg.yield {ys} : {yts}
  }} -> ({', '.join(outs_t)})
  return {', '.join(f'%r#{j}' for j in range(len(out_types)))} : {', '.join(outs_t)}
}}
"""


def _float_program(t):
    fns = []
    for op in UNARY_F:
        fns.append(_elementwise_fn(f"{op}_{t}", f"%y0 = math.{op} %x0 : {t}", [t], [t]))
    for op in BINARY_F:
        fns.append(_elementwise_fn(f"{op}_{t}", f"%y0 = math.{op} %x0, %x1 : {t}", [t, t], [t]))
    for op in PREDICATES:
        fns.append(_elementwise_fn(f"{op}_{t}", f"%y0 = math.{op} %x0 : {t}", [t], ["i1"]))
    fns.append(_elementwise_fn(f"fma_{t}", f"%y0 = math.fma %x0, %x1, %x2 : {t}", [t, t, t], [t]))
    fns.append(_elementwise_fn(f"fpowi_{t}", f"%y0 = math.fpowi %x0, %x1 : {t}, i32", [t, "i32"], [t]))
    fns.append(_elementwise_fn(f"clampf_{t}", f"%y0 = math.clampf %x0 to [%x1, %x2] : {t}",
                               [t, t, t], [t]))
    fns.append(_elementwise_fn(f"sincos_{t}", f"%y0, %y1 = math.sincos %x0 : {t}", [t], [t, t]))
    return "\n".join(fns)


def _int_program(t):
    fns = [_elementwise_fn(f"{op}_{t}", f"%y0 = math.{op} %x0 : {t}", [t], [t])
           for op in ("absi", "ctlz", "ctpop", "cttz")]
    fns.append(_elementwise_fn(f"ipowi_{t}", f"%y0 = math.ipowi %x0, %x1 : {t}", [t, t], [t]))
    return "\n".join(fns)


@pytest.fixture(scope="module")
def programs():
    # IEEE subnormals (numpy's references keep them; the default build
    # flushes them to zero as jax.jit does, tested in test_blas.py).
    progs = {t: tdf.compile(_float_program(t), inplace=False, flush_denormals=False)
             for t in FTYPES}
    progs.update({t: tdf.compile(_int_program(t), inplace=False, flush_denormals=False)
                  for t in ITYPES})
    return progs


def _tolerance(op, t):
    if op in EXACT:
        return 0.0
    if t == "f32" and op in APPROX_ULPS:
        return APPROX_ULPS[op]
    return LIBM_ULPS


def _check(got, ref64, dtype, tol, what, x=None):
    err = ulp_error(got, ref64, dtype)
    bad = ~(err <= tol)
    if bad.any():
        i = int(np.argmax(np.where(np.isfinite(err), err, 1e300)))
        i = int(np.flatnonzero(bad)[0]) if not bad[i] else i
        where = f" at x={x[i]!r}" if x is not None else ""
        raise AssertionError(f"{what}: {int(bad.sum())} element(s) beyond {tol} ulp; worst"
                             f"{where}: got {got[i]!r}, want {ref64[i]!r} ({err[i]} ulp)")


@pytest.mark.parametrize("t", list(FTYPES))
@pytest.mark.parametrize("op", list(UNARY_F))
def test_unary(programs, op, t):
    dtype = FTYPES[t]
    x = _inputs(dtype, seed=zlib.crc32(op.encode()) % 1000)  # not hash(): per-process
    got = getattr(programs[t], f"{op}_{t}")(x)
    with np.errstate(all="ignore"):
        ref = UNARY_F[op](x.astype(np.float64))
    _check(got, ref, dtype, _tolerance(op, t), f"math.{op} {t}", x)


@pytest.mark.parametrize("t", list(FTYPES))
@pytest.mark.parametrize("op", list(BINARY_F))
def test_binary(programs, op, t):
    dtype = FTYPES[t]
    x = _inputs(dtype, seed=1)
    y = np.random.default_rng(2).permutation(_inputs(dtype, seed=3, lo=-4, hi=4))
    if op == "powf":  # integral exponents for negative bases
        y[::3] = np.round(y[::3])
    got = getattr(programs[t], f"{op}_{t}")(x, y)
    with np.errstate(all="ignore"):
        ref = BINARY_F[op](x.astype(np.float64), y.astype(np.float64))
    _check(got, ref, dtype, _tolerance(op, t), f"math.{op} {t}", x)


@pytest.mark.parametrize("t", list(FTYPES))
@pytest.mark.parametrize("op", list(PREDICATES))
def test_predicates(programs, op, t):
    dtype = FTYPES[t]
    x = _inputs(dtype, seed=4)
    got = getattr(programs[t], f"{op}_{t}")(x)
    if op == "isnormal":
        want = np.isfinite(x) & (np.abs(x) >= np.finfo(dtype).tiny)
    else:
        want = PREDICATES[op](x)
    np.testing.assert_array_equal(got.astype(bool), want, err_msg=f"math.{op} {t}")


@pytest.mark.parametrize("t", list(FTYPES))
def test_fma_fpowi_clampf_sincos(programs, t):
    dtype = FTYPES[t]
    rng = np.random.default_rng(5)
    a, b, c = (rng.uniform(-100, 100, N).astype(dtype) for _ in range(3))
    got = getattr(programs[t], f"fma_{t}")(a, b, c)
    # Exact a*b+c, rounded once: a fused multiply-add is within 0.5 ulp.
    ref = np.array([float(Fraction(float(p)) * Fraction(float(q)) + Fraction(float(r)))
                    for p, q, r in zip(a, b, c)])
    if t == "f32":  # round the exact value to f32 through the f64 rounding (exact enough)
        ref = ref.astype(np.float64)
    _check(got, ref, dtype, 0.5, f"math.fma {t}")

    x = _inputs(dtype, seed=6)
    e = rng.integers(-6, 7, N).astype(np.int32)
    got = getattr(programs[t], f"fpowi_{t}")(x, e)
    with np.errstate(all="ignore"):
        ref = np.power(x.astype(np.float64), e.astype(np.float64))
    # Repeated multiplication, and x**-n as 1 / x**n (like llvm.powi and
    # JAX's integer_pow): where x**n overflows the reciprocal is 0 instead of
    # a subnormal; those elements are checked to be 0.
    with np.errstate(all="ignore"):
        overflow = (e < 0) & np.isinf(np.power(x.astype(np.float64), -e.astype(np.float64)).astype(dtype))
    assert (got[overflow] == 0).all()
    _check(got[~overflow], ref[~overflow], dtype, 16.0, f"math.fpowi {t}", x[~overflow])

    # MathOps.td defines clampf(value, min, max) = maxf(minf(value, min), max)
    # (NaN-propagating), and math-expand-ops lowers it exactly so: that, not
    # np.clip, is the reference (bounds drawn from both ranges, and NaNs).
    lo = rng.uniform(-10, 10, N).astype(dtype)
    hi = rng.uniform(-10, 10, N).astype(dtype)
    lo[::17] = np.nan
    x = _inputs(dtype, seed=7)
    got = getattr(programs[t], f"clampf_{t}")(x, lo, hi)
    np.testing.assert_array_equal(got, np.maximum(np.minimum(x, lo), hi))

    x = _inputs(dtype, seed=8)
    s, co = getattr(programs[t], f"sincos_{t}")(x)
    _check(s, np.sin(x.astype(np.float64)), dtype, LIBM_ULPS, f"math.sincos (sin) {t}", x)
    _check(co, np.cos(x.astype(np.float64)), dtype, LIBM_ULPS, f"math.sincos (cos) {t}", x)


def _ctlz(v, bits):
    u = v.astype(np.uint64) & np.uint64((1 << bits) - 1)
    return np.array([bits - int(x).bit_length() for x in u])


@pytest.mark.parametrize("t", list(ITYPES))
def test_integer_ops(programs, t):
    dtype = ITYPES[t]
    bits = np.iinfo(dtype).bits
    info = np.iinfo(dtype)
    rng = np.random.default_rng(9)
    x = np.concatenate([np.array([0, 1, -1, 2, info.min, info.max, info.min + 1], dtype=dtype),
                        rng.integers(info.min, info.max, N - 7, dtype=dtype, endpoint=True)])
    p = programs[t]
    np.testing.assert_array_equal(p[f"absi_{t}"](x), np.abs(x))
    np.testing.assert_array_equal(p[f"ctlz_{t}"](x), _ctlz(x, bits))
    u = [int(v) & ((1 << bits) - 1) for v in x]
    np.testing.assert_array_equal(p[f"ctpop_{t}"](x), [bin(v).count("1") for v in u])
    np.testing.assert_array_equal(p[f"cttz_{t}"](x),
                                  [bits if v == 0 else (v & -v).bit_length() - 1 for v in u])
    base = rng.integers(-50, 50, N, dtype=dtype)
    exp = rng.integers(0, 40, N, dtype=dtype)
    want = [(pow(int(b), int(e), 1 << bits)) for b, e in zip(base, exp)]
    want = np.array([w - (1 << bits) if w >= 1 << (bits - 1) else w for w in want], dtype=dtype)
    np.testing.assert_array_equal(p[f"ipowi_{t}"](base, exp), want)


def test_rsqrt_links_and_is_exact_enough():
    """Regression: math.rsqrt lowered to a call of `rsqrtf`, which libm does
    not define, so the JIT failed to link; f64 rsqrt now links and matches
    numpy."""
    text = _elementwise_fn("r", "%y0 = math.rsqrt %x0 : f64", ["f64"], ["f64"])
    x = np.linspace(0.01, 100, N)
    got = tdf.compile(text, flush_denormals=False).r(x)
    _check(got, 1.0 / np.sqrt(x), np.float64, 2.0, "math.rsqrt f64")


def test_missing_symbol_is_named_in_compile_error():
    """An external function nobody defines is named in the CompileError, not
    only printed by the JIT on stderr."""
    ctx = tdf.Context()
    module = tdf.parse("""
llvm.func @rsqrtf(f32) -> f32
llvm.func @sqrtf(f32) -> f32
llvm.func @f(%x: f32) -> f32 {
  %y = llvm.call @rsqrtf(%x) : (f32) -> f32
  %z = llvm.call @sqrtf(%y) : (f32) -> f32
  llvm.return %z : f32
}
""", ctx)
    assert jit_symbols.unresolved_functions(module, []) == ["rsqrtf"]



@pytest.fixture
def libm_only(monkeypatch):
    """tdf.compile without tdf-math-approximation (the pipeline option
    approximate-math=false): every math op through libm / LLVM intrinsics."""
    original = pipelines.lower_to_llvm

    def without(count_allocations=False, approximate_math=True, *rest, **options):
        return original(count_allocations, False, *rest, **options)

    monkeypatch.setattr(pipelines, "lower_to_llvm", without)


def test_approximation_switched_off_matches_libm(libm_only):
    """Approximated vs libm builds of the same program, and both vs numpy:
    the approximation is the only difference (checked in the lowered IR)."""
    text = "\n".join(_elementwise_fn(f"{op}_f32", f"%y0 = math.{op} %x0 : f32", ["f32"], ["f32"])
                     for op in APPROXIMATED_OPS)
    reference = tdf.compile(text, inplace=False, flush_denormals=False)
    assert all(_calls(reference.llvm_ir, op) for op in APPROXIMATED_OPS)
    for seed in range(2):
        x = _inputs(np.float32, seed=100 + seed, lo=-20, hi=20)
        for op in APPROXIMATED_OPS:
            with np.errstate(all="ignore"):
                ref = UNARY_F[op](x.astype(np.float64))
            _check(reference[f"{op}_f32"](x), ref, np.float32, LIBM_ULPS, f"libm {op}", x)


def test_approximation_is_in_the_default_build(programs):
    """The default build has no libm call for the approximated f32 ops (the
    loops stay vectorizable) and still calls libm for f64."""
    for op in APPROXIMATED_OPS:
        assert not _calls(programs["f32"].llvm_ir, op), op
        assert _calls(programs["f64"].llvm_ir, op), op


def _calls(llvm_ir: str, op: str) -> bool:
    """Whether the LLVM-dialect text calls libm or an LLVM intrinsic for ``op``."""
    return any(s in llvm_ir for s in (f"llvm.intr.{op}(", f"@{op}f(", f"@{op}("))
