"""shardc.lax control flow (cond, switch, while_loop, fori_loop, scan, map) against
jax.lax under jax.jit and NumPy: values, dtypes, weak types and output shardings on
8 CPU devices. Many programs share one compile (compare_cases)."""
import jax
from jax.experimental.shard_alike import shard_alike as jax_shard_alike
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import Case, compare_cases, data


def lax(m):
    return shardc.lax if m._base is snp else jax.lax


def _np_lax():
    """Python reference implementations of the control flow (for NumPy runs)."""
    import types

    def cond(p, t, f, *ops):
        return t(*ops) if p else f(*ops)

    def switch(i, bs, *ops):
        return bs[int(np.clip(i, 0, len(bs) - 1))](*ops)

    def while_loop(c, b, v):
        while c(v):
            v = b(v)
        return v

    def fori_loop(lo, hi, b, v):
        for i in range(int(lo), int(hi)):
            v = b(np.int32(i), v)
        return v

    def scan(f, init, xs=None, length=None, reverse=False):
        leaves, tree = jax.tree_util.tree_flatten(xs)
        n = length if length is not None else leaves[0].shape[0]
        c, ys = init, [None] * n
        for t in (reversed(range(n)) if reverse else range(n)):
            x = jax.tree_util.tree_unflatten(tree, [a[t] for a in leaves])
            c, ys[t] = f(c, x)
        if n == 0 or ys[0] is None:
            return c, None if n == 0 else ys[0]
        return c, jax.tree_util.tree_map(lambda *a: np.stack(a), *ys)

    def map_(f, xs, batch_size=None):
        return scan(lambda c, x: (c, f(x)), (), xs)[1]
    return types.SimpleNamespace(cond=cond, switch=switch, while_loop=while_loop,
                                 fori_loop=fori_loop, scan=scan, map=map_)


NPLAX = _np_lax()


def L(m):
    if m._base is snp:
        return shardc.lax
    if m._base is jnp:
        return jax.lax
    return NPLAX


F = np.float32


def AD(m):
    return shardc if m._base is snp else jax


# ---------------------------------------------------------------- cond / switch

def _cond_cases():
    a, b = data((4, 3), F, seed=2), data((3,), F, seed=3)
    cs = []
    for pv in (True, False):
        cs.append(Case(f"cond_bool_{pv}", lambda m, p, x: L(m).cond(
            p, lambda x: m.sin(x) * 2, lambda x: m.cos(x) + 1, x), [np.bool_(pv), a]))
    for iv in (0, 3, -2):
        cs.append(Case(f"cond_int_{iv}", lambda m, p, x: L(m).cond(
            p, lambda x: x + 1, lambda x: x - 1, x), [np.int32(iv), a]))
    for pv in (0.0, -0.5, np.nan):   # float predicates mean pred != 0, as jax
        cs.append(Case(f"cond_float_{pv}", lambda m, p, x: L(m).cond(
            p, lambda x: x + 1, lambda x: x - 1, x), [F(pv), a]))
    # pytrees in and out, several operands, operand=
    cs.append(Case("cond_pytree", lambda m, p, x, y: L(m).cond(
        p, lambda d, y: {"s": d["a"] * y, "t": (d["a"].sum(), y)},
        lambda d, y: {"s": d["a"] - y, "t": (d["a"].max(), y * 2)}, {"a": x}, y),
        [np.bool_(True), a, b]))
    # closures over outer traced values; each branch closes over different ones
    cs.append(Case("cond_closures", lambda m, p, x, y, z: L(m).cond(
        p < 0, lambda: x * y, lambda: x + z[0]), [F(-1), a, b, data((2,), F, seed=4)]))
    cs.append(Case("cond_closure_and_op", lambda m, p, x, y: L(m).cond(
        p > 0, lambda v: v @ y, lambda v: v.sum(1) + y.sum(), x), [F(2), a, b]))
    # int outputs and mixed dtypes
    cs.append(Case("cond_int_out", lambda m, p, x: L(m).cond(
        p, lambda x: (m.argmax(x, 0).astype(m.int32), x.astype(m.int32)),
        lambda x: (m.argmin(x, 0).astype(m.int32), (x * 2).astype(m.int32)), x),
        [np.bool_(False), a]))
    # no operands, a constant output
    cs.append(Case("cond_const", lambda m, p: L(m).cond(
        p, lambda: m.float32(1.0), lambda: m.float32(2.0)), [np.bool_(True)]))
    for iv in (-3, 0, 1, 2, 7):
        cs.append(Case(f"switch_{iv}", lambda m, i, x: L(m).switch(
            i, [lambda x: x * 2, lambda x: m.sin(x), lambda x: -x], x), [np.int32(iv), a]))
    cs.append(Case("switch_one", lambda m, i, x: L(m).switch(i, [lambda x: x * 3], x),
                   [np.int32(5), a]))
    cs.append(Case("switch_pytree_closure", lambda m, i, x, y: L(m).switch(
        i, [lambda t: (t[0] + y, t[1]), lambda t: (t[0] * 0, t[1] + 1),
            lambda t: (t[0] @ m.ones((3, 3), m.float32), t[1] * 2)], (x, y)),
        [np.int32(2), a, b]))
    cs.append(Case("switch_uint8", lambda m, i, x: L(m).switch(
        i, [lambda x: x, lambda x: x + 1], x), [np.uint8(200), a]))
    return cs


def test_cond_switch_values():
    compare_cases(_cond_cases())


# ---------------------------------------------------------------- while / fori

def _loop_cases():
    a = data((4,), F, seed=5)
    cs = []
    cs.append(Case("while_pytree", lambda m, x: L(m).while_loop(
        lambda c: c["i"] < 5, lambda c: {"i": c["i"] + 1, "v": (c["v"][0] * 1.5,
                                                                  c["v"][1] + c["i"])},
        {"i": m.int32(0), "v": (x, m.int32(3))}), [a]))
    cs.append(Case("while_closures", lambda m, x, lim, k: L(m).while_loop(
        lambda c: c[0].sum() < lim, lambda c: (c[0] + k, c[1] + 1), (x, 0)),
        [data((4,), F, "pos", seed=6), F(20), F(0.5)]))
    cs.append(Case("while_zero_trips", lambda m, x: L(m).while_loop(
        lambda c: c.sum() > 1e9, lambda c: c * 2, x), [a]))
    for lo, hi in ((0, 5), (2, 7), (5, 2), (3, 3), (-4, -1)):
        cs.append(Case(f"fori_{lo}_{hi}", lambda m, x, lo=lo, hi=hi: L(m).fori_loop(
            lo, hi, lambda i, c: (c[0] * 0.9 + i, c[1] + i * i), (x, 0)), [a]))
    # traced bounds: a while loop
    cs.append(Case("fori_traced", lambda m, x, lo, hi: L(m).fori_loop(
        lo, hi, lambda i, c: c + i.astype(m.float32), x), [a, np.int32(1), np.int32(6)]))
    cs.append(Case("fori_traced_empty", lambda m, x, lo, hi: L(m).fori_loop(
        lo, hi, lambda i, c: c + i.astype(m.float32), x), [a, np.int32(6), np.int32(-2)]))
    cs.append(Case("fori_traced_hi", lambda m, x, hi: L(m).fori_loop(
        0, hi, lambda i, c: c * 2 + i, x), [a, np.int32(3)]))
    # the index's dtype follows the bounds
    cs.append(Case("fori_index_dtype", lambda m, x: L(m).fori_loop(
        m.int16(0), m.int16(3), lambda i, c: (c[0] + i, c[1] + 1.0), (m.int16(0), x)),
        [a], numpy_ref=False))
    cs.append(Case("fori_closure", lambda m, x, w: L(m).fori_loop(
        0, 3, lambda i, c: m.tanh(c @ w), x), [data((2, 4), F, seed=7),
                                              data((4, 4), F, seed=8)]))
    return cs


def test_loops_values():
    compare_cases(_loop_cases())


def _index_types(lax_, np_, lo, hi, traced):
    """The (dtype, weak) of fori_loop's index and of its result, in one jitted trace."""
    seen = []

    def g(x, lo_t, hi_t):
        def body(i, c):
            seen.append(i)
            return c + i
        out = lax_.fori_loop(lo_t if traced else lo, hi_t if traced else hi, body, x)
        seen.append(out)
        return out
    jit = shardc.jit if lax_ is shardc.lax else jax.jit
    jit(g)(np.float32(0), lo, hi)
    return [(str(a.dtype), a.weak_type) if hasattr(a, "weak_type") else
            (str(a.aval.dtype), a.aval.weak) for a in seen]


@pytest.mark.parametrize("lo,hi,traced", [
    (0, 3, False), (np.int16(0), np.int16(3), False), (np.int16(1), np.int16(4), True),
    (np.int8(1), np.int8(4), True)])
def test_fori_index_type_matches_jax(lo, hi, traced):
    """Concrete bounds: the index is a weak i32 (from the Python int lo) whatever the
    bounds' dtype, as jax's; traced bounds: the bounds' dtype."""
    ours = _index_types(shardc.lax, snp, lo, hi, traced)
    ref = [(str(a.dtype), a.weak_type) for a in _jax_index_avals(lo, hi, traced)]
    assert ours == ref


def _jax_index_avals(lo, hi, traced):
    seen = []

    def g(x, lo_t, hi_t):
        def body(i, c):
            seen.append(i.aval)
            return c + i
        out = jax.lax.fori_loop(lo_t if traced else lo, hi_t if traced else hi, body, x)
        seen.append(out.aval)
        return out
    jax.jit(g)(np.float32(0), lo, hi)
    return seen


def test_fori_bounds_of_different_types():
    with pytest.raises(shardc.ShardcError, match="must have equal types, got i16 and i8"):
        shardc.jit(lambda lo, hi: shardc.lax.fori_loop(lo, hi, lambda i, c: c, 0.0))(
            np.int16(0), np.int8(2))
    with pytest.raises(TypeError, match="must have equal types"):
        jax.jit(lambda lo, hi: jax.lax.fori_loop(lo, hi, lambda i, c: c, 0.0))(
            np.int16(0), np.int8(2))


# ---------------------------------------------------------------- scan / map

def _scan_cases():
    xs, w = data((5, 3), F, seed=9), data((3, 3), F, seed=10)
    cs = []
    for rev in (False, True):
        cs.append(Case(f"scan_cumsum_rev{rev}", lambda m, x, rev=rev: L(m).scan(
            lambda c, x: (c + x, c * x), m.zeros((3,), m.float32), x, reverse=rev), [xs]))
    cs.append(Case("scan_pytrees", lambda m, x, y: L(m).scan(
        lambda c, t: ({"a": c["a"] + t[0], "n": c["n"] + 1},
                      {"p": t[0] * c["a"], "q": (t[1].sum(), c["n"])}),
        {"a": m.zeros((3,), m.float32), "n": m.int32(0)}, (x, y)),
        [xs, data((5, 2, 2), F, seed=11)]))
    cs.append(Case("scan_xs_none", lambda m, x: L(m).scan(
        lambda c, _: (c * 2 + 1, c.sum()), x, None, length=4), [data((3,), F, seed=12)]))
    cs.append(Case("scan_no_ys", lambda m, x: L(m).scan(
        lambda c, x: (c + x, None), m.zeros((3,), m.float32), x)[0], [xs]))
    cs.append(Case("scan_int_carry", lambda m, x: L(m).scan(
        lambda c, x: ((c[0] + 1, c[1] * 2), (c[0] * x).astype(m.int32)),
        (m.int32(0), m.uint8(1)), x), [data((5,), np.int32, seed=13)]))
    cs.append(Case("scan_closure", lambda m, x, w, b: L(m).scan(
        lambda c, x: (m.tanh(c @ w + x + b), c.sum()), m.ones((3,), m.float32), x),
        [xs, w, data((3,), F, seed=14)]))
    cs.append(Case("scan_nested", lambda m, x, w: L(m).scan(
        lambda c, row: L(m).scan(lambda c2, e: (c2 * 0.5 + e * c, c2.sum() + e), c, row),
        m.ones((3,), m.float32) * w[0], x), [data((4, 2, 3), F, seed=15), w]))
    cs.append(Case("scan_cond_inside", lambda m, x: L(m).scan(
        lambda c, x: L(m).cond(x.sum() > 0, lambda: (c + x, x * 2),
                               lambda: (c - x, -x)), m.zeros((3,), m.float32), x), [xs]))
    cs.append(Case("cond_scan_inside", lambda m, p, x: L(m).cond(
        p, lambda x: L(m).scan(lambda c, e: (c + e, c), m.zeros((3,), m.float32), x)[0],
        lambda x: x[0], x), [np.bool_(True), xs]))
    cs.append(Case("scan_fori_inside", lambda m, x: L(m).scan(
        lambda c, x: (L(m).fori_loop(0, 3, lambda i, v: v * x + 1, c), c),
        m.ones((3,), m.float32), x), [xs]))
    cs.append(Case("scan_length0", lambda m, x: L(m).scan(
        lambda c, x: (c + x, x * 2), m.zeros((3,), m.float32), x[:0])[0], [xs]))
    cs.append(Case("scan_length1", lambda m, x: L(m).scan(
        lambda c, x: (c + x, x * 2), m.zeros((3,), m.float32), x[:1]), [xs]))
    cs.append(Case("scan_bool_ys", lambda m, x: L(m).scan(
        lambda c, x: (c, x > 0), (), x)[1], [xs]))
    cs.append(Case("map", lambda m, x: L(m).map(lambda r: (m.sin(r).sum(), r * 2), x), [xs]))
    for bs in (0, 1, 2, 5, 7):     # 0: one full batch, as jax
        cs.append(Case(f"map_batch{bs}", lambda m, x, bs=bs: L(m).map(
            lambda r: {"s": r.sum(), "r": r[::-1]}, x, batch_size=bs), [xs]))
    cs.append(Case("map_batch_empty", lambda m, x: L(m).map(lambda r: r * 2, x[:0],
                                                          batch_size=2), [xs]))
    cs.append(Case("map_batch_closure", lambda m, x, w: L(m).map(
        lambda r: r @ w, x, batch_size=2), [xs, w]))
    return cs


def test_scan_map_values():
    compare_cases(_scan_cases())


# ---------------------------------------------------------------- sharded

def SM(m):
    return shardc.shard_map if m._base is snp else jax.shard_map


def _sharded_cases(mesh):
    x, ws = data((8, 16), F, seed=20), data((3, 16, 16), F, seed=21) / 4
    cs = []
    # stacked weights sharded on "y" in their last dim, scanned over: the slice keeps "y"
    cs.append(Case("scan_stacked_w", lambda m, x, ws: L(m).scan(
        lambda h, w: (m.tanh(h @ w), (h @ w).sum(0)), x, ws),
        [x, ws], [P("x", None), P(None, None, "y")]))
    cs.append(Case("scan_stacked_w_wsc", lambda m, x, ws: L(m).scan(
        lambda h, w: (m.constrain(m.tanh(h @ w), P("x", "y")), None), x, ws)[0],
        [x, ws], [P("x", None), P(None, None, "y")], numpy_ref=True))
    cs.append(Case("scan_xs_sharded", lambda m, xs: L(m).scan(
        lambda c, r: (c + r, r * 2), m.zeros((16,), m.float32), xs),
        [x], [P(None, "y")]))
    cs.append(Case("cond_sharded", lambda m, p, x, y: L(m).cond(
        p, lambda a, b: (a * 2, b.sum(0)), lambda a, b: (a - 1, b.max(0)), x, y),
        [np.bool_(True), x, x], [None, P("x", "y"), P(None, "y")]))
    cs.append(Case("cond_wsc_branch", lambda m, i, x: L(m).switch(
        i, [lambda a: m.constrain(a * 2, P("y", None)), lambda a: a + 1], x),
        [np.int32(0), x], [None, P("x", None)]))
    # where branches or a loop's init and body disagree, each result meets all its
    # sources at once (Shardy's data-flow edge): conflicting axes leave it unsharded
    cs.append(Case("cond_branches_disagree", lambda m, p, a, b: L(m).cond(
        p, lambda: a, lambda: b), [np.bool_(True), x, x], [None, P("x", "y"), P("y", "x")]))
    cs.append(Case("switch_wsc_one_dim", lambda m, i, a: L(m).switch(
        i, [lambda: m.constrain(a, P(None, "x")), lambda: a]), [np.int32(0), x],
        [None, P("x", "y")]))
    cs.append(Case("fori_body_constraint_wins", lambda m, a: L(m).fori_loop(
        0, 3, lambda i, v: m.constrain(v * 2, P("y", "x")), a), [x], [P("x", "y")]))
    cs.append(Case("fori_body_const_disagrees", lambda m, a, b: L(m).fori_loop(
        0, 3, lambda i, v: v + b, a), [x, x], [P("x", "y"), P("y", "x")]))
    cs.append(Case("scan_body_constraint_wins", lambda m, a: L(m).scan(
        lambda v, _: (m.constrain(v * 2, P("y", "x")), None), a, None, length=3)[0],
        [x], [P("x", "y")]))
    # nested region ops and sharding groups: one value held by several edges
    v = np.zeros(8, F)
    cs.append(Case("cond_in_cond_operand", lambda m, b, c: L(m).cond(
        c[0] < 1, lambda b: L(m).cond(c[1] < 1, lambda b: b.sum(1), lambda b: (2 * b).sum(1),
                                      b), lambda b: c, b), [x[:, :8], v], [P("x", "y"), P()]))
    cs.append(Case("fori_const_in_cond", lambda m, b, c: L(m).fori_loop(
        0, 2, lambda i, c: c + L(m).cond(i < 1, lambda: b.sum(1), lambda: b.sum(0)), c),
        [x[:, :8], v], [P("x", "y"), P()]))

    def alike_cond_operand(m, a, b):
        a, b = (shardc.shard_alike if m._base is snp else jax_shard_alike)(a * 1, b)
        return L(m).cond(a[0, 0] > 0, lambda a: a.sum(1), lambda a: (a * 2).sum(1), a)
    cs.append(Case("shard_alike_cond_operand", alike_cond_operand, [x[:, :8], x[:, :8]],
                   [P(), P("x", "y")]))
    cs.append(Case("fori_sharded", lambda m, x, w: L(m).fori_loop(
        0, 4, lambda i, h: m.tanh(h @ w), x), [x, ws[0]], [P("x", None), P(None, "y")]))
    cs.append(Case("while_sharded", lambda m, x: L(m).while_loop(
        lambda c: c[1] < 3, lambda c: (c[0] * 1.5 + 1, c[1] + 1), (x, 0))[0],
        [x], [P("x", "y")]))

    # shard_map inside a scan body
    def smap_in_scan(m, x, ws):
        inner = SM(m)(lambda h, w: L(m).psum(h @ w, "y"), mesh=mesh,
                      in_specs=(P("x", "y"), P("y", None)), out_specs=P("x", None))
        return L(m).scan(lambda h, w: (m.tanh(inner(h, w)), None), x, ws)[0]
    # values only: jax's Shardy gives the carry the shard_map's P("x", "y") in_spec,
    # shardc keeps the init's P("x") (a propagation difference, reported)
    cs.append(Case("smap_in_scan", smap_in_scan, [x, ws], [P("x", None), None],
                   numpy_ref=False, check_sharding=False))

    # scan / cond / fori inside a shard_map body, with psum inside the loop
    def loops_in_smap(m, x, w):
        def body(h, w):
            h2, ys = L(m).scan(lambda c, r: (L(m).psum(c * r.sum(), "y") * 0.1, c.sum()),
                               h, h)
            f = L(m).fori_loop(0, 3, lambda i, c: L(m).pmax(c, "x") + i, h)
            # the predicate must agree across devices (a collective in one branch)
            p = L(m).psum(h.sum(), ("x", "y")) > 0
            c = L(m).cond(p, lambda: L(m).psum(h, ("x", "y")), lambda: h * 0)
            return h2, ys, f, c
        return SM(m)(body, mesh=mesh, in_specs=(P("x", "y"), P()),
                     out_specs=(P("x", "y"), P(("x", "y")), P(None, "y"), P()),
                     check_vma=False)(x, w)
    cs.append(Case("loops_in_smap", loops_in_smap, [x, ws[0]], [P("x", "y"), None],
                   numpy_ref=False))
    return cs


def test_sharded_values_and_shardings(mesh2x4):
    compare_cases(_sharded_cases(mesh2x4), mesh2x4)


def _weak_and_passthrough_cases():
    """Weak types of results follow jax's rules (cond: branch 0's; scan and while: the
    body's outputs'; Python-scalar results stay weak), and values passed through."""
    xs, a = data((5, 3), F, seed=1), data((3,), F, seed=2)
    cs = []
    def case(label, fn, arrays, **kw):
        cs.append(Case(label, fn, arrays, **kw))
    case("scan_weak_init", lambda m, x: L(m).scan(lambda c, x: (c + x[0], c), 0.0, x), [xs])
    case("scan_weak_init_int", lambda m, x: L(m).scan(
        lambda c, x: (c + x.astype(m.int32), c), 0, x), [xs])
    case("while_weak_init", lambda m, x: L(m).while_loop(
        lambda c: c < 10, lambda c: c + x[0] * x[0] + 1, 0.0), [a])
    case("fori_weak_int", lambda m, x: L(m).fori_loop(0, 4, lambda i, c: c + i, 0), [a])
    case("fori_weak_float", lambda m, x: L(m).fori_loop(
        0, 4, lambda i, c: c + x[0], 1.0), [a])
    case("cond_weak_branch", lambda m, p, x: L(m).cond(p, lambda: x[0], lambda: 1.0),
         [np.bool_(True), a])
    case("cond_weak_both", lambda m, p: L(m).cond(p, lambda: 2.0, lambda: 1.0),
         [np.bool_(False)])
    case("scan_passthrough", lambda m, x, k: L(m).scan(
        lambda c, x: (c, (x, k, c, 1.0)), a, x), [xs, a])
    case("scan_dict_xs_none_leaf", lambda m, x: L(m).scan(
        lambda c, t: (c + t["a"], {"y": None, "z": t["a"]}), m.zeros(3), {"a": x, "b": None}),
        [xs])
    case("map_pytree_none", lambda m, x: L(m).map(lambda t: (t[0] * 2, None), (x, None)),
         [xs])
    case("map_batch_gt_len", lambda m, x: L(m).map(lambda r: r * 2, x, batch_size=9), [xs])

    def g1(m, p, x, k):
        def loss(x, k):
            r = L(m).cond(p, lambda x: (x, 3.0 * m.ones(3)), lambda x: (k, x * k), x)
            return (r[0] * r[1]).sum()
        return AD(m).grad(loss, (0, 1))(x, k)
    for pv in (True, False):
        case(f"cond_grad_passthrough_{pv}", g1, [np.bool_(pv), a, a * 2], numpy_ref=False)
    def g2(m, x, k):
        def loss(x, k):
            c, ys = L(m).scan(lambda c, x: (c, (x, k, c, 1.0, x[0] > 0)), k * 2, x)
            return ys[0].sum() + ys[1].sum() * 2 + (ys[2] * ys[3]).sum() + c.sum()
        return AD(m).grad(loss, (0, 1))(x, k)
    cs.append(Case("scan_grad_passthrough", g2, [xs, a], numpy_ref=False))
    def g3(m, x):
        def loss(x):
            return L(m).cond(x.sum() > 0, lambda: x * x, lambda: -x).sum()
        return AD(m).grad(loss)(x)
    cs.append(Case("cond_grad_pred_depends", g3, [a], numpy_ref=False))
    def g4(m, x):
        def loss(x):
            return L(m).scan(lambda c, x: (c * x, None), 1.0, x)[0]
        return AD(m).grad(loss)(x)
    cs.append(Case("scan_grad_weak", g4, [a], numpy_ref=False))
    def g5(m, x, i):
        def loss(x):
            c, _ = L(m).scan(lambda c, x: ((c[0] * x, c[1] + 1), None), (1.0, i), x)
            return c[0]
        return AD(m).value_and_grad(loss)(x)
    cs.append(Case("scan_grad_int_carry_arg", g5, [a, np.int32(2)], numpy_ref=False))
    def g6(m, x):
        def loss(x):
            return L(m).fori_loop(0, 3, lambda i, c: c * x, x)
        return AD(m).grad(lambda x: loss(x).sum())(x), AD(m).jvp(loss, (x,), (x,))
    cs.append(Case("fori_grad_jvp_closure", g6, [a], numpy_ref=False))
    def g7(m, x):
        def f(x):
            return L(m).map(lambda r: m.sin(r) * x[0], x, batch_size=2)
        return AD(m).jvp(f, (x,), (x * 2,))
    cs.append(Case("map_jvp", g7, [xs], numpy_ref=False))
    def g8(m, x, i):
        def f(x):
            return L(m).switch(i, [lambda x: x, lambda x: m.sin(x), lambda x: 2.0 * m.ones(3)], x)
        return AD(m).jvp(f, (x,), (x * 2,)), AD(m).grad(lambda x: f(x).sum())(x)
    for iv in (0, 2):
        cs.append(Case(f"switch_jvp_{iv}", g8, [a, np.int32(iv)], numpy_ref=False))
    return cs


def test_weak_types_and_passthrough():
    compare_cases(_weak_and_passthrough_cases())


def _sharded_more_cases(mesh):
    x, ws = data((8, 16), F, seed=20), data((4, 16, 16), F, seed=21) / 4
    pol = {True: shardc.checkpoint_policies, False: jax.checkpoint_policies}
    cs = []

    def case(label, fn, arrays, specs, **kw):
        cs.append(Case(label, fn, arrays, specs, **kw))
    # the scanned dim itself sharded
    case("scan_xs_lead_sharded", lambda m, xs: L(m).scan(
        lambda c, r: (c + r, r * 2), m.zeros((16,), m.float32), xs), [x], [P("x", "y")])
    case("scan_ws_lead_sharded", lambda m, x, ws: L(m).scan(
        lambda h, w: (m.tanh(h @ w), None), x, ws)[0], [x, ws],
        [P("x", None), P("x", None, "y")])
    case("map_batch_sharded", lambda m, x: L(m).map(lambda r: r * 2, x, batch_size=3),
         [x], [P(None, "y")])

    def smap_in_cond(m, p, x):
        inner = SM(m)(lambda h: L(m).psum(h, "y"), mesh=mesh, in_specs=P("x", "y"),
                      out_specs=P("x", None))
        return L(m).cond(p, lambda: inner(x), lambda: x * 2)
    case("smap_in_cond", smap_in_cond, [np.bool_(True), x], [None, P("x", "y")],
         numpy_ref=False)

    def while_in_smap(m, x):
        def body(h):    # collectives in the predicate and in the body
            return L(m).while_loop(lambda c: L(m).psum(c[1], "x") < 6,
                                   lambda c: (L(m).psum(c[0], "y") * 0.25, c[1] + 1), (h, 0))
        return SM(m)(body, mesh=mesh, in_specs=P("x", "y"), out_specs=(P("x", "y"), P()),
                     check_vma=False)(x)
    case("while_in_smap", while_in_smap, [x], [P("x", "y")], numpy_ref=False)

    # gradients through shard_map bodies holding a scan, a checkpoint, a cond; shardc's
    # gradients take their primals' shardings (as test_grad's reference)
    def grad_smap_scan(m, x, w):
        def f(x, w):
            def body(h, w):
                return L(m).scan(lambda c, _: (m.tanh(L(m).psum(c @ w, "y")), None), h,
                                 None, length=2)[0]
            return SM(m)(body, mesh=mesh, in_specs=(P("x", "y"), P("y", None)),
                         out_specs=P("x", None))(x, w).sum()
        gx, gw = AD(m).grad(f, (0, 1))(x, w)
        return m.constrain(gx, P("x", "y")), m.constrain(gw, P("y", None))
    case("grad_smap_scan", grad_smap_scan, [x, ws[0]], [P("x", "y"), P("y", None)],
         numpy_ref=False)

    def remat_in_smap(m, x, w):
        def f(x, w):
            def body(h, w):
                ck = AD(m).checkpoint(lambda h: m.sin(L(m).psum(h @ w, "y")),
                                      policy=pol[m._base is snp].nothing_saveable)
                return ck(h)
            return SM(m)(body, mesh=mesh, in_specs=(P("x", "y"), P("y", None)),
                         out_specs=P("x", None))(x, w).sum()
        v, (gx, gw) = AD(m).value_and_grad(f, (0, 1))(x, w)
        return v, m.constrain(gx, P("x", "y")), m.constrain(gw, P("y", None))
    case("remat_in_smap", remat_in_smap, [x, ws[0]], [P("x", "y"), P("y", None)],
         numpy_ref=False)

    def cond_grad_smap(m, x):
        def f(x):
            def body(h):
                p = L(m).psum(h.sum(), ("x", "y")) > 0
                return L(m).cond(p, lambda: m.sin(h) * L(m).psum(h.sum(), "y"),
                                 lambda: h * 3)
            return SM(m)(body, mesh=mesh, in_specs=P("x", "y"), out_specs=P("x", "y"))(
                x).sum()
        return AD(m).grad(f)(x)
    case("cond_grad_smap", cond_grad_smap, [x], [P("x", "y")], numpy_ref=False)
    return cs


def test_sharded_more(mesh2x4):
    compare_cases(_sharded_more_cases(mesh2x4), mesh2x4)


def test_eager_calls():
    """Outside a trace the control flow runs under shardc.jit, as jax's does."""
    from helpers import check_outputs
    xs = jnp.asarray(data((5, 3), F, seed=30))

    def both(f):
        check_outputs(f(shardc.lax, snp), f(jax.lax, jnp), what="jax eager")
    both(lambda lax, m: lax.scan(lambda c, x: (c + x, c * 2), m.zeros(3), xs))
    both(lambda lax, m: lax.cond(True, lambda x: x * 2, lambda x: x, xs))
    both(lambda lax, m: lax.switch(7, [lambda x: x * 2, lambda x: x], xs))
    both(lambda lax, m: lax.fori_loop(jnp.int32(1), jnp.int32(3), lambda i, c: c * i, xs))
    both(lambda lax, m: lax.while_loop(lambda c: c.sum() < 1000, lambda c: c * 2, xs))
    both(lambda lax, m: lax.map(lambda r: r.sum(), xs, batch_size=2))
    both(lambda lax, m: lax.scan(lambda c, _: (c + 1, c), 0, None, length=np.int64(3)))


def test_scan_forwards_what_its_body_passes_through():
    """As jax's scan: a ys that is the step's slice of an xs is that xs (keeping a
    scanned dim's sharding), a carry returned unchanged is its init (fuzz: lax.map of an
    identity over P(('y','x')) came out replicated where jax keeps it)."""
    from jax.sharding import NamedSharding
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    v = jax.device_put(np.arange(64, dtype=np.float32).reshape(8, 8),
                       NamedSharding(mesh, P(("y", "x"), None)))

    def f(lax_, v):
        return lax_.map(lambda x: x, v), lax_.scan(lambda c, x: (c, (x, x * 2)), v[0], v)
    got = jax.tree.leaves(shardc.jit(lambda v: f(shardc.lax, v))(v))
    want = jax.tree.leaves(jax.jit(lambda v: f(jax.lax, v))(v))
    for a, b in zip(got, want):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        assert a.sharding.is_equivalent_to(b.sharding, a.ndim), (a.sharding, b.sharding)
    ir = str(shardc.jit(lambda v: f(shardc.lax, v)).trace(v).ir)
    # the map's scan yields nothing left and is dead code; the forwarded ys are %v
    assert ir.count("scan(") == 1 and "return %v, %1, %v, %3" in ir
