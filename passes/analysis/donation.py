"""Donation pairing: which result of a function each donated argument is
paired with, and whether One-Shot Bufferize computes that result in the
argument's buffer.

**The rule** is JAX's (``_set_up_aliases`` in ``jax/_src/interpreters/mlir.py``):
for each result in order, the first donated argument not paired yet whose
shape and element type are the result's is paired with it
(:func:`pair_by_type`; per shape and dtype the k-th such result takes the
k-th such donated argument). Only tensors of static shape are paired (a
dynamic type does not fix the sizes). A function may state its pairs
instead with the function attribute ``tdf.donation_pairs =
array<i64: ...>``: per result, the donated argument paired with it, or -1
(``tdf.jax.jit`` sets it: JAX pairs over every output leaf of the user's
function, some of which never reach the compiled function).

**In place** means One-Shot Bufferize's analysis (tdf's configuration after
``tdf-donate``, on a copy of the module) finds the result equivalent to the
argument (``__equivalent_func_args__`` on ``func.return``): bufferized, the
function returns the argument's own buffer, and ``tdf-drop-donated-results``
hands the caller's array back (:func:`one_shot_equivalences`).

``tdf-insert-inplace`` makes the paired results land there
(:mod:`tdf.passes._pair_donations`), ``tdf-verify-inplace{donations}`` and
``prog.report()`` check them.
"""

from __future__ import annotations

from collections import defaultdict, deque

from mlir import ir, passmanager

from ...vocabulary import DONATE_ATTR, INPLACE_OPERANDS_ATTR, OUTLINED_ATTR
from ..ir_utils import arg_dicts, collect_ops, function_type, has_body, sym_name
from ..pipelines import ONE_SHOT_ANALYSIS

__all__ = ["PAIRS_ATTR", "EQUIVALENT_ATTR", "pair_by_type", "pairing_key", "donation_pairs",
           "pairs_are_promised",
           "pairs_problem", "one_shot_equivalences", "one_shot_verdicts", "verdicts_of",
           "equivalences_of", "returns_of"]

#: Function attribute: per result, the donated argument paired with it (-1: none).
PAIRS_ATTR = "tdf.donation_pairs"
#: One-Shot Bufferize's annotation of ``func.return`` (test-analysis-only): per
#: returned tensor, the function argument it is equivalent to (-1: none).
EQUIVALENT_ATTR = "__equivalent_func_args__"


def pair_by_type(arg_keys, donated, result_keys) -> list[int]:
    """JAX's pairing: per result, the index of the donated argument paired
    with it, or -1. ``arg_keys``/``result_keys`` are hashable (shape, dtype)
    keys (None: never paired); ``donated`` one flag per argument."""
    queues: dict = defaultdict(deque)
    for index, (key, flag) in enumerate(zip(arg_keys, donated)):
        if flag and key is not None:
            queues[key].append(index)
    pairs = []
    for key in result_keys:
        queue = queues.get(key) if key is not None else None
        pairs.append(queue.popleft() if queue else -1)
    return pairs


def pairs_are_promised(func) -> bool:
    """Whether ``func``'s pairs are a promise to its callers, which
    ``tdf-verify-inplace{donations}`` checks and the report lists: not for a
    function ``tdf-outline-deep-nests`` made (``tdf.outlined``), whose
    donated parameters only let it update them in place (pairing still moves
    its results into them where One-Shot agrees)."""
    return OUTLINED_ATTR not in func.attributes


def pairing_key(type_):
    """``(shape, element type)`` of a static-shaped ranked tensor type, else None."""
    if not isinstance(type_, ir.RankedTensorType):
        return None
    tensor = ir.RankedTensorType(type_)
    if not tensor.has_static_shape:
        return None
    return tuple(tensor.shape), str(tensor.element_type)


def _explicit_pairs(func):
    if PAIRS_ATTR not in func.attributes:
        return None
    try:
        return list(ir.DenseI64ArrayAttr(func.attributes[PAIRS_ATTR]))
    except (TypeError, ValueError):
        return []


def pairs_problem(func) -> str | None:
    """What is wrong with ``func``'s ``tdf.donation_pairs`` (None: absent or
    valid): one entry per result, each -1 or a distinct donated argument of
    the result's (static) type."""
    pairs = _explicit_pairs(func)
    if pairs is None:
        return None
    ftype = function_type(func)
    results, inputs = list(ftype.results), list(ftype.inputs)
    if PAIRS_ATTR in func.attributes and not isinstance(
            func.attributes[PAIRS_ATTR], ir.DenseI64ArrayAttr):
        return f"'{PAIRS_ATTR}' must be an array<i64: ...>"
    if len(pairs) != len(results):
        return (f"'{PAIRS_ATTR}' has {len(pairs)} entries for {len(results)} result(s) "
                f"(one per result: the donated argument paired with it, or -1)")
    dicts = arg_dicts(func) if has_body(func) else [{} for _ in inputs]
    seen = set()
    for r, a in enumerate(pairs):
        if a == -1:
            continue
        if not 0 <= a < len(inputs) or DONATE_ATTR not in dicts[a]:
            return f"'{PAIRS_ATTR}' pairs result #{r} with argument #{a}, which is not donated"
        if a in seen:
            return f"'{PAIRS_ATTR}' pairs donated argument #{a} with several results"
        seen.add(a)
        if pairing_key(inputs[a]) is None or inputs[a] != results[r]:
            return (f"'{PAIRS_ATTR}' pairs result #{r} ({results[r]}) with donated argument "
                    f"#{a} of another or a dynamic type ({inputs[a]})")
    return None


def donation_pairs(func) -> list[int]:
    """Per result of ``func`` (a ``func.func`` with a body), the donated
    argument paired with it, or -1: ``tdf.donation_pairs`` when present and
    valid (:func:`pairs_problem`), else JAX's rule over the function's
    results (:func:`pair_by_type`)."""
    func = func.operation
    ftype = function_type(func)
    results = list(ftype.results)
    if not has_body(func):
        return [-1] * len(results)
    dicts = arg_dicts(func)
    donated = [DONATE_ATTR in d for d in dicts]
    if not any(donated):
        return [-1] * len(results)
    explicit = _explicit_pairs(func)
    if explicit is not None:
        return explicit if pairs_problem(func) is None else [-1] * len(results)
    return pair_by_type([pairing_key(t) for t in ftype.inputs], donated,
                        [pairing_key(t) for t in results])


def returns_of(func) -> list:
    """The ``func.return`` ops of ``func``'s body."""
    return [op for op in collect_ops(func, "func.return") if op.parent == func.operation]


def equivalences_of(func) -> list[int] | None:
    """Per result of analysed ``func`` (One-Shot's annotation, see the
    module doc), the argument it is equivalent to (-1: none); None when
    there is not exactly one ``func.return``."""
    rets = returns_of(func)
    if len(rets) != 1:
        return None
    ret = rets[0]
    n = len(ret.operands)
    if EQUIVALENT_ATTR not in ret.attributes:
        return [-1] * n  # One-Shot annotates only returns with an equivalence
    values = [ir.IntegerAttr(a).value for a in ir.ArrayAttr(ret.attributes[EQUIVALENT_ATTR])]
    # One entry per operand of the return (upstream's annotateEquivalentReturnBbArg).
    return (values + [-1] * n)[:n]


def one_shot_equivalences(module_op) -> dict | None:
    """``{function name: equivalences}`` (:func:`equivalences_of`) for
    every function with a body in ``module_op`` (a ``builtin.module``),
    from One-Shot Bufferize's analysis on a copy of the module; None when
    the analysis cannot run (One-Shot fails: the bufferization itself will
    report that)."""
    found = one_shot_verdicts(module_op)
    return None if found is None else {name: eq for name, (eq, _) in found.items()}


def one_shot_verdicts(module_op) -> dict | None:
    """``{function name: (equivalences, copies)}``: as
    :func:`one_shot_equivalences`, with the number of operands One-Shot
    bufferizes out of place (each a copy) in the function."""
    module_op = module_op.operation
    if module_op.name != "builtin.module":
        return None
    clone = module_op.clone()
    context = module_op.context
    handler = context.attach_diagnostic_handler(lambda diagnostic: True)
    try:
        pm = passmanager.PassManager.parse(
            "builtin.module(" + ", ".join(ONE_SHOT_ANALYSIS) + ")", context=context)
        pm.run(clone)
        return verdicts_of(clone)
    except ir.MLIRError:
        return None
    finally:
        handler.detach()
        clone.erase()


def verdicts_of(analysed) -> dict:
    """:func:`one_shot_verdicts` read off ``analysed``, a module One-Shot
    Bufferize's analysis has annotated (e.g.
    :class:`tdf.passes.analysis.one_shot.OneShotAnalysis`'s clone)."""
    found = {}
    for op in analysed.regions[0].blocks[0].operations:
        op = op.operation
        if op.name == "func.func" and has_body(op):
            copies = 0
            for inner in collect_ops(op, None, lambda o: INPLACE_OPERANDS_ATTR in o.attributes):
                copies += sum(1 for flag in ir.ArrayAttr(inner.attributes[INPLACE_OPERANDS_ATTR])
                              if ir.StringAttr(flag).value == "false")
            found[sym_name(op)] = (equivalences_of(op), copies)
    return found
