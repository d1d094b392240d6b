"""einsum's dtypes against jax.jit: every step in the operands' result type (or
preferred_element_type), indices summed in one operand included (they were summed in
that operand's own dtype: bool counts as int32, bf16 accumulating in bf16), repeated
indices (diagonals) and numpy's sublist form."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import check_outputs, compare, place, sample

SUBSCRIPTS = {
    "ij,k->i": ((3, 4), (5,)),
    "a,ae->a": ((4,), (4, 300)),
    "ij,jk->ik": ((3, 4), (4, 2)),
    "bij,bjk->bik": ((2, 3, 4), (2, 4, 2)),
    "ij->": ((3, 4),),
    "ij,ij->i": ((3, 4), (3, 4)),
    "i,j,k->ijk": ((2,), (3,), (4,)),
    "ijk,k->": ((2, 3, 4), (4,)),
    "ii": ((4, 4),),                    # a trace
    "ii,ij->j": ((4, 4), (4, 5)),       # a diagonal that meets another operand
}
DTYPES = [np.bool_, np.int32, jnp.bfloat16, np.float16, np.float32]


def _data(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.random(shape) > 0.4
    if dtype == np.int32:
        return rng.integers(-3, 4, shape).astype(np.int32)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("b", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("a", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("sub", sample(sorted(SUBSCRIPTS), 2))
def test_einsum_dtypes(sub, a, b, mesh2x4):
    shapes = SUBSCRIPTS[sub]
    dts = [a, b, a][:len(shapes)]
    arrays = [_data(s, d, i) for i, (s, d) in enumerate(zip(shapes, dts))]
    compare(lambda m, *xs: m.einsum(sub, *xs), arrays, [P()] * len(arrays), mesh2x4,
            numpy_ref=False)


@pytest.mark.parametrize("pref", [np.float32, jnp.bfloat16, np.int32], ids=str)
def test_einsum_preferred_element_type(pref, mesh2x4):
    x, y = _data((4, 4), jnp.bfloat16, 0), _data((4, 8), jnp.bfloat16, 1)
    if pref == np.int32:
        x, y = _data((4, 4), np.int32, 0), _data((4, 8), np.int32, 1)
    compare(lambda m, x, y: m.einsum("ij,jk->ik", x, y, preferred_element_type=pref),
            [x, y], [P("x"), P(None, "y")], mesh2x4, numpy_ref=False)


def test_einsum_weak_scalar(mesh2x4):
    compare(lambda m, x: m.einsum("ij,->ij", x, 2.0), [_data((3, 4), jnp.bfloat16, 0)],
            [P()], mesh2x4, numpy_ref=False)


def test_grad_of_a_bf16_dot_accumulating_in_f32(mesh2x4):
    """A bf16 matmul with preferred_element_type=f32 (mixed precision): its gradient's dots
    take the f32 cotangent as it is (the bf16 operand upcast), each result rounded to
    bf16 after, as jax's transpose; shardc rounded the cotangent to bf16 first (one bf16
    ulp off)."""
    import jax

    import shardc

    x, w = _data((16, 64), jnp.bfloat16, 0), _data((64, 32), jnp.bfloat16, 1)
    x = jax.device_put(x, jax.NamedSharding(mesh2x4, P("x")))
    w = jax.device_put(w, jax.NamedSharding(mesh2x4, P(None, "y")))

    def loss(m, lax):
        def f(x, w):
            y = lax.dot_general(x, w, (((1,), (0,)), ((), ())),
                                preferred_element_type=np.float32)
            return m.sum(m.sin(y) * 1.37)
        return f
    ours = shardc.jit(shardc.grad(loss(shardc.numpy, shardc.lax), argnums=(0, 1)))(x, w)
    ref = jax.jit(jax.grad(loss(jnp, jax.lax), argnums=(0, 1)))(x, w)
    for a, b in zip(ours, ref):
        assert a.dtype == b.dtype == jnp.bfloat16
        np.testing.assert_array_equal(np.asarray(a, np.float32), np.asarray(b, np.float32))


@pytest.mark.parametrize("name", ["matmul", "dot", "tensordot", "inner", "vdot"])
def test_products_accumulate_into_preferred_element_type(name, mesh2x4):
    """bf16 products with preferred_element_type=f32 accumulate into f32, bit for bit as
    jax's (they multiplied in bf16 and converted the product after: a few 1e-6 off)."""
    import jax

    import shardc
    x = jax.device_put(_data((16, 64), jnp.bfloat16, 0), jax.NamedSharding(mesh2x4, P("x")))
    y = jax.device_put(_data((64, 32), jnp.bfloat16, 1), jax.NamedSharding(mesh2x4, P()))
    args = {"tensordot": (1,)}.get(name, ())

    def f(m):
        def g(x, y):
            a, b = (x[0], y[:, 0]) if name == "vdot" else (x, y.T if name == "inner" else y)
            return getattr(m, name)(a, b, *args, preferred_element_type=np.float32)
        return g
    ours, ref = shardc.jit(f(shardc.numpy))(x, y), jax.jit(f(jnp))(x, y)
    assert ours.dtype == ref.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(ref))


def _precisions(text):
    import re
    return re.findall(r"precision = \[(\w+), (\w+)\]", text)


def test_precision_reaches_the_lowering(mesh2x4):
    """precision= (jax.lax.Precision, its names, a pair) and jax_default_matmul_precision
    lower to the dots' precision_config as jax's, the gradient's dots included: it
    decides TF32 on GPUs and the bf16 passes on TPUs (shardc dropped it)."""
    import jax

    import shardc

    x = jax.device_put(_data((16, 64), np.float32, 0), jax.NamedSharding(mesh2x4, P("x")))
    w = jax.device_put(_data((64, 32), np.float32, 1), jax.NamedSharding(mesh2x4, P()))
    H = jax.lax.Precision.HIGHEST
    cases = [lambda m, lax: lambda x, w: m.matmul(x, w, precision=H),
             lambda m, lax: lambda x, w: m.einsum("ij,jk->ik", x, w, precision="highest"),
             lambda m, lax: lambda x, w: lax.dot_general(
                 x, w, (((1,), (0,)), ((), ())), precision=(jax.lax.Precision.HIGH, H)),
             lambda m, lax: jax.grad(lambda x, w: m.sum(m.dot(x, w, precision="float32")))
             if m is jnp else shardc.grad(lambda x, w: m.sum(m.dot(x, w, precision="float32")))]
    for case in cases:
        ours = shardc.jit(case(shardc.numpy, shardc.lax)).lower(x, w).as_text()
        ref = jax.jit(case(jnp, jax.lax)).lower(x, w).as_text()
        assert _precisions(ours) == _precisions(ref) != []
        assert all(p != ("DEFAULT", "DEFAULT") for p in _precisions(ours))
    # jax code under shardc.jit keeps its precision; the config sets the default
    jaxcode = case(jnp, jax.lax)
    assert _precisions(shardc.jit(jaxcode).lower(x, w).as_text()) == _precisions(ref)
    with jax.default_matmul_precision("tensorfloat32"):
        ours = shardc.jit(lambda x, w: shardc.numpy.matmul(x, w)).lower(x, w).as_text()
        ref = jax.jit(lambda x, w: jnp.matmul(x, w)).lower(x, w).as_text()
    assert _precisions(ours) == _precisions(ref) == [("HIGH", "HIGH")]


def test_a_dot_algorithm_preset_as_jax():
    """einsum's and matmul's dots carry the preset (tests/test_dot_algorithms.py has the
    presets themselves)."""
    preset = jax.lax.DotAlgorithmPreset.BF16_BF16_F32
    x = _data((4, 6), np.float32, 0)
    for f in (lambda m: lambda x: m.matmul(x, x.T, precision=preset),
              lambda m: lambda x: m.einsum("ij,kj->ik", x, x, precision=preset)):
        ref = jax.jit(f(jnp))(x)
        np.testing.assert_array_equal(shardc.jit(f(snp))(x), ref)
        np.testing.assert_array_equal(shardc.jit(f(jnp))(x), ref)


@pytest.mark.parametrize("args", [
    ("ii->i", (4, 4)), ("abba->a", (4, 3, 3, 4)), ("abbc->ac", (4, 4, 4, 3)),
    ("...ii->...i", (2, 3, 4, 4)), ("iij->ij", (4, 4, 5)), ("aba->ab", (4, 3, 4)),
    ("ij,jj,jk->ik", (2, 4), (4, 4), (4, 2))], ids=lambda a: a[0])
def test_einsum_repeated_indices(args, mesh2x4):
    """Diagonals as jax's einsum takes them (the operand masked to the diagonal, then
    summed), on sharded operands: values, shardings and gradients' values."""
    sub, *shapes = args
    arrays = [_data(s, np.float32, i) for i, s in enumerate(shapes)]
    specs = [P("x") for _ in shapes]
    compare(lambda m, *xs: m.einsum(sub, *xs), arrays, specs, mesh2x4)
    argnums = tuple(range(len(arrays)))
    ours = shardc.jit(shardc.grad(lambda *xs: (snp.einsum(sub, *xs) ** 2).sum(), argnums))
    ref = jax.jit(jax.grad(lambda *xs: (jnp.einsum(sub, *xs) ** 2).sum(), argnums))
    # values only: shardc shards a gradient as its primal, where jax replicates these
    check_outputs(ours(*place(mesh2x4, arrays, specs)), ref(*place(mesh2x4, arrays, specs)),
                  mesh2x4, check_sharding=False)


SUBLISTS = {    # numpy's other form: each operand followed by its indices' ints
    "matmul": lambda m, x, y: m.einsum(x, [0, 1], y, [1, 2], [0, 2]),
    "implicit_out": lambda m, x, y: m.einsum(x, [1, 0], y, [0, 2]),
    "trace": lambda m, x, y: m.einsum(x, [0, 0]),
    "diagonal": lambda m, x, y: m.einsum(x, [0, 0], [0]),
    "ellipsis": lambda m, x, y: m.einsum(y, [Ellipsis, 1], [1, Ellipsis]),
    "numpy_ints": lambda m, x, y: m.einsum(x, [np.int64(0), 1], [1]),
}


@pytest.mark.parametrize("name", sorted(SUBLISTS))
def test_einsum_sublists(name, mesh2x4):
    x, y = _data((4, 4), np.float32, 0), _data((4, 8), np.float32, 1)
    compare(SUBLISTS[name], [x, y], [P("x"), P(None, "y")], mesh2x4)


def test_einsum_bad_sublist():
    with pytest.raises(shardc.ShardcError, match="sublist index must be an int"):
        snp.einsum(np.ones((2, 2)), [0, "a"])
