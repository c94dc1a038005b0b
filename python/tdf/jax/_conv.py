"""``conv_general_dilated``: any dimension numbers, window strides, padding
(negative included), lhs and rhs dilation, ``feature_group_count`` and
``batch_group_count``, ``preferred_element_type``.

A float32 convolution with one group, no lhs dilation and a channels-last
or channels-first layout is, when the translation asks for it
(``tr.library_convolutions``: compiled for the CPU with the BLAS route and
oneDNN), an upstream named convolution after its padding
(:func:`_named_convolution`), which ``tdf-convolutions-to-dnnl`` runs
through oneDNN's convolution primitive. Otherwise:

A convolution is a contraction of the input's patches with the kernel, and
that is how it is built, so that it reaches the BLAS (the CPU pipeline's
``tdf-specialize-contractions`` / ``tdf-contractions-to-blas``):

1. lhs dilation and padding: :func:`._window.dilate_pad` (a zero-filled
   tensor and one strided ``tensor.insert_slice``);
2. the patches (im2col): one ``linalg.generic`` copy whose input map reads
   ``x[..., y * stride + k * rhs_dilation, ...]``: its M dimensions (output
   batch and spatial) in runs of the output's order, its K dimensions
   (input feature and kernel spatial) in the order of decreasing input
   stride (NHWC: kh, kw, c; NCHW: c, kh, kw), K innermost unless the M run
   reads the input more contiguously (NCHW: the output row streams). A
   kernel of spatial size 1 (pointwise, strided or not) needs no patches:
   the (strided) input itself is the operand;
3. one contraction ``linalg.generic`` (``C + A * B``, projected-permutation
   maps) of the patches and the kernel viewed as [K, O] or [O, K]
   (transposed first when its K dimensions are not adjacent in that order)
   into the output's own dimensions, the groups a batch dimension; the BLAS
   runtime merges what is contiguous in every operand (NHWC: one GEMM).
4. patches of more than :data:`CHUNK_BYTES` are built and contracted in
   batch chunks (:func:`_batch_chunks`): the memory planner gives every
   chunk the same patches buffer, which stays in the core's cache between
   its copy and its GEMM, and each chunk's contraction accumulates in its
   rows of the result (an ``extract_slice``/``insert_slice`` pair that
   One-Shot Bufferize updates in place; ``tdf-contractions-to-blas`` drops
   the zero fill of such a view). Measured on ``benchmarks/conv.py``'s CNN
   at batch 64 (13x13x32 -> 64, 8.9 MB of patches): about 7% off the
   forward pass.

The views around the contraction are ``tensor.reshape`` ops, never
``collapse_shape``/``expand_shape``: ``linalg-fuse-elementwise-ops`` folds
those into a ``linalg.contract`` (it becomes a ``linalg.generic`` again) and
then fuses the patches copy into it, which would lose the BLAS. The result
needs no reshape (a ``tensor.reshape`` of a returned buffer would be copied
at the return), except ``collapse_shape`` of the (group, feature) split.
``benchmarks/conv.py --strategies`` measures this against :data:`STRATEGY`
``"direct"`` (one ``linalg.generic`` over output and window loops): im2col +
BLAS won on every workload (2-20x).

Semantics are XLA's: output feature ``o`` belongs to group
``o // (O / groups)``; feature groups take input features
``[g * C/G, (g + 1) * C/G)``, batch groups take input batch elements
``[g * N/B, (g + 1) * N/B)``. Operands are converted to the accumulation
type (``preferred_element_type``, else the result type; ``float32`` for
``float16``/``bfloat16`` results, rounded once at the end) in the
contraction's body; integer convolutions wrap around.
"""

from __future__ import annotations

import copy
from types import SimpleNamespace

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg, tensor

from ._builder import element_type, is_bool, rule
from ._elementwise import convert_scalar
from ._reduce import _identity, multiply_accumulate
from ._window import dilate_pad

#: Loop dimensions the BLAS runtime takes (``analysis.contractions.MAX_DIMS``).
_MAX_DIMS = 6
#: ``"im2col"`` (patches + one contraction: the BLAS) or ``"direct"`` (one
#: ``linalg.generic`` over output and window loops reading the input through
#: strided maps; loops, no BLAS). Only ``benchmarks/conv.py`` switches it,
#: to measure the two against each other.
STRATEGY = "im2col"
#: Float32 convolutions that the CPU pipeline's oneDNN route takes (one
#: group, no lhs dilation, channels-last or channels-first layouts) are
#: built as upstream named ops when the translation asks for them
#: (``tr.library_convolutions``: ``tdf.jax._api.library_convolutions``);
#: tests of the im2col path switch it off.
LIBRARY = True
#: Patches of at most about this many bytes per contraction: a larger
#: patches tensor is built and contracted in batch chunks (one patches
#: buffer, reused, that stays in the core's cache between its copy and the
#: GEMM that reads it, instead of a round trip through memory).
CHUNK_BYTES = 1 << 20
#: No chunk of fewer GEMM rows (batch x output spatial) than this: small
#: GEMMs run far below the BLAS's peak.
CHUNK_MIN_ROWS = 512
#: At most this many chunks (each is its own copy and contraction in the IR).
CHUNK_MAX = 16


def _accumulator(out_dtype):
    """The dtype a convolution with result ``out_dtype`` accumulates in."""
    d = np.dtype(out_dtype)
    if d.name in ("bfloat16", "float16"):
        return np.dtype(np.float32)
    return d


class _Conv:
    """The geometry of one ``conv_general_dilated`` equation, in terms of
    named dimensions: ``"g"`` (group), ``"b"`` (output batch), ``("y", i)``
    (output spatial), ``"o"`` (output feature within a group), ``"f"``
    (input feature within a group), ``("k", i)`` (kernel spatial)."""

    def __init__(self, eqn, lhs_shape, rhs_shape):
        p = eqn.params
        dn = p["dimension_numbers"]
        self.lhs_spec = tuple(int(d) for d in dn.lhs_spec)
        self.rhs_spec = tuple(int(d) for d in dn.rhs_spec)
        self.out_spec = tuple(int(d) for d in dn.out_spec)
        self.nsp = len(self.lhs_spec) - 2
        self.strides = tuple(int(s) for s in p["window_strides"])
        self.padding = tuple((int(lo), int(hi)) for lo, hi in p["padding"])
        self.lhs_dilation = tuple(int(d) for d in p["lhs_dilation"])
        self.rhs_dilation = tuple(int(d) for d in p["rhs_dilation"])
        self.fgc = int(p["feature_group_count"])
        self.bgc = int(p["batch_group_count"])
        self.groups = self.fgc * self.bgc
        self.out_shape = tuple(int(s) for s in eqn.outvars[0].aval.shape)
        self.lhs_shape, self.rhs_shape = tuple(lhs_shape), tuple(rhs_shape)
        out_features = rhs_shape[self.rhs_spec[0]]
        self.sizes = {
            "g": self.groups,
            "b": self.out_shape[self.out_spec[0]],
            "o": out_features // self.groups,
            "f": rhs_shape[self.rhs_spec[1]],
        }
        for i in range(self.nsp):
            self.sizes[("y", i)] = self.out_shape[self.out_spec[2 + i]]
            self.sizes[("k", i)] = rhs_shape[self.rhs_spec[2 + i]]

    def with_batch(self, n: int) -> _Conv:
        """This geometry for ``n`` of the batch elements (one group of
        batch: ``batch_group_count`` 1)."""
        chunk = copy.copy(self)
        lhs, out = list(self.lhs_shape), list(self.out_shape)
        lhs[self.lhs_spec[0]] = out[self.out_spec[0]] = n
        chunk.lhs_shape, chunk.out_shape = tuple(lhs), tuple(out)
        chunk.sizes = dict(self.sizes, b=n)
        return chunk

    def tags_of(self, spec, kinds):
        """Named dimensions of a tensor with dimension numbers ``spec`` in
        memory order; ``kinds`` names spec's (batch, feature, spatial)."""
        batch, feature, spatial = kinds
        order = []
        for d in range(len(spec)):
            if d == spec[0]:
                order += batch
            elif d == spec[1]:
                order += feature
            else:
                order.append((spatial, spec.index(d) - 2))
        return order

    @property
    def out_order(self):
        return self.tags_of(self.out_spec, (["b"], ["g", "o"], "y"))

    @property
    def rhs_order(self):
        return self.tags_of(self.rhs_spec, (["g", "o"], ["f"], "k"))

    def direct_tags(self, tags):
        """``tags`` without the kernel spatial dimensions (all 1 in a direct
        convolution) and without ``g`` when there is one group."""
        return [t for t in tags if not (isinstance(t, tuple) and t[0] == "k")
                and not (t == "g" and self.groups == 1)]

    def drop_units(self, tags):
        """``tags`` without the unit dimensions (and without ``g`` when
        there is one group)."""
        return [t for t in tags if self.sizes[t] != 1]


def _group_runs(order, members):
    """Maximal runs of consecutive ``order`` entries that are in
    ``members``, each as a tuple (the other entries as 1-tuples)."""
    groups, run = [], []
    for tag in order:
        if tag in members:
            run.append(tag)
            continue
        if run:
            groups.append(tuple(run))
            run = []
        groups.append((tag,))
    if run:
        groups.append(tuple(run))
    return groups


def _view(tr, value, groups, sizes, opaque=False):
    """``value`` (a row-major tensor whose dimensions are the tags of
    ``groups`` flattened, unit ones possibly absent) reshaped to one
    dimension per group (by :func:`opaque_reshape` when ``opaque``)."""
    shape = [int(np.prod([sizes[t] for t in g], dtype=np.int64)) for g in groups]
    return opaque_reshape(tr, value, shape) if opaque else regroup(tr, value, shape)


def opaque_reshape(tr, value, shape):
    """``value`` reshaped (row-major) to ``shape`` by a ``tensor.reshape``:
    a view, like ``collapse_shape``/``expand_shape``, that the elementwise
    fusion's reshape propagation does not fold into the contraction (which
    would turn it back into a generic with the patches fused in)."""
    t = ir.RankedTensorType(value.type)
    shape = [int(s) for s in shape]
    if list(t.shape) == shape:
        return value
    i64 = ir.IntegerType.get_signless(64)
    stype = ir.RankedTensorType.get([len(shape)], i64)
    dims = arith.ConstantOp(stype, ir.DenseElementsAttr.get(np.asarray(shape, np.int64),
                                                            type=stype)).result
    return tensor.ReshapeOp(ir.RankedTensorType.get(shape, t.element_type), value, dims).result


def regroup(tr, value, shape):
    """``value`` reshaped (row-major) to ``shape`` (no zero sizes) by one
    ``tensor.collapse_shape`` of runs of dimensions followed by one
    ``tensor.expand_shape``, so that a strided view stays a view where
    merging its runs allows it (unlike a flatten to one dimension)."""
    t = ir.RankedTensorType(value.type)
    src, dst = [int(s) for s in t.shape], [int(s) for s in shape]
    if src == dst:
        return value
    if not src or not dst or 0 in src or 0 in dst:
        return tr.reshape(value, dst)
    # chunks: consecutive source and target runs of equal products
    chunks, i, j = [], 0, 0
    while i < len(src) or j < len(dst):
        si, dj = [i], [j] if j < len(dst) else []
        ps = src[i] if i < len(src) else 1
        pd = dst[j] if j < len(dst) else 1
        i, j = i + 1, j + 1
        while ps != pd:
            if ps < pd:
                si.append(i)
                ps *= src[i]
                i += 1
            else:
                dj.append(j)
                pd *= dst[j]
                j += 1
        # trailing unit dimensions join the current chunk
        while i < len(src) and src[i] == 1 and (j >= len(dst) or dst[j] != 1):
            si.append(i)
            i += 1
        while j < len(dst) and dst[j] == 1 and (i >= len(src) or src[i] != 1):
            dj.append(j)
            j += 1
        chunks.append(([s for s in si if s < len(src)], [d for d in dj if d < len(dst)]))
    if any(not s or not d for s, d in chunks):
        return tr.reshape(value, dst)
    etype = t.element_type
    mid = [int(np.prod([src[s] for s in si], dtype=np.int64)) for si, _ in chunks]
    if mid != src:
        value = tensor.CollapseShapeOp(ir.RankedTensorType.get(mid, etype), value,
                                       [si for si, _ in chunks]).result
    if mid != dst:
        groups, at = [], 0
        for _, dj in chunks:
            groups.append(list(range(at, at + len(dj))))
            at += len(dj)
        value = tensor.ExpandShapeOp(ir.RankedTensorType.get(dst, etype), value, groups, [],
                                     dst).result
    return value


@rule("conv_general_dilated")
def _conv_general_dilated(tr, eqn, args):
    lhs, rhs = args
    lt, rt = ir.RankedTensorType(lhs.type), ir.RankedTensorType(rhs.type)
    cv = _Conv(eqn, list(lt.shape), list(rt.shape))
    aval = eqn.outvars[0].aval
    out_dtype = aval.dtype
    ldtype, rdtype = eqn.invars[0].aval.dtype, eqn.invars[1].aval.dtype
    if is_bool(out_dtype):
        raise tr.unsupported("dtype bool")
    acc_dtype = _accumulator(out_dtype)
    acc_type = element_type(acc_dtype)
    zero = _identity(tr, "sum", acc_dtype, acc_type)
    if 0 in cv.out_shape:
        return [tr.empty(cv.out_shape, element_type(out_dtype))]
    reduction = cv.sizes["f"] * int(np.prod([cv.sizes[("k", i)] for i in range(cv.nsp)]))
    if reduction == 0 or 0 in cv.lhs_shape:
        return [_finish(tr, tr.fill(zero, cv.out_shape), acc_dtype, out_dtype)]

    # 1. lhs dilation and padding of the spatial dimensions
    dilation, padding = [1] * lt.rank, [(0, 0)] * lt.rank
    for i in range(cv.nsp):
        d = cv.lhs_spec[2 + i]
        dilation[d], padding[d] = cv.lhs_dilation[i], cv.padding[i]
    x = dilate_pad(tr, lhs, dilation, padding, _identity(tr, "sum", ldtype, lt.element_type))

    if STRATEGY == "direct":
        return [_direct_generic(tr, cv, x, rhs, ldtype, rdtype, acc_dtype, out_dtype)]
    named = _named_convolution(tr, cv, (ldtype, rdtype, out_dtype))
    if named is not None:
        init = tr.fill(zero, cv.out_shape)
        attrs = {"strides": list(cv.strides), "dilations": list(cv.rhs_dilation)}
        return [named(x, rhs, outs=[init], **attrs)]

    # 2. the contraction's operands and result layout
    k_tags = ["f"] + [("k", i) for i in range(cv.nsp)]
    m_tags = ["b"] + [("y", i) for i in range(cv.nsp)]
    direct = all(cv.sizes[("k", i)] == 1 for i in range(cv.nsp))
    if direct:
        built = _direct_operands(tr, cv, x, rhs, m_tags, k_tags)
        if built is not None:
            return [_contract(tr, cv, built, ldtype, rdtype, acc_dtype, out_dtype)]
    chunks = _batch_chunks(cv, ldtype)
    if len(chunks) > 1:
        return [_chunked(tr, cv, x, rhs, chunks, m_tags, k_tags, (ldtype, rdtype, acc_dtype,
                                                                  out_dtype))]
    built = _patch_operands(tr, cv, x, rhs, m_tags, k_tags)
    return [_contract(tr, cv, built, ldtype, rdtype, acc_dtype, out_dtype)]


def _named_convolution(tr, cv, dtypes):
    """The upstream named convolution (``linalg.conv_2d_nhwc_hwcf`` ...)
    that computes ``cv`` after its padding, when the translation builds
    them (``tr.library_convolutions``: the CPU pipeline's oneDNN route will
    take it) and one does: float32 throughout, one group, no lhs dilation,
    1-3 spatial dimensions in the channels-last (NHWC / HWIO / NHWC) or
    channels-first (NCHW / OIHW / NCHW) layout; else None."""
    if not (LIBRARY and tr.library_convolutions) or not 1 <= cv.nsp <= 3:
        return None
    if any(np.dtype(d) != np.dtype(np.float32) for d in dtypes):
        return None
    if cv.groups != 1 or any(d != 1 for d in cv.lhs_dilation):
        return None
    n = cv.nsp
    spatial = tuple(range(1, n + 1))
    if cv.lhs_spec == cv.out_spec == (0, n + 1) + spatial and \
            cv.rhs_spec == (n + 1, n) + tuple(range(n)):
        names = {1: "conv_1d_nwc_wcf", 2: "conv_2d_nhwc_hwcf", 3: "conv_3d_ndhwc_dhwcf"}
    elif cv.lhs_spec == cv.out_spec == cv.rhs_spec == tuple(range(n + 2)):
        names = {1: "conv_1d_ncw_fcw", 2: "conv_2d_nchw_fchw", 3: "conv_3d_ncdhw_fcdhw"}
    else:
        return None
    return getattr(linalg, names[n])


def _batch_chunks(cv, ldtype) -> list[int]:
    """The batch sizes of the chunks an im2col convolution is built in
    (one entry: not chunked). Chunked when its patches exceed
    :data:`CHUNK_BYTES`, the batch is the outermost dimension of input and
    output (each chunk a contiguous view) and every chunk keeps at least
    :data:`CHUNK_MIN_ROWS` GEMM rows; ``batch_group_count`` must be 1 (a
    batch chunk is then a convolution of its own)."""
    n = cv.sizes["b"]
    if cv.bgc != 1 or cv.lhs_spec[0] != 0 or cv.out_spec[0] != 0 or n < 2:
        return [n]
    rows = int(np.prod([cv.sizes[("y", i)] for i in range(cv.nsp)], dtype=np.int64))
    depth = cv.groups * cv.sizes["f"] * int(np.prod([cv.sizes[("k", i)] for i in range(cv.nsp)],
                                                    dtype=np.int64))
    per_image = rows * depth * np.dtype(ldtype).itemsize
    count = min(-(-n * per_image // CHUNK_BYTES), CHUNK_MAX, n * rows // CHUNK_MIN_ROWS, n)
    if count < 2:
        return [n]
    size = -(-n // count)
    return [min(size, n - at) for at in range(0, n, size)]


def _chunked(tr, cv, x, rhs, chunks, m_tags, k_tags, dtypes):
    """The convolution as one im2col contraction per batch chunk of
    ``chunks``, each written into its rows of the result."""
    ldtype, rdtype, acc_dtype, out_dtype = dtypes
    xt = ir.RankedTensorType(x.type)
    result = tr.empty(cv.out_shape, element_type(out_dtype))
    at, kernel = 0, None
    for n in chunks:
        part = cv.with_batch(n)
        sizes = list(xt.shape)
        sizes[0] = n
        xs = tr.extract_slice(x, [at] + [0] * (xt.rank - 1), sizes)
        built = _patch_operands(tr, part, xs, rhs, m_tags, k_tags, kernel)
        kernel = built[1] + (built[4],)  # the kernel's view, built once
        offsets = [at] + [0] * (len(part.out_shape) - 1)
        # the chunk's rows of the result as the accumulator: One-Shot
        # Bufferize computes it in place there (no copy into the result)
        rows = tr.extract_slice(result, offsets, part.out_shape)
        value = _contract(tr, part, built, ldtype, rdtype, acc_dtype, out_dtype, dest=rows)
        result = tr.insert_slice(value, result, offsets, part.out_shape)
        at += n
    return result


def _kernel_view(tr, cv, rhs, k_tags, collapse_k, keep_o=False, k_order=None):
    """The kernel as (value, groups): its dimensions in memory order with
    the output feature split into (g, o), unit dimensions dropped, and the
    K dimensions collapsed into one group when ``collapse_k``, in the order
    ``k_order`` (tags; the patches read the input best in that order): the
    kernel is transposed first when its K dimensions are not adjacent in
    memory in that order. Without ``collapse_k`` only the (unit) kernel
    spatial dimensions are dropped. ``keep_o`` keeps a unit output feature
    (and the group). Reshaped by :func:`opaque_reshape`, which fusion
    leaves alone."""
    def kept(tags):
        if not collapse_k:
            return cv.direct_tags(tags)
        if keep_o:
            return [t for t in tags if t == "o" or (t == "g" and cv.groups > 1)
                    or cv.sizes[t] != 1]
        return cv.drop_units(tags)

    order = kept(cv.rhs_order)
    ks = [t for t in order if t in k_tags]
    if collapse_k and ks:
        want = [t for t in (k_order or ks) if t in ks]
        at = order.index(ks[0])
        if order[at:at + len(ks)] != want:
            # transpose to [K..., O] (output feature innermost, as in HWIO)
            # or [O, K...] (as in OIHW), whichever the kernel is closer to
            o_last = cv.rhs_spec[0] > min(cv.rhs_spec[1:])
            tags = want + ["g", "o"] if o_last else ["g", "o"] + want
            dim_of = {"o": cv.rhs_spec[0], "f": cv.rhs_spec[1]}
            dim_of.update({("k", i): cv.rhs_spec[2 + i] for i in range(cv.nsp)})
            perm = []
            for t in tags:
                d = dim_of.get(t)
                if d is not None and d not in perm:
                    perm.append(d)
            perm = [d for d in range(len(cv.rhs_spec)) if d not in perm] + perm  # unit dims
            rt = ir.RankedTensorType(rhs.type)
            init = tr.empty([rt.shape[d] for d in perm], rt.element_type)
            rhs = linalg.transpose(rhs, outs=[init], permutation=perm).results[0]
            order = kept([t for t in _tags_of_dims(cv, perm)])
            ks = want
        groups = _group_runs(order, set(ks))
    else:
        groups = [(t,) for t in order]
    return _view(tr, rhs, groups, cv.sizes, opaque=True), groups, tuple(ks)


def _tags_of_dims(cv, dims):
    """The tags of the kernel's dimensions ``dims`` in that order (the
    output feature as (g, o))."""
    tags = []
    for d in dims:
        if d == cv.rhs_spec[0]:
            tags += ["g", "o"]
        elif d == cv.rhs_spec[1]:
            tags.append("f")
        else:
            tags.append(("k", cv.rhs_spec.index(d) - 2))
    return tags


def _result_groups(order, m_tags, collapse_m):
    """Groups of the contraction's result with its dimensions in ``order``
    (tags, unit ones dropped): runs of M tags collapsed when
    ``collapse_m``."""
    if collapse_m:
        return _group_runs(order, set(m_tags))
    return [(t,) for t in order]


def _direct_operands(tr, cv, x, rhs, m_tags, k_tags):
    """Operands of a convolution whose kernel is 1 in every spatial
    dimension: the (strided) input is A itself, no patches. None when that
    needs more loop dimensions than the BLAS runtime takes."""
    xt = ir.RankedTensorType(x.type)
    # strided slice: x[..., y * stride, ...] for y < Y
    offsets, sizes, strides = [0] * xt.rank, list(xt.shape), [1] * xt.rank
    for i in range(cv.nsp):
        d = cv.lhs_spec[2 + i]
        sizes[d] = cv.sizes[("y", i)]
        strides[d] = cv.strides[i]
    if sizes != list(xt.shape):
        x = tr.extract_slice(x, offsets, sizes, strides)
    # x's dimensions as tags: batch -> (g, b) or b, feature -> (g, f) or f
    lhs_order = cv.tags_of(cv.lhs_spec, (["g", "b"] if cv.bgc > 1 else ["b"],
                                         ["g", "f"] if cv.fgc > 1 else ["f"], "y"))
    # Unit dimensions stay (as loops of size 1 in two operands each): A is
    # only ever expanded (groups split), never collapsed, so that the
    # fusion's reshape propagation has nothing to fold into the contraction.
    a_groups = [(t,) for t in cv.direct_tags(lhs_order)]
    c_groups = [(t,) for t in cv.direct_tags(cv.out_order)]
    loops = _loops(a_groups, [(t,) for t in cv.direct_tags(cv.rhs_order)], c_groups)
    if len(loops) > _MAX_DIMS:
        return None
    b_value, b_groups, _ = _kernel_view(tr, cv, rhs, k_tags, collapse_k=False)
    a_value = _view(tr, x, a_groups, cv.sizes)
    return (a_value, a_groups), (b_value, b_groups), c_groups, True


def _patch_k_order(cv, x, k_tags):
    """The K tags in the order the patches copy reads the input best: by
    decreasing stride in the input (NHWC: kh, kw, c; NCHW: c, kh, kw)."""
    stride = _input_strides(cv, ir.RankedTensorType(x.type))
    return sorted(k_tags, key=lambda t: -stride(t))


def _patch_split(cv, m_tags, k_tags) -> bool:
    """Whether the contraction sees the output's own dimensions (see
    :func:`_patch_operands`)."""
    reduces = any(cv.sizes[t] != 1 for t in k_tags)
    return (1 if cv.groups > 1 else 0) + len(m_tags) + 2 <= _MAX_DIMS and reduces


def _patch_operands(tr, cv, x, rhs, m_tags, k_tags, kernel=None):
    """Operands of the im2col form: the patches tensor A, the kernel view B
    and the result's groups.

    The patches hold the M dimensions in runs of the output's order (each
    run contiguous) and K collapsed. The contraction itself sees the
    result in the output's own dimensions (unit ones included, the output
    feature split into (g, o)) and the patches reshaped to match: the BLAS
    runtime merges the dimensions that are contiguous in every operand, and
    the result needs no reshape that deallocation cannot see through (a
    ``tensor.reshape`` of a returned buffer is copied at the return). Only
    when that takes more loops than the runtime has (3-d groups, layouts
    interleaving batch/spatial and feature) are the runs collapsed in the
    contraction too (or the result computed as [M, O] and transposed)."""
    split = _patch_split(cv, m_tags, k_tags)
    if kernel is None:
        kernel = _kernel_view(tr, cv, rhs, k_tags, collapse_k=True, keep_o=split,
                              k_order=_patch_k_order(cv, x, k_tags))
    b_value, b_groups, k_order = kernel
    k_group = tuple(k_order)
    runs = _result_groups(cv.drop_units(cv.out_order), m_tags, collapse_m=True)
    flat = [(t,) for t in cv.direct_tags(cv.out_order)]
    if split:
        c_groups = flat
    else:
        c_groups = runs
        if len(c_groups) + 1 > _MAX_DIMS:
            # compute [groups..., M, O] and transpose it to the output's
            # layout afterwards
            canonical = cv.drop_units(m_tags + ["g", "o"])
            c_groups = runs = _result_groups(canonical, m_tags, collapse_m=True)
    m_groups = [g for g in runs if g[0] in m_tags]
    # the block (M or K) whose innermost dimension reads x with the smaller
    # stride goes innermost (the copy's inner loop then streams), on a tie
    # the one with the longer innermost dimension (NCHW: the output row,
    # not the kernel row); K sits just inside the other M runs
    stride = _input_strides(cv, ir.RankedTensorType(x.type))
    k_last = True
    if m_groups and k_group:
        m_tag, k_tag = m_groups[-1][-1], k_group[-1]
        m_key = (stride(m_tag), -cv.sizes[m_tag])
        k_key = (stride(k_tag), -cv.sizes[k_tag])
        k_last = k_key <= m_key
    head = [("g",)] if cv.groups > 1 else []
    if not k_group:
        p_groups = head + m_groups
    elif k_last:
        p_groups = head + m_groups + [k_group]
    else:
        p_groups = head + m_groups[:-1] + [k_group] + m_groups[-1:]
    patches = _patches(tr, cv, _used_extent(tr, cv, x), [t for g in p_groups for t in g])
    if split:
        # the patches' runs as single dimensions, the result's unit M
        # dimensions in front (size 1: anywhere will do)
        units = [(t,) for t in m_tags if cv.sizes[t] == 1]
        a_groups = units + [g2 for g in p_groups for g2 in
                            ([g] if g == k_group else [(t,) for t in g])]
    else:
        a_groups = p_groups
    a_value = _view(tr, patches, a_groups, cv.sizes, opaque=True)
    return (a_value, a_groups), (b_value, b_groups), c_groups, not split, k_order


def _used_extent(tr, cv, x):
    """``x`` cut to the extent the windows read along each spatial
    dimension (a view): linalg infers loop ranges from the operands, and an
    index expression that is a bare loop dimension (a unit dimension
    dropped beside it) must then see the same extent as the patches."""
    xt = ir.RankedTensorType(x.type)
    sizes = list(xt.shape)
    for i in range(cv.nsp):
        d = cv.lhs_spec[2 + i]
        used = (cv.sizes[("y", i)] - 1) * cv.strides[i] + \
            (cv.sizes[("k", i)] - 1) * cv.rhs_dilation[i] + 1
        sizes[d] = min(sizes[d], used)
    if sizes == list(xt.shape):
        return x
    return tr.extract_slice(x, [0] * xt.rank, sizes)


def _input_strides(cv, xt):
    """``stride(tag)``: the element stride of the padded input along the
    input dimension that tag ``tag`` walks."""
    shape = list(xt.shape)
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]

    def stride(tag):
        if tag == "b":
            return strides[cv.lhs_spec[0]]
        if tag == "f":
            return strides[cv.lhs_spec[1]]
        kind, i = tag
        d = cv.lhs_spec[2 + i]
        return strides[d] * (cv.strides[i] if kind == "y" else cv.rhs_dilation[i])
    return stride


def _patches(tr, cv, x, tags):
    """The im2col tensor: one dimension per tag of ``tags`` (in that order),
    ``P[..] = x[batch, feature, y * stride + k * rhs_dilation]``."""
    xt = ir.RankedTensorType(x.type)
    dims = tr.dims(len(tags))
    at = {t: dims[i] for i, t in enumerate(tags)}

    def dim(tag, scale=1):
        if tag not in at:  # a unit dimension (index 0)
            return 0
        return at[tag] * scale if scale != 1 else at[tag]

    in_map = []
    for d in range(xt.rank):
        if d == cv.lhs_spec[0]:
            e = dim("b")
            if cv.bgc > 1:
                e = dim("g", cv.sizes["b"]) + e
        elif d == cv.lhs_spec[1]:
            e = dim("f")
            if cv.fgc > 1:
                e = dim("g", cv.sizes["f"]) + e
        else:
            i = cv.lhs_spec.index(d) - 2
            e = dim(("y", i), cv.strides[i]) + dim(("k", i), cv.rhs_dilation[i])
        in_map.append(e)
    shape = [cv.sizes[t] for t in tags]
    init = tr.empty(shape, xt.element_type)
    return tr.generic([x], [[_affine(e) for e in in_map]], [init], [dims],
                      ["parallel"] * len(tags), lambda a, _o: [a])[0]


def _affine(e):
    return ir.AffineConstantExpr.get(e) if isinstance(e, int) else e


def _loops(a_groups, b_groups, c_groups):
    """The contraction's loop dimensions: batch (in all three), M (A and
    C), K (A and B), N (B and C), in the order batch, M, K, N."""
    a, b, c = set(a_groups), set(b_groups), set(c_groups)
    batch = [g for g in c_groups if g in a and g in b]
    m = [g for g in c_groups if g in a and g not in b]
    n = [g for g in c_groups if g in b and g not in a]
    k = [g for g in a_groups if g in b and g not in c]
    return batch + m + k + n


def _contract(tr, cv, built, ldtype, rdtype, acc_dtype, out_dtype, dest=None):
    """The contraction of ``built``'s operands, as the output. ``dest`` (a
    tensor of the output's shape and type) is the accumulator's init where
    it can be: the contraction's result in the output's own layout and
    type (then it is computed in ``dest``'s storage)."""
    (a_value, a_groups), (b_value, b_groups), c_groups, opaque = built[:4]
    loops = _loops(a_groups, b_groups, c_groups)
    k = [g for g in a_groups if g in set(b_groups) and g not in set(c_groups)]
    dims = tr.dims(len(loops))
    at = {g: dims[i] for i, g in enumerate(loops)}
    acc_type = element_type(acc_dtype)
    c_shape = [int(np.prod([cv.sizes[t] for t in g], dtype=np.int64)) for g in c_groups]
    if dest is None or c_shape != list(cv.out_shape) or \
            np.dtype(acc_dtype) != np.dtype(out_dtype):
        dest = tr.empty(c_shape, acc_type)
    init = linalg.fill(_identity(tr, "sum", acc_dtype, acc_type), outs=[dest])
    iters = ["reduction" if g in k else "parallel" for g in loops]
    body = multiply_accumulate(tr, ldtype, rdtype, acc_dtype)

    result = tr.generic([a_value, b_value],
                        [[at[g] for g in a_groups], [at[g] for g in b_groups]], [init],
                        [[at[g] for g in c_groups]], iters, body)[0]
    order = cv.drop_units([t for g in c_groups for t in g])
    target = cv.drop_units(cv.out_order)
    if order != target:
        # [tags in c order] -> [tags in the output's memory order]
        t = ir.RankedTensorType(result.type)
        result = opaque_reshape(tr, result, [cv.sizes[tag] for tag in order])
        perm = [order.index(tag) for tag in target]
        init = tr.empty([cv.sizes[tag] for tag in target], t.element_type)
        result = linalg.transpose(result, outs=[init], permutation=perm).results[0]
    result = (opaque_reshape if opaque else regroup)(tr, result, cv.out_shape)
    return _finish(tr, result, acc_dtype, out_dtype)


def _direct_generic(tr, cv, x, rhs, ldtype, rdtype, acc_dtype, out_dtype):
    """The convolution as one ``linalg.generic``: loops over the output's
    batch and spatial dimensions, the group, the kernel's spatial and input
    feature dimensions (reductions) and, innermost, the output feature
    (contiguous in an HWIO kernel and an NHWC result)."""
    x = _used_extent(tr, cv, x)
    ys = [("y", i) for i in range(cv.nsp)]
    ks = [t for t in cv.rhs_order if t in ["f"] + [("k", i) for i in range(cv.nsp)]]
    tags = ["b"] + ys + (["g"] if cv.groups > 1 else []) + ks + ["o"]
    dims = tr.dims(len(tags))
    at = dict(zip(tags, dims))
    g = at.get("g")
    xt = ir.RankedTensorType(x.type)
    x_map = []
    for d in range(xt.rank):
        if d == cv.lhs_spec[0]:
            x_map.append(g * cv.sizes["b"] + at["b"] if cv.bgc > 1 else at["b"])
        elif d == cv.lhs_spec[1]:
            x_map.append(g * cv.sizes["f"] + at["f"] if cv.fgc > 1 else at["f"])
        else:
            i = cv.lhs_spec.index(d) - 2
            x_map.append(at[("y", i)] * cv.strides[i] + at[("k", i)] * cv.rhs_dilation[i])
    # kernel and result with the output feature split into (g, o)
    w_order = [t for t in cv.rhs_order if t != "g" or cv.groups > 1]
    w = opaque_reshape(tr, rhs, [cv.sizes[t] for t in w_order])
    out_order = [t for t in cv.out_order if t != "g" or cv.groups > 1]
    acc_type = element_type(acc_dtype)
    init = linalg.fill(_identity(tr, "sum", acc_dtype, acc_type),
                       outs=[tr.empty([cv.sizes[t] for t in out_order], acc_type)])
    iters = ["reduction" if t in ks else "parallel" for t in tags]
    body = multiply_accumulate(tr, ldtype, rdtype, acc_dtype)

    result = tr.generic([x, w], [x_map, [at[t] for t in w_order]], [init],
                        [[at[t] for t in out_order]], iters, body)[0]
    return _finish(tr, opaque_reshape(tr, result, cv.out_shape), acc_dtype, out_dtype)


def _finish(tr, value, acc_dtype, out_dtype):
    """``value`` (accumulated in ``acc_dtype``) converted to ``out_dtype``."""
    if np.dtype(acc_dtype) == np.dtype(out_dtype):
        return value
    t = ir.RankedTensorType(value.type)
    aval = SimpleNamespace(shape=tuple(t.shape), dtype=out_dtype)
    return tr.elementwise(aval, [value], lambda v: convert_scalar(tr, v, acc_dtype, out_dtype))
