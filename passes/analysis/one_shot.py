"""What One-Shot Bufferize itself decides about a module: its analysis
(tdf's One-Shot configuration after ``tdf-donate``, analysis only, on a copy
of the module) annotates every op with ``__inplace_operands_attr__`` and
every ``func.return`` with ``__equivalent_func_args__``.

:class:`OneShotAnalysis` runs it once and answers every question asked of
it: :meth:`~OneShotAnalysis.copies` (which in-place operands of each
``tdf.call_inplace`` it would copy before the call: ``tdf-verify-inplace``
and ``tdf-insert-inplace`` judge calls by it), :meth:`~OneShotAnalysis.verdicts`
(per function, the donated arguments results are computed in, and the
number of copies: donation pairing) and the annotated copy itself
(:attr:`~OneShotAnalysis.analysed`: ``tdf.compile``'s report). Through
:mod:`tdf.passes.analysis.manager`, ``tdf.compile`` runs it once for its
report and for ``tdf-verify-inplace`` together (the IR does not change
between them). :func:`one_shot_copies` is the one-question form.
"""

from __future__ import annotations

from mlir import ir

from ...errors import PipelineError
from ...pipeline import run_pipeline
from ...vocabulary import INPLACE_OPERANDS_ATTR
from ..ir_utils import collect_ops, op_key
from ..pipelines import ONE_SHOT_ANALYSIS
from .donation import verdicts_of

__all__ = ["ANALYSIS_PIPELINE", "OneShotAnalysis", "one_shot_copies", "view_copied"]

#: One-Shot Bufferize's own analysis with the options of every tdf pipeline.
ANALYSIS_PIPELINE = "builtin.module(" + ", ".join(ONE_SHOT_ANALYSIS) + ")"


class OneShotAnalysis:
    """One-Shot Bufferize's analysis of ``module_op`` (a
    ``builtin.module``), run once, on a copy, when first needed. Valid
    while ``module_op`` is unchanged; :meth:`close` frees the copy (also on
    leaving a ``with`` block)."""

    def __init__(self, module_op):
        self.module_op = module_op.operation
        self._analysed = None
        self._error: PipelineError | None = None
        self._ran = False
        self._copies: dict | None = None
        self._verdicts: dict | None = None

    def __enter__(self) -> OneShotAnalysis:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _run(self) -> None:
        if self._ran:
            return
        self._ran = True
        if self.module_op.name != "builtin.module":
            return
        clone = self.module_op.clone()
        try:
            run_pipeline(clone, ANALYSIS_PIPELINE)
        except PipelineError as err:
            clone.erase()
            self._error = err
            return
        self._analysed = clone

    @property
    def analysed(self):
        """The annotated copy of the module; raises the
        :class:`tdf.PipelineError` of the analysis when it failed (None for
        an op that is not a module)."""
        self._run()
        if self._error is not None:
            raise self._error
        return self._analysed

    @property
    def ok(self) -> bool:
        """Did the analysis run (a module, and One-Shot did not fail)?"""
        self._run()
        return self._analysed is not None

    def copies(self) -> dict | None:
        """``{op_key(call): {operand, ...}}``: the in-place operands of each
        ``tdf.call_inplace`` of the module that One-Shot Bufferize would copy
        before the call -- the operand itself, or a view it is taken
        through (an out-of-place ``extract_slice`` is a copy of the slice
        the call then writes). None when the analysis cannot run (not a
        module, or One-Shot fails: the bufferization itself will report
        that)."""
        if self._copies is None:
            if self.module_op.name != "builtin.module":
                return None
            calls = collect_ops(self.module_op, "tdf.call_inplace")
            if not calls:
                return {}  # no question to ask: the analysis is not run for it
            if not self.ok:
                return None
            self._copies = _copies(calls, collect_ops(self._analysed, "tdf.call_inplace"))
        return self._copies

    def verdicts(self) -> dict | None:
        """:func:`tdf.passes.analysis.donation.one_shot_verdicts`:
        ``{function name: (equivalences, copies)}``, None when the analysis
        cannot run."""
        if self._verdicts is None and self.ok:
            self._verdicts = verdicts_of(self._analysed)
        return self._verdicts

    def equivalences(self) -> dict | None:
        """:func:`tdf.passes.analysis.donation.one_shot_equivalences`."""
        found = self.verdicts()
        return None if found is None else {name: eq for name, (eq, _) in found.items()}

    def close(self) -> None:
        """Frees the annotated copy; the answers already given stay valid."""
        if self._analysed is not None:
            self._analysed.erase()
            self._analysed = None


def _copies(calls, analysed_calls) -> dict | None:
    if len(analysed_calls) != len(calls):
        return None
    found = {}
    for call, analysed in zip(calls, analysed_calls):
        if INPLACE_OPERANDS_ATTR not in analysed.attributes:
            continue
        flags = [ir.StringAttr(a).value
                 for a in ir.ArrayAttr(analysed.attributes[INPLACE_OPERANDS_ATTR])]
        indices = list(ir.DenseI64ArrayAttr(call.attributes["inplace_indices"]))
        bad = {i for i in indices if 0 <= i < len(flags)
               and (flags[i] == "false" or view_copied(analysed.operands[i]))}
        if bad:
            found[op_key(call)] = bad
    return found


def one_shot_copies(module_op) -> dict | None:
    """:meth:`OneShotAnalysis.copies` of ``module_op``, the analysis run
    for this one question (not at all when the module has no
    ``tdf.call_inplace``)."""
    with OneShotAnalysis(module_op) as analysis:
        return analysis.copies()


_VIEWS = ("tensor.extract_slice", "tensor.expand_shape", "tensor.collapse_shape")


def view_copied(value) -> bool:
    """Is ``value`` (in the analysed clone) a view -- ``extract_slice``,
    ``expand_shape``/``collapse_shape``, possibly of another view -- that
    One-Shot Bufferize makes out of place, i.e. a copy of the storage the
    in-place call was meant to write (its write then lands in the copy)?"""
    for _ in range(16):
        owner = value.owner
        if isinstance(owner, ir.Block):
            return False
        owner = owner.operation
        if owner.name not in _VIEWS:
            return False
        if INPLACE_OPERANDS_ATTR in owner.attributes:
            flags = [ir.StringAttr(a).value
                     for a in ir.ArrayAttr(owner.attributes[INPLACE_OPERANDS_ATTR])]
            if flags and flags[0] == "false":
                return True
        value = owner.operands[0]
    return False
