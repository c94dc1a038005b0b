"""Structure and control flow: calls are inlined (``jit``/``pjit``,
``closed_call``, ``core_call``, ``custom_jvp_call``, ``custom_vjp_call``,
``remat``/``checkpoint``), ``scan`` becomes ``scf.for``, ``while`` becomes
``scf.while`` and ``cond`` a chain of ``scf.if``.

Loop carries are ``iter_args`` (``scf.for``) or ``scf.while`` arguments, so a
donated cache carried through a loop is updated in its own storage; the
stacked outputs of a ``scan`` are written slice by slice into a
loop-carried ``tensor.empty``.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, scf

from ._builder import rule, tensor_type

_CALL_PARAMS = ("jaxpr", "call_jaxpr", "fun_jaxpr")


@rule("pjit", "jit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call",
      "custom_vjp_call_jaxpr", "remat", "checkpoint", "remat2", "custom_lin")
def _call(tr, eqn, args):
    for name in _CALL_PARAMS:
        if name in eqn.params:
            jaxpr = eqn.params[name]
            break
    else:
        raise tr.unsupported("a call without a jaxpr parameter")
    return tr.inline(jaxpr, list(args))


@rule("scan")
def _scan(tr, eqn, args):
    p = eqn.params
    nconsts, ncarry, length = int(p["num_consts"]), int(p["num_carry"]), int(p["length"])
    reverse = bool(p["reverse"])
    body = p["jaxpr"]
    consts, carry, xs = args[:nconsts], args[nconsts:nconsts + ncarry], args[nconsts + ncarry:]
    y_avals = [v.aval for v in eqn.outvars[ncarry:]]
    ys_init = [tr.empty(a.shape, tensor_type(a).element_type) for a in y_avals]
    lower, upper, step = tr.const_index(0), tr.const_index(length), tr.const_index(1)
    loop = scf.ForOp(lower, upper, step, list(carry) + ys_init)
    with ir.InsertionPoint(loop.body):
        i = loop.induction_variable
        index = arith.SubIOp(tr.const_index(length - 1), i).result if reverse else i
        state = list(loop.inner_iter_args)
        carry_in, ys_in = state[:ncarry], state[ncarry:]
        x_t = []
        for x in xs:
            t = ir.RankedTensorType(x.type)
            rest = list(t.shape[1:])
            x_t.append(tr.extract_slice(x, [index] + [0] * len(rest), [1] + rest,
                                        result_shape=rest))
        outs = tr.inline(body, list(consts) + carry_in + x_t)
        new_carry, y_t = outs[:ncarry], outs[ncarry:]
        ys_out = []
        for y, acc in zip(y_t, ys_in):
            rest = list(ir.RankedTensorType(y.type).shape)
            ys_out.append(tr.insert_slice(y, acc, [index] + [0] * len(rest), [1] + rest))
        scf.YieldOp(list(new_carry) + ys_out)
    return list(loop.results)


@rule("while")
def _while(tr, eqn, args):
    p = eqn.params
    ncond, nbody = int(p["cond_nconsts"]), int(p["body_nconsts"])
    cond_consts, body_consts, init = args[:ncond], args[ncond:ncond + nbody], args[ncond + nbody:]
    types = [v.type for v in init]
    loop = scf.WhileOp(types, list(init))
    before = loop.before.blocks.append(*types)
    with ir.InsertionPoint(before):
        (pred,) = tr.inline(p["cond_jaxpr"], list(cond_consts) + list(before.arguments))
        scf.ConditionOp(tr.extract(pred), list(before.arguments))
    after = loop.after.blocks.append(*types)
    with ir.InsertionPoint(after):
        outs = tr.inline(p["body_jaxpr"], list(body_consts) + list(after.arguments))
        scf.YieldOp(outs)
    return list(loop.results)


@rule("cond")
def _cond(tr, eqn, args):
    branches = list(eqn.params["branches"])
    index, operands = args[0], list(args[1:])
    result_types = [tensor_type(v.aval) for v in eqn.outvars]
    selector = tr.extract(index)
    if ir.IntegerType(selector.type).width == 1:
        selector = arith.ExtUIOp(ir.IntegerType.get_signless(32), selector).result

    def emit(k):
        if k == len(branches) - 1:
            return tr.inline(branches[k], operands)
        # Out-of-range indices clamp: branch 0 for index <= 0, the last for
        # index >= n - 1.
        pred = arith.CmpIOp(arith.CmpIPredicate.sle, selector, tr.const(k, selector.type)).result
        op = scf.IfOp(pred, result_types, has_else=True)
        with ir.InsertionPoint(op.then_block):
            scf.YieldOp(tr.inline(branches[k], operands))
        with ir.InsertionPoint(op.else_block):
            scf.YieldOp(emit(k + 1))
        return list(op.results)

    return emit(0)
