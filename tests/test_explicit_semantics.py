"""What the explicit-sharding tutorial implies beyond its cells, checked against jax: the
traced IR shows the types, a mixed mesh (Explicit X, Auto Y), types through grad, scan,
cond and vmap, reductions, reshape's split/merge rule and its errors, dot_general's batch
dims, and creation ops (unsharded types)."""
from __future__ import annotations

import numpy as np
import pytest
from jax.sharding import AxisType, PartitionSpec as P

import shardc
import shardc.numpy as snp
from explicit_cells import EXPLICIT, JAX, SHARDC, errors, mesh_of, put, same


@pytest.fixture(scope="module")
def mesh():
    return mesh_of((2, 4), ("X", "Y"), EXPLICIT)


@pytest.fixture(scope="module")
def mixed():
    return mesh_of((2, 4), ("X", "Y"), (AxisType.Explicit, AxisType.Auto))


def _x(m, *spec):
    return put(m, np.arange(32.).reshape(8, 4) / 7, *(spec or ("X", "Y")))


def test_traced_ir_shows_types(mesh):
    with shardc.set_mesh(mesh):
        ir = shardc.jit(lambda a: snp.sum(snp.sin(a) * 2, 0)).trace(_x(mesh)).traced_ir
    assert "%a: f32[8@X,4@Y]" in ir
    assert "f32[8@X,4@Y] = sin(%a)" in ir
    assert "-> (f32[4@Y])" in ir


def test_mixed_mesh_types(mixed):
    def cell(L, log):
        x = _x(mixed)
        y = put(mixed, np.arange(32.).reshape(4, 8), "Y", None)

        def f(a, b):
            log.append(str(L.typeof(a)))
            d = a @ b               # contracting over Auto Y: no type error
            log.append(str(L.typeof(d)))
            e = L.np.sum(a, 1)
            log.append(str(L.typeof(e)))
            return d, e
        return L.jit(f)(x, y)
    log, _ = same(cell, mixed, rtol=1e-5)
    assert log == ["float32[8@X,4]", "float32[8@X,8]", "float32[8@X]"]


def test_mixed_mesh_contracting_explicit_is_ambiguous(mixed):
    def cell(L, log):
        a = put(mixed, np.ones((4, 8), np.float32), None, "X")
        b = put(mixed, np.ones((8, 4), np.float32), "X", None)
        return L.jit(lambda a, b: a @ b)(a, b)
    errors(cell, mixed, ["ambiguous", "out_sharding"])


def test_grad_has_param_types(mesh):
    def cell(L, log):
        w = put(mesh, np.arange(16.).reshape(4, 4) / 16, None, "Y")

        def loss(w, a):
            return L.np.sum(L.np.tanh(a @ w))

        def step(w, a):
            g = L.grad(loss)(w, a)
            log.append(str(L.typeof(g)))
            return g, w - 0.1 * g
        return L.jit(step)(w, _x(mesh))
    log, _ = same(cell, mesh, rtol=1e-5)
    assert log == ["float32[4,4@Y]"]


def test_scan_carry_keeps_type(mesh):
    def cell(L, log):
        def run(c, xs):
            def body(c, xi):
                c2 = c + xi
                log.append(str(L.typeof(c2)))
                return c2, c2 * 2
            c, ys = L.lax.scan(body, c, xs)
            log.append(str(L.typeof(c)))
            log.append(str(L.typeof(ys)))
            return c, ys
        xs = put(mesh, np.arange(32.).reshape(2, 4, 4), None, "X", "Y")
        return L.jit(run)(put(mesh, np.zeros((4, 4), np.float32), "X", "Y"), xs)
    log, _ = same(cell, mesh)
    assert log == ["float32[4@X,4@Y]", "float32[4@X,4@Y]", "float32[2,4@X,4@Y]"]


def test_cond_result_type(mesh):
    def cell(L, log):
        def f(p, a):
            r = L.lax.cond(p, lambda a: a * 2, lambda a: a - 1, a)
            log.append(str(L.typeof(r)))
            return r
        jf = L.jit(f)
        return jf(True, _x(mesh)), jf(False, _x(mesh))
    log, _ = same(cell, mesh)
    assert log == ["float32[8@X,4@Y]"]


def test_vmap_body_types(mesh):
    def cell(L, log):
        def row(r):
            log.append(str(L.typeof(r)))
            return r * 2

        def f(a):
            r = L.vmap(row)(a)
            log.append(str(L.typeof(r)))
            r2 = L.vmap(L.np.sum, in_axes=1)(a)
            log.append(str(L.typeof(r2)))
            return r, r2
        return L.jit(f)(_x(mesh))
    log, _ = same(cell, mesh)
    assert log == ["float32[4@Y]", "float32[8@X,4@Y]", "float32[4@Y]"]


def test_reduction_over_sharded_dim(mesh):
    def cell(L, log):
        def f(a):
            outs = (L.np.sum(a, axis=0), L.np.sum(a, axis=1), L.np.max(a, axis=0),
                    L.np.sum(a), L.np.mean(a, axis=(0, 1)))
            log.extend(str(L.typeof(o)) for o in outs)
            return outs
        return L.jit(f)(_x(mesh))
    log, _ = same(cell, mesh, rtol=1e-5)
    assert log == ["float32[4@Y]", "float32[8@X]", "float32[4@Y]", "float32[]",
                   "float32[]"]


RESHAPES = [((8, 4), ("X", "Y"), (32,)),          # merge of sharded dims (was an error)
            ((8, 4), ("X", None), (32,)),
            ((8, 4), ("Y", None), (32,)),
            ((2, 4, 4), (None, "X", "Y"), (2, 16)),
            ((2, 8, 4), ("X", "Y", None), (16, 4)),
            ((4, 2, 4), ("Y", "X", None), (8, 4)),
            ((2, 8, 4), ("X", "Y", None), (2, 32)),
            ((16, 2), (("X", "Y"), None), (2, 8, 2)),   # split
            ((16,), (("X", "Y"),), (2, 8)),
            ((8, 4), ("X", "Y"), (4, 2, 4)),
            ((8, 4), ("X", None), (8, 2, 2)),
            ((8, 1, 4), ("X", None, "Y"), (8, 4, 1))]    # singletons only


@pytest.mark.parametrize("shape,spec,new", RESHAPES)
def test_reshape_split_merge(mesh, shape, spec, new):
    def cell(L, log):
        def f(a):
            r = L.np.reshape(a, new)
            log.append(str(L.typeof(r)))
            return r
        return L.jit(f)(put(mesh, np.arange(np.prod(shape), dtype=np.float32).reshape(shape),
                            *spec))
    same(cell, mesh)


@pytest.mark.parametrize("shape,spec,new", [
    ((8, 4), ("X", "Y"), (8, 2, 2)),       # Y (4) does not split 2
    ((8, 4), (None, "Y"), (32,)),          # merge with a sharded minor dim only
    ((16,), (("X", "Y"),), (4, 4)),
])
def test_reshape_errors(mesh, shape, spec, new):
    def cell(L, log):
        x = put(mesh, np.arange(np.prod(shape), dtype=np.float32).reshape(shape), *spec)
        return L.jit(lambda a: L.np.reshape(a, new))(x)
    errors(cell, mesh, ["reshape", "out_sharding"])


def test_reshape_out_sharding(mesh):
    def cell(L, log):
        def f(a):
            r = L.np.reshape(a, (2, 16), out_sharding=P("X", "Y"))
            log.append(str(L.typeof(r)))
            return r
        return L.jit(f)(_x(mesh, "X", "Y"))
    log, _ = same(cell, mesh)
    assert log == ["float32[2@X,16@Y]"]


def test_dot_general_batch_dims(mesh):
    def cell(L, log):
        a = put(mesh, np.arange(64.).reshape(2, 8, 4), "X", "Y", None)
        b = put(mesh, np.arange(40.).reshape(2, 4, 5), "X", None, None)

        def f(a, b):
            r = L.lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,))))
            log.append(str(L.typeof(r)))
            r2 = L.np.einsum("bij,bjk->bik", a, b)
            log.append(str(L.typeof(r2)))
            return r, r2
        return L.jit(f)(a, b)
    log, _ = same(cell, mesh)
    assert log == ["float32[2@X,8@Y,5]"] * 2


def test_dot_general_batch_dims_disagree(mesh):
    def cell(L, log):
        a = put(mesh, np.ones((4, 8, 4), np.float32), "X", None, None)
        b = put(mesh, np.ones((4, 4, 5), np.float32), "Y", None, None)
        return L.jit(lambda a, b: L.lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,)))))(a, b)
    je, se = errors(cell, mesh, [])
    assert "dot_general" in str(je) and "dot_general" in str(se)


def test_creation_ops_unsharded(mesh):
    def cell(L, log):
        def f(a):
            outs = (L.np.zeros((8, 4)), L.np.ones((8, 4)) + a, L.np.arange(8),
                    L.np.full((4,), 2.0), L.np.zeros_like(a) + a)
            log.extend(str(L.typeof(o)) for o in outs)
            return outs
        return L.jit(f)(_x(mesh))
    log, _ = same(cell, mesh)
    assert log == ["float32[8,4]", "float32[8@X,4@Y]", "int32[8]", "~float32[4]",
                   "float32[8@X,4@Y]"]


def test_like_creation_keeps_type(mesh):
    def cell(L, log):
        def f(a):
            outs = (L.np.ones_like(a), L.np.zeros_like(a), L.np.full_like(a, 3.0))
            log.extend(str(L.typeof(o)) for o in outs)
            return outs
        return L.jit(f)(_x(mesh))
    log, _ = same(cell, mesh)
    assert log == ["float32[8@X,4@Y]"] * 3


def test_creation_ops_out_sharding(mesh):
    def cell(L, log):
        def f():
            z = L.np.zeros((8, 4), out_sharding=P("X"))
            log.append(str(L.typeof(z)))
            return z
        return L.jit(f)()
    log, _ = same(cell, mesh)
    assert log == ["float32[8@X,4]"]


def _type_errors(cell, mesh, words):
    """Both raise a TypeError whose message has each of `words`."""
    got = []
    for L in (JAX, SHARDC):
        with L.set_mesh(mesh):
            with pytest.raises(TypeError) as ei:
                cell(L)
        got.append(str(ei.value).lower())
    for w in words:
        assert all(w in g for g in got), (w, got)


def test_scan_carry_type_must_match(mesh):
    def cell(L):
        c0 = put(mesh, np.zeros((4, 4), np.float32), "X", None)
        xs = put(mesh, np.ones((2, 4, 4), np.float32), None, None, "Y")
        f = L.jit(lambda c, xs: L.lax.scan(lambda c, x: (c + x, None), c, xs)[0])
        return f(c0, xs)
    _type_errors(cell, mesh, ["carry", "float32[4@x,4]", "float32[4@x,4@y]"])


def test_cond_branch_types_must_match(mesh):
    def cell(L):
        a = put(mesh, np.ones((8, 4), np.float32), "X", None)
        f = L.jit(lambda p, a: L.lax.cond(p, lambda a: a * 2,
                                          lambda a: L.reshard(a, P(None, "X")), a))
        return f(True, a)
    _type_errors(cell, mesh, ["branches", "float32[8@x,4]", "float32[8,4@x]"])


@pytest.mark.parametrize("how", ["reshard", "out_sharding"])
def test_uneven_type_sharding_is_refused_where_asked(mesh, how):
    """A reshard (or out_sharding=) whose sharding does not split a dim evenly is jax's
    ValueError at that call (once shardc blamed the next op, or typed it silently)."""
    msgs = []
    for L in (JAX, SHARDC):
        def f(a):
            if how == "reshard":
                return L.reshard(a[:3], P("Y")) * 2
            return L.np.reshape(a[:12], (3, 4), out_sharding=P("Y", None)) * 2
        x = put(mesh, np.arange(16.), None)
        with L.set_mesh(mesh), pytest.raises(ValueError) as ei:
            L.jit(f)(x)
        msgs.append(str(ei.value))
    assert "does not evenly divide the dimension size" in msgs[0]
    assert "does not evenly divide the dimension size" in msgs[1] and ".py:" in msgs[1]


VMAPPED = {   # body(L, row) with row f32[4@Y] of a f32[8@X,4@Y] batch mapped on its dim 0
    "reshard": lambda L, r: L.reshard(r, P(None)),
    "out_sharding": lambda L, r: L.np.einsum("i,j->ij", r, r, out_sharding=P("Y", None)),
    "jvp": lambda L, r: L.jvp(lambda v: v * v, (r,), (r,))[1],
    "grad": lambda L, r: L.grad(lambda v: (L.np.sin(v) * v).sum())(r),
    "vjp": lambda L, r: L.vjp(lambda v: v * 3, r)[1](r)[0],
}


@pytest.mark.parametrize("name", sorted(VMAPPED))
def test_vmap_keeps_the_mapped_dims_explicit_sharding(mesh, name):
    """The mapped dim's explicit sharding shards every mapped result (jax's
    explicit_mesh_axis, as spmd_axis_name does): a reshard or out_sharding= inside the
    body and the constraints gradients make keep it (they once replicated it)."""
    def cell(L, log):
        def f(a):
            r = L.vmap(lambda row: VMAPPED[name](L, row))(a)
            log.append(str(L.typeof(r)))
            return r
        return L.jit(f)(_x(mesh))
    same(cell, mesh, rtol=1e-5)


def test_jvp_tangents_are_typed_like_the_outputs(mesh):
    def cell(L, log):
        def f(a):
            t = L.jvp(lambda v: L.np.tanh(v) * v, (a,), (a,))[1]
            log.append(str(L.typeof(t)))
            return t
        return L.jit(f)(_x(mesh))
    log, _ = same(cell, mesh, rtol=1e-5)
    assert log == ["float32[8@X,4@Y]"]


def test_vmap_of_differently_sharded_mapped_dims_is_an_error(mesh):
    for L in (JAX, SHARDC):
        a, b = _x(mesh), _x(mesh, None, "Y")
        with L.set_mesh(mesh), pytest.raises(ValueError, match="should be sharded the same"):
            L.jit(lambda a, b: L.vmap(lambda r, s: r + s)(a, b))(a, b)
        with L.set_mesh(mesh), pytest.raises(ValueError, match="cannot be sharded along"):
            L.jit(lambda a, c: L.vmap(lambda r, c: r + c.sum(), in_axes=(0, None))(a, c))(
                a, _x(mesh))


@pytest.mark.parametrize("kind", ["explicit", "auto"])
def test_creation_device_inside_jit_as_jnp(kind):
    """arange and eye (jnp device_puts them) take device= as their type on Explicit
    axes; linspace converts to it on any axes; zeros ignores it: as jax.jit."""
    types_ = EXPLICIT if kind == "explicit" else (AxisType.Auto,) * 2
    m = mesh_of((2, 4), ("X", "Y"), types_)
    ns = shardc.NamedSharding(m, P("Y"))
    ns2 = shardc.NamedSharding(m, P("X", "Y"))

    def cell(L, log):
        def f():
            return (L.np.arange(16.0, device=ns), L.np.linspace(0., 1., 16, device=ns),
                    L.np.eye(8, device=ns2), L.np.zeros(16, device=ns))
        return L.jit(f)()
    same(cell, m)


def test_reshard_inside_a_partial_shard_map_fixes_the_free_axes(mesh):
    """With X manual and Y explicit, reshard(v, P(None, None)) replicates over Y: the
    result's sharding is its type (it was left open, and Y sharded it anyway)."""
    def cell(L, log):
        def body(v):
            r = L.reshard(v, P(None, None))
            log.append(str(L.typeof(r)))
            return r

        def f(a):
            out = L.shard_map(body, in_specs=P("X"), out_specs=P("X"), axis_names={"X"})(a)
            log.append(str(L.typeof(out)))
            return out
        return L.jit(f)(put(mesh, np.arange(128.).reshape(8, 16), "X", "Y"))
    log, _ = same(cell, mesh)
    assert log[-1] == "float32[8@X,16]"
