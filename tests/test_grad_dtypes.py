"""grad, value_and_grad, jacfwd, jacrev and hessian over complex and integer inputs, as
jax's: a real output of complex inputs (jax's convention: the conjugate of the
gradient), holomorphic=True, allow_int=True (float0 gradients, zero Jacobian blocks),
and jax's dtype errors."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp

RNG = np.random.default_rng(5)
Z = (RNG.normal(size=8) + 1j * RNG.normal(size=8)).astype(np.complex64)
W = (RNG.normal(size=(8, 8)) + 1j * RNG.normal(size=(8, 8))).astype(np.complex64)
R = RNG.normal(size=8).astype(np.float32)
N = np.arange(1, 9, dtype=np.int32)

REAL_OF_COMPLEX = {
    "abs2": lambda m: lambda z: m.sum(m.abs(z) ** 2),
    "matvec": lambda m: lambda z: m.sum(m.abs(W @ z)),
    "fft": lambda m: lambda z: m.sum(m.abs(m.fft.fft(z)) ** 2),
    "angle_log": lambda m: lambda z: m.sum(m.angle(z) + m.log(z).imag),
    "conj_div": lambda m: lambda z: m.sum((m.conj(z) / (z + 3)).real),
    "where_pow": lambda m: lambda z: m.sum(m.where(z.real > 0, z ** 3, 2 * z).imag),
    "norm": lambda m: lambda z: m.linalg.norm(z),
}


def _same(ours, ref):
    lo, lr = jax.tree.leaves(ours), jax.tree.leaves(ref)
    assert len(lo) == len(lr)
    for o, r in zip(lo, lr):
        assert np.asarray(o).dtype == np.asarray(r).dtype and np.shape(o) == np.shape(r)
        if np.asarray(r).dtype != jax.dtypes.float0:
            np.testing.assert_allclose(np.asarray(o), np.asarray(r), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("name", sorted(REAL_OF_COMPLEX))
def test_grad_of_real_function_of_complex_inputs(mesh8, name):
    f = REAL_OF_COMPLEX[name]
    z = jax.device_put(Z, NamedSharding(mesh8, P("x")))
    _same(shardc.jit(shardc.grad(f(snp)))(z), jax.jit(jax.grad(f(jnp)))(z))
    _same(shardc.jit(shardc.jacrev(f(snp)))(z), jax.jacrev(f(jnp))(z))


def test_grad_allow_int():
    def loss(m):
        return lambda p, k: m.sum(p["w"] * p["n"] * k)
    params = {"w": R, "n": N}
    ours = shardc.grad(loss(snp), argnums=(0, 1), allow_int=True)(params, 3)
    ref = jax.grad(loss(jnp), argnums=(0, 1), allow_int=True)(params, 3)
    _same(ours, ref)
    assert ours[0]["n"].dtype == jax.dtypes.float0 and ours[0]["n"].shape == (8,)
    # under jit too: a float0 result is no output of the program, rebuilt on return
    ours = shardc.jit(shardc.value_and_grad(loss(snp), allow_int=True))(params, 3)
    _same(ours, jax.jit(jax.value_and_grad(loss(jnp), allow_int=True))(params, 3))


def test_jacobians_holomorphic_and_int():
    def f(m):
        return lambda z: z * z * m.sin(z)
    _same(shardc.jacfwd(f(snp), holomorphic=True)(Z), jax.jacfwd(f(jnp), holomorphic=True)(Z))
    _same(shardc.jacrev(f(snp), holomorphic=True)(Z), jax.jacrev(f(jnp), holomorphic=True)(Z))
    _same(shardc.hessian(lambda z: snp.sum(z ** 3), holomorphic=True)(Z),
          jax.hessian(lambda z: jnp.sum(z ** 3), holomorphic=True)(Z))
    # integer inputs with allow_int: zero blocks in the input's dtype, as jax's
    _same(shardc.jit(shardc.jacrev(lambda p: p["w"] * p["n"], allow_int=True))(
        {"w": R, "n": N}), jax.jacrev(lambda p: p["w"] * p["n"], allow_int=True)(
        {"w": R, "n": N}))


ERRORS = [
    ("grad int input", lambda J, m: J.grad(lambda x: m.sum(x * 2.0))(N), "inexact"),
    ("grad int output", lambda J, m: J.grad(lambda x: m.sum(x).astype(np.int32))(1.0),
     "integer outputs"),
    ("grad complex output", lambda J, m: J.grad(lambda x: m.sum(x * (1 + 1j)))(1.0),
     "pass holomorphic=True"),
    ("grad holomorphic real input", lambda J, m: J.grad(lambda x: x, holomorphic=True)(1.0),
     "complex dtype"),
    ("grad reduce_axes", lambda J, m: J.grad(lambda x: x, reduce_axes=("x",))(1.0),
     "reduce_axes"),
    ("jacfwd complex input", lambda J, m: J.jacfwd(lambda z: z)(Z), "real-valued inputs"),
    ("jacrev int input", lambda J, m: J.jacrev(lambda x: x * 1.0)(N), "allow_int"),
    ("jacrev complex output", lambda J, m: J.jacrev(lambda z: z * z)(Z), "real-valued outputs"),
    ("jacfwd holomorphic real output",
     lambda J, m: J.jacfwd(lambda z: m.abs(z), holomorphic=True)(Z), "outputs with complex"),
]


@pytest.mark.parametrize("name,call,match", ERRORS, ids=[e[0] for e in ERRORS])
def test_dtype_errors_as_jax(name, call, match):
    with pytest.raises((TypeError, NotImplementedError), match=match):
        call(jax, jnp)
    with pytest.raises((TypeError, NotImplementedError), match=match) as err:
        call(shardc, snp)
    assert isinstance(err.value, shardc.ShardcError)


WEAK = {    # the gradient of a Python float is weak if jax's is (its weak seed, and the
            # transpose of a weak-to-strong conversion giving back a weak cotangent)
    "square": lambda m: lambda x: x * x,
    "sin": lambda m: lambda x: m.sin(x),
    "promoted": lambda m: lambda x: (x * np.ones(3, np.float32)).sum(),
    "both": lambda m: lambda x: x * x + (x * np.ones(3, np.float32)).sum(),
    "bf16": lambda m: lambda x: (x * m.ones(3, m.bfloat16)).sum().astype(m.float32),
    "stack": lambda m: lambda x: m.sum(m.stack([x, 2 * x])),
}


@pytest.mark.parametrize("name", WEAK)
@pytest.mark.parametrize("x", [1.5, np.float32(1.5)], ids=["python", "f32"])
def test_weak_type_of_gradients_is_jaxs(name, x):
    want = jax.grad(WEAK[name](jnp))(x)
    for got in (shardc.grad(WEAK[name](snp))(x), shardc.jit(shardc.grad(WEAK[name](snp)))(x)):
        assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type)
        np.testing.assert_allclose(got, want, rtol=1e-6)
    (v, g), (jv, jg) = shardc.value_and_grad(WEAK[name](snp))(x), \
        jax.value_and_grad(WEAK[name](jnp))(x)
    assert (v.weak_type, g.weak_type) == (jv.weak_type, jg.weak_type)
