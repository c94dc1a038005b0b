"""Explicit mutation with JAX refs: functionalization and ``jax.Ref``
arguments.

A jaxpr that mutates refs (``r = jax.new_ref(x)``, ``r[i] = v``,
``r[i] += v``: the ``new_ref``, ``get``, ``swap`` and ``addupdate``
primitives, ``empty_ref``/``freeze``) is *functionalized* before it is
translated: JAX's own state discharge
(``jax._src.state.discharge.discharge_state``) threads each ref's value
through the program as an ordinary array, so a read is a ``slice``/
``dynamic_slice``/``gather`` of the current value and a write a
``dynamic_update_slice``/``scatter`` producing the next one; refs used
inside ``scan``/``fori_loop``/``while_loop`` bodies become loop-carried
values and refs written in ``cond`` branches results of the branches. Each
discharged equation keeps the source line of the ref operation it came
from, so ``report()`` names the user's line for each mutation. The updates
then run in place where tdf's in-place analysis proves them safe (the old
value of a ref is dead after its update by construction).

A ``jax.Ref`` passed as an argument (``jax.jit`` accepts them and updates
the ref) is a donated leaf: the compiled function receives the ref's own
buffer, updates it in place and returns its final value in the same buffer,
so the ref keeps its identity and buffer and nothing is copied. A ref that
a traced function closes over is treated the same way, as an extra leaf
after the arguments. The buffer is the ref's CPU ``jax.Array``; when it
cannot be viewed as a writable host array (another backend, a cached host
copy) it is copied in and the final value is stored with ``ref[...] =``.
"""

from __future__ import annotations

import ctypes

import numpy as np

from ._builder import Translator, UnsupportedPrimitiveError, _sub_jaxprs, is_key, rule

__all__ = ["is_ref", "functionalize", "Functionalized", "ref_buffer", "write_back",
           "pass_buffers", "finish", "share_index_computations", "REF_PRIMITIVES"]

#: Primitives that create, read, write or retire refs (besides the calls,
#: loops and branches that carry refs into their jaxprs).
REF_PRIMITIVES = ("new_ref", "empty_ref", "free_ref", "freeze", "get", "swap", "addupdate")


def is_ref(value) -> bool:
    """Whether ``value`` is a ``jax.Ref`` (a mutable array reference)."""
    from jax._src import core
    return isinstance(value, core.Ref)


def _is_ref_aval(aval) -> bool:
    from jax._src.state.types import AbstractRef
    return isinstance(aval, AbstractRef)


class Functionalized:
    """A traced jaxpr with its refs discharged.

    ``closed`` is the pure jaxpr; its invars are the function's argument
    leaves (a ref argument as its value) followed by one invar per ref the
    function closes over (``ref_consts``, the ``jax.Ref`` objects); its
    outvars are the function's outputs followed by the final value of each
    ref leaf, in leaf order (``ref_leaves``)."""

    def __init__(self, closed, ref_leaves, ref_consts, discharged=False):
        self.closed = closed
        self.discharged = discharged  # whether the traced jaxpr had refs
        self.ref_leaves = list(ref_leaves)
        self.ref_consts = list(ref_consts)


def functionalize(closed, name: str = "<jax>", where=None) -> Functionalized:
    """Discharges the refs of ``closed`` (see the module docstring); a jaxpr
    without refs is returned as is. ``name``/``where`` (the call site) name
    the program in errors."""
    jaxpr = closed.jaxpr
    const_refs = [_is_ref_aval(v.aval) for v in jaxpr.constvars]
    arg_refs = [_is_ref_aval(v.aval) for v in jaxpr.invars]
    if not any(const_refs) and not any(arg_refs) and not _uses_refs(jaxpr, {}):
        return Functionalized(closed, [], [])
    _validate(jaxpr, Translator(name, fallback=where))
    from jax._src import core
    from jax._src.interpreters import partial_eval as pe
    from jax._src.state import discharge

    # Closed-over refs become arguments after the function's own: the
    # constants that are not refs first (closed again below), then the
    # arguments, then the refs.
    lifted = core.ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), ())
    moved = pe.move_binders_to_front(lifted, [not r for r in const_refs] + [True] * len(arg_refs))
    try:
        pure = discharge.discharge_state(moved, should_discharge=True)
    except Exception as err:  # JAX could not discharge a form of ref use
        raise Translator(name, fallback=_error_site(err) or where).error(
            UnsupportedPrimitiveError, f"tdf.jax.jit cannot functionalize this program's refs "
            f"(JAX's state discharge failed: {type(err).__name__}: "
            f"{str(err).splitlines()[0] if str(err) else ''})") from err
    n_consts = len(const_refs) - sum(const_refs)
    pj = pure.jaxpr
    dbg = pj.debug_info
    if dbg is not None and dbg.arg_names is not None:
        dbg = dbg._replace(arg_names=dbg.arg_names[n_consts:])
    pj = pj.replace(constvars=list(pj.constvars) + list(pj.invars[:n_consts]),
                    invars=list(pj.invars[n_consts:]), debug_info=dbg)
    consts = list(pure.consts) + [c for c, r in zip(closed.consts, const_refs) if not r]
    ref_consts = [c for c, r in zip(closed.consts, const_refs) if r]
    n_args = len(arg_refs)
    ref_leaves = [i for i, r in enumerate(arg_refs) if r] + \
        list(range(n_args, n_args + len(ref_consts)))
    pj = _views_for_unit_broadcasts(pj, {})
    if len(pj.outvars) != len(jaxpr.outvars) + len(ref_leaves):  # pragma: no cover - JAX changed
        raise Translator(name, fallback=where).error(
            UnsupportedPrimitiveError, "tdf.jax.jit cannot functionalize this program's refs "
            "(the discharged program has an unexpected number of results)")
    return Functionalized(core.ClosedJaxpr(pj, consts), ref_leaves, ref_consts, True)


def _views_for_unit_broadcasts(jaxpr, memo: dict):
    """``jaxpr`` with each ``broadcast_in_dim`` that only inserts unit
    dimensions (the discharge's ``expand_dims`` of a value written to a
    ref: ``r[i] = row``) as the equivalent ``reshape``, nested jaxprs
    included: a reshape is a view (``tensor.expand_shape``), where a
    broadcast would copy the row into a temporary before its insert."""
    from jax._src import core
    from jax._src.lax import lax

    def param(value):
        if isinstance(value, core.ClosedJaxpr):
            new = _views_for_unit_broadcasts(value.jaxpr, memo)
            return value if new is value.jaxpr else core.ClosedJaxpr(new, value.consts)
        if isinstance(value, core.Jaxpr):
            return _views_for_unit_broadcasts(value, memo)
        if isinstance(value, tuple):
            new = tuple(param(v) for v in value)
            return value if all(a is b for a, b in zip(new, value)) else new
        return value

    if id(jaxpr) in memo:
        return memo[id(jaxpr)][1]
    eqns, changed = [], False
    for eqn in jaxpr.eqns:
        params = {k: param(v) for k, v in eqn.params.items()}
        if any(params[k] is not v for k, v in eqn.params.items()):
            eqn = eqn.replace(params=params)
            changed = True
        if eqn.primitive is lax.broadcast_in_dim_p and _is_unit_broadcast(eqn):
            shape = tuple(int(d) for d in eqn.outvars[0].aval.shape)
            eqn = eqn.replace(primitive=lax.reshape_p, params=dict(
                new_sizes=shape, dimensions=None, sharding=eqn.params.get("sharding")))
            changed = True
        eqns.append(eqn)
    out = jaxpr.replace(eqns=eqns) if changed else jaxpr
    memo[id(jaxpr)] = (jaxpr, out)  # the key's jaxpr stays alive with its entry
    return out


def _is_unit_broadcast(eqn) -> bool:
    """Whether a ``broadcast_in_dim`` equation of a non-scalar only inserts
    unit dimensions (then it is a row-major reshape)."""
    if len(eqn.invars) != 1:
        return False
    src = tuple(eqn.invars[0].aval.shape)
    dst = tuple(eqn.outvars[0].aval.shape)
    dims = tuple(int(d) for d in eqn.params["broadcast_dimensions"])
    if not src or list(dims) != sorted(set(dims)):
        return False
    return all(src[i] == dst[d] for i, d in enumerate(dims)) and all(
        dst[d] == 1 for d in range(len(dst)) if d not in dims)


def _uses_refs(jaxpr, seen: dict) -> bool:
    """Whether ``jaxpr`` or a jaxpr nested in it creates or takes a ref."""
    key = id(jaxpr)
    if key in seen:
        return seen[key]
    seen[key] = False
    found = any(_is_ref_aval(v.aval) for v in list(jaxpr.invars) + list(jaxpr.constvars))
    for eqn in jaxpr.eqns:
        if found:
            break
        found = eqn.primitive.name in REF_PRIMITIVES or any(
            _is_ref_aval(v.aval) for v in list(eqn.invars) + list(eqn.outvars)) or any(
            _uses_refs(sub, seen) for sub in _sub_jaxprs(eqn.params.values()))
    seen[key] = found
    return found


def _error_site(err):
    """(file, line, column) of the innermost user frame in ``err``'s chain
    of causes (JAX attaches the traced equation's user traceback as the
    cause of an error raised while it re-evaluates the equation), or None."""
    import traceback

    from ._builder import is_library_file
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        for frame in reversed(traceback.extract_tb(err.__traceback__)):
            if not is_library_file(frame.filename):
                return frame.filename, frame.lineno, (getattr(frame, "colno", None) or 0) + 1
        err = err.__cause__ or err.__context__
    return None


def _validate(jaxpr, tr: Translator) -> None:
    """Raises ``tr.unsupported`` (the innermost primitive and its user line)
    at the first equation on refs that the discharge cannot functionalize:
    a primitive without a discharge rule, a ref of a dtype tdf cannot hold."""
    from jax._src.state import discharge
    rules = set(discharge._discharge_rules) | set(discharge._partial_discharge_rules)
    for eqn in jaxpr.eqns:
        tr.eqn = eqn
        tr.stack.append(eqn)
        for sub in _sub_jaxprs(eqn.params.values()):
            _validate(sub, tr)
        tr.eqn = eqn
        refs = [v.aval for v in list(eqn.invars) + list(eqn.outvars) if _is_ref_aval(v.aval)]
        if refs:
            name = eqn.primitive.name
            if eqn.primitive not in rules and name not in REF_PRIMITIVES:
                raise tr.unsupported(f"on a ref ({refs[0].str_short()}): JAX has no state "
                                     f"discharge rule for it")
            if name == "while":
                _check_while(eqn, tr)
            inner = refs[0].inner_aval
            if is_key(getattr(inner, "dtype", None)):
                raise tr.unsupported(f"dtype {inner.dtype}: a ref of PRNG keys")
            if not hasattr(inner, "shape") or not hasattr(inner, "dtype"):
                raise tr.unsupported(f"a ref of {inner}")
        tr.stack.pop()


def _check_while(eqn, tr: Translator) -> None:
    """Refuses a ``while_loop`` whose condition reads a ref that its body
    writes: JAX's state discharge threads such a ref through the loop twice,
    and the condition keeps reading the initial copy (``jax.jit`` then loops
    forever too)."""
    from jax._src.state.types import AccumEffect, WriteEffect
    p = eqn.params
    ncond, nbody = int(p["cond_nconsts"]), int(p["body_nconsts"])
    cond_refs = [v for v in eqn.invars[:ncond] if _is_ref_aval(v.aval)]
    body_consts = list(eqn.invars[ncond:ncond + nbody])
    body = p["body_jaxpr"]
    body_vars = list(getattr(body, "jaxpr", body).invars)
    written = set()
    for effect in getattr(body, "effects", ()):
        if isinstance(effect, (WriteEffect, AccumEffect)):
            index = getattr(effect, "input", None)  # the body's invar (or its position)
            if isinstance(index, int):
                written.add(index)
            elif any(index is v for v in body_vars):
                written.add(next(k for k, v in enumerate(body_vars) if index is v))
    for ref in cond_refs:
        for k, v in enumerate(body_consts):
            if v is ref and k in written:
                raise tr.unsupported(
                    f"a while_loop whose condition reads a ref ({ref.aval.str_short()}) that "
                    f"its body writes: JAX's state discharge gives the condition a stale copy "
                    f"(jax.jit loops forever on it too); carry the value the condition tests "
                    f"in the loop state instead")


# ---------------------------------------------------------------- ref leaves


def _jax_buffer(ref):
    """The ``jax.Array`` a ref holds, or None (JAX internals changed)."""
    return getattr(getattr(ref, "_refs", None), "_buf", None)


def ref_buffer(ref, dtype, shape):
    """(a writable C-contiguous numpy array holding ``ref``'s value,
    whether it *is* the ref's buffer). The ref's CPU buffer is viewed in
    place when that is safe; else its value is copied."""
    buf = _jax_buffer(ref)
    view = _writable_view(buf, dtype, shape) if buf is not None else None
    if view is not None:
        return view, True
    return np.array(ref[...], dtype=dtype, order="C").reshape(shape), False


def _writable_view(buf, dtype, shape):
    """A writable numpy view of the CPU ``jax.Array`` ``buf`` (row-major,
    ready, with no cached host copy that a write would leave stale), or
    None."""
    try:
        if buf.is_deleted() or len(buf.devices()) != 1:
            return None
        (device,) = buf.devices()
        if device.platform != "cpu" or getattr(buf, "_npy_value", None) is not None:
            return None
        if np.dtype(buf.dtype) != np.dtype(dtype) or tuple(buf.shape) != tuple(shape):
            return None
        buf.block_until_ready()
        host = np.asarray(buf)  # the CPU client's zero-copy host view (read-only)
        address = buf.unsafe_buffer_pointer()
        if not host.flags.c_contiguous or (host.size and host.ctypes.data != address):
            return None
    except Exception:  # pragma: no cover - another backend or JAX internals changed
        return None
    if host.size == 0:
        return np.empty(shape, dtype)
    raw = (ctypes.c_char * host.nbytes).from_address(address)
    raw._tdf_keepalive = buf  # the view keeps the jax.Array (and its buffer) alive
    return np.frombuffer(raw, dtype=host.dtype).reshape(host.shape)


def write_back(ref, buffer, in_place: bool, value) -> None:
    """Stores ``value``, the final value of ``ref`` computed by a call, into
    the ref: nothing to do when the compiled code already wrote it into the
    ref's own buffer, else a copy into it (or ``ref[...] = value`` when the
    buffer was a copy)."""
    if in_place:
        if not (isinstance(value, np.ndarray) and value.size
                and value.ctypes.data == buffer.ctypes.data and value.nbytes == buffer.nbytes):
            np.copyto(buffer, np.asarray(value).reshape(buffer.shape))
        return
    ref[...] = np.asarray(value).reshape(buffer.shape)


def pass_buffers(leaves, sig):
    """(the call's leaves with each ref leaf -- the closed-over refs
    appended -- replaced by its buffer, [(ref, buffer, in_place)] per ref
    leaf) for a signature with refs (``sig.ref_leaves``); ``leaves`` and no
    refs for another."""
    if not sig.ref_leaves:
        return leaves, ()
    leaves = list(leaves) + list(sig.ref_consts)
    refs = []
    for i in sig.ref_leaves:
        aval = sig.in_avals[i]
        buffer, in_place = ref_buffer(leaves[i], aval.dtype, aval.shape)
        refs.append((leaves[i], buffer, in_place))
        leaves[i] = buffer
    return leaves, refs


def finish(refs, outs):
    """After a call: stores the final value of each ref (the last
    ``len(refs)`` of ``outs``; ``refs`` holds (ref, buffer, in_place) per
    ref leaf) and returns the function's own outputs, copied where one
    shares memory with a ref's buffer (a returned ``r[...]`` is a snapshot,
    not a view of the ref)."""
    if not refs:
        return outs
    n = len(outs) - len(refs)
    for (ref, buffer, in_place), value in zip(refs, outs[n:]):
        write_back(ref, buffer, in_place, value)
    buffers = [buffer for _, buffer, _ in refs]
    return [o.copy() if isinstance(o, np.ndarray)
            and any(np.may_share_memory(o, b) for b in buffers) else o for o in outs[:n]]


# ---------------------------------------------------------------- translation


@rule("empty")
def _empty(tr, eqn, args):
    """``lax.empty`` (what ``empty_ref`` discharges to): zeros, as JAX's CPU
    lowering makes it (never uninitialized memory)."""
    aval = eqn.outvars[0].aval
    return [tr.constant(np.zeros(aval.shape, aval.dtype), aval)]


_KEEP_ATTR = "tdf.jax.keep"


def share_index_computations(module) -> None:
    """Merges identical scalar computations of the translated ``module``
    (upstream ``cse`` on everything but the ops that make tensors).

    A discharged ``r[i] += y`` reads and writes the same slice, but the read
    (``dynamic_slice``) and the write (``dynamic_update_slice``) each compute
    the offsets from ``i``: with two SSA values for one offset, One-Shot
    Bufferize cannot see that the updated row is the row it read, and
    computes the new row in a temporary (one allocation per loop step). With
    the offsets shared it writes the row in place. Ops with tensor results
    of rank >= 1 are kept apart (tagged while ``cse`` runs; rank-0 tensors
    are the translation's scalars): merging two ``tensor.empty``
    inits would make their updates share one buffer, and the pipeline
    deliberately runs no ``cse`` before bufferization for that reason."""
    from mlir import ir, passmanager

    i64 = ir.IntegerType.get_signless(64)
    tagged: list = []

    def tag(op):
        if any(_is_array(r.type) for r in op.results):
            op.attributes[_KEEP_ATTR] = ir.IntegerAttr.get(i64, len(tagged))
            tagged.append(op)
        return ir.WalkResult.ADVANCE

    def untag(op):
        if _KEEP_ATTR in op.attributes:
            del op.attributes[_KEEP_ATTR]
        return ir.WalkResult.ADVANCE

    module.operation.walk(tag)
    try:
        passmanager.PassManager.parse("builtin.module(func.func(cse))").run(module.operation)
    except ir.MLIRError:  # pragma: no cover - only an optimization: the module is unchanged
        pass
    finally:
        module.operation.walk(untag)


def _is_array(t) -> bool:
    """Whether ``t`` is a tensor or memref of rank >= 1 (rank-0 tensors are
    the translation's scalars: merging them is merging scalars)."""
    from mlir import ir
    if not isinstance(t, ir.ShapedType):
        return False
    shaped = ir.ShapedType(t)
    return not shaped.has_rank or shaped.rank > 0
