"""einsum's dtypes against jax.jit: every step in the operands' result type (or
preferred_element_type), indices summed in one operand included (they were summed in
that operand's own dtype: bool counts as int32, bf16 accumulating in bf16)."""
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from helpers import compare

SUBSCRIPTS = {
    "ij,k->i": ((3, 4), (5,)),
    "a,ae->a": ((4,), (4, 300)),
    "ij,jk->ik": ((3, 4), (4, 2)),
    "bij,bjk->bik": ((2, 3, 4), (2, 4, 2)),
    "ij->": ((3, 4),),
    "ij,ij->i": ((3, 4), (3, 4)),
    "i,j,k->ijk": ((2,), (3,), (4,)),
    "ijk,k->": ((2, 3, 4), (4,)),
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
@pytest.mark.parametrize("sub", sorted(SUBSCRIPTS))
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
