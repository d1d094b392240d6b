"""shardc.AUTO through jit (issue 19's API): in/out shardings chosen per leaf by the
sharding search, the choice on `.compile().input_shardings / .output_shardings` in
jax's structure, the compiled object and the jitted function running with arrays
placed any way, user shardings and constraints kept, memory_budget= honoured, and
clear errors for what cannot work. Values are checked against jax.jit."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
from shardc.errors import ShardcError
from shardc.report import report

B, D, F = 4, 256, 1024
DM = ("data", "model")
RNG = np.random.default_rng(0)
X = RNG.standard_normal((B, D), np.float32)
W1 = RNG.standard_normal((D, F), np.float32) / 16
W2 = RNG.standard_normal((F, D), np.float32) / 32


@pytest.fixture(scope="module")
def mesh():
    return shardc.make_mesh((2, 4), DM, axis_types=(shardc.AxisType.Auto,) * len(DM))


def mlp(x, w1, w2):
    return shardc.nn.gelu(x @ w1) @ w2


def ref_mlp(x, w1, w2):
    return jax.nn.gelu(x @ w1) @ w2


def specs(tree):
    return jax.tree.map(lambda s: s.spec, tree)


def test_auto_weights_are_chosen_and_run_as_jax(mesh):
    f = shardc.jit(mlp, in_shardings=(NamedSharding(mesh, P("data")), shardc.AUTO(mesh),
                                      shardc.AUTO(mesh)))
    c = f.lower(X, W1, W2).compile()
    # the search's choice (tests/test_auto_solve.py): Megatron's column / row split
    # over model, one all-reduce of the 2 KiB output; x stays as given
    assert specs(c.input_shardings) == ((P("data"), P(None, "model"), P("model")), {})
    assert isinstance(c.output_shardings, NamedSharding)
    want = jax.jit(ref_mlp)(X, W1, W2)
    placed = [jax.device_put(a, s) for a, s in zip((X, W1, W2), c.input_shardings[0])]
    for out in (c(X, W1, W2), c(*placed), f(X, W1, W2), f(*placed)):
        np.testing.assert_allclose(out, want, rtol=2e-5, atol=2e-5)
        assert out.sharding == c.output_shardings
    # one search and one compile for the signature, whatever the placement
    assert len(f._cache) == 1
    sol = f.trace(X, W1, W2).propagate().auto
    assert sol.predicted.collective_bytes > 0 and set(sol.input_shardings) == {1, 2}


def test_bare_auto_takes_the_set_mesh_and_pytree_prefixes(mesh):
    def step(params, x, *, scale):
        h = x @ params["w1"]
        return {"y": jnp.tanh(h) @ params["w2"] * scale, "h": h}
    params = {"w1": W1, "w2": W2}
    with shardc.set_mesh(mesh):
        f = shardc.jit(step, in_shardings=(shardc.AUTO, P("data")),
                       out_shardings={"y": shardc.AUTO, "h": P("data", "model")})
        c = f.lower(params, X, scale=np.float32(2)).compile()
        got = f(params, X, scale=np.float32(2))
    args, kwargs = c.input_shardings
    assert set(args[0]) == {"w1", "w2"} and specs(args[1]) == P("data")
    assert set(kwargs) == {"scale"}
    assert c.output_shardings["h"].spec == P("data", "model")
    assert got["h"].sharding.spec == P("data", "model")
    assert got["y"].sharding == c.output_shardings["y"]
    want = jax.jit(step, static_argnames=())(params, X, scale=np.float32(2))
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=2e-5, atol=2e-5)


def test_auto_outputs_alone_keep_the_inputs_given(mesh):
    s = NamedSharding(mesh, P(None, "model"))
    f = shardc.jit(lambda a, b: jnp.sin(a) @ b, in_shardings=(s, s),
                   out_shardings=shardc.AUTO)
    a = RNG.standard_normal((64, 64), np.float32)
    c = f.lower(a, a).compile()
    assert specs(c.input_shardings) == ((P(None, "model"), P(None, "model")), {})
    out = c(a, a)
    np.testing.assert_allclose(out, jnp.sin(a) @ a, rtol=1e-4, atol=1e-4)
    assert out.sharding == c.output_shardings


def test_constraints_stay_fixed(mesh):
    pin = NamedSharding(mesh, P(None, "data"))

    def f(x, w1, w2):
        h = shardc.with_sharding_constraint(x @ w1, pin)
        return shardc.nn.gelu(h) @ w2
    g = shardc.jit(f, in_shardings=shardc.AUTO(mesh))
    p = g.trace(X, W1, W2).propagate().program
    wsc = [op for op in p.ops if op.prim.name == "sharding_constraint"
           and str(op.params["sharding"]) == "[{}, {data}]"]
    assert len(wsc) == 1 and str(wsc[0].outputs[0].sharding) == "[{}, {data}]"
    # every value the search decided is made as it decided (the dot's result too, whose
    # chosen sharding now sits between it and the user's constraint)
    chosen = [op for op in p.ops if op.prim.name == "sharding_constraint" and op not in wsc]
    assert chosen and all(op.inputs[0].sharding == op.params["sharding"] for op in chosen)
    np.testing.assert_allclose(g(X, W1, W2), jax.jit(ref_mlp)(X, W1, W2), rtol=2e-5,
                               atol=2e-5)


def test_abstract_arguments_lower_and_compile(mesh):
    sds = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in (X, W1, W2)]
    c = shardc.jit(mlp, in_shardings=shardc.AUTO(mesh)).lower(*sds).compile()
    np.testing.assert_allclose(c(X, W1, W2), jax.jit(ref_mlp)(X, W1, W2), rtol=2e-5,
                               atol=2e-5)


def test_memory_budget_bounds_the_choice(mesh):
    x = RNG.standard_normal((64, D), np.float32)
    xs = NamedSharding(mesh, P("data"))
    free = shardc.jit(mlp, in_shardings=(xs, shardc.AUTO(mesh), shardc.AUTO(mesh)))
    fc = free.lower(x, W1, W2).compile()
    assert specs(fc.input_shardings[0][1:]) == (P(), P())    # data parallel: no collective
    budget = 1 << 20
    tight = shardc.jit(mlp, in_shardings=(xs, shardc.AUTO(mesh), shardc.AUTO(mesh)),
                       memory_budget=budget)
    c = tight.lower(x, W1, W2).compile()
    assert all(s.spec != P() for s in c.input_shardings[0][1:])
    sol = c.lowered.traced.auto
    assert sol.predicted.peak_bytes <= budget
    m = c.memory_analysis()
    compiled_peak = (m.argument_size_in_bytes + m.output_size_in_bytes
                     + m.temp_size_in_bytes - m.alias_size_in_bytes)
    assert compiled_peak <= budget * 1.15
    np.testing.assert_allclose(c(x, W1, W2), jax.jit(ref_mlp)(x, W1, W2), rtol=2e-5,
                               atol=2e-5)
    with pytest.raises(ShardcError, match=r"test_auto_api.py:\d+: no sharding of the program "
                       r"fits memory_budget=1000 B.*raise memory_budget to at least \d+"):
        shardc.jit(mlp, in_shardings=shardc.AUTO(mesh), memory_budget=1000)(x, W1, W2)


def test_a_peak_over_the_budget_after_propagation_warns_at_the_users_line(mesh):
    # the search bounds its own estimate of the choice; the memory model of the
    # propagated program can differ (a loop's gathered operands): then a warning names
    # both numbers. Checked at a budget just under and at the propagated peak
    import warnings

    from shardc.api import autojit
    from shardc.auto.memory import peak_memory
    x = RNG.standard_normal((64, D), np.float32)
    f = shardc.jit(mlp, in_shardings=shardc.AUTO(mesh), memory_budget=1 << 20)
    with warnings.catch_warnings():
        warnings.simplefilter("error")       # the search's choice fits: no warning
        program = f.lower(x, W1, W2).compile().lowered.traced.program
    sol = program.meta["auto"]
    peak = peak_memory(program)
    for budget, warns in ((peak, False), (peak - 1, True)):
        sol.memory_budget = budget
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            autojit.warn_over_budget(program)
        assert len(seen) == int(warns)
    w = seen[0]
    assert w.filename == __file__ and str(peak) in str(w.message) and \
        f"memory_budget={peak - 1}" in str(w.message)


def test_inside_another_trace_auto_is_the_outer_programs(mesh):
    inner = shardc.jit(mlp, in_shardings=shardc.AUTO(mesh), out_shardings=shardc.AUTO(mesh))
    outer = shardc.jit(shardc.grad(lambda x, w1, w2: inner(x, w1, w2).sum(), argnums=1))
    want = jax.jit(jax.grad(lambda x, w1, w2: ref_mlp(x, w1, w2).sum(), argnums=1))(X, W1, W2)
    np.testing.assert_allclose(outer(X, W1, W2), want, rtol=1e-4, atol=1e-4)


def test_errors_name_the_line_and_the_fix():
    jmesh = jax.make_mesh((2, 4), DM)       # jax's default: Explicit axes
    with pytest.raises(ShardcError, match=r"test_auto_api.py:\d+: in_shardings for argument "
                       r"0 is shardc.AUTO, but the mesh's axes \['data', 'model'\] are "
                       r"Explicit.*axis_types=\(shardc.AxisType.Auto,\) \* n"):
        shardc.jit(mlp, in_shardings=shardc.AUTO(jmesh)).lower(X, W1, W2)
    with pytest.raises(ShardcError, match="no mesh to shard over; pass shardc.AUTO"):
        shardc.jit(mlp, in_shardings=shardc.AUTO).lower(X, W1, W2)
    with pytest.raises(ShardcError, match="memory_budget= bounds the sharding search"):
        shardc.jit(mlp, memory_budget=1 << 20)
    with pytest.raises(ShardcError, match="expected a positive number of bytes"):
        shardc.jit(mlp, in_shardings=shardc.AUTO, memory_budget=0)
    with pytest.raises(ShardcError, match="expected a shardc.auto.Hardware"):
        shardc.AUTO(hardware="tpu")
    with pytest.raises(ShardcError, match="expected a jax Mesh"):
        shardc.AUTO("mesh")


def test_hardware_and_repr(mesh):
    a = shardc.AUTO(mesh, hardware=shardc.auto.TPU_ICI)
    assert repr(shardc.AUTO) == "AUTO" and "tpu v4 (ICI)" in repr(a)
    assert shardc.sharding.AUTO is shardc.AUTO
    f = shardc.jit(mlp, in_shardings=(None, a, a))
    sol = f.trace(X, W1, W2).propagate().auto
    assert sol.hw is shardc.auto.TPU_ICI
    other = shardc.AUTO(mesh, hardware=shardc.auto.GPU_IB)
    with pytest.raises(ShardcError, match="name different hardware"):
        shardc.jit(mlp, in_shardings=(None, a, other)).lower(X, W1, W2)


def test_explain_and_report_of_an_auto_program(mesh):
    f = shardc.jit(mlp, in_shardings=(NamedSharding(mesh, P("data")), shardc.AUTO(mesh),
                                      shardc.AUTO(mesh)), memory_budget=1 << 22)
    text = f.trace(X, W1, W2).explain()
    assert "chosen by the sharding search (shardc.AUTO)" in text
    assert "// automatic sharding: 2 inputs chosen" in text
    assert "w1: f32[256,1024] [{}, {model}]" in text and "next best" in text
    assert "memory_budget 4.0 MiB per device" in text
    r = report(f.lower(X, W1, W2).compile())
    assert "automatic sharding (shardc.AUTO): w1 [{}, {model}]" in r.text()
    auto = r.json()["auto"]
    assert auto["predicted"]["collective_bytes"] == auto["compiled"]["collective_bytes"] > 0
    assert auto["memory_budget"] == 1 << 22


def test_axis_names_ask_for_the_mesh_shape_too():
    x = RNG.standard_normal((64, D), np.float32)
    auto = shardc.AUTO(axis_names=("data", "model"))
    f = shardc.jit(mlp, in_shardings=(P("data"), auto, auto), memory_budget=600_000)
    t = f.trace(x, W1, W2)
    sol = t.propagate().auto
    # every factorization of the 8 devices was solved; the cheapest is the program's
    shapes = sol.mesh_shapes
    assert list(shapes) == [(("data", a), ("model", 8 // a)) for a in (1, 2, 4, 8)]
    best = min(shapes, key=shapes.get)
    assert tuple(t.mesh.shape.axes) == best and sol.objective == shapes[best]
    assert "mesh shape: data=" in t.explain() and "(chosen)" in t.explain()
    c = f.lower(x, W1, W2).compile()
    assert c.input_shardings[0][0].mesh.shape == dict(best)
    np.testing.assert_allclose(f(x, W1, W2), jax.jit(ref_mlp)(x, W1, W2), rtol=2e-5,
                               atol=2e-5)
    # a shape whose sizes do not divide an argument is skipped, and said why
    y = RNG.standard_normal((2, D), np.float32)     # P("data") splits 2 rows
    text = shardc.jit(mlp, in_shardings=(P("data"), auto, auto)).trace(y, W1, W2).explain()
    assert "data=4, model=2: not possible" in text and "does not divide" in text
    with pytest.raises(ShardcError, match="give a mesh or the axis_names"):
        shardc.AUTO(jax.make_mesh((8,), ("a",)), axis_names=("a",))
