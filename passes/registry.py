"""The registry of tdf's Python passes and pipelines.

A pass is a Python function ``run(op, ctx: PassContext)`` decorated with
:func:`register_pass`; it becomes a real MLIR pass (with MLIR pass options and
statistics) that any textual pipeline can name, mixed with upstream passes::

    @register_pass("tdf-donate", "Turn tdf.donate into bufferization.writable",
                   options=[PassOption("strict", bool, False, "error instead of warning")],
                   statistics=[("donated", "arguments marked writable")])
    def donate(op, ctx):
        ...
        ctx.statistic("donated", 1)

A pipeline is a named expansion to a pass list, computed from its options::

    @register_pipeline("tdf-bufferize", "...", options=[...])
    def bufferize(options) -> str:
        return "tdf-donate, one-shot-bufferize{bufferize-function-boundaries}"

Diagnostics: ``ctx.error(op_or_loc, msg, notes=[...])``, ``ctx.warning``,
``ctx.remark``. A pass fails when it raises, or when it emitted an error
(``ctx.error``) and returns.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

from mlir import ir

from .. import _tdf

__all__ = [
    "PassOption",
    "PassContext",
    "PassSpec",
    "PipelineSpec",
    "register_pass",
    "register_pipeline",
    "get_all_passes",
    "get_all_pipelines",
    "parse_options",
]

_KINDS = {bool: "b", int: "i", str: "s"}


@dataclass(frozen=True)
class PassOption:
    """An option of a pass or pipeline: ``name``, Python type (bool, int or
    str), default value and help text."""

    name: str
    type: type
    default: object
    description: str

    def __post_init__(self):
        if self.type not in _KINDS:
            raise TypeError(f"option {self.name!r}: type must be bool, int or str")
        if not isinstance(self.default, self.type):
            raise TypeError(f"option {self.name!r}: default {self.default!r} is not a {self.type.__name__}")

    def default_text(self) -> str:
        if self.type is bool:
            return "true" if self.default else "false"
        return str(self.default)


def _location_of(target) -> ir.Location:
    if isinstance(target, ir.Location):
        return target
    if isinstance(target, ir.Value):
        owner = target.owner
        if isinstance(owner, ir.Block):
            return owner.owner.location if owner.owner else ir.Location.unknown()
        return owner.location
    if hasattr(target, "operation"):
        return target.operation.location
    return target.location


class PassContext:
    """What a running Python pass sees besides its op: option values,
    statistics counters and diagnostic helpers."""

    def __init__(self, spec: PassSpec, options: dict):
        self.spec = spec
        self.options = dict(options)
        self.counters = [0] * len(spec.statistics)
        self.had_error = False

    def option(self, name: str):
        return self.options[name]

    def statistic(self, name: str, amount: int = 1) -> None:
        """Adds ``amount`` to statistic ``name`` (see --mlir-pass-statistics)."""
        for index, (stat, _) in enumerate(self.spec.statistics):
            if stat == name:
                self.counters[index] += amount
                return
        raise KeyError(f"pass {self.spec.argument!r} declares no statistic {name!r}")

    def _emit(self, severity: int, target, message: str, notes) -> None:
        pairs = [(_location_of(t), m) for t, m in (notes or [])]
        _tdf.emit_diagnostic(_location_of(target), severity, message, pairs)

    def error(self, target, message: str, notes=None) -> None:
        """Emits an error at ``target`` (op, value or location); the pass fails."""
        self.had_error = True
        self._emit(0, target, message, notes)

    def warning(self, target, message: str, notes=None) -> None:
        self._emit(1, target, message, notes)

    def remark(self, target, message: str, notes=None) -> None:
        self._emit(2, target, message, notes)


@dataclass
class PassSpec:
    """A registered Python pass."""

    argument: str
    description: str
    run: Callable[[ir.Operation, PassContext], None]
    options: list[PassOption] = field(default_factory=list)
    statistics: list[tuple[str, str]] = field(default_factory=list)

    def _runner(self, op: ir.Operation, options: dict):
        ctx = PassContext(self, options)
        try:
            with op.context, op.location:
                self.run(op, ctx)
        except Exception as exc:  # reported as a located MLIR error
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            return (False, f"pass '{self.argument}' failed: {detail}", ctx.counters)
        return (not ctx.had_error, "", ctx.counters)


@dataclass
class PipelineSpec:
    """A registered pipeline: ``expand(options: dict) -> str`` returns the
    comma-separated pass list it stands for."""

    argument: str
    description: str
    expand: Callable[[dict], str]
    options: list[PassOption] = field(default_factory=list)

    def _expander(self, text: str):
        try:
            values = parse_options(text, self.options, self.argument)
            return (True, self.expand(values))
        except (ValueError, TypeError) as exc:
            return (False, str(exc))


_PASSES: dict[str, PassSpec] = {}
_PIPELINES: dict[str, PipelineSpec] = {}
_NAME = re.compile(r"^[a-z][a-z0-9-]*$")


def _check_name(argument: str) -> None:
    if not _NAME.match(argument):
        raise ValueError(f"pass name {argument!r} must be kebab-case")
    if argument in _PASSES or argument in _PIPELINES or _tdf.is_pass_registered(argument):
        raise ValueError(f"a pass or pipeline named {argument!r} is already registered")


def register_pass(argument: str, description: str, options=(), statistics=()):
    """Decorator registering ``run(op, ctx)`` as the MLIR pass ``argument``."""

    def wrap(run):
        _check_name(argument)
        spec = PassSpec(argument, description, run, list(options), list(statistics))
        _tdf.register_pass(
            argument,
            description,
            [(o.name, _KINDS[o.type], o.default_text(), o.description) for o in spec.options],
            list(spec.statistics),
            spec._runner,
        )
        _PASSES[argument] = spec
        run.pass_spec = spec
        return run

    return wrap


def register_pipeline(argument: str, description: str, options=()):
    """Decorator registering ``expand(options) -> str`` as pipeline ``argument``."""

    def wrap(expand):
        _check_name(argument)
        spec = PipelineSpec(argument, description, expand, list(options))
        _tdf.register_pipeline(argument, description, spec._expander)
        _PIPELINES[argument] = spec
        expand.pipeline_spec = spec
        return expand

    return wrap


def get_all_passes() -> dict[str, PassSpec]:
    """Every registered tdf Python pass, by argument."""
    return dict(_PASSES)


def get_all_pipelines() -> dict[str, PipelineSpec]:
    """Every registered tdf pipeline, by argument."""
    return dict(_PIPELINES)


_TRUE = {"true", "1", "on", "yes", ""}
_FALSE = {"false", "0", "off", "no"}


def parse_options(text: str, options: list[PassOption], owner: str) -> dict:
    """Parses MLIR pass-option syntax (``a=1 b c=foo``; a bare name means
    true) against ``options``; raises ValueError naming the bad option."""
    known = {o.name: o for o in options}
    values = {o.name: o.default for o in options}
    for token in text.split():
        name, _, raw = token.partition("=")
        if name not in known:
            expected = ", ".join(sorted(known)) or "none"
            raise ValueError(f"'{owner}' has no option '{name}' (options: {expected})")
        option = known[name]
        if option.type is bool:
            if raw.lower() in _TRUE:
                values[name] = True
            elif raw.lower() in _FALSE:
                values[name] = False
            else:
                raise ValueError(f"option '{name}' of '{owner}' expects a boolean, got '{raw}'")
        elif option.type is int:
            try:
                values[name] = int(raw)
            except ValueError:
                raise ValueError(f"option '{name}' of '{owner}' expects an integer, got '{raw}'") from None
        else:
            values[name] = raw
    return values
