"""shardc.numpy's poly, polyfit and roots vs jax.numpy's (jit and eager)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shardc
import shardc.numpy as snp
from helpers import Case, compare_cases

RNG = np.random.default_rng(0)
X = np.linspace(-1, 1, 12).astype(np.float32)
Y = (3 * X ** 2 - X + 0.5 + 0.01 * RNG.standard_normal(12)).astype(np.float32)
W = RNG.uniform(0.5, 1.5, 12).astype(np.float32)

CASES = [
    ("polyfit", lambda m, x, y: m.polyfit(x, y, 2), [X, Y]),
    ("polyfit_2d_full", lambda m, x, y: m.polyfit(x, m.stack([y, 2 * y], 1), 3, full=True),
     [X, Y]),
    ("polyfit_w_cov", lambda m, x, y, w: m.polyfit(x, y, 2, w=w, cov=True), [X, Y, W]),
    ("polyfit_cov_unscaled", lambda m, x, y: m.polyfit(x, y, 1, cov="unscaled"), [X, Y]),
    ("poly", lambda m, z: m.poly(z), [np.array([1.0, 2.0, -3.0], np.float32)]),
    ("poly_matrix", lambda m, a: m.poly(a), [RNG.standard_normal((3, 3)).astype(np.float32)]),
    ("roots_keep_zeros", lambda m, p: m.roots(p, strip_zeros=False),
     [np.array([0.0, 1.0, -6.0, 11.0, -6.0], np.float32)]),
    ("roots_no_zeros", lambda m, p: m.roots(p, strip_zeros=False),
     [np.array([2.0, -3.0, 1.0], np.float32)]),
]


def test_poly_functions_jit():
    compare_cases([Case(n, f, a, numpy_ref=False) for n, f, a in CASES])


def test_roots_eager_strips_leading_zeros():
    p = np.array([0.0, 0.0, 1.0, -3.0, 2.0], np.float32)
    got, want = snp.roots(p), jnp.roots(p)
    assert got.shape == want.shape == (2,) and got.dtype == want.dtype
    np.testing.assert_allclose(np.sort_complex(np.asarray(got)),
                               np.sort_complex(np.asarray(want)), rtol=1e-5, atol=1e-5)


def test_roots_strip_zeros_in_jit_says_what_to_do():
    with pytest.raises(shardc.ShardcError, match="strip_zeros=False") as e:
        shardc.jit(snp.roots)(np.ones(3, np.float32))
    assert e.value.loc.file.endswith("test_linalg_poly.py")
    with pytest.raises(jax.errors.ConcretizationTypeError):
        jax.jit(jnp.roots)(np.ones(3, np.float32))
