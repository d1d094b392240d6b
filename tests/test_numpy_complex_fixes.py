"""Silent wrong values of shardc.numpy vs jax.numpy found by a bug hunt (mostly complex
inputs), each checked against jax: eagerly, and under shardc.jit vs jax.jit with the
inputs sharded on the (2, 4) mesh (values, dtypes, weak types, shardings)."""
import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp
import shardc.scipy.special as ssp
from helpers import Case, assert_close, compare_cases

_rng = np.random.default_rng(0)
CX = (_rng.normal(size=(4, 8)) + 1j * _rng.normal(size=(4, 8))).astype(np.complex64)
CX[0, 1] = complex(np.nan, 0)
CX[2, 3] = complex(1, np.nan)
CX[3, 5] = complex(np.inf, -np.inf)
CXN = CX.copy()                    # NaNs only, for the NaN-ignoring reductions
CXN[3, 5] = 1 - 2j
CXF = np.where(np.isfinite(CX), CX, 0.5 - 1j).astype(np.complex64)   # all finite
CXH = (CXF * 2.5).astype(np.complex64)                                 # halves to round
CXH[0, :4] = [0.5 + 1.5j, -0.5 + 2.5j, 1.5 - 0.5j, -2.5 - 3.5j]
# sorted in jax's complex order (real part, then imaginary part; NaNs last)
SORTED = np.array([-1 - 1j, 1 + 1j, 1 + 2j, 2, 2 + 1j, 3 - 1j, 3, 4 + 0.5j], np.complex64)
QUERIES = np.array([[1 + 1.5j, 1 + 3j, 1 + 0j, 2 + 1j], [-1 - 1j, 5, -2, 3 - 0.5j]],
                   np.complex64)
REALS = np.array([[-1e10, -3e38, -1e5, -2.0], [0.5, 1.0, 1e10, 3e38]], np.float32)
INTS = np.array([[0, 3, 1, 8], [2, 2, 5, 7]], np.int32)
S = P("x", "y")

CASES = {   # name: (fn, inputs, specs)
    "rint": (lambda m, a: m.rint(a), [CXH], [S]),
    "nan_to_num": (lambda m, a: m.nan_to_num(a), [CX], [S]),
    "nan_to_num_args": (lambda m, a: m.nan_to_num(a, nan=2.0, posinf=9.0, neginf=-9.0),
                        [CX], [S]),
    "nansum": (lambda m, a: (m.nansum(a), m.nansum(a, axis=1)), [CXN], [S]),
    "nanprod": (lambda m, a: m.nanprod(a, axis=0), [CXN], [S]),
    "nanmean": (lambda m, a: (m.nanmean(a), m.nanmean(a, axis=1, keepdims=True)), [CXN],
                [S]),
    "nanvar": (lambda m, a: (m.nanvar(a), m.nanvar(a, axis=0, ddof=1)), [CXN], [S]),
    "nanstd": (lambda m, a: m.nanstd(a, axis=1), [CXN], [S]),
    "nancumsum": (lambda m, a: m.nancumsum(a, axis=1), [CXN], [S]),
    "nancumprod": (lambda m, a: m.nancumprod(a * 0.5, axis=0), [CXN], [S]),
    "vecdot": (lambda m, a, b: (m.vecdot(a, b), m.vecdot(a, b, axis=0)), [CXF, CXF[::-1]],
               [S, S]),
    # conj(x1) @ x2, as jnp.vecmat and NumPy (shardc did not conjugate)
    "vecmat": (lambda m, a, b: (m.vecmat(a[:, 0], b), m.vecmat(a[0], b.T), m.matvec(b, a[0])),
               [CXF, CXF[::-1]], [S, S]),
    # V S+ U^H b (shardc used transposes without conjugating)
    "lstsq": (lambda m, a: (m.linalg.lstsq(a[:, :3], a[:, 3]),
                            m.linalg.lstsq(a[:3, :5], a[:3, 5:7])), [CXF], [S]),
    "linalg_vecdot": (lambda m, a, b: (m.linalg.vecdot(a, b), m.linalg.vecdot(a, b, axis=0)),
                      [CXF, CXF[::-1]], [S, S]),
    "cov": (lambda m, a: (m.cov(a), m.cov(a, rowvar=False, bias=True)), [CXF], [S]),
    "cov_w": (lambda m, a: m.cov(a, aweights=m.arange(8.0) + 1), [CXF], [S]),
    "corrcoef": (lambda m, a: m.corrcoef(a), [CXF], [S]),
    "logsumexp": (lambda m, a: (m.nn.logsumexp(a), m.nn.logsumexp(a, axis=1),
                                m.nn.logsumexp(a, axis=0, return_sign=True)), [CXF], [S]),
    "logsumexp_b": (lambda m, a: m.nn.logsumexp(a, axis=1, b=m.arange(8.0) - 3), [CXF], [S]),
    "searchsorted": (lambda m, a, v: (m.searchsorted(a, v), m.searchsorted(a, v, side="right"),
                                      m.searchsorted(a, v, method="compare_all")),
                     [SORTED, QUERIES], [P(), S]),
    "geomspace": (lambda m, a: (m.geomspace(1j, 1000j, 4), m.geomspace(1 + 0j, -1 + 0j, 3),
                                m.geomspace(a[0, :2], 8 * a[0, :2], 3)), [CXF], [P()]),
    "arccosh": (lambda m, a: m.arccosh(a), [REALS], [S]),
    "var_int_dtype": (lambda m, a: (m.var(a, axis=1, dtype=m.uint8),
                                    m.std(a, axis=1, dtype=m.int32),
                                    m.var(a, axis=1, dtype=m.int32, ddof=4)), [INTS], [S]),
    "linspace_weak": (lambda m, a: (m.linspace(0.0, 1.0, 1), m.linspace(0.0, 1.0, 0),
                                    m.linspace(0.0, 4.0, 5, retstep=True),
                                    m.linspace(0.0, 1.0, 1, endpoint=False, retstep=True)),
                      [INTS], [P()]),
}


def test_against_jax_jit(mesh2x4):
    compare_cases([Case(n, fn, xs, specs, numpy_ref=False)
                   for n, (fn, xs, specs) in CASES.items()], mesh2x4)


def test_against_jax_eager():
    compare_cases([Case(n, fn, xs, numpy_ref=False) for n, (fn, xs, _) in CASES.items()],
                  eager=True)


def test_rint_complex_dtype():
    out = snp.rint(np.array([1.6 + 2.4j, -0.5 + 3.5j], np.complex64))
    assert out.dtype == np.complex64
    np.testing.assert_array_equal(np.asarray(out), [2 + 2j, -0 + 4j])


def test_complex_nan_reductions_ignore_nan():
    x = np.array([1 + 1j, complex(np.nan, 0), 2 - 1j], np.complex64)
    for name in ("nansum", "nanprod", "nanmean", "nanvar", "nanstd", "nancumsum",
                 "nancumprod", "nanmin", "nanmax"):   # (XLA's CPU can't min-reduce
        # complex values split over devices: unsharded here)
        ours, ref = getattr(snp, name)(x), getattr(jnp, name)(x)
        assert ours.dtype == ref.dtype, name
        assert_close(ours, ref, name)


def test_scipy_logsumexp_complex():
    x = np.array([1 + 1j, 2 + 1j], np.complex64)
    for ours in (ssp.logsumexp(x), shardc.jit(ssp.logsumexp)(x)):
        assert ours.dtype == np.complex64
        assert_close(ours, jsp.logsumexp(x))


@pytest.mark.filterwarnings("ignore:Explicitly requested dtype")
@pytest.mark.parametrize("v,dtype", [([2 ** 40], None), ([1, 2 ** 33], None), ([2 ** 31], None),
                                     ([[1, -2 ** 31 - 1]], None), ([2 ** 40], jnp.int64),
                                     ([-1], jnp.uint8)])
def test_asarray_int_overflow(v, dtype):
    with pytest.raises(OverflowError):
        jnp.asarray(v, dtype=dtype)
    with pytest.raises(OverflowError):
        snp.asarray(v, dtype=dtype)
    with pytest.raises(OverflowError):
        snp.array(v, dtype=dtype)


def test_asarray_int_in_range():
    for v in ([2 ** 31 - 1, -2 ** 31], [2 ** 40, 1.5]):
        ours, ref = snp.asarray(v), jnp.asarray(v)
        assert ours.dtype == ref.dtype
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(ref))
    assert snp.asarray([2 ** 31], dtype=jnp.uint32).dtype == np.uint32


@pytest.mark.parametrize("axis", [3, -4])
def test_one_hot_axis_out_of_range(axis):
    ids = np.array([[1, 3], [0, 2]])
    with pytest.raises(ValueError):
        jax.nn.one_hot(ids, 4, axis=axis)
    with pytest.raises(ValueError):
        shardc.nn.one_hot(ids, 4, axis=axis)
    assert shardc.nn.one_hot(ids, 4, axis=-3).shape == jax.nn.one_hot(ids, 4, axis=-3).shape


@pytest.mark.parametrize("name", ["exp1", "expi"])
def test_exp1_expi_bfloat16(name):
    x = jnp.array([0.5, 2.0, 5.0], jnp.bfloat16)
    ref = getattr(jsp, name)(x)
    for ours in (getattr(ssp, name)(x), shardc.jit(getattr(ssp, name))(x)):
        assert ours.dtype == jnp.bfloat16
        assert_close(ours, ref, name)
