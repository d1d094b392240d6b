"""Products of shardc.numpy: dot, matmul, tensordot, einsum, vdot, inner, outer."""
from __future__ import annotations

import numpy as np

from ...trace import core
from ...ir import dtypes
from ...errors import ArgumentError, ShardcError, ShardcTypeError
from ...ir.program import Aval, Lit
from ...ops import linalg
from ..explicit import takes_out_sharding
from ..precision import canonical_precision
from ...ops import reduce as red
from ...ops.common import check_axis
from ._shapes import expand_dims, reshape, squeeze, transpose
from ._ufuncs import multiply
from ._util import _ARRAYS, _Tracer
from ._util import (aval, broadcast_to, canonical_dtype, check_arraylike, convert,
    promote_dtypes, result_type)


def _dot_general(a, b, contracting, batch, name, pref=None, precision=None):
    """dot_general of a and b in their common dtype; `pref` (preferred_element_type,
    canonical) the product's dtype: the dot accumulates into it, as jax's."""
    a, b = promote_dtypes(a, b)
    out = linalg.dot_general_p.bind(a, b, contracting=contracting, batch=batch,
                                    **_dot_params(aval(a).dtype, pref, precision))
    return out if pref is None else convert(out, pref)


def _dot_params(dt, pref, precision):
    """dot_general's optional params: preferred_element_type (when it is not the
    operands' dtype) and precision (when not the default)."""
    out = {}
    if pref is not None and pref != dt:
        out["preferred_element_type"] = pref
    prec = canonical_precision(precision)
    if prec is not None:
        out["precision"] = prec
    return out


def _pref(preferred_element_type):
    return None if preferred_element_type is None else canonical_dtype(preferred_element_type)


@takes_out_sharding
def dot(a, b, *, precision=None, preferred_element_type=None):
    """jnp.dot: sum over the last axis of a and the second-to-last of b."""
    pref = _pref(preferred_element_type)
    check_arraylike("dot", a, b)
    na, nb = aval(a).ndim, aval(b).ndim
    if na == 0 or nb == 0:
        out = multiply(a, b)
        return out if pref is None else convert(out, pref)
    contract = ((na - 1,), (0,)) if nb == 1 else ((na - 1,), (nb - 2,))
    _check_contract("dot", a, b, contract)
    return _dot_general(a, b, contract, ((), ()), "dot", pref, precision)


def _check_contract(name, a, b, contract):
    for x, y in zip(*contract):
        if aval(a).shape[x] != aval(b).shape[y]:
            raise ShardcTypeError(f"{name}: shapes {aval(a).shape} and {aval(b).shape} are not "
                              f"aligned: dim {x} ({aval(a).shape[x]}) != dim {y} "
                              f"({aval(b).shape[y]})")


@takes_out_sharding
def matmul(a, b, *, precision=None, preferred_element_type=None):
    """jnp.matmul: batch dims broadcast; size-1 batch dims are squeezed, as jax does."""
    pref = _pref(preferred_element_type)
    ta, tb = type(a), type(b)
    if pref is None and (ta is _Tracer or ta in _ARRAYS) and (tb is _Tracer or tb in _ARRAYS):
        # the common call: two matrices of one type, nothing to promote or broadcast
        x, y = aval(a), aval(b)
        if len(x.shape) == 2 == len(y.shape) and x.shape[1] == y.shape[0] and \
                x.dtype == y.dtype and x.weak == y.weak and x.dtype != dtypes.bool_:
            return linalg.dot_general_p.bind(a, b, contracting=((1,), (0,)), batch=((), ()),
                                             **_dot_params(x.dtype, None, precision))
    check_arraylike("matmul", a, b)
    sa, sb = aval(a).shape, aval(b).shape
    for i, s in enumerate((sa, sb)):
        if len(s) < 1:
            raise ShardcError(f"matmul input operand {i} must have ndim at least 1, "
                              f"but it has ndim 0")
    a_mat, b_mat = len(sa) > 1, len(sb) > 1
    ka = sa[-1]
    kb = sb[-2] if b_mat else sb[0]
    if ka != kb:
        raise ShardcTypeError(f"matmul: shapes {sa} and {sb} are not aligned: {ka} (last dim "
                              f"of the first) != {kb} (second-to-last dim of the second)")
    if a_mat and b_mat and len(sa) == 2 and len(sb) == 2:     # no batch dims
        return _dot_general(a, b, ((1,), (0,)), ((), ()), "matmul", pref, precision)
    ab = sa[:-2] if a_mat else ()
    bb = sb[:-2] if b_mat else ()
    nbatch = max(len(ab), len(bb))
    ab = (None,) * (nbatch - len(ab)) + tuple(ab)
    bb = (None,) * (nbatch - len(bb)) + tuple(bb)
    a_sq, b_sq, both_sq, a_batch, b_batch = [], [], [], [], []
    idx_batch, idx_a, idx_b = [], [], []
    for i, (x, y) in enumerate(zip(ab, bb)):
        if x is None:
            idx_b.append(i)
        elif y is None:
            idx_a.append(i)
        elif x == 1 and y == 1:
            a_sq.append(len(idx_batch) + len(idx_a) + len(a_sq))
            b_sq.append(len(idx_batch) + len(idx_b) + len(b_sq))
            both_sq.append(i)
        elif x == 1:
            idx_b.append(i)
            a_sq.append(len(idx_batch) + len(idx_a) + len(a_sq))
        elif y == 1:
            idx_a.append(i)
            b_sq.append(len(idx_batch) + len(idx_b) + len(b_sq))
        elif x == y:
            a_batch.append(len(idx_batch) + len(idx_a))
            b_batch.append(len(idx_batch) + len(idx_b))
            idx_batch.append(i)
        else:
            raise ShardcError(f"matmul: batch dims of {sa} and {sb} cannot be broadcast")
    if a_mat:
        idx_a.append(nbatch)
    if b_mat:
        idx_b.append(nbatch + a_mat)
    order = idx_batch + idx_a + idx_b
    perm = sorted(range(len(order)), key=lambda k: order[k])
    a = squeeze(a, tuple(a_sq)) if a_sq else a
    b = squeeze(b, tuple(b_sq)) if b_sq else b
    na, nb = aval(a).ndim, aval(b).ndim
    out = _dot_general(a, b, ((na - 1,), (nb - 1 - b_mat,)), (tuple(a_batch), tuple(b_batch)),
                       "matmul", pref, precision)
    out = transpose(out, perm)
    if both_sq:
        out = expand_dims(out, tuple(both_sq))
    return out


@takes_out_sharding
def vdot(a, b, *, precision=None, preferred_element_type=None):
    """The dot product of the flattened arrays, the first conjugated (as jnp.vdot)."""
    from ...ir import dtypes
    if dtypes.is_complex(aval(a).dtype):
        from ...ops.complex import conj_p
        a = conj_p.bind(a)
    return dot(reshape(a, (-1,)), reshape(b, (-1,)), precision=precision,
               preferred_element_type=preferred_element_type)


@takes_out_sharding
def inner(a, b, *, precision=None, preferred_element_type=None):
    na, nb = aval(a).ndim, aval(b).ndim
    if na == 0 or nb == 0:
        return dot(a, b, preferred_element_type=preferred_element_type)
    return tensordot(a, b, ((na - 1,), (nb - 1,)), precision=precision,
                     preferred_element_type=preferred_element_type)


def outer(a, b, out=None):
    if out is not None:
        raise ShardcError("The 'out' argument to shardc.numpy.outer is not supported.")
    a, b = reshape(a, (-1,)), reshape(b, (-1,))
    return multiply(expand_dims(a, 1), expand_dims(b, 0))


@takes_out_sharding
def tensordot(a, b, axes=2, *, precision=None, preferred_element_type=None):
    pref = _pref(preferred_element_type)
    check_arraylike("tensordot", a, b)
    na, nb = aval(a).ndim, aval(b).ndim
    if isinstance(axes, int):
        if axes > min(na, nb) or axes < 0:
            raise ShardcError(f"tensordot: axes={axes} is too large for ranks {na} and {nb}")
        ca, cb = tuple(range(na - axes, na)), tuple(range(axes))
    else:
        ca, cb = axes
        ca = (ca,) if isinstance(ca, int) else tuple(ca)
        cb = (cb,) if isinstance(cb, int) else tuple(cb)
        if len(ca) != len(cb):
            raise ShardcError("tensordot: the two axes lists must have the same length")
        ca = tuple(check_axis("tensordot", x, na) for x in ca)
        cb = tuple(check_axis("tensordot", x, nb) for x in cb)
    _check_contract("tensordot", a, b, (ca, cb))
    return _dot_general(a, b, (ca, cb), ((), ()), "tensordot", pref, precision)


# ---------------------------------------------------------------- einsum

def _parse(subscripts, operands):
    s = subscripts.replace(" ", "")
    if "->" in s:
        ins, out = s.split("->")
    else:
        ins, out = s, None
    terms = ins.split(",")
    if len(terms) != len(operands):
        raise ShardcError(f"einsum: {len(terms)} operand subscripts for {len(operands)} "
                          "operands")
    # expand ellipses to unused capital letters
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in s]
    ell_rank = 0
    expanded = []
    for t, x in zip(terms, operands):
        n = aval(x).ndim
        if "..." in t:
            k = n - (len(t) - 3)
            ell_rank = max(ell_rank, k)
            t = t.replace("...", "".join(free[ell_rank - k:ell_rank]) if k else "")
        if len(t) != n:
            raise ShardcError(f"einsum: subscript {t!r} has {len(t)} indices but the "
                              f"operand has rank {n}")
        expanded.append(t)
    ell = "".join(free[:ell_rank])
    if out is None:
        counts = {}
        for t in expanded:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in ell))
    else:
        out = out.replace("...", ell)
    return expanded, out


def _sum(x, axes, pref):
    """x summed over `axes` as jax's einsum sums: in the einsum's dtype `pref` when the
    operand's is narrower (bf16 accumulates in f32 beside an f32 operand), with OR for
    bools (bools stay bools)."""
    if result_type(x, _strong(pref))[0] != aval(x).dtype:
        x = convert(x, pref)
    p = red.reduce_or_p if aval(x).dtype == dtypes.bool_ else red.reduce_sum_p
    return p.bind(x, axes=tuple(axes))


def _sum_unused(x, term, keep, pref):
    """Sum away indices of one operand that appear nowhere else."""
    drop = tuple(d for d, c in enumerate(term) if c not in keep)
    if drop:
        x = _sum(x, drop, pref)
        term = "".join(c for c in term if c in keep)
    return x, term


def _diagonals(x, term, keep, pref):
    """An index repeated within one operand (`ii->i`, a trace `ii`), as jax's einsum:
    the operand masked to where those dims' indices agree, summed down to one of them
    (the last), or away if the index is in no other operand nor the output."""
    from ...ops import elementwise as ew
    from ...ops import lax as L
    for c in dict.fromkeys(term):
        axes = [d for d, t in enumerate(term) if t == c]
        if len(axes) < 2:
            continue
        shape = aval(x).shape
        if len({shape[d] for d in axes}) > 1:
            raise ShardcError(f"einsum: the repeated index {c!r} has sizes "
                              f"{[shape[d] for d in axes]} in one operand")
        # the mask over those dims alone, broadcast (as jax's lax._delta builds it)
        base = (shape[axes[0]],) * len(axes)
        u32 = dtypes.canonicalize("uint32")
        eye = None
        for i in range(1, len(axes)):
            e = L.eq(L.iota(u32, base, i - 1), L.iota(u32, base, i))
            eye = e if eye is None else ew.and_p.bind(eye, e)
        eye = L.broadcast_in_dim(eye, shape, axes)
        x = L.select(eye, x, L.full(shape, 0, aval(x).dtype))
        summed = axes if c not in keep else axes[:-1]
        x = _sum(x, summed, pref)
        term = "".join(t for d, t in enumerate(term) if d not in summed)
    return x, term


def _from_sublists(first, rest):
    """numpy's other form, einsum(x, [0, 1], y, [1, 2], [0, 2]): a subscripts string
    (index k the k-th letter of a-zA-Z, Ellipsis `...`) and the operands."""
    import string
    args = (first, *rest)
    operands, subs = list(args[0::2]), list(args[1::2])
    out = None
    if len(subs) < len(operands):       # an odd count: the last is the output's
        out = operands.pop()
    letters = string.ascii_lowercase + string.ascii_uppercase

    def term(sub):
        if isinstance(sub, str) or not hasattr(sub, "__iter__"):
            raise ShardcError(f"einsum: expected a sublist of ints (and ...) after each "
                              f"operand, got {sub!r}")
        t = ""
        for i in sub:
            if i is Ellipsis:
                t += "..."
            elif isinstance(i, (int, np.integer)) and 0 <= i < len(letters):
                t += letters[int(i)]
            else:
                raise ShardcError(f"einsum: a sublist index must be an int in [0, 52) or "
                                  f"..., got {i!r}")
        return t
    s = ",".join(map(term, subs)) + ("" if out is None else "->" + term(out))
    return s, operands


def _strong(dtype):
    return Lit(core._scalar(0, dtype), Aval((), dtype, False))


def _einsum_dot(x, y, contracting, batch, pref, precision):
    """dot_general of two operands in their common dtype, giving `pref` (jax's
    preferred_element_type) where that is wider."""
    x, y = promote_dtypes(x, y)
    return linalg.dot_general_p.bind(x, y, contracting=contracting, batch=batch,
                                     **_dot_params(aval(x).dtype, pref, precision))


@takes_out_sharding
def einsum(subscripts, *operands, optimize=None, precision=None,
           preferred_element_type=None):
    """Einstein summation by pairwise dot_generals, left to right, with jax's dtypes:
    everything in the operands' result type (or `preferred_element_type`)."""
    if not isinstance(subscripts, str):
        subscripts, operands = _from_sublists(subscripts, operands)
    check_arraylike("einsum", *operands)
    terms, out = _parse(subscripts, operands)
    sizes = {}
    for t, x in zip(terms, operands):
        for c, n in zip(t, aval(x).shape):
            if sizes.setdefault(c, n) != n and n != 1 and sizes[c] != 1:
                raise ArgumentError(f"einsum: index {c!r} has sizes {sizes[c]} and {n}")
    if preferred_element_type is None:
        pref, weak = result_type(*operands)
    else:
        pref, weak = canonical_dtype(preferred_element_type), False
    xs = list(operands)
    for i, (x, t) in enumerate(zip(xs, terms)):
        if len(set(t)) != len(t):
            keep = set(out) | {c for j, u in enumerate(terms) if j != i for c in u}
            xs[i], terms[i] = _diagonals(x, t, keep, pref)
    x, t = xs[0], terms[0]
    for k in range(1, len(xs)):
        y, u = xs[k], terms[k]
        later = set(out) | {c for tt in terms[k + 1:] for c in tt}
        x, t = _sum_unused(x, t, later | set(u), pref)
        y, u = _sum_unused(y, u, later | set(t), pref)
        batch = [c for c in t if c in u and c in later]
        contract = [c for c in t if c in u and c not in later]
        dims = lambda term, cs: tuple(term.index(c) for c in cs)  # noqa: E731
        x = _einsum_dot(x, y, (dims(t, contract), dims(u, contract)),
                        (dims(t, batch), dims(u, batch)), pref, precision)
        t = "".join(batch) + "".join(c for c in t if c not in batch and c not in contract) + \
            "".join(c for c in u if c not in batch and c not in contract)
    x, t = _sum_unused(x, t, set(out), pref)
    if sorted(t) != sorted(out):
        raise ShardcError(f"einsum: output subscript {out!r} names indices not in the inputs")
    return convert(transpose(x, [t.index(c) for c in out]), pref, weak)


_ = broadcast_to
