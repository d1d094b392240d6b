"""The function vjp returns, as jax's `VJP`: called on a cotangent it gives the primals'
cotangents; as a pytree its leaves are the residuals, the forward values the backward
pass reads. So it crosses jit boundaries: `shardc.jit(lambda x: vjp(f, x))` returns one
holding arrays, and a jitted `bwd(vjp_fn, ct)` takes one (jax.fwd_and_bwd's pattern).

Inside the trace that made it, a call differentiates in place. Flattening it (a jit
returning it) traces the backward pass once into a region whose block arguments are the
cotangents; the values the region captures are the residuals. An unflattened one
re-traces that region on its leaves, compiled per region when called outside a trace.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import numpy as np

from ..errors import ArgumentError, ShardcError, api_boundary
from ..ir import dtypes
from ..ir.program import Lit, Op
from ..ops import lax as L
from ..ops.region import placement_of, trace_region
from ..propagate.passes import dce
from ..trace import core
from ..transforms.ad import copy_p, eval_ops
from ..trace import pytree as _tree


class _Backward:
    """The backward pass as a region: (cotangents, residuals) -> the primals' cotangents."""
    __slots__ = ("region", "out_tree", "in_tree", "ct_avals", "jitted")

    def __init__(self, region, out_tree, in_tree, ct_avals):
        self.region, self.out_tree, self.in_tree = region, out_tree, in_tree
        self.ct_avals, self.jitted = ct_avals, None

    def __call__(self, cts, residuals):
        outs = eval_ops(self.region, list(cts) + list(residuals))
        return _tree.tree_unflatten(self.in_tree, [o.value if isinstance(o, Lit) else o
                                                   for o in outs])


class Float0Fill(NamedTuple):
    """The primals' cotangents from those of the float ones (at `diff`, in order): an
    integer or bool primal's is float0 zeros of its shape, as jax's."""
    tree: Any
    diff: tuple
    shapes: tuple

    def __call__(self, cts):
        full = [np.zeros(s, jax.dtypes.float0) for s in self.shapes]
        for k, c in zip(self.diff, cts):
            full[k] = c
        return _tree.tree_unflatten(self.tree, full)


@_tree.register_pytree_node_class
class VJP:
    """vjp's pullback: `fn(ct)`; a pytree of its residuals. `fill`: a Float0Fill when
    some primals are integers (the backward pass gives the float ones' cotangents)."""

    def __init__(self, direct=None, builder=None, out_tree=None, out_avals=None,
                 backward=None, residuals=(), fill=None):
        self._direct, self._builder = direct, builder
        self._out_tree, self._out_avals = out_tree, out_avals
        self._backward, self._residuals = backward, tuple(residuals)
        self._placement = (None, None)
        self._fill = fill

    @api_boundary
    def __call__(self, ct):
        got = self._pullback(ct)
        return got if self._fill is None else self._fill(got)

    def _pullback(self, ct):
        bw = self._backward
        out_tree, avals = (self._out_tree, self._out_avals) if bw is None else \
            (bw.out_tree, bw.ct_avals)
        leaves, tree = _tree.tree_flatten(ct)
        if tree != out_tree:
            raise ShardcError(f"vjp: the cotangent's structure {tree} does not match the "
                              f"output's {out_tree}")
        for c, a in zip(leaves, avals):
            _check_cotangent(c, a)
            _check_cotangent_type(c, a)
        if bw is None:                      # in the trace that made it
            if core.current_builder() is None:
                raise ShardcError("a vjp function made inside a trace is called after that "
                                  "trace ended: return it from the jitted function instead")
            return self._direct(ct)
        if core.current_builder() is not None:
            return bw(_fit(leaves, bw.ct_avals), self._residuals)
        if bw.jitted is None:
            from .jit import internal_jit
            bw.jitted = internal_jit(lambda c, r: bw(_fit(c, bw.ct_avals), r), "vjp")
        return bw.jitted(leaves, list(self._residuals))

    def tree_flatten(self):
        if self._backward is None:
            self._trace_backward()
        return self._residuals, (self._backward, self._fill)

    @classmethod
    def tree_unflatten(cls, aux, residuals):
        backward, fill = aux
        return cls(backward=backward, residuals=residuals, fill=fill)

    def _trace_backward(self):
        b = core.current_builder()
        inside = b
        while inside is not None and inside is not self._builder:
            inside = inside.parent
        if inside is None:
            raise ShardcError("a vjp function made inside a trace is used as a pytree "
                              "(returned from jit, mapped over) after that trace ended")
        in_tree = []

        def body(*cts):
            got = self._direct(_tree.tree_unflatten(self._out_tree, list(cts)))
            leaves, t = _tree.tree_flatten(got)
            in_tree.append(t)
            return leaves, None
        region, caps, _ = trace_region(self._out_avals, body, "vjp", *self._placement)
        # the residuals are what the backward pass reads: not what a rule computed for
        # a cotangent nobody asks for (a literal's, a constant's)
        dce(region)
        n = len(self._out_avals)
        used = {id(v) for op in region.ops for v in op.inputs}
        used.update(id(v) for v in region.outputs)
        keep = [i for i, v in enumerate(region.inputs[n:]) if id(v) in used]
        region.inputs = region.inputs[:n] + [region.inputs[n + i] for i in keep]
        caps = _copies_inside(region, n, [caps[i] for i in keep], b)
        self._backward = _Backward(region, self._out_tree, in_tree[0], self._out_avals)
        self._residuals = tuple(caps)


def _copies_inside(region, n, caps, b):
    """The residuals with each copy of another residual made inside the region instead
    (vjp's fresh copy of a primal, which the backward pass reads beside the primal
    itself, would otherwise leave jit as a second buffer of the same bytes)."""
    made = {id(op.outputs[0]): op for op in b.program.ops if op.prim is copy_p}
    arg = {id(t.value): v for t, v in zip(caps, region.inputs[n:])}
    drop, sources, ops = set(), set(), []
    for t, v in zip(caps, region.inputs[n:]):
        op = made.get(id(t.value))
        src = None if op is None else id(op.inputs[0])
        if src in arg and src not in drop and id(t.value) not in sources:
            ops.append(Op(copy_p, [arg[src]], [v], {}, op.loc))
            drop.add(id(t.value))
            sources.add(src)
    if not ops:
        return caps
    region.ops = ops + region.ops
    region.inputs = region.inputs[:n] + [v for t, v in zip(caps, region.inputs[n:])
                                         if id(t.value) not in drop]
    return [t for t in caps if id(t.value) not in drop]


def _check_cotangent(c, aval):
    """A cotangent of the output's shape; a complex one for a real output would lose its
    imaginary part, so it is refused (as jax refuses any other dtype)."""
    shape = tuple(core.aval_of(c).shape) if core.is_tracer(c) else np.shape(c)
    dt = core.aval_of(c).dtype if core.is_tracer(c) else np.result_type(c)
    if tuple(shape) != tuple(aval.shape) or \
            (dtypes.is_complex(dt) and not dtypes.is_complex(aval.dtype)):
        raise ArgumentError(
            f"unexpected type for argument to VJP function: got {np.dtype(dt).name}"
            f"{list(shape)}, but expected {np.dtype(aval.dtype).name}{list(aval.shape)} "
            "because the corresponding output of the differentiated function has that type")


def _check_cotangent_type(c, aval):
    """Explicit mode: a cotangent whose sharding type is not the output's cotangent
    type is refused, as jax's vjp does (a partial-sums cotangent for a reduced output)."""
    from .explicit import cotangent_type_mismatch
    bad = cotangent_type_mismatch(c, aval)
    if bad is not None:
        got, want, out = bad
        raise ArgumentError(
            f"unexpected type for argument to VJP function: got {got}, but expected {want} "
            f"because the corresponding output of the differentiated function had type "
            f"{out} (a cotangent's unreduced axes are its output's reduced ones, and the "
            "other way around); reshard the cotangent to that type")


def _fit(cts, avals):
    """Cotangents with the outputs' dtypes (jax accepts a weak or other float type)."""
    out = []
    for c, a in zip(cts, avals):
        if not core.is_tracer(c):
            c = np.asarray(c, a.dtype)
        elif core.aval_of(c).dtype != a.dtype:
            c = L.convert_element_type(c, a.dtype)
        out.append(c)
    return out


def make_vjp(vjp_fn, out, fill=None):
    """The VJP of a traced vjp: `vjp_fn` made in the current trace for outputs `out`."""
    leaves, tree = _tree.tree_flatten(out)
    fn = VJP(vjp_fn, core.current_builder(), tree, [core.aval_of(o) for o in leaves],
             fill=fill)
    fn._placement = placement_of(leaves)   # the cotangents vary as the outputs do
    return fn
