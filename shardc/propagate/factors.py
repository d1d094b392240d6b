"""Projection of tensor shardings onto an op's factors and back (Shardy's
buildTensorFactorShardings / createTensorShardingAttr), and what the engine reads of
a rule on every visit.
"""
from __future__ import annotations

import functools
from math import gcd

from . import axes as ax
from ..ir.program import Aval
from ..ir.rules import pointwise

class _FS:
    """A tensor's sharding along one factor (Shardy's FactorSharding)."""
    __slots__ = ("axes", "overflow", "closed", "minor")

    def __init__(self, closed, minor):
        self.axes = []
        self.overflow = []
        self.closed = closed
        self.minor = minor



def _project(mapping, st, sizes):
    """Dim shardings of one tensor -> {factor: _FS} (buildTensorFactorShardings)."""
    out = {}
    for d, factors in enumerate(mapping):
        if not factors:
            continue
        axes = st.dims[d]
        closed = st.closed[d]
        if len(factors) == 1:           # minor-most: takes all the axes, merged
            fs = out[factors[0]] = _FS(closed, True)
            if len(axes) == 1:
                fs.axes.append(axes[0])
            elif axes:
                for a in axes:
                    ax.add_or_merge(fs.axes, a)
            continue
        if not axes:
            last = factors[-1]
            for f in factors:
                out[f] = _FS(closed, f == last)
            continue
        i = 0
        rem = axes[0] if axes else None   # remaining part of axes[i] as a ref
        overflow = False
        last = factors[-1]
        for f in factors:
            fs = out[f] = _FS(closed, f == last)
            if overflow:
                fs.closed = True
                break
            if fs.minor:
                while rem is not None:
                    ax.add_or_merge(fs.axes, rem)
                    i += 1
                    rem = axes[i] if i < len(axes) else None
                break
            left = sizes[f]
            while rem is not None:
                if rem[2] == 1:
                    g = 1
                else:
                    g = gcd(left, rem[2])
                    if g == 1:
                        break
                if rem[2] > g:
                    fs.axes.append((rem[0], rem[1], g))
                    rem = (rem[0], rem[1] * g, rem[2] // g)
                    left //= g
                else:
                    fs.axes.append(rem)
                    left //= rem[2]
                    i += 1
                    rem = axes[i] if i < len(axes) else None
            if left > 1 and rem is not None:
                overflow = True
                while rem is not None:
                    ax.add_or_merge(fs.overflow, rem)
                    i += 1
                    rem = axes[i] if i < len(axes) else None
    return out


def _unproject(mapping, fss, sizes):
    """{factor: _FS} -> dim shardings (createTensorShardingAttr)."""
    dims = []
    for factors in mapping:
        d = []
        for f in factors:
            fs = fss[f]
            n = 1
            for k, a in enumerate(fs.axes):
                n *= a[2]
                if k == 0:
                    ax.add_or_merge(d, a)
                else:
                    d.append(a)
            if fs.overflow:
                for k, a in enumerate(fs.overflow):
                    if k == 0:
                        ax.add_or_merge(d, a)
                    else:
                        d.append(a)
                break
            if n < sizes[f]:
                break
        dims.append(d)
    return dims


# ---------------------------------------------------------------- factor propagation


def project_simple(fd, st):
    """_project for a simple rule (see _RuleInfo): factor fd[k] is dim k, minor-most."""
    out = {}
    dims, closed = st.dims, st.closed
    for k, f in enumerate(fd):
        fs = out[f] = _FS(closed[k], True)
        d = dims[k]
        fs.axes = d if len(d) < 2 else _merged(d)     # replaced, never edited
    return out


class _RuleInfo:
    """What the engine reads of a rule on every visit, computed once per distinct rule.

    A *simple* rule maps every dim to exactly one factor and no factor twice within a
    tensor (elementwise ops, dot_general, transposes, reductions, most broadcasts): its
    projection onto factors is the tensors' own (merged) dim shardings, which
    `project_simple` reads off directly. `fdims` (simple rules only, else None): per
    tensor, the factor of each dim."""
    __slots__ = ("rule", "mappings", "n_in", "nf", "fdims")

    def __init__(self, rule, n_in):
        self.rule = rule
        self.mappings = rule.operands + rule.results
        self.n_in = n_in
        self.nf = len(rule.sizes)
        simple = all(len(fs) == 1 for m in self.mappings for fs in m) and \
            all(len(set(m)) == len(m) for m in self.mappings)
        self.fdims = tuple(tuple(fs[0] for fs in m) for m in self.mappings) if simple \
            else None


def _merged(axes):
    """A dim's axes as the projection sees them: consecutive sub-axes merged."""
    if len(axes) < 2:
        return axes
    prev = axes[0]
    for a in axes[1:]:
        if a[0] == prev[0] and prev[1] * prev[2] == a[1]:
            out = []
            for b in axes:
                ax.add_or_merge(out, b)
            return out
        prev = a
    return axes


@functools.lru_cache(maxsize=256)
def identity_rule(shape):
    """The rule of an edge: every dim of both values is one factor."""
    a = Aval(shape, None)
    return pointwise([a], [a])


@functools.lru_cache(maxsize=256)
def flow_rule(shape, n):
    """The rule of a Flow: `n` sources and the owner share every dim."""
    a = Aval(shape, None)
    return pointwise([a] * n, [a])


@functools.lru_cache(maxsize=256)
def stacked_rule(shape):
    """The rule of a stacked edge: the outer value's leading dim is a factor of its
    own, each other dim one factor with the inner value's."""
    from ..ir.rules import RuleBuilder
    outer, inner = Aval(shape, None), Aval(shape[1:], None)
    b = RuleBuilder([outer], [inner])
    b.factor([0], [None], shape[0])
    for d, n in enumerate(shape[1:]):
        b.factor([d + 1], [d], n)
    return b.build()


def default_rule(op):
    rule_fn = op.prim.sharding_rule
    if rule_fn is None:
        return None
    return rule_fn([v.aval for v in op.inputs], [v.aval for v in op.outputs], **op.params)


_MISSING = object()


def cached_rule(op, cache):
    """default_rule, memoized per (rule, operand and result types, params) within one
    propagation: rules are pure functions of these (deep_mlp's layers, or a long chain,
    repeat a few distinct ops many times). Ops with unhashable params are not cached."""
    rule_fn = op.prim.sharding_rule
    if rule_fn is None:
        return None
    sig = op.sig       # names (primitive, params, operand types), hence the result types
    if sig is not None:
        rule = cache.get(sig, _MISSING)
        if rule is _MISSING:
            rule = cache[sig] = default_rule(op)
        return rule
    ins = [v.aval for v in op.inputs]
    outs = [v.aval for v in op.outputs]
    try:
        key = (rule_fn, tuple(ins), tuple(outs),
               tuple([(k, type(v), v) for k, v in op.params.items()]))
        rule = cache.get(key, _MISSING)
    except TypeError:
        return rule_fn(ins, outs, **op.params)
    if rule is _MISSING:
        rule = cache[key] = rule_fn(ins, outs, **op.params)
    return rule

