"""jax 0.10's sharding API spellings, side by side with jax: shardc.sharding, make_mesh's
axis_types, set_mesh as statement and context (one context with jax's), shard_map's
mesh from context / positional / inferred in_specs, pcast/pvary, creation ops' device=."""
import contextlib
import inspect
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp

X = np.arange(64, dtype=np.float32).reshape(8, 8)


@contextlib.contextmanager
def mesh_statement(setter, mesh):
    """`setter(mesh)` as a statement, undone at the end (it would leak into later tests)."""
    token = setter(mesh)
    try:
        yield
    finally:
        token.__exit__(None, None, None)


def explicit_mesh(shape=(2, 4), names=("x", "y")):
    return shardc.make_mesh(shape, names, axis_types=(AxisType.Explicit,) * len(names))


# ---------------------------------------------------------------- shardc.sharding

def test_sharding_module_has_every_name_of_jax_sharding():
    public = {n for n in dir(jax.sharding) if not n.startswith("_")}
    missing = public - set(dir(shardc.sharding))
    assert not missing, missing
    for n in ("Mesh", "NamedSharding", "PartitionSpec", "AxisType", "AbstractMesh",
              "AbstractDevice", "ManualAxisType", "Sharding", "SingleDeviceSharding"):
        assert getattr(shardc.sharding, n) is getattr(jax.sharding, n)     # jax's classes
    assert shardc.sharding.reshard is shardc.reshard
    assert issubclass(shardc.sharding.PositionalSharding, jax.sharding.Sharding)
    assert set(shardc.sharding.__all__) <= set(dir(shardc.sharding))


def test_top_level_names_where_jax_has_them():
    assert shardc.sharding is not None and shardc.reshard is not None
    for n in ("set_mesh", "make_mesh", "sharding", "NamedSharding", "P", "shard_map"):
        assert hasattr(jax, n) and hasattr(shardc, n), n


# ---------------------------------------------------------------- make_mesh

def test_make_mesh_signature_and_axis_types():
    params = lambda f: [(p.name, p.kind) for p in inspect.signature(f).parameters.values()]  # noqa
    assert params(shardc.make_mesh) == params(jax.make_mesh)
    ours = shardc.make_mesh((2, 4), ("x", "y"), (AxisType.Explicit, AxisType.Auto))
    ref = jax.make_mesh((2, 4), ("x", "y"), (AxisType.Explicit, AxisType.Auto))
    assert ours == ref and ours.axis_types == ref.axis_types
    # the default is jax's: Explicit
    assert shardc.make_mesh((8,), ("x",)).axis_types == (AxisType.Explicit,)
    assert jax.make_mesh((8,), ("x",)).axis_types == (AxisType.Explicit,)
    assert "Auto" in shardc.make_mesh.__doc__ and "Explicit" in shardc.make_mesh.__doc__
    devs = jax.devices()[::-1]
    m = shardc.make_mesh((4, 2), ("a", "b"), axis_types=(AxisType.Explicit,) * 2, devices=devs)
    assert [d.id for d in m.devices.flat] == [d.id for d in devs]
    assert m.axis_types == (AxisType.Explicit,) * 2
    with pytest.raises(ValueError, match="one shardc.AxisType"):
        shardc.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit,))


# ---------------------------------------------------------------- set_mesh

def test_jax_set_mesh_statement_then_shard_map_without_mesh(mesh2x4):
    """The issue's spelling, unchanged: jax.set_mesh(mesh); shard_map(f, in_specs, out_specs)."""
    x = jax.device_put(X, NamedSharding(mesh2x4, P("x", "y")))
    with mesh_statement(jax.set_mesh, mesh2x4):
        ours = shardc.shard_map(lambda a: shardc.lax.psum(a, "y"), in_specs=P("x", "y"),
                                out_specs=P("x", None))(x)
        ref = jax.shard_map(lambda a: jax.lax.psum(a, "y"), in_specs=P("x", "y"),
                            out_specs=P("x", None))(x)
    np.testing.assert_array_equal(ours, ref)
    assert ours.sharding.is_equivalent_to(ref.sharding, ours.ndim)
    assert jax.sharding.get_mesh().empty


def test_shardc_set_mesh_statement_is_jax_context(mesh2x4):
    assert jax.sharding.get_abstract_mesh().empty
    with mesh_statement(shardc.set_mesh, mesh2x4):
        assert jax.sharding.get_mesh() is mesh2x4
        assert jax.sharding.get_abstract_mesh() == mesh2x4.abstract_mesh
        assert shardc.sharding.get_abstract_mesh() == mesh2x4.abstract_mesh
        ours = shardc.jit(shardc.shard_map(lambda a: a * 2, in_specs=P("x"),
                                           out_specs=P("x")))(X)
        ref = jax.jit(jax.shard_map(lambda a: a * 2, in_specs=P("x"), out_specs=P("x")))(X)
        np.testing.assert_array_equal(ours, ref)
        assert ours.sharding.is_equivalent_to(ref.sharding, ours.ndim)
        # a bare spec names the context mesh, in shardc and jax alike
        assert shardc.device_put(X, P("y")).sharding == jax.device_put(X, P("y")).sharding
    assert jax.sharding.get_mesh().empty and jax.sharding.get_abstract_mesh().empty


def test_set_mesh_as_context_restores_the_previous_mesh(mesh2x4, mesh8):
    for setter in (shardc.set_mesh, jax.set_mesh):
        with setter(mesh8):
            assert jax.sharding.get_mesh() is mesh8
            with shardc.set_mesh(mesh2x4) as m:
                assert m is None or m is mesh2x4
                assert jax.sharding.get_mesh() is mesh2x4
                assert shardc.sharding.get_mesh() is mesh2x4
            assert jax.sharding.get_mesh() is mesh8
            assert jax.sharding.get_abstract_mesh() == mesh8.abstract_mesh
        assert jax.sharding.get_mesh().empty


def test_set_mesh_rejects_what_jax_rejects():
    for setter in (shardc.set_mesh, jax.set_mesh):
        with pytest.raises(ValueError, match="Mesh"):
            setter("x")
    manual = jax.make_mesh((8,), ("x",), axis_types=(AxisType.Manual,))
    for setter in (shardc.set_mesh, jax.set_mesh):
        with pytest.raises(ValueError, match="manual axes"):
            setter(manual)
    assert jax.sharding.get_mesh().empty


def test_jit_is_not_reused_across_meshes(mesh2x4, mesh8):
    """A shardc.jit function called under different set_mesh meshes compiles for each
    (a bare spec means another sharding under each), with no stale executable."""
    f = shardc.jit(lambda v: shardc.with_sharding_constraint(v * 2, P("x")))
    seen = []
    for mesh in (mesh8, mesh2x4, mesh8, mesh2x4):
        for setter in (shardc.set_mesh, jax.set_mesh):
            with mesh_statement(setter, mesh):
                out = f(X)
                seen.append(out.sharding)
                assert out.sharding == NamedSharding(mesh, P("x"))
                np.testing.assert_array_equal(out, X * 2)
    assert len(set(seen)) == 2
    with pytest.raises(shardc.ShardcError, match="set_mesh"):
        f(X)        # no context mesh: the bare spec names none


def test_abstract_mesh_context_in_a_trace(mesh2x4):
    x = jax.device_put(X, NamedSharding(mesh2x4, P("x", "y")))

    @shardc.jit
    def f(a):
        with shardc.sharding.use_abstract_mesh(mesh2x4.abstract_mesh):
            assert shardc.sharding.get_abstract_mesh() == mesh2x4.abstract_mesh
            return shardc.shard_map(lambda b: b + 1, in_specs=P("x", "y"),
                                    out_specs=P("x", "y"))(a)
    np.testing.assert_array_equal(f(x), X + 1)
    assert shardc.sharding.get_abstract_mesh().empty


# ---------------------------------------------------------------- shard_map

def test_shard_map_signature_is_jaxs():
    sig = inspect.signature(shardc.shard_map).parameters
    for n, p in inspect.signature(jax.shard_map).parameters.items():
        assert n in sig, n
        if n != "f":
            assert sig[n].kind == p.kind == p.KEYWORD_ONLY, n
        if n not in ("f", "in_specs", "out_specs"):     # (jax's sentinels are its own)
            assert sig[n].default == p.default, n
    assert sig["f"].kind == sig["f"].POSITIONAL_ONLY


def test_shard_map_positional_mesh_as_experimental_shard_map(mesh2x4):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from jax.experimental.shard_map import shard_map as old_shard_map
    body = lambda L: lambda a: L.psum(a, "x")     # noqa: E731
    ref = old_shard_map(body(jax.lax), mesh2x4, P("x", "y"), P(None, "y"))(X)
    ours = shardc.shard_map(body(shardc.lax), mesh2x4, P("x", "y"), P(None, "y"))(X)
    np.testing.assert_array_equal(ours, ref)
    ours = shardc.shard_map(body(shardc.lax), mesh2x4, P("x", "y"), P(None, "y"), True)(X)
    np.testing.assert_array_equal(ours, ref)
    with pytest.raises(TypeError, match="both positionally and by keyword"):
        shardc.shard_map(body(shardc.lax), mesh2x4, mesh=mesh2x4, out_specs=P())


def test_shard_map_without_any_mesh_says_what_to_do():
    with pytest.raises(ValueError, match="context mesh cannot be empty"):
        jax.shard_map(lambda a: a, in_specs=P("x"), out_specs=P("x"))(X)
    with pytest.raises(ValueError, match=r"shardc.set_mesh\(mesh\)"):
        shardc.shard_map(lambda a: a, in_specs=P("x"), out_specs=P("x"))(X)


def test_shard_map_mesh_must_match_the_context(mesh2x4, mesh8):
    with shardc.set_mesh(mesh8):
        with pytest.raises(ValueError, match="should match the mesh passed"):
            jax.shard_map(lambda a: a, mesh=mesh2x4, in_specs=P("x"), out_specs=P("x"))(X)
        with pytest.raises(ValueError, match="differs from the mesh passed"):
            shardc.shard_map(lambda a: a, mesh=mesh2x4, in_specs=P("x"), out_specs=P("x"))(X)


def test_shard_map_infers_in_specs_from_explicit_arrays():
    mesh = explicit_mesh()
    x = jax.device_put(X, NamedSharding(mesh, P("x", "y")))
    y = jax.device_put(X[:, :4], NamedSharding(mesh, P(None, "y")))
    body = lambda L: lambda a, b: (L.psum(a, "y"), b * 2)      # noqa: E731
    outs = (P("x", None), P(None, "y"))
    with jax.set_mesh(mesh):
        ref = jax.shard_map(body(jax.lax), out_specs=outs)(x, y)
        ours = shardc.shard_map(body(shardc.lax), out_specs=outs)(x, y)
        ours_mesh = shardc.shard_map(body(shardc.lax), mesh=mesh, out_specs=outs)(x, y)
    for o, om, r in zip(ours, ours_mesh, ref):
        np.testing.assert_array_equal(o, r)
        np.testing.assert_array_equal(om, r)
    # partly manual: only the manual axes' part of each spec is read
    with jax.set_mesh(mesh):
        ref = jax.shard_map(lambda a: a.sum(0, keepdims=True), out_specs=P("x"),
                            axis_names={"x"})(x)
        ours = shardc.shard_map(lambda a: a.sum(0, keepdims=True), out_specs=P("x"),
                                axis_names={"x"})(x)
    np.testing.assert_array_equal(ours, ref)


def test_shard_map_cannot_infer_on_auto_axes(mesh2x4):
    x = jax.device_put(X, NamedSharding(mesh2x4, P("x", "y")))
    msg = "in_specs argument must be a pytree of `jax.sharding.PartitionSpec`"
    with pytest.raises(TypeError, match=msg):
        jax.shard_map(lambda a: a, mesh=mesh2x4, out_specs=P("x", "y"))(x)
    with pytest.raises(TypeError, match=msg):
        shardc.shard_map(lambda a: a, mesh=mesh2x4, out_specs=P("x", "y"))(x)


# ---------------------------------------------------------------- pcast / pvary

def _vary_body(L, m):
    def f(a):
        ones = m.ones(2)                                  # the same on every device
        v = L.pcast(ones, "y", to="varying") * 2
        return a + v, L.psum(L.pcast(ones, ("x", "y"), to="varying"), ("x", "y"))
    return f


def test_pcast_to_varying_as_jax(mesh2x4):
    specs = dict(mesh=mesh2x4, in_specs=P("x", "y"), out_specs=(P("x", "y"), P()))
    ours = shardc.jit(shardc.shard_map(_vary_body(shardc.lax, snp), **specs))(X[:, :])
    ref = jax.jit(jax.shard_map(_vary_body(jax.lax, jnp), **specs))(X)
    for o, r in zip(ours, ref):
        np.testing.assert_array_equal(o, r)
    assert float(ours[1][0]) == 8.0       # a sum of 8 copies


def test_pcast_makes_out_specs_check_fail_as_jax(mesh2x4):
    for L, m, sm in ((shardc.lax, snp, shardc.shard_map), (jax.lax, jnp, jax.shard_map)):
        f = sm(lambda a: L.pcast(m.ones(4), "y", to="varying"), mesh=mesh2x4,
               in_specs=P("x", "y"), out_specs=P())
        with pytest.raises(ValueError if sm is jax.shard_map else shardc.ShardcError):
            f(X)
        # unchecked, pcast is a no-op and P() is taken on trust, in both
        g = sm(lambda a: L.pcast(m.ones(4), "y", to="varying"), mesh=mesh2x4,
               in_specs=P("x", "y"), out_specs=P(), check_vma=False)
        np.testing.assert_array_equal(g(X), np.ones(4))


def test_pcast_errors_as_jax(mesh2x4):
    cases = [("y", "varying", ValueError, "Unsupported pcast from=varying"),
             ("y", "bogus", ValueError, "Got unexpected `to` value"),
             ({"y"}, "varying", TypeError, "must be a tuple or a str")]
    for axis, to, err, msg in cases:
        for L, sm in ((shardc.lax, shardc.shard_map), (jax.lax, jax.shard_map)):
            f = sm(lambda a: L.pcast(a, axis, to=to), mesh=mesh2x4, in_specs=P("x", "y"),
                   out_specs=P("x", "y"))
            with pytest.raises(err, match=msg):
                f(X)


def test_pcast_gradient_is_a_psum(mesh2x4):
    def loss(L, m, sm):
        def f(w):
            g = sm(lambda w: L.psum(L.pcast(w, "y", to="varying") * 3.0, "y"), mesh=mesh2x4,
                   in_specs=P(), out_specs=P())
            return g(w).sum()
        return f
    w = np.arange(3, dtype=np.float32)
    ours = shardc.grad(loss(shardc.lax, snp, shardc.shard_map))(w)
    ref = jax.grad(loss(jax.lax, jnp, jax.shard_map))(jnp.asarray(w))
    np.testing.assert_allclose(ours, ref)
    np.testing.assert_allclose(ours, np.full(3, 12.0))


def test_pvary_is_pcast_to_varying(mesh2x4):
    specs = dict(mesh=mesh2x4, in_specs=P("x", "y"), out_specs=P("x", "y"))
    ours = shardc.shard_map(lambda a: shardc.lax.pvary(snp.ones(2), ("x", "y")) +
                            shardc.lax.psum(a, "x"), **specs)(X)
    ref = jax.shard_map(lambda a: jax.lax.pcast(jnp.ones(2), ("x", "y"), to="varying") +
                        jax.lax.psum(a, "x"), **specs)(X)
    np.testing.assert_array_equal(ours, ref)
    assert "pcast" in shardc.lax.pvary.__doc__


# ---------------------------------------------------------------- device= on creation ops

CREATION = [("zeros", (8,)), ("ones", (8,)), ("empty", (8,)), ("full", (8, 2.0)),
            ("arange", (8,)), ("linspace", (0, 1, 8)), ("eye", (8,)),
            ("zeros_like", (np.ones(8),)), ("ones_like", (np.ones(8),)),
            ("full_like", (np.ones(8), 3)), ("empty_like", (np.ones(8),)),
            ("array", ([1.0, 2, 3, 4, 5, 6, 7, 8],)), ("asarray", ([1.0, 2, 3, 4, 5, 6, 7, 8],))]


@pytest.mark.parametrize("name,args", CREATION, ids=[c[0] for c in CREATION])
def test_creation_device_places_as_jax(name, args, mesh8):
    for device in (NamedSharding(mesh8, P("x")), jax.devices()[3]):
        ours = getattr(snp, name)(*args, device=device)
        ref = getattr(jnp, name)(*args, device=device)
        assert ours.sharding == ref.sharding and ours.committed == ref.committed
        assert ours.dtype == ref.dtype and ours.shape == ref.shape
        if "empty" not in name:
            np.testing.assert_array_equal(ours, ref)


def test_creation_device_and_out_sharding_inside_jit(mesh8):
    s = NamedSharding(mesh8, P("x"))
    for mod, jit in ((snp, shardc.jit), (jnp, jax.jit)):   # device= is no constraint in jit
        out = jit(lambda: mod.zeros(8, device=s) + 1)()
        assert isinstance(out.sharding, jax.sharding.SingleDeviceSharding)
    for mod, jit in ((snp, shardc.jit), (jnp, jax.jit)):   # out_sharding: Explicit axes only
        with pytest.raises(ValueError, match="Auto"):
            jit(lambda v: mod.zeros_like(v, out_sharding=s) + v)(np.ones(8))
    out = shardc.jit(lambda: snp.arange(8, device=jax.devices()[0]))()   # no constraint
    np.testing.assert_array_equal(out, np.arange(8))
    for mod in (snp, jnp):
        with pytest.raises(ValueError, match="Only one of `device` or `out_sharding`"):
            mod.zeros(8, device=s, out_sharding=s)


def test_shard_map_infers_in_specs_inside_jit_from_types():
    """Inside a trace the spec is read off the value's type (shardc.typeof), as jax's."""
    mesh = explicit_mesh()
    x = jax.device_put(X, NamedSharding(mesh, P("x", "y")))

    def f(L, sm, rs):
        def g(a):
            a = rs(a * 2, P("x", None))
            return sm(lambda b: L.psum(b, "x"), out_specs=P(None, None))(a)
        return g
    with jax.set_mesh(mesh):
        ref = jax.jit(f(jax.lax, jax.shard_map, jax.sharding.reshard))(x)
        ours = shardc.jit(f(shardc.lax, shardc.shard_map, shardc.reshard))(x)
    np.testing.assert_array_equal(ours, ref)


def test_abstract_mesh_and_typeof_inside_a_shard_map_body():
    """Inside a body the manual axes are Manual in the abstract mesh, as jax's."""
    mesh = explicit_mesh()
    x = jax.device_put(X, NamedSharding(mesh, P("x", "y")))
    seen = {}

    def body(sm, tag):
        def f(a):
            seen[tag] = jax.sharding.get_abstract_mesh() if sm is jax.shard_map else \
                shardc.api.explicit.abstract_mesh_now()
            return a
        return f
    with jax.set_mesh(mesh):
        jax.jit(jax.shard_map(body(jax.shard_map, "jax"), out_specs=P("x"),
                              axis_names={"x"}))(x)
        shardc.jit(shardc.shard_map(body(shardc.shard_map, "ours"), out_specs=P("x"),
                                    axis_names={"x"}))(x)
    assert seen["ours"].axis_types == seen["jax"].axis_types


def test_shard_map_in_specs_must_match_explicit_types():
    mesh = explicit_mesh()
    x = jax.device_put(X, NamedSharding(mesh, P("x", "y")))
    for sm in (jax.shard_map, shardc.shard_map):
        with jax.set_mesh(mesh):
            with pytest.raises(ValueError, match=r"does not match the specs of the input"):
                sm(lambda a: a, in_specs=P("x", None), out_specs=P("x", None))(x)
            out = sm(lambda a: a + 1, in_specs=P("x", "y"), out_specs=P("x", "y"))(x)
            np.testing.assert_array_equal(out, X + 1)


def test_shard_map_in_specs_none_is_a_static_input(mesh8):
    """jax 0.10: a None leaf of in_specs passes that argument to f as it is."""
    def body(a, how, k):
        return a * k if how == "scale" else a + k
    for sm in (jax.shard_map, shardc.shard_map):
        f = sm(body, mesh=mesh8, in_specs=(P("x"), None, None), out_specs=P("x"))
        np.testing.assert_array_equal(f(X, "scale", 3), X * 3)
        np.testing.assert_array_equal(f(X, "shift", 2), X + 2)
    g = shardc.jit(lambda v: shardc.shard_map(body, mesh=mesh8, in_specs=(P("x"), None, None),
                                              out_specs=P("x"))(v, "scale", 5))
    np.testing.assert_array_equal(g(X), X * 5)


def _auto_axis_cases(lib, np_):
    rs = shardc.reshard if lib is shardc else jax.sharding.reshard
    aa = shardc.sharding.auto_axes if lib is shardc else jax.sharding.auto_axes
    A = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    E = explicit_mesh()
    M = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit, AxisType.Auto))
    return [   # (function, context mesh, jitted, jax refuses it)
        (lambda x: rs(x, P("x")), A, True, True),
        (lambda x: rs(x, NamedSharding(A, P("x"))), A, False, True),
        (lambda x: np_.zeros((8,), out_sharding=P("x")) + x[:, 0], A, True, True),
        (lambda x: np_.dot(x, x.T, out_sharding=P("x")), A, True, True),
        (lambda x: x.at[0].set(1.0, out_sharding=P("x")), A, True, True),
        (lambda x: rs(x, P("y")), M, True, True),
        (lambda x: rs(x, P("x")), M, True, False),
        (lambda x: aa(lambda v: rs(v, P("x")), axes="x", out_sharding=P())(x), E, True, True),
        (lambda x: aa(lambda v: v * 2, axes="x", out_sharding=P("x"))(x), E, True, False),
        (lambda x: np_.zeros((8, 4), device=NamedSharding(A, P("x"))) + x, A, True, False),
    ]


@pytest.mark.parametrize("case", range(10))
def test_out_sharding_and_reshard_take_explicit_axes_only_as_jax(case):
    """jax refuses an Auto or Manual axis in reshard / out_sharding= (a constraint there
    is with_sharding_constraint's); shardc took it as a constraint."""
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    for lib, np_ in ((jax, jnp), (shardc, snp)):
        f, mesh, jitted, refused = _auto_axis_cases(lib, np_)[case]
        with lib.set_mesh(mesh):
            g = lib.jit(f) if jitted else f
            xs = jax.device_put(x, NamedSharding(mesh, P()))
            if refused:
                with pytest.raises(ValueError, match="Auto"):
                    g(xs)
            else:
                g(xs)
