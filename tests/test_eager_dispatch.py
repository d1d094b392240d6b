"""Eager ops dispatch in C++ (one jaxlib dispatcher per primitive and params): a repeated
call never re-enters shardc's Python build path, and whatever decides a result's dtype,
weak type, sharding or committed-ness is part of the key."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp
from shardc.ir import dtypes
from shardc.ir.program import Aval, Lit
from shardc.ops import elementwise as ew
from shardc.runtime import backend, eager


@pytest.fixture
def counted(monkeypatch):
    """How often a call reached shardc's Python path (`_run`) and placed an input."""
    n = {"run": 0, "place": 0}
    run, place = eager._run, backend.place

    def counting_run(*a):
        n["run"] += 1
        return run(*a)

    def counting_place(*a):
        n["place"] += 1
        return place(*a)
    monkeypatch.setattr(eager, "_run", counting_run)
    monkeypatch.setattr(backend, "place", counting_place)
    return n


def test_repeated_calls_stay_in_cpp(mesh2x4, counted):
    x = jax.device_put(np.linspace(-2, 2, 8 * 40, dtype=np.float32).reshape(8, 40),
                       NamedSharding(mesh2x4, P("x", "y")))
    y = x + 1
    for f, g in [(lambda: snp.sin(x), lambda: jnp.sin(x)),
                 (lambda: snp.add(x, y), lambda: jnp.add(x, y)),
                 (lambda: snp.sum(x, axis=1), lambda: jnp.sum(x, axis=1)),
                 (lambda: snp.matmul(x, y.T), lambda: jnp.matmul(x, y.T))]:
        first = f()
        runs = counted["run"]
        for _ in range(3):
            out = f()
        assert counted["run"] == runs, "a cached signature came back to Python"
        want = g()
        for o in (first, out):
            np.testing.assert_allclose(np.asarray(o), np.asarray(want), rtol=1e-5, atol=1e-5)
            assert o.sharding.is_equivalent_to(want.sharding, o.ndim)
            assert o.committed == want.committed and o.dtype == want.dtype


def test_literals_are_placed_once_and_bit_for_bit(counted):
    x = jnp.arange(1.0, 7.0, dtype=jnp.float32)
    snp.multiply(x, 3.0)
    placed = counted["place"]
    for _ in range(5):
        out = snp.multiply(x, 3.0)
    assert counted["place"] == placed
    np.testing.assert_array_equal(out, x * 3.0)
    # a Python scalar bound directly (as the lax-level wrappers may) is a weak literal too
    first = ew.mul_p.bind(x, 3.0)
    placed = counted["place"]
    again = ew.mul_p.bind(x, 3.0)
    assert counted["place"] == placed and not again.weak_type
    np.testing.assert_array_equal(first, x * 3.0)
    both = ew.add_p.bind(2.0, 3.0)
    assert both.weak_type and both.dtype == np.float32 and float(both) == 5.0
    # 0.0 and -0.0 are equal as keys but not as values
    assert np.all(np.signbit(snp.multiply(x, 0.0)) == np.signbit(x * 0.0))
    assert np.all(np.signbit(snp.multiply(x, -0.0)) == np.signbit(x * -0.0))
    assert np.all(np.signbit(snp.multiply(x, 0.0)) == np.signbit(x * 0.0))


@pytest.mark.parametrize("first_weak", [True, False])
def test_literal_weak_type_is_part_of_the_key(first_weak):
    """A weak and a strong f32 literal travel as the same rank-0 NumPy array; their
    results still differ in weak type (jax: 2.0 + 3.0 is weak, f32(2) + f32(3) not)."""
    def add(weak):
        a = Aval((), dtypes.float32, weak)
        return ew.add_p.bind(Lit(2.0, a), Lit(3.0, a))
    for weak in (first_weak, not first_weak, first_weak):
        out = add(weak)
        want = jnp.add(2.0, 3.0) if weak else jnp.add(np.float32(2), np.float32(3))
        assert (out.weak_type, out.dtype, float(out)) == (want.weak_type, want.dtype, 5.0)


@pytest.mark.parametrize("committed_first", [True, False])
def test_committed_is_part_of_the_key(committed_first):
    a = np.arange(6, dtype=np.float32)
    u, c = jnp.asarray(a), jax.device_put(a, jax.devices()[0])
    order = [c, u, c] if committed_first else [u, c, u]
    for v in order:
        out, want = snp.cos(v), jnp.cos(v)
        assert out.committed == want.committed == (v is c)
        assert out.devices() == want.devices()


def test_set_mesh_context_is_part_of_the_key(mesh2x4):
    """Inside `set_mesh` an eager op runs on the mesh; outside, on one device."""
    u = jnp.arange(8.0, dtype=jnp.float32)
    outside = snp.tanh(u)
    with shardc.set_mesh(mesh2x4):
        inside = snp.tanh(u)
    again = snp.tanh(u)
    assert isinstance(outside.sharding, jax.sharding.SingleDeviceSharding)
    assert isinstance(again.sharding, jax.sharding.SingleDeviceSharding)
    assert isinstance(inside.sharding, NamedSharding) and inside.sharding.mesh == mesh2x4
    for o in (outside, inside, again):
        np.testing.assert_allclose(o, np.tanh(np.arange(8.0)), rtol=1e-6)


def test_numpy_inputs_follow_x64():
    a = np.linspace(0, 1, 5)          # float64
    assert snp.exp(a).dtype == jnp.exp(a).dtype == np.float32
    prev = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        assert snp.exp(a).dtype == jnp.exp(a).dtype == np.float64
    finally:
        jax.config.update("jax_enable_x64", prev)
    assert snp.exp(a).dtype == np.float32


def test_unsupported_numpy_dtype_raises_shardcs_error():
    with pytest.raises(shardc.ShardcError) as e:
        snp.sin(np.array(["a"]))
    assert "test_eager_dispatch.py" in str(e.value)


def test_errors_from_a_new_signature_name_the_users_line(mesh2x4, mesh8):
    """An error found while building a signature's program (here: two meshes) comes back
    through jaxlib's dispatcher and still names the line that called the op."""
    a = jax.device_put(np.ones((8, 8), np.float32), NamedSharding(mesh2x4, P("x")))
    b = jax.device_put(np.ones((8, 8), np.float32), NamedSharding(mesh8, P("x")))
    with pytest.raises(shardc.ShardcError) as e:
        snp.add(a, b)                       # the line the error names
    assert "different meshes" in str(e.value)
    line = next(i for i, t in enumerate(open(__file__), 1) if "# the line the error" in t)
    assert (e.value.loc.file, e.value.loc.line) == (__file__, line)


def test_aval_of_a_64_bit_array_follows_x64():
    """aval_of's cache (by jax's interned aval) keeps no dtype that x64 decides."""
    from shardc.trace import core
    prev = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        wide = jnp.ones(3, jnp.float64)
        jax.config.update("jax_enable_x64", False)
        assert core.aval_of(wide).dtype == np.float32
        jax.config.update("jax_enable_x64", True)
        assert core.aval_of(wide).dtype == np.float64
    finally:
        jax.config.update("jax_enable_x64", prev)
