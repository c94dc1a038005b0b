"""Compile-time memory figures of compiled functions: ``memory_analysis()``.

:class:`MemoryAnalysis` has the field names of JAX's ``CompiledMemoryStats``
(``jax.jit(f).lower(*a).compile().memory_analysis()``), computed from the
buffer IR after ``tdf-plan-memory`` (its ``tdf.memory_plan`` attribute) and
the function's signature:

* ``argument_size_in_bytes``: the bytes of the tensor arguments;
* ``output_size_in_bytes``: the bytes of the tensor results, donated ones
  included;
* ``alias_size_in_bytes``: the bytes of results that are a donated argument
  updated in place (no allocation);
* ``temp_size_in_bytes``: the arena plus the allocations the planner left
  alone that are not results (one loop iteration's worth twice: while an
  iteration computes a loop-carried buffer, the previous one is live), plus
  the most any call of a private function with a body holds (its own
  temporaries, less the buffers it returns, and, transitively, its calls');
* ``peak_memory_in_bytes``: ``temp + output − alias``, the most heap bytes
  one call holds at once (what ``count_allocations`` measures as the peak
  of a call from zero);

and tdf's own: ``arena_size_in_bytes``, ``host_size_in_bytes`` (the
fresh results that hold temporaries before they are written),
``lower_bound_in_bytes`` (the most bytes of the function's own buffers --
temporaries, fresh results, allocations the planner left alone -- live at
once: no placement of them needs less; ``peak / lower bound − 1`` is the
fragmentation ``str()`` shows),
``allocations_per_call`` (the arena, fresh results and kept allocations
outside loops) and ``exact`` (False when a size is dynamic: the figures then
leave out what is only known at run time).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from mlir import ir

from .passes.ir_utils import collect_ops, function_type, sym_name
from .vocabulary import MEMORY_PLAN_ATTR, static_nbytes

__all__ = ["MemoryAnalysis", "memory_analyses"]


@dataclass(frozen=True)
class MemoryAnalysis:
    """The memory of one call of a compiled function (see the module doc)."""

    argument_size_in_bytes: int
    output_size_in_bytes: int
    alias_size_in_bytes: int
    temp_size_in_bytes: int
    peak_memory_in_bytes: int
    arena_size_in_bytes: int
    host_size_in_bytes: int
    lower_bound_in_bytes: int
    allocations_per_call: int
    exact: bool
    generated_code_size_in_bytes: int = 0

    def as_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        kib = lambda n: f"{n / 1024:.1f} KiB"  # noqa: E731
        bound = self.lower_bound_in_bytes
        frag = f"{(self.peak_memory_in_bytes / bound - 1) * 100:.1f}%" if bound else "-"
        return (f"peak {kib(self.peak_memory_in_bytes)} = temp {kib(self.temp_size_in_bytes)}"
                f" + output {kib(self.output_size_in_bytes)} - alias "
                f"{kib(self.alias_size_in_bytes)}; arena {kib(self.arena_size_in_bytes)} + results "
                f"hosting temporaries {kib(self.host_size_in_bytes)}, lifetime lower bound "
                f"{kib(bound)} (fragmentation {frag}); {self.allocations_per_call} "
                f"allocation(s) per call" + ("" if self.exact else " (dynamic sizes left out)"))


def _bytes(specs) -> tuple[int, bool]:
    total, exact = 0, True
    for spec in specs:
        nbytes = getattr(spec, "nbytes", 0)
        if nbytes is None:
            exact = False
        else:
            total += nbytes
    return total, exact


def _plan(func) -> dict:
    if MEMORY_PLAN_ATTR not in func.attributes:
        return {}
    plan = ir.DictAttr(func.attributes[MEMORY_PLAN_ATTR])
    return {plan[i].name: ir.IntegerAttr(plan[i].attr).value for i in range(len(plan))}


def _allocations(func) -> int:
    """Allocations of ``func`` outside loops: each happens once per call."""
    count = 0

    def visit(op):
        nonlocal count
        if op.name in ("scf.for", "scf.while", "scf.parallel", "scf.forall"):
            return ir.WalkResult.SKIP
        if op.name == "memref.alloc":
            count += 1
        return ir.WalkResult.ADVANCE

    func.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return count


def _temp(plan: dict) -> int:
    return plan.get("arena", 0) + plan.get("kept_bytes", 0) + plan.get("kept_in_loops", 0)


def _call_temp(func, funcs: dict, memo: dict, calling: frozenset = frozenset()) -> int:
    """The most temporary bytes a call made by ``func`` holds (the callee's
    own and, transitively, its calls'): what the function's peak adds while
    it waits for a private function with a body (a kernel, a nest
    ``tdf-outline-deep-nests`` moved out)."""
    worst = 0
    for op in collect_ops(func, "func.call"):
        name = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
        callee = funcs.get(name)
        if callee is None or name in calling or not len(callee.regions[0].blocks):
            continue
        if name not in memo:
            # The buffers it returns outlive the call: the caller's values
            # (its outputs when they reach its results), not its temporaries.
            returned = sum(static_nbytes(t) or 0 for t in function_type(callee).results
                           if isinstance(t, ir.MemRefType))
            memo[name] = max(0, _temp(_plan(callee)) - returned) \
                + _call_temp(callee, funcs, memo, calling | {name})
        worst = max(worst, memo[name])
    return worst


def memory_analyses(module, entries: dict, returned: dict) -> dict[str, MemoryAnalysis]:
    """Function name -> :class:`MemoryAnalysis` for every entry of
    ``entries`` (name -> (parameter specs, result specs)) in the bufferized
    ``module``; ``returned[name][i]`` is the donated argument result ``i``
    is (or -1)."""
    funcs = {sym_name(f): f for f in module.body.operations if f.operation.name == "func.func"}
    analyses = {}
    memo: dict = {}
    for name, (params, results) in entries.items():
        plan = _plan(funcs[name])
        args, args_exact = _bytes(params)
        outputs, out_exact = _bytes(results)
        alias, _ = _bytes([params[i] for i in returned.get(name, []) if i >= 0])
        temp = _temp(plan) + _call_temp(funcs[name], funcs, memo, frozenset({name}))
        analyses[name] = MemoryAnalysis(
            argument_size_in_bytes=args, output_size_in_bytes=outputs,
            alias_size_in_bytes=alias, temp_size_in_bytes=temp,
            peak_memory_in_bytes=temp + outputs - alias,
            arena_size_in_bytes=plan.get("arena", 0), host_size_in_bytes=plan.get("hosts", 0),
            lower_bound_in_bytes=plan.get("lower_bound", 0),
            allocations_per_call=_allocations(funcs[name]),
            exact=args_exact and out_exact and not plan.get("dynamic", 0) and bool(plan))
    return analyses
