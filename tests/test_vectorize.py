"""shardc.numpy.vectorize against jnp.vectorize (nested vmaps over the loop dims)."""
import jax.numpy as jnp
import numpy as np
import pytest

import shardc
import shardc.numpy as snp
from tests.helpers import check_outputs

R = np.random.RandomState(0)


@pytest.mark.parametrize("sig,fn,shapes", [
    (None, lambda m: lambda a, b: m.sin(a) * b, [(3, 1, 4), (5, 1)]),
    ("(n),(n)->()", lambda m: lambda a, b: m.dot(a, b), [(2, 3, 4), (3, 4)]),
    ("(m,n)->(n),(m)", lambda m: lambda a: (a.sum(0), a.max(1)), [(5, 2, 3)]),
    ("(n)->(n)", lambda m: lambda a: m.cumsum(a) * a[0], [(1, 6)]),
])
def test_matches_jax(sig, fn, shapes):
    args = [R.randn(*s).astype(np.float32) for s in shapes]
    got = snp.vectorize(fn(snp), signature=sig)(*args)
    want = jnp.vectorize(fn(jnp), signature=sig)(*args)
    check_outputs(got, want)
    got = shardc.jit(snp.vectorize(fn(snp), signature=sig))(*args)
    check_outputs(got, want)


def test_excluded_and_errors():
    f = snp.vectorize(lambda a, k: a[:k].sum(), excluded={1}, signature="(n)->()")
    g = jnp.vectorize(lambda a, k: a[:k].sum(), excluded={1}, signature="(n)->()")
    x = R.randn(4, 5).astype(np.float32)
    check_outputs(f(x, 3), g(x, 3))
    with pytest.raises(shardc.ShardcError, match="core dim 'n' has sizes"):
        snp.vectorize(lambda a, b: a @ b, signature="(n),(n)->()")(x, x[:, :3])
    with pytest.raises(shardc.ShardcError, match="not a valid gufunc signature"):
        snp.vectorize(lambda a: a, signature="n->n")(x)
