"""The merge step of one visit to an op (Shardy's aggressive factor propagation).

`decide` projects the op's tensors onto its factors (factors.py), finds per factor
the mesh axes all tensors agree on (in the factor's directions, schedule.py), settles
factors that want the same mesh axis, and returns the tensors whose dims change and
the conflicts it settled. It is a pure function of the rule, the directions and the
tensors' dim shardings (and closedness), so the engine memoizes it.

How conflicts are settled (deterministic):
  * within a factor, tensors that disagree keep their longest common prefix;
  * between factors that want the same mesh axis, the factor whose sharding comes
    from the larger tensor wins, then (elementwise ops) the more sharded factor,
    then the lower tensor index (operands before results), then the lower factor.
"""
from __future__ import annotations

from math import gcd

from . import axes as ax
from .factors import _project, _unproject, project_simple
from .schedule import BACKWARD, BOTH, NONE
from .state import state_key

def _compatible(old, new, can_expand):
    """Shardy's getCompatibleMajorAxesInternal: the common major axes of two lists.

    The result may be `old` or `new` itself; callers never modify it."""
    if not new or old == new:
        return old, can_expand
    if not old:
        return (new, True) if can_expand else (old, False)
    result = []
    i = 0
    n = min(len(old), len(new))
    while i < n:
        o, w = old[i], new[i]
        if o[0] != w[0]:
            return result, False
        if o[1] == w[1] and o[2] == w[2]:
            result.append(w)
        elif ax.prefix_of(w, o):
            if i + 1 < len(new):
                result.append(w)
                return result, False
            result.append(o)
        elif ax.prefix_of(o, w):
            if not can_expand or i + 1 < len(old):
                result.append(o)
                return result, False
            result.append(w)
        else:
            return result, False
        i += 1
    result.extend(old[i:])
    if can_expand:
        result.extend(new[i:])
    return result, can_expand


def _major_axes(projs, n_in, f, direction):
    if direction == NONE:
        return []
    if direction == BACKWARD:
        first, second = projs[n_in:], projs[:n_in]
    else:
        first, second = projs[:n_in], projs[n_in:]
    result, can = [], True
    for p in first:
        fs = p.get(f)
        if fs is not None:
            result, can = _compatible(result, fs.axes, can)
    if direction != BOTH:
        can = False
    for p in second:
        fs = p.get(f)
        if fs is not None:
            result, can = _compatible(result, fs.axes, can)
    return result


def _truncate(axes, fix):
    """Keep the longest prefix of `axes` that `fix(axis, sharded_so_far)` accepts."""
    prev = 1
    for i, a in enumerate(axes):
        new = fix(a, prev)
        if new is None:
            del axes[i:]
            return
        if new != a:
            axes[i] = new
            del axes[i + 1:]
            return
        prev *= new[2]


def _within_factor(a, fs, prev, size):
    """compatiblePrefixNoConflictsWithinFactor (no replicated/unreduced axes here)."""
    for x in fs.axes:
        if ax.contains(x, a):
            return a
    if not fs.closed and not fs.overflow:
        if fs.minor:
            return a
        if size % prev == 0:
            g = gcd(size // prev, a[2])
            if g == a[2]:
                return a
            if g != 1:
                return (a[0], a[1], g)
    if fs.axes and ax.prefix_of(fs.axes[-1], a):
        return fs.axes[-1]
    return None


def _change(ri, t, new_dims, fset, src, state):
    """A decided change of tensor t: (t, new dims, their key, per dim the tensor and dim
    its new axes come from -- (-1, None) if none -- for the provenance records)."""
    mappings = ri.mappings
    whys = []
    for factors in mappings[t]:
        w = _NO_WHY
        for f in factors:
            s = src[f][0]
            if f in fset and s >= 0 and s != t:
                w = (s, next((k for k, fs in enumerate(mappings[s]) if f in fs), None))
                break
        whys.append(w)
    return t, new_dims, state_key(new_dims, state.closed, state.repl), whys   # see _decided


_NO_WHY = (-1, None)


def _across_factors(a, proj, f):
    for g, fs in proj.items():
        if g != f:
            if fs.overflow:
                a = ax.prefix_without_overlap(a, fs.overflow)
                if a is None:
                    return None
            if fs.axes:
                a = ax.prefix_without_overlap(a, fs.axes)
                if a is None:
                    return None
    return a


def _lost_to(rank, f, holder, holder_dim, changed):
    """Why factor f could not take a mesh axis that factor `holder` (at dim
    `holder_dim` of the same tensor) uses: `rank(g)` is the conflict order's key
    (source size, sharded size, source tensor, factor); `changed`: the factors this
    visit gave new axes to the tensor."""
    if holder is None or holder not in changed:
        where = "another dim" if holder_dim is None else f"dim {holder_dim}"
        return f"{where} of the tensor already uses the same mesh axes"
    (sf, hf, tf, _), (sg, hg, tg, _) = rank(f), rank(holder)
    why = ("from a larger tensor" if sg != sf else "more sharded" if hg != hf else
           "from a tensor earlier in the op (operands before results)" if tg != tf else
           "a factor listed before it (same tensor size)")
    return f"another factor of the op (dim {holder_dim}), {why}, took the same mesh axes"


def _disagreements(projs, n_in, per_factor, dirs):
    """Conflicts where tensors propose incompatible axes for a factor (a * b with a split
    over `data` and b over `model`) and so none reaches the results: recorded on each
    result that holds the factor, so explain says why it stays as it is."""
    out = []
    for f, d in enumerate(dirs):
        if not d:
            continue
        props = [fs.axes for p in projs[:n_in] for fs in [p.get(f)] if fs is not None
                 and fs.axes]
        if len(props) < 2 or all(ax.list_prefix_status(props[0], q) != ax.NOT_PREFIX or
                                 ax.list_prefix_status(q, props[0]) != ax.NOT_PREFIX
                                 for q in props[1:]):
            continue
        a, b = props[0], next(q for q in props[1:] if q != props[0])
        reason = (f"its operands want {ax.refs_text(a)} and {ax.refs_text(b)}, which are "
                  "incompatible: neither is kept")
        for t in range(n_in, len(projs)):
            fs = projs[t].get(f)
            if fs is not None and not fs.axes:
                out.append((t, f, list(a), list(per_factor[f]), reason))
    return out


def decide(ri, dirs, states):
    """One visit's decision: (conflicts, changes) or None if nothing changes.

    conflicts: (tensor, factor, wanted axes, kept axes, reason); changes: see _change."""
    rule = ri.rule
    sizes = rule.sizes
    n_in = ri.n_in
    mappings = ri.mappings
    fdims = ri.fdims
    if fdims is not None:       # a simple rule: each factor is one dim of each tensor
        projs = [project_simple(fd, s) if fd else {} for fd, s in zip(fdims, states)]
    else:
        projs = [_project(m, s, sizes) if m else {} for m, s in zip(mappings, states)]
    nf = ri.nf
    # a factor all tensors already agree on cannot change
    for f in range(nf):
        if dirs[f]:
            first = None
            for p in projs:
                fs = p.get(f)
                if fs is not None:
                    if first is None:
                        first = fs.axes
                    elif fs.axes != first:
                        break
            else:
                continue
            break
    else:
        return None
    per_factor = [_major_axes(projs, n_in, f, dirs[f]) for f in range(nf)]
    if not any(per_factor):
        disagree = _disagreements(projs, n_in, per_factor, dirs)
        return (disagree, []) if disagree else None
    # the tensor each factor's sharding comes from: the largest one holding it
    src = [(-1, -1)] * nf
    for t, proj in enumerate(projs):
        tsize = 1
        for f in proj:
            tsize *= sizes[f]
        for f, fs in proj.items():
            want = per_factor[f]
            if want and ax.list_prefix_status(want, fs.axes) != ax.NOT_PREFIX \
                    and tsize > src[f][1]:
                src[f] = (t, tsize)
    elementwise = rule.elementwise

    def key(f):
        shard = ax.total_size(per_factor[f]) if elementwise else 0
        return (-src[f][1], -shard, src[f][0], f)
    order = sorted(range(nf), key=key)
    mappings = ri.mappings
    changed_dims = {}
    conflicts = []
    n_t = len(projs)
    for t in list(range(n_in, n_t)) + list(range(n_in)):
        proj = projs[t]
        if not proj:
            continue
        for f in order:
            fs = proj.get(f)
            if fs is None or not per_factor[f]:
                continue
            new = list(per_factor[f])
            if fs.closed or fs.overflow or not fs.minor:
                _truncate(new, lambda a, prev: _within_factor(a, fs, prev, sizes[f]))
            repl = states[t].repl
            if repl:        # axes the tensor's type keeps it replicated over
                _truncate(new, lambda a, prev: ax.prefix_without_overlap(a, repl))
            if not ax.is_strict_prefix(fs.axes, new):
                continue
            if len(proj) > 1:       # other factors of the tensor may hold the axes
                wanted = list(new)
                _truncate(new, lambda a, prev: _across_factors(a, proj, f))
                if new != wanted and src[f][0] >= 0:
                    lost = wanted[min(len(new), len(wanted) - 1)]
                    g = next((g for g, gs in proj.items() if g != f and
                              ax.prefix_without_overlap(lost, gs.axes + gs.overflow)
                              != lost), None)
                    gd = next((d for d, fs in enumerate(mappings[t]) if g in fs), None)
                    conflicts.append((t, f, wanted, list(new), _lost_to(
                        key, f, g, gd, changed_dims.get(t, ()))))
            if t < n_in and elementwise:
                for r in projs[n_in:]:
                    rf = r.get(f)
                    if rf is not None and ax.is_strict_prefix(rf.axes, new):
                        new = list(rf.axes)
            if ax.is_strict_prefix(fs.axes, new):
                fs.axes = new
                changed_dims.setdefault(t, set()).add(f)
    if fdims is not None:
        def dims_of(t):
            proj = projs[t]
            return [proj[f].axes for f in fdims[t]]
    else:
        def dims_of(t):
            return _unproject(mappings[t], projs[t], sizes)
    changes = [_change(ri, t, dims_of(t), fset, src, states[t])
               for t, fset in changed_dims.items()]
    if not changes and not conflicts:
        return None
    return conflicts, changes

