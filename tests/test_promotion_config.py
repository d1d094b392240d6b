"""jax.numpy's promotion switches hold for shardc.numpy, as jax's: dtype promotion
'strict' (only weak Python scalars promote) and rank promotion 'warn' / 'raise', under
jit (where they are part of the cache key) and eagerly."""
import itertools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shardc
import shardc.numpy as snp

DTYPES = [np.bool_, np.int8, np.uint8, np.int32, np.uint32, jnp.bfloat16, np.float16,
          np.float32, np.complex64]
SCALARS = [True, 2, 2.5, 1j]


def _outcome(fn):
    try:
        out = fn()
    except Exception as e:           # noqa: BLE001 - the kind of failure is compared
        return ("error", isinstance(e, ValueError), "strict" in str(e))
    return ("ok", str(out.dtype), out.weak_type if hasattr(out, "weak_type") else None)


@pytest.mark.parametrize("mode", ["strict"])     # 'standard': tests/test_dtypes.py
def test_dtype_promotion_matches_jax(mode):
    vals = [np.ones(2, d) for d in DTYPES] + SCALARS
    with jax.numpy_dtype_promotion(mode):
        for a, b in itertools.product(vals, repeat=2):
            if not (isinstance(a, np.ndarray) or isinstance(b, np.ndarray)):
                continue
            want = _outcome(lambda: jnp.add(a, b))
            got = _outcome(lambda: snp.add(a, b))
            assert got == want, (mode, a, b)
            traced = _outcome(lambda: shardc.eval_shape(lambda x, y: x + y, a, b))
            assert traced[:2] == want[:2], (mode, a, b)


def test_strict_promotion_is_part_of_the_jit_key():
    f = shardc.jit(lambda x, y: x * y)
    x, y = np.ones(3, np.int32), np.ones(3, np.float32)
    assert f(x, y).dtype == np.float32
    with jax.numpy_dtype_promotion("strict"):
        with pytest.raises(ValueError, match="jax_numpy_dtype_promotion=strict"):
            f(x, y)
        assert f(y, 2.0).dtype == np.float32           # weak scalars still promote
    assert f(x, y).dtype == np.float32


def test_rank_promotion_warn_and_raise():
    a, b = np.ones((2, 3), np.float32), np.ones(3, np.float32)
    f = shardc.jit(lambda x, y: snp.maximum(x, y))
    f(a, b)                                            # 'allow', cached
    with jax.numpy_rank_promotion("raise"):
        with pytest.raises(ValueError) as je:
            jnp.maximum(a, b)
        with pytest.raises(ValueError) as se:
            f(a, b)
        assert str(se.value).split("\n")[0].endswith(str(je.value).split("\n")[0])
        assert "test_promotion_config.py" in str(se.value)     # the user's line
        with pytest.raises(ValueError, match="jax_numpy_rank_promotion='raise'"):
            snp.add(a, b)
        f(a, np.float32(2))                            # scalars are not rank promotion
        f(a, a + 1)
    with jax.numpy_rank_promotion("warn"):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            snp.add(a, b)
        assert any("automatic rank promotion for add on shapes (2, 3) (3,)" in str(w.message)
                   for w in got)


def test_strict_weak_values_promote_among_themselves_and_library_code_complies():
    with jax.numpy_dtype_promotion("strict"):
        for fn in (lambda m: m.asarray(1.0) / 4, lambda m: m.asarray(2) + 1.5,
                   lambda m: m.linspace(0, 1, 5), lambda m: m.mean(m.arange(6)),
                   lambda m: m.var(m.arange(6).reshape(2, 3), axis=0)):
            want = jax.jit(lambda: fn(jnp))()
            got = shardc.jit(lambda: fn(snp))()
            assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type)
            np.testing.assert_allclose(got, want, rtol=1e-6)
