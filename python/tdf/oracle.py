"""JAX as the numeric oracle of tdf programs.

An :class:`OracleProgram` bundles an MLIR source, the entry function to call,
a JAX reference function with the same parameters and results, and an input
generator. :func:`check` runs the program through ``tdf.compile`` (in-place
rewrite on or off) and through ``jax.jit`` and compares:

- every result: exactly for integer and bool dtypes, with the program's
  ``rtol``/``atol`` for floats (default ``rtol=1e-5, atol=1e-6``);
- every non-donated input: byte-identical before and after the tdf call;
- every result that the compiled program returns in a donated argument: it is
  the caller's array object (updated in place, no copy).

Usage::

    from tdf.oracle import OracleProgram, check
    prog = OracleProgram("add", SOURCE, "main", lambda x, y: x + y,
                         lambda rng: (rng.standard_normal(4, np.float32),) * 2)
    check(prog, inplace=True)          # raises OracleMismatch on disagreement
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

__all__ = ["OracleProgram", "OracleMismatch", "OracleResult", "check", "run_jax", "compare"]


class OracleMismatch(AssertionError):
    """tdf and JAX disagree, or tdf wrote a non-donated input."""


@dataclass
class OracleProgram:
    """A program of the differential corpus.

    ``make_inputs(rng)`` returns the argument tuple (numpy arrays and Python
    scalars); ``reference(*args)`` is traced by ``jax.jit``; ``static`` lists
    the argument positions JAX treats as static (shapes depending on them).
    """

    name: str
    source: str
    entry: str
    reference: Callable
    make_inputs: Callable
    rtol: float = 1e-5
    atol: float = 1e-6
    static: tuple = ()
    shared_libs: tuple = ()
    description: str = ""


@dataclass
class OracleResult:
    """What :func:`check` compared."""

    name: str
    inplace: bool
    results: int
    donated_in_place: list = field(default_factory=list)
    max_abs_error: float = 0.0


def _as_tuple(value):
    if value is None:
        return ()
    if isinstance(value, (tuple, list)):
        return tuple(value)
    return (value,)


def run_jax(program: OracleProgram, args) -> tuple:
    """Runs ``program.reference`` under ``jax.jit`` on copies of ``args``;
    returns numpy results."""
    import jax

    fn = jax.jit(program.reference, static_argnums=program.static)
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    return tuple(np.asarray(r) for r in _as_tuple(fn(*copies)))


def compare(name: str, got, want, rtol: float, atol: float) -> float:
    """Raises :class:`OracleMismatch` unless ``got`` matches ``want``; returns
    the largest absolute difference (0 for exact dtypes)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        raise OracleMismatch(f"{name}: shape {got.shape} != JAX {want.shape}")
    if got.dtype != want.dtype and not (got.dtype.kind == want.dtype.kind):
        raise OracleMismatch(f"{name}: dtype {got.dtype} != JAX {want.dtype}")
    if got.dtype.kind in "biu":
        if not np.array_equal(got, want.astype(got.dtype)):
            bad = np.argwhere(got != want)
            raise OracleMismatch(f"{name}: {len(bad)} element(s) differ from JAX, first at "
                                 f"{tuple(bad[0])}: {got[tuple(bad[0])]} != {want[tuple(bad[0])]}")
        return 0.0
    try:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    except AssertionError as err:
        raise OracleMismatch(f"{name}: differs from JAX (rtol={rtol}, atol={atol})\n{err}") from None
    if got.size == 0:
        return 0.0
    return float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))


def check(program: OracleProgram, inplace: bool = True, seed: int = 0, compiled=None) -> OracleResult:
    """Runs ``program`` through tdf and JAX and compares (see the module
    docstring). ``compiled`` reuses a ``tdf.compile`` result."""
    import tdf

    if compiled is None:
        compiled = tdf.compile(program.source, inplace=inplace, shared_libs=program.shared_libs,
                               filename=f"{program.name}.mlir")
    entry = compiled.functions[program.entry]
    rng = np.random.default_rng(seed)
    args = tuple(program.make_inputs(rng))
    want = run_jax(program, args)

    before = [a.tobytes() if isinstance(a, np.ndarray) else None for a in args]
    got = _as_tuple(entry(*args))
    if len(got) != len(want):
        raise OracleMismatch(f"{program.name}: tdf returned {len(got)} result(s), JAX {len(want)}")

    result = OracleResult(program.name, inplace, len(got))
    for i, spec in enumerate(entry.params):
        if before[i] is None or getattr(spec, "donated", False):
            continue
        if args[i].tobytes() != before[i]:
            raise OracleMismatch(f"{program.name}: tdf wrote the non-donated argument #{i}")
    for i, (g, w) in enumerate(zip(got, want)):
        err = compare(f"{program.name} result #{i} (inplace={inplace})", g, w, program.rtol, program.atol)
        result.max_abs_error = max(result.max_abs_error, err)
        arg = entry.returned_args[i]
        if arg >= 0:
            if g is not args[arg]:
                raise OracleMismatch(f"{program.name}: result #{i} should be the donated argument #{arg}")
            result.donated_in_place.append(i)
    return result
