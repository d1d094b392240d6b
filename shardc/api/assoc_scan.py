"""lax.associative_scan: a parallel prefix scan (Blelloch 1990) built from shardc ops.

As jax builds it: combine adjacent pairs (the elements at even and odd positions, by
strided slices), scan that half-length sequence recursively (it gives the results at odd
positions), combine those with the remaining original elements for the results at even
positions, and interleave the two by padding each with zeros between its elements and
adding. Every step is an ordinary op (slice, pad, concatenate, add, rev and the user's
fn), so it traces, runs eagerly and differentiates through those ops' own rules.
"""
from __future__ import annotations

import operator

import jax
import numpy as np

from ..errors import ArgumentError, ShardcTypeError, api_boundary
from ..ir import dtypes
from ..ir.program import Aval, Lit
from ..ops import lax as L
from ..trace import core
from ..trace import pytree as _tree


def _is_array(x) -> bool:
    return core.is_tracer(x) or isinstance(x, (jax.Array, np.ndarray, np.generic))


def _check_leaves(elems):
    paths, tree = _tree.tree_flatten_with_path(elems)
    if not paths:
        raise ArgumentError("lax.associative_scan: elems has no arrays (an empty pytree); "
                            "pass an array or a pytree of arrays")
    for path, x in paths:
        if not _is_array(x):
            raise ShardcTypeError(
                f"lax.associative_scan: elems must be a pytree of arrays, but "
                f"elems{_tree.keystr(path)} is a {type(x).__name__}; convert it with "
                f"shardc.numpy.asarray first")
    return [x for _, x in paths], tree


def _canonical_axis(axis, ndim):
    try:
        axis = operator.index(axis)
    except TypeError:
        raise ShardcTypeError(f"lax.associative_scan: axis must be an integer, got "
                              f"{axis!r}") from None
    if not -ndim <= axis < ndim:
        raise ArgumentError(f"lax.associative_scan: axis {axis} is out of bounds for array "
                            f"of dimension {ndim}")
    return axis % ndim


def _slice(x, start, limit, stride, axis):
    """x[start:limit:stride] along `axis` (limit None: to the end; negative: from it)."""
    shape = L.aval(x).shape
    n = shape[axis]
    limit = n if limit is None else (limit + n if limit < 0 else limit)
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    starts[axis], limits[axis], strides[axis] = start, max(limit, start), stride
    return L.slice(x, starts, limits, strides if stride != 1 else None)


def _interleave(a, b, axis):
    """a[0], b[0], a[1], b[1], ... along `axis` (a has as many elements as b, or one
    more): each padded with a zero between its elements, then summed (or-ed for bool)."""
    aa = L.aval(a)
    na, nb = aa.shape[axis], L.aval(b).shape[axis]
    even = na == nb
    cfg_a = [(0, 0, 0)] * aa.ndim
    cfg_b = [(0, 0, 0)] * aa.ndim
    cfg_a[axis] = (0, 1 if even else 0, 1)
    cfg_b[axis] = (1, 0 if even else 1, 1)
    # a strongly typed zero, as jax's (so the padded result is strongly typed, as there)
    zero = Lit(core._scalar(0, aa.dtype), Aval((), aa.dtype, False))
    op = L.bitwise_or if aa.dtype == dtypes.bool_ else L.add
    return op(L.pad(a, zero, cfg_a), L.pad(b, zero, cfg_b))


def _combiner(fn, tree):
    """fn on flat lists of leaves, checking that it returns what a scan step needs:
    elems' number of leaves, each of its operands' shape and dtype."""
    def combine(a_flat, b_flat):
        out = fn(_tree.tree_unflatten(tree, a_flat), _tree.tree_unflatten(tree, b_flat))
        leaves, out_tree = _tree.tree_flatten(out)
        if len(leaves) != tree.num_leaves:   # (as jax, only the leaves count: a list
            raise ShardcTypeError(           # for a tuple is fine)
                f"lax.associative_scan: fn must return a pytree of the structure of elems "
                f"({tree}), got {out_tree}")
        for x, want in zip(leaves, a_flat):
            if not _is_array(x):
                raise ShardcTypeError(f"lax.associative_scan: fn must return arrays, got "
                                      f"a {type(x).__name__}")
            got, want = L.aval(x), L.aval(want)
            if got.shape != want.shape or got.dtype != want.dtype:
                raise ShardcTypeError(
                    f"lax.associative_scan: fn must return arrays of the shape and dtype of "
                    f"its operands (it is applied elementwise along the scan axis): got "
                    f"{got.dtype}{list(got.shape)} for operands of "
                    f"{want.dtype}{list(want.shape)}")
        return leaves
    return combine


def _scan(combine, elems, axis):
    n = L.aval(elems[0]).shape[axis]
    if n < 2:
        return elems
    # pairs (0,1), (2,3), ...: their scan is the result at odd positions 1, 3, ...
    pairs = combine([_slice(x, 0, -1, 2, axis) for x in elems],
                    [_slice(x, 1, None, 2, axis) for x in elems])
    odd = _scan(combine, pairs, axis)
    # the result at even position 2k (k >= 1) is the one at 2k-1 combined with elems[2k]
    prev = odd if n % 2 else [_slice(x, 0, -1, 1, axis) for x in odd]
    even = combine(prev, [_slice(x, 2, None, 2, axis) for x in elems])
    even = [L.concatenate([_slice(x, 0, 1, 1, axis), e], axis) for x, e in zip(elems, even)]
    return [_interleave(e, o, axis) for e, o in zip(even, odd)]


@api_boundary
def associative_scan(fn, elems, reverse=False, axis=0):
    """A scan with an associative binary operation, in parallel, as jax.lax.associative_scan.

    `fn(a, b)` combines two pytrees like `elems` elementwise along `axis`; the result's
    k-th element along `axis` is fn applied left to right to elements 0..k (with
    `reverse=True`, right to left to elements k..n-1). It runs O(log n) steps of ops that
    each touch the whole array, so it suits sharded and accelerator arrays."""
    if not callable(fn):
        raise ShardcTypeError("lax.associative_scan: fn argument should be callable.")
    leaves, tree = _check_leaves(elems)
    ndim = L.aval(leaves[0]).ndim
    axis = _canonical_axis(axis, ndim)
    shapes = [L.aval(x).shape for x in leaves]
    if any(len(s) <= axis or s[axis] != shapes[0][axis] for s in shapes):
        raise ArgumentError(
            f"lax.associative_scan: every array in elems needs the same size along the scan "
            f"axis {axis}; got shapes {[tuple(s) for s in shapes]}")
    if reverse:
        leaves = [L.rev(x, (axis,)) for x in leaves]
    out = _scan(_combiner(fn, tree), leaves, axis)
    if reverse:
        out = [L.rev(x, (axis,)) for x in out]
    return _tree.tree_unflatten(tree, out)
