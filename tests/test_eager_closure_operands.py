"""Outside jit, control flow and transforms whose functions close over an array sharded
over a mesh take it as an operand, as jax's do: the result keeps jax's sharding (it came
back on one device, the array gathered into the program as a constant). Values, dtypes
and shardings against eager jax."""
import jax
import jax.numpy  # noqa: F401  (jax.numpy, as m.numpy)
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

import shardc

MESH = jax.make_mesh((2, 4), ("d", "m"), axis_types=(AxisType.Auto,) * 2)
MESH2 = jax.make_mesh((4, 2), ("a", "b"), axis_types=(AxisType.Auto,) * 2)
XS = jax.device_put(np.arange(128, dtype=np.float32).reshape(8, 16) / 7,
                    NamedSharding(MESH, P("d", None)))
WS = jax.device_put(np.linspace(-1, 1, 16 * 16, dtype=np.float32).reshape(16, 16),
                    NamedSharding(MESH, P(None, "m")))
Z = np.zeros((8, 16), np.float32)

CASES = {
    "cond": lambda m: m.lax.cond(True, lambda: XS * 2, lambda: XS),
    "switch": lambda m: m.lax.switch(1, [lambda: XS * 2, lambda: XS @ WS]),
    "while": lambda m: m.lax.while_loop(lambda c: c[0] < 2, lambda c: (c[0] + 1, c[1] + XS),
                                        (0, Z))[1],
    "fori": lambda m: m.lax.fori_loop(0, 3, lambda i, c: c @ WS * 0.5 + XS, Z),
    "scan": lambda m: m.lax.scan(lambda c, w: (c + XS * w, c.sum()), Z,
                                 np.arange(3, dtype=np.float32)),
    # the same array in a region nested in another (captured through both)
    "cond in while": lambda m: m.lax.while_loop(
        lambda c: c[0] < 3, lambda c: (c[0] + 1, m.lax.cond(c[0] % 2 == 0, lambda: c[1] + XS,
                                                            lambda: c[1] @ WS)), (0, Z))[1],
    "jvp": lambda m: m.jvp(lambda p: XS * p + WS[:8], (2.0,), (1.0,)),
    "vmap": lambda m: m.vmap(lambda p: XS * p)(np.ones(3, np.float32)),
    "grad": lambda m: m.grad(lambda w: ((XS @ w) ** 2).sum())(np.eye(16, dtype=np.float32)),
    "checkpoint": lambda m: m.checkpoint(lambda p: m.numpy.sin(XS * p))(1.5),
}


@pytest.mark.parametrize("name", list(CASES))
def test_closed_over_sharded_arrays_are_operands_as_in_jax(name):
    want = CASES[name](jax)
    got = CASES[name](shardc)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-6, atol=1e-5)
        assert g.sharding.is_equivalent_to(w.sharding, w.ndim), (g.sharding, w.sharding)


def test_a_closed_over_array_is_an_input_not_a_constant():
    from shardc.api.jit import internal_jit
    t = internal_jit(lambda p: XS * p, "f").trace(2.0)
    assert "constant" not in t.ir and "f32[8,16] [{d}, {}]" in t.ir
    # a user's jit keeps jax.jit's behaviour: a closed-over array is a constant
    assert "constant" in shardc.jit(lambda p: XS * p).trace(2.0).ir


def test_arrays_on_two_meshes_keep_the_first_and_fold_the_other():
    ys = jax.device_put(np.ones((8, 16), np.float32), NamedSharding(MESH2, P("a")))
    got = shardc.lax.cond(True, lambda: XS + ys, lambda: XS)
    np.testing.assert_allclose(np.asarray(got), np.asarray(XS) + 1)
    assert got.sharding.mesh == MESH


def test_an_eager_transform_over_a_closure_compiles_once():
    from shardc.runtime import backend
    calls = []
    orig = backend.compile

    def counting(*a, **k):
        calls.append(1)
        return orig(*a, **k)
    g = shardc.grad(lambda a: shardc.numpy.tanh(a * XS + 0.5).sum())
    a = np.ones((8, 16), np.float32)
    try:
        backend.compile = counting
        outs = [g(a) for _ in range(3)]
    finally:
        backend.compile = orig
    assert len(calls) == 1
    want = jax.grad(lambda a: jax.numpy.tanh(a * XS + 0.5).sum())(a)
    for o in outs:
        np.testing.assert_allclose(np.asarray(o), np.asarray(want), rtol=1e-6)


def _global_reads(M):
    """Each eager transform of a function reading the global SCALE, called before and
    after SCALE changes (one transformed function object, called twice)."""
    f = lambda x: x * SCALE[0]                                        # noqa: E731
    fs = lambda x: (f(x) ** 2).sum()                                  # noqa: E731
    mesh = jax.make_mesh((8,), ("i",), axis_types=(jax.sharding.AxisType.Auto,))
    return {
        "grad": M.grad(fs),
        "value_and_grad": lambda x: M.value_and_grad(fs)(x)[1],
        "vjp": lambda x: M.vjp(f, x)[1](x)[0],
        "jvp": lambda x: M.jvp(f, (x,), (x,))[1],
        "linearize": lambda x: M.linearize(f, x)[1](x),
        "jacfwd": M.jacfwd(fs),
        "jacrev": M.jacrev(fs),
        "hessian": lambda x: M.hessian(fs)(x[:2]),
        "vmap": M.vmap(f),
        "shard_map": M.shard_map(f, mesh=mesh, in_specs=P("i"), out_specs=P("i")),
        "while": lambda x: M.lax.fori_loop(0, 2, lambda i, c: f(c), x),
        "scan": lambda x: M.lax.scan(lambda c, _: (f(c), None), x, None, length=2)[0],
    }


SCALE = [1.0]


@pytest.mark.parametrize("name", sorted(_global_reads(jax)))
def test_an_eager_transform_reads_a_changed_global(name):
    """jax's eager transforms run the function on each call; shardc's cached the first
    call's trace, so a transformed function kept using a global's old value."""
    x = np.arange(1, 9, dtype=np.float32)
    got_fn, want_fn = _global_reads(shardc)[name], _global_reads(jax)[name]
    try:
        for s in (1.0, 3.0):
            SCALE[0] = s
            np.testing.assert_allclose(np.asarray(got_fn(x)), np.asarray(want_fn(x)),
                                       rtol=1e-6, err_msg=f"SCALE={s}")
    finally:
        SCALE[0] = 1.0


def test_programs_of_equal_text_keep_their_own_weak_types():
    """Executables are shared by StableHLO text, where weak types do not show: each
    call's results must keep their own (review: the first call's leaked into later)."""
    g = shardc.grad(jax.numpy.sin)
    h = shardc.vmap(lambda x: x * 2)
    for arg in (np.float32(1.0), 1.0):
        assert g(arg).weak_type == jax.grad(jax.numpy.sin)(arg).weak_type
    w = jax.lax.broadcast(1.0, (3,))
    for arg in (w, np.ones(3, np.float32)):
        assert h(arg).weak_type == jax.vmap(lambda x: x * 2)(arg).weak_type
