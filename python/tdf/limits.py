"""Input limits checked in Python before MLIR sees the input.

MLIR's parser, printer and bufferization abort or overflow the process stack
on some inputs that are syntactically fine; tdf refuses them first with a
located error:

* **nesting depth** (:data:`MAX_NESTING_DEPTH`): the deepest nesting of
  brackets ``( [ { <`` in the text (regions, attribute arrays, types) outside
  string literals and comments. MLIR's recursive-descent parser uses a stack
  frame per level and crashed (SIGSEGV) at 5,000 nested regions and at a
  20,000-deep array attribute on an 8 MiB stack; 3,000 nested regions still
  parsed. Real programs nest a few dozen levels; 1,000 nested ``scf.if`` are
  accepted and go through every tdf pipeline.
* **static sizes** (:func:`static_size_errors`): a shaped type with a static
  shape whose size in bits does not fit in int64 (e.g.
  ``tensor<4611686018427387904x4xf32>``) makes bufferization abort
  (``integer overflow in size computation``). Every type the IR holds is
  checked: function signatures, block arguments, op operands and results, and
  types inside attributes (``TypeAttr``, arrays, dictionaries).
"""

from __future__ import annotations

import re

from mlir import ir

from .vocabulary import DONATE_ATTR, ELEMENTWISE_ATTR, EMIT_C_INTERFACE_ATTR, element_nbytes

__all__ = [
    "MAX_NESTING_DEPTH",
    "MAX_STATIC_BITS",
    "InputError",
    "NestingError",
    "EncodingError",
    "check_nesting",
    "check_from_elements",
    "check_dense_arrays",
    "check_concat_dims",
    "check_value_positions",
    "check_forward_uses",
    "forward_use_into_region",
    "check_parser_limits",
    "check_reassociation",
    "MAX_REASSOCIATION_INDEX",
    "nesting_violation",
    "check_utf8",
    "static_size_errors",
]

#: Deepest bracket nesting accepted in textual IR.
MAX_NESTING_DEPTH = 2048
#: Largest static size, in bits, of a tensor or memref type.
MAX_STATIC_BITS = 2**63 - 1

_OPEN = "([{<"
_TOKENS = re.compile(r'"(?:[^"\\\n]|\\.)*"?|//[^\n]*|->|>=|[\[\](){}<>]')


class InputError(ValueError):
    """Raised by :func:`check_nesting` and :func:`check_utf8`: the message is
    ``file:line:col: error: detail``; ``filename``, ``line``, ``column``
    (1-based) and ``detail`` are kept separately."""

    def __init__(self, filename: str, line: int, column: int, detail: str):
        super().__init__(f"{filename}:{line}:{column}: error: {detail}")
        self.filename = filename
        self.line = line
        self.column = column
        self.detail = detail


class NestingError(InputError):
    """Input nested deeper than the limit."""


class EncodingError(InputError, UnicodeError):
    """Text that is not valid UTF-8 (a lone surrogate)."""


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    start = text.rfind("\n", 0, offset) + 1
    return line, offset - start + 1


_STRINGS_AND_COMMENTS = re.compile(r'"(?:[^"\\\n]|\\.)*"?|//[^\n]*')


def _max_depth(text: str, chunk: int = 1 << 22) -> int:
    """The deepest bracket nesting of ``text`` (same rules as
    :func:`nesting_violation`), computed without a Python loop per character.
    With ``S`` the prefix sums of the +1/-1 steps of a chunk entered at depth
    ``d0``, the depth clamped at zero is ``S - min(-d0, running min of S)``
    (the running min includes the empty prefix, 0). Chunked, so memory stays
    bounded for large inputs."""
    import numpy as np

    stripped = _STRINGS_AND_COMMENTS.sub(" ", text).replace("->", "  ").replace(">=", "  ")
    data = np.frombuffer(stripped.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    table = np.zeros(256, dtype=np.int8)
    table[list(b"([{<")] = 1
    table[list(b")]}>")] = -1
    depth, deepest = 0, 0
    for start in range(0, len(data), chunk):
        sums = np.cumsum(table[data[start:start + chunk]], dtype=np.int64)
        floor = np.minimum(np.minimum.accumulate(sums), 0)
        clamped = sums - np.minimum(floor, -depth)
        deepest = max(deepest, int(clamped.max()))
        depth = int(clamped[-1])
    return deepest


def nesting_violation(text: str, limit: int = MAX_NESTING_DEPTH):
    """``(line, column, depth)`` of the first bracket that nests deeper than
    ``limit`` in ``text``, or None. String literals, ``//`` comments, ``->``
    and ``>=`` are skipped; a closing bracket never takes the depth below 0.
    Linear in the text: texts with fewer opening brackets than ``limit`` are
    accepted without scanning, others are measured with numpy and only a
    text that is too deep is scanned token by token to locate the bracket."""
    if sum(text.count(c) for c in _OPEN) <= limit:
        return None
    if _max_depth(text) <= limit:
        return None
    depth = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        first = token[0]
        if first in _OPEN and len(token) == 1:
            depth += 1
            if depth > limit:
                line, column = _line_col(text, match.start())
                return line, column, depth
        elif first in ")]}>" and len(token) == 1:
            if depth:
                depth -= 1
    return None


def check_nesting(text: str, filename: str = "<input>", limit: int = MAX_NESTING_DEPTH) -> None:
    """Raises :class:`NestingError` (``file:line:col: error: ...``) when
    ``text`` nests brackets deeper than ``limit``."""
    found = nesting_violation(text, limit)
    if found is None:
        return
    line, column, _ = found
    raise NestingError(
        filename, line, column,
        f"input nests brackets, braces, parentheses or angle brackets (regions, attributes, "
        f"types) more than {limit} levels deep; tdf refuses it before parsing (MLIR's parser "
        f"would overflow the stack)")


_FROM_ELEMENTS = re.compile(
    r"(tensor|vector)\.from_elements\b[^:\n\"]*:\s*(?:tensor|vector)<((?:\d+x)*\d+)")


def check_from_elements(text: str, filename: str = "<input>") -> None:
    """Raises :class:`InputError` for a ``tensor``/``vector.from_elements`` whose
    result type has more elements than the text has characters: its custom
    parser allocates one entry per element before reading the operands and
    aborts the process (``SmallVector unable to grow``) on a huge count. A
    valid op lists one operand per element, so no valid program is refused."""
    if "from_elements" not in text:
        return
    for match in _FROM_ELEMENTS.finditer(text):
        count = 1
        for extent in match.group(2).split("x"):
            count *= int(extent)
        if count > len(text):
            line, column = _line_col(text, match.start())
            raise InputError(
                filename, line, column,
                f"{match.group(1)}.from_elements result type has {count} elements, more than the "
                f"input could list as operands; tdf refuses it before parsing (MLIR's parser "
                f"would abort)")


#: Largest reassociation index accepted in ``expand_shape``/``collapse_shape``.
MAX_REASSOCIATION_INDEX = 65535
_REASSOCIATION = re.compile(
    r"(?:_shape\s+%[\w.$#-]+\s*|reassociation\s*=\s*)(\[\s*(?:\[[^\[\]\n]*\]\s*,?\s*)*\])")


def check_reassociation(text: str, filename: str = "<input>") -> None:
    """Raises :class:`InputError` for a reassociation index of a
    ``tensor``/``memref`` ``expand_shape``/``collapse_shape`` (custom or
    generic form) above :data:`MAX_REASSOCIATION_INDEX`: the verifier builds
    an affine map with that many dimensions and aborts the process on an
    index near 2^32 or above (a valid index is below the op's rank)."""
    if "_shape" not in text and "reassociation" not in text:
        return
    for match in _REASSOCIATION.finditer(text):
        # Hexadecimal too: MLIR's integer parser reads 0x7fffffffffffffff.
        for number in re.finditer(r"0[xX][0-9a-fA-F]+|\d+", match.group(1)):
            digits = number.group()
            value = int(digits, 16) if digits[:2] in ("0x", "0X") else int(digits)
            if value > MAX_REASSOCIATION_INDEX:
                line, column = _line_col(text, match.start(1) + number.start())
                raise InputError(
                    filename, line, column,
                    f"reassociation index {number.group()} is larger than any rank tdf accepts "
                    f"({MAX_REASSOCIATION_INDEX}); tdf refuses it before parsing (MLIR's "
                    f"verifier would abort)")


_LINALG_INDEX_LIST = re.compile(
    r"linalg\.(?:reduce|broadcast|transpose)\b[^{}]*?\b(dimensions|permutation)\s*=\s*\[([^\]]*)\]")
_PLAIN_INTEGER = re.compile(r"-?(?:0x[0-9a-fA-F]+|\d+)")


def check_linalg_index_lists(text: str, filename: str = "<input>") -> None:
    """Raises :class:`InputError` for an item of the ``dimensions`` /
    ``permutation`` list of a custom-form ``linalg.reduce``,
    ``linalg.broadcast`` or ``linalg.transpose`` that is not a plain 64-bit
    integer (``nan``, ``1.5``, ``1 : i64``, an integer past 2^63): their
    parser stores the failed list as a null attribute and aborts the process
    (``attributes may never be null``). Valid lists hold plain integers, so no
    valid program is refused."""
    if "linalg." not in text:
        return
    for match in _LINALG_INDEX_LIST.finditer(text):
        body, start = match.group(2), match.start(2)
        if not body.strip():
            continue
        offset = 0
        for item in body.split(","):
            stripped = item.strip()
            ok = _PLAIN_INTEGER.fullmatch(stripped) is not None
            if ok:
                value = int(stripped, 16 if "0x" in stripped else 10)
                ok = -(1 << 63) <= value < 1 << 63
            if not ok:
                at = start + offset + (len(item) - len(item.lstrip()))
                line, column = _line_col(text, at)
                raise InputError(
                    filename, line, column,
                    f"{match.group(1)} list item {stripped!r} is not a 64-bit integer; tdf "
                    f"refuses it before parsing (MLIR's linalg parser would abort)")
            offset += len(item) + 1


#: The ``dim`` of a ``tensor.concat`` (custom ``dim(N)``, generic ``dim = N``).
_CONCAT_DIM = re.compile(
    r'tensor\.concat"?[^\n]*?\bdim\s*(?:\(|=)\s*(-?\s*(?:0x[0-9a-fA-F]+|\d+))')


def check_concat_dims(text: str, filename: str = "<input>") -> None:
    """Raises :class:`InputError` for a ``tensor.concat`` whose ``dim`` is
    negative as a 64-bit integer (``dim(-1)``, or ``dim(2^63)``, which the
    parser wraps): its verifier checks ``dim < rank`` and then indexes the
    shape with it, which aborts the process (``invalid index for shaped
    type``). A valid ``dim`` is in ``[0, rank)``, so no valid program is
    refused; a ``dim`` at or past the rank is the verifier's own error."""
    if "tensor.concat" not in text:
        return
    for match in _CONCAT_DIM.finditer(text):
        before = text[text.rfind("\n", 0, match.start()) + 1:match.start()]
        if "//" in before:
            continue  # a comment
        literal = match.group(1).replace(" ", "")
        value = int(literal, 16 if "0x" in literal else 10)
        if 0 <= value < 1 << 63:
            continue
        line, column = _line_col(text, match.start(1))
        raise InputError(
            filename, line, column,
            f"tensor.concat dim {literal} is not in [0, 2^63); tdf refuses it before "
            f"parsing (MLIR's tensor.concat verifier would abort on it)")


_VALUE_POSITION = re.compile(
    r"llvm\.(?:insertvalue|extractvalue)\b(?:[^\n\[]*\[([^\]\n]*)\]"   # custom form
    r"|\"[^\n]*?position\s*=\s*array\s*<\s*i64\s*:([^>\n]*)>)")       # generic form
_INTEGER = re.compile(r"-?\s*(?:0x[0-9a-fA-F]+|\d+)")


def check_value_positions(text: str, filename: str = "<input>") -> None:
    """Raises :class:`InputError` for an ``llvm.insertvalue`` /
    ``llvm.extractvalue`` position outside 32 bits (``%s[4611686018427387904]``):
    MLIR's parser checks the position against the aggregate in 32 bits and
    then indexes its element types with the full value, which aborts the
    process. A valid position is below the aggregate's size, so no valid
    program is refused; other out-of-bounds positions are the parser's own
    error."""
    if "llvm.insertvalue" not in text and "llvm.extractvalue" not in text:
        return
    for match in _VALUE_POSITION.finditer(text):
        before = text[text.rfind("\n", 0, match.start()) + 1:match.start()]
        if "//" in before:
            continue  # a comment
        group = 1 if match.group(1) is not None else 2
        for number in _INTEGER.finditer(match.group(group)):
            literal = number.group(0).replace(" ", "")
            value = int(literal, 16 if "0x" in literal else 10)
            if -(1 << 31) <= value < 1 << 31:
                continue
            line, column = _line_col(text, match.start(group) + number.start())
            raise InputError(
                filename, line, column,
                f"llvm.insertvalue/extractvalue position {literal} does not fit in 32 bits; "
                f"tdf refuses it before parsing (MLIR's parser would abort on it)")


_INDEX_ARRAY = re.compile(r"(?<![\w.!$#-])array\s*<\s*index\s*[:>]")


def check_dense_arrays(text: str, filename: str = "<input>") -> None:
    """Raises :class:`InputError` for a dense array attribute of ``index``
    elements (``array<index: 0, 1>``): MLIR's parser accepts the element type
    and then asks it for a bit width, which aborts the process (``only
    integers and floats have a bitwidth``). No dense array of ``index``
    exists (its element types are i1-i64, f32 and f64), so no valid program
    is refused."""
    if "index" not in text or "array" not in text:
        return
    for match in _INDEX_ARRAY.finditer(text):
        before = text[text.rfind("\n", 0, match.start()) + 1:match.start()]
        if "//" in before or before.count('"') % 2:
            continue  # in a comment or a string (escaped quotes aside)
        line, column = _line_col(text, match.start())
        raise InputError(
            filename, line, column,
            "a dense array attribute cannot hold 'index' elements (use i64); tdf refuses "
            "it before parsing (MLIR's parser would abort)")


#: Comments, strings, braces and SSA names; group 1 the name of a value,
#: group 2 set when the token defines it (``%v =``, ``%v:2 =``, or ``%v:``
#: before a type: a block or function argument).
_SSA_TOKENS = re.compile(r'//[^\n]*|"(?:[^"\\\n]|\\.)*"?|[{}]|'
                         r'(%[\w$.\-]+)(?:[:#]\d+)?(\s*=(?!=)|:(?=[ \t]*[^\s:]))?')

#: Several names declared at once: a multi-result op's ``%a, %b =``, or a
#: parenthesized list a custom syntax declares (``scf.forall (%i) in``,
#: ``scf.parallel (%i) =``, ``gpu.launch blocks(%x, %y, %z) in``).
_DECLARED_LISTS = re.compile(
    r"(%[\w$.\-]+(?::\d+)?(?:\s*,\s*%[\w$.\-]+(?::\d+)?)+)\s*=(?!=)"
    r"|\(\s*(%[\w$.\-]+(?:\s*,\s*%[\w$.\-]+)*)\s*\)\s*(?:=(?!=)|in\b)")

#: The text before a ``{`` that opens a module's body.
_MODULE_HEAD = re.compile(r"\bmodule\b[^{}\"]*$")

#: Runs MLIR's parser on standard input in a process of its own (tdf's
#: dialects registered): a process that a parser abort may kill.
_PROBE = ("import sys, tdf\nfrom mlir import ir\ntext = sys.stdin.read()\n"
          "try:\n    ir.Module.parse(text, context=tdf.Context())\nexcept Exception:\n"
          "    pass\n")


def forward_use_into_region(text: str):
    """``(use offset, definition offset, name)`` of the first value used
    before a definition that lies in a region not enclosing the use (nested
    deeper, or a sibling's); else ``(use offset, None, name)`` of the first
    name its function never defines (a later parse error may destroy such
    placeholders with uses left: found by the fuzz); None when there is none. Such a use is never
    valid (a value defined in a region is visible only inside it), but MLIR's
    parser keeps an unresolved forward reference until the end of the
    function and resolves it to any later definition; when a later error
    makes it destroy what it built, it may destroy the definition first and
    abort the process (``operation destroyed but still has uses``).
    Lexical: string literals and ``//`` comments are skipped, every ``{``
    opens a scope, and the scopes opened at the top two levels (function
    bodies) end a function's forward references. A name a custom syntax
    declares without ``=`` or ``:`` (``scf.forall (%i)``) looks like a use,
    so a finding is only a suspect (:func:`check_forward_uses`)."""
    if "%" not in text:
        return None
    # Names a custom syntax or a multi-result op declares without a token of
    # its own: never taken for uses of undefined names.
    declared = {name for match in _DECLARED_LISTS.finditer(text)
                for name in re.findall(r"%[\w$.\-]+", match.group(1) or match.group(2))}
    undefined = None  # the first use of a name its function never defines
    defined: dict = {}  # name -> number of open scopes defining it
    # (id, names defined in it, holds top-level ops: the text or a module)
    scopes: list[tuple[int, list[str], bool]] = [(0, [], True)]
    next_id = 1
    pending: dict = {}  # name -> (ids of the scopes around the use, offset)
    for match in _SSA_TOKENS.finditer(text):
        name = match.group(1)
        if name is None:
            token = match.group()
            if token == "{":
                line = text[text.rfind("\n", 0, match.start()) + 1:match.start()]
                scopes.append((next_id, [], _MODULE_HEAD.search(line) is not None))
                next_id += 1
            elif token == "}" and len(scopes) > 1:
                closed, names, _ = scopes.pop()
                for gone in names:
                    defined[gone] -= 1
                if scopes[-1][2]:  # a function's body (or a module) ends
                    for n, u in pending.items():
                        if closed in u[0] and n not in declared and undefined is None:
                            undefined = (u[1], None, n)
                    pending = {n: u for n, u in pending.items() if closed not in u[0]}
            continue
        if match.group(2) is not None:
            use = pending.pop(name, None)
            if use is not None and scopes[-1][0] not in use[0]:
                return use[1], match.start(1), name
            defined[name] = defined.get(name, 0) + 1
            scopes[-1][1].append(name)
        elif not defined.get(name) and name not in pending:
            pending[name] = (frozenset(i for i, _, _ in scopes), match.start(1))
    return undefined


def check_forward_uses(text: str, filename: str = "<input>") -> None:
    """Raises :class:`InputError` at the use when :func:`forward_use_into_region`
    finds a suspect and MLIR's parser, run on ``text`` in a process of its
    own, aborts that process. A suspect the parser survives (a name declared
    by a custom syntax and reused in a nested region, or an error it reports)
    is left to the parser in this process. Valid programs have no suspect
    unless a custom syntax reuses a name, and then pass the probe."""
    found = forward_use_into_region(text)
    if found is None:
        return
    import subprocess
    import sys

    try:
        probe = subprocess.run([sys.executable, "-c", _PROBE], input=text.encode("utf-8"),
                               capture_output=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return
    if probe.returncode >= 0 and probe.returncode != 134:
        return
    use, definition, name = found
    line, column = _line_col(text, use)
    if definition is None:
        raise InputError(
            filename, line, column,
            f"'{name}' is used but its function never defines it; tdf refuses the input "
            f"before parsing (MLIR's parser aborts on it)")
    dline, dcolumn = _line_col(text, definition)
    raise InputError(
        filename, line, column,
        f"'{name}' is used before its definition at {dline}:{dcolumn}, in a region that does not "
        f"enclose this use; tdf refuses the input before parsing (MLIR's "
        f"parser aborts on it)")


def check_parser_limits(text: str, filename: str = "<input>") -> None:
    """Everything checked on the text before MLIR parses it: nesting depth
    (:func:`check_nesting`), element counts of ``tensor``/``vector.from_elements``
    (:func:`check_from_elements`), reassociation indices
    (:func:`check_reassociation`), linalg index lists
    (:func:`check_linalg_index_lists`), dense arrays of ``index``
    (:func:`check_dense_arrays`), negative ``tensor.concat`` dims
    (:func:`check_concat_dims`), 64-bit ``llvm.insertvalue`` /
    ``extractvalue`` positions (:func:`check_value_positions`) and values
    used before a definition nested
    deeper (:func:`check_forward_uses`). Raises :class:`InputError`."""
    check_nesting(text, filename)
    check_from_elements(text, filename)
    check_reassociation(text, filename)
    check_linalg_index_lists(text, filename)
    check_dense_arrays(text, filename)
    check_concat_dims(text, filename)
    check_value_positions(text, filename)
    check_forward_uses(text, filename)


def check_utf8(text: str, filename: str = "<input>") -> None:
    """Raises :class:`EncodingError` (a ``UnicodeError``) with
    ``file:line:col`` when ``text`` cannot be encoded as UTF-8 (a lone
    surrogate such as ``'\\ud800'``)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        line, column = _line_col(text, err.start)
        raise EncodingError(
            filename, line, column,
            f"the text is not valid UTF-8 (character {text[err.start]!r} at offset "
            f"{err.start} cannot be encoded: {err.reason})") from None


# --------------------------------------------------------------- sizes

def _element_bits(element) -> int | None:
    """Storage bits of one element (:func:`tdf.vocabulary.element_nbytes`;
    a vector element of a memref: its elements), or None when unknown
    (opaque element types)."""
    if isinstance(element, ir.ShapedType):  # vector element of a memref
        return _shaped_bits(element)
    nbytes = element_nbytes(element)
    return None if nbytes is None else 8 * nbytes


def _shaped_bits(t) -> int | None:
    shaped = ir.ShapedType(t)
    if not shaped.has_rank:
        return None
    count = 1
    for extent in shaped.shape:
        if extent < 0:  # dynamic
            return None
        count *= extent
    bits = _element_bits(shaped.element_type)
    return count * (bits if bits is not None else 8)


def _too_large(t) -> int | None:
    """Total bits of shaped type ``t`` when they overflow int64, else None."""
    if isinstance(t, (ir.RankedTensorType, ir.MemRefType, ir.VectorType)):
        bits = _shaped_bits(t)
        if bits is not None and bits > MAX_STATIC_BITS:
            return bits
    return None


def _types_in_type(t):
    """``t`` and the types nested in it (function, tuple, shaped elements)."""
    stack, seen = [t], []
    while stack:
        current = stack.pop()
        seen.append(current)
        if isinstance(current, ir.FunctionType):
            ft = ir.FunctionType(current)
            stack.extend(ft.inputs)
            stack.extend(ft.results)
        elif isinstance(current, ir.TupleType):
            tt = ir.TupleType(current)
            stack.extend(tt.get_type(i) for i in range(tt.num_types))
        elif isinstance(current, ir.ShapedType) and ir.ShapedType(current).has_rank:
            stack.append(ir.ShapedType(current).element_type)
    return seen


def _types_in_attr(attr):
    """Types held (transitively) by ``attr``."""
    stack, found = [attr], []
    while stack:
        current = stack.pop()
        if isinstance(current, ir.TypeAttr):
            found.append(ir.TypeAttr(current).value)
        elif isinstance(current, ir.ArrayAttr):
            stack.extend(ir.ArrayAttr(current))
        elif isinstance(current, ir.DictAttr):
            stack.extend(named.attr for named in ir.DictAttr(current))
        elif isinstance(current, (ir.DenseElementsAttr, ir.DenseResourceElementsAttr)):
            found.append(current.type)
    return found


# Inherent attributes whose ODS constraint excludes types (skipped for speed:
# fetching every attribute of every op costs more than the rest of the check).
_NO_TYPE_ATTRS = frozenset({
    "callee", "sym_name", "sym_visibility", "inplace_indices", "operandSegmentSizes",
    "resultSegmentSizes", "predicate", "fastmath", "overflowFlags", "static_offsets",
    "static_sizes", "static_strides", "static_output_shape", "reassociation", "iterator_types",
    "indexing_maps", ELEMENTWISE_ATTR, DONATE_ATTR, EMIT_C_INTERFACE_ATTR, "alignment",
    "nontemporal", "in_bounds", "permutation_map", "lowerBound", "upperBound", "step",
})


def static_size_errors(root) -> list[tuple[object, str]]:
    """``[(location, message)]`` for every type at or under ``root`` (an
    ``ir.Operation``/``ir.Module``/op view) whose static size in bits
    overflows int64, at the op that defines the value (result, region
    argument) or holds the attribute (a function's signature included).
    Operands need no check: each is some op's result or a block argument.
    Linear in the IR; each distinct type is examined once. A walk in C++
    (``_tdf.static_sizes_may_overflow``) first tells whether any type may
    overflow at all: a Python callback per op costs 0.1 s on a 2,000-op
    program, the C++ walk a few milliseconds."""
    from . import _tdf
    if not _tdf.static_sizes_may_overflow(root.operation):
        return []
    found = []
    verdicts: dict = {}  # type -> (inner type, bits) or None

    def oversized(t):
        try:
            return verdicts[t]
        except KeyError:
            pass
        verdict = None
        for inner in _types_in_type(t):
            bits = _too_large(inner)
            if bits is not None:
                verdict = (inner, bits)
                break
        verdicts[t] = verdict
        return verdict

    def check(op, types, what):
        for t in types:
            verdict = oversized(t)
            if verdict is not None:
                inner, bits = verdict
                found.append((op.location,
                              f"{what} has type {inner} whose static size ({bits} bits) "
                              f"overflows int64; tdf cannot allocate or address it"))
                return

    def visit(op):
        results = op.results
        if len(results):
            check(op, results.types, f"result of '{op.name}'")
        regions = op.regions
        if len(regions):
            for region in regions:
                for block in region.blocks:
                    check(op, block.arguments.types, f"block argument in a region of '{op.name}'")
        for what, types in _attribute_types(op):
            check(op, types, what)
        return ir.WalkResult.ADVANCE

    root.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def _attribute_types(op):
    """``(what, types)`` for each attribute of ``op`` that may hold types
    (``what`` names it in a diagnostic)."""
    attributes = op.attributes
    if not len(attributes):
        return
    for name in attributes:
        if name in _NO_TYPE_ATTRS:
            continue
        attr = attributes[name]
        if isinstance(attr, (ir.TypeAttr, ir.ArrayAttr, ir.DictAttr, ir.DenseElementsAttr,
                             ir.DenseResourceElementsAttr)):
            what = (f"the signature of '{op.name}'" if name == "function_type"
                    else f"attribute '{name}' of '{op.name}'")
            yield what, _types_in_attr(attr)
