"""Plain NumPy calls on traced values inside shardc.jit (np.sin(x), np.dot(x, w),
np.sum(x, axis=0), ...) trace through __array_ufunc__ / __array_function__, and match
the same program written with jax.numpy under jax.jit (and NumPy itself)."""
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc
from helpers import Case, compare_cases, data

W = data((16, 4), np.float32, seed=3)     # a NumPy constant mixed with traced values


def npx(m):
    """The module a plain-NumPy program calls: real NumPy, except jnp for the jax reference."""
    return jnp if m.__name__ == "jax.numpy" else np


PROTOCOL = {
    # ufuncs (__array_ufunc__)
    "sin": lambda n, x, y: n.sin(x),
    "exp_log": lambda n, x, y: n.log(n.exp(x) + 1),
    "add": lambda n, x, y: n.add(x, y),
    "multiply_scalar": lambda n, x, y: n.multiply(x, 2.5),
    "maximum": lambda n, x, y: n.maximum(x, 0),
    "true_divide": lambda n, x, y: n.true_divide(x, y + 3),
    "floor_divide": lambda n, x, y: n.floor_divide(x, 0.5),
    "power": lambda n, x, y: n.power(n.abs(x), 1.5),
    "greater": lambda n, x, y: n.greater(x, y),
    "logical_and": lambda n, x, y: n.logical_and(x > 0, y > 0),
    "isnan": lambda n, x, y: n.isnan(x),
    "tanh_sqrt": lambda n, x, y: n.tanh(n.sqrt(n.square(x))),
    "arctan2": lambda n, x, y: n.arctan2(x, y),
    "matmul_ufunc": lambda n, x, y: n.matmul(x, y.T),
    "add_reduce": lambda n, x, y: n.add.reduce(x, axis=1),
    "max_reduce": lambda n, x, y: n.maximum.reduce(x),
    "add_accumulate": lambda n, x, y: n.add.accumulate(x, axis=1),
    "rsub_numpy_scalar": lambda n, x, y: np.float32(2) - x,
    # functions (__array_function__)
    "dot": lambda n, x, y: n.dot(x, W),
    "dot_traced": lambda n, x, y: n.dot(x, y.T),
    "sum_axis0": lambda n, x, y: n.sum(x, axis=0),
    "mean_kd": lambda n, x, y: n.mean(x, axis=1, keepdims=True),
    "max": lambda n, x, y: n.max(x),
    "argmax": lambda n, x, y: n.argmax(x, axis=1),
    "var": lambda n, x, y: n.var(x, axis=0),
    "where": lambda n, x, y: n.where(x > y, x, y),
    "clip": lambda n, x, y: n.clip(x, -0.5, 0.5),
    "reshape": lambda n, x, y: n.reshape(x, (4, 32)),
    "transpose": lambda n, x, y: n.transpose(x),
    "swapaxes": lambda n, x, y: n.swapaxes(x[None], 0, 2),
    "concatenate": lambda n, x, y: n.concatenate([x, y], axis=1),
    "stack": lambda n, x, y: n.stack([x, y]),
    "split": lambda n, x, y: n.split(x, 2, axis=1),
    "expand_squeeze": lambda n, x, y: n.squeeze(n.expand_dims(x, 0)),
    "pad": lambda n, x, y: n.pad(x, ((1, 0), (0, 2))),
    "cumsum": lambda n, x, y: n.cumsum(x, axis=0),
    "einsum": lambda n, x, y: n.einsum("ij,kj->ik", x, y),
    "tensordot": lambda n, x, y: n.tensordot(x, W, 1),
    "zeros_like": lambda n, x, y: n.zeros_like(x) + y,
    "ones_like": lambda n, x, y: n.ones_like(x) * x,
    "broadcast_to": lambda n, x, y: n.broadcast_to(x[0], (3, 16)),
    "round": lambda n, x, y: n.round(x, 1),
    "any_all": lambda n, x, y: (n.any(x > 1), n.all(x > -3)),
    "shape_ndim_size": lambda n, x, y: x * (n.ndim(x) + n.size(x) + n.shape(x)[1]),
    # methods and operators on traced values mixed with NumPy arrays
    "operators": lambda n, x, y: (x @ W) * 2 - W.sum(0),
    "numpy_lhs": lambda n, x, y: W.T @ x.T + np.ones((4, 1), np.float32),
}


@pytest.mark.parametrize("group", range(4))
def test_numpy_protocol(mesh2x4, group):
    x, y = data((8, 16), np.float32), data((8, 16), np.float32, seed=1)
    names = sorted(PROTOCOL)[group::4]
    specs = [[P("x", "y"), P("x", None)], [P(None, "y"), P()], [P(("x", "y"), None)] * 2]
    cases = [Case(f"{n}-{k}", lambda m, x, y, f=PROTOCOL[n]: f(npx(m), x, y), [x, y], s)
             for i, n in enumerate(names) for k, s in [(i % 3, specs[i % 3])]]
    compare_cases(cases, mesh2x4)


def test_numpy_protocol_dtypes(mesh2x4):
    cases = []
    for dt in (np.int32, np.float16, np.bool_):
        x, y = data((8, 16), dt, "small"), data((8, 16), dt, "small", seed=1)
        cases += [
            Case(f"add-{np.dtype(dt).name}", lambda m, x, y: npx(m).add(x, y), [x, y],
                 [P("x", "y")] * 2),
            Case(f"sum-{np.dtype(dt).name}", lambda m, x, y: npx(m).sum(x, axis=1), [x, y],
                 [P("x", "y")] * 2),
            Case(f"maximum-{np.dtype(dt).name}", lambda m, x, y: npx(m).maximum(x, y), [x, y],
                 [P(None, "y")] * 2),
        ]
    compare_cases(cases, mesh2x4)


def test_numpy_protocol_errors():
    x = np.ones((8, 16), np.float32)
    for fn, what in [
        (lambda x: np.busday_count(x, x), "np.busday_count is not supported on traced arrays"),
        (lambda x: np.sin(x, out=np.empty((8, 16), np.float32)), "cannot write into"),
        (lambda x: np.asarray(x), "Converting to a NumPy array"),
        (lambda x: float(np.sum(x)), r"float\(\) needs a concrete value"),
        (lambda x: np.add.outer(x, x), r"np.add.outer is not supported"),
        (lambda x: np.linalg.norm(x), r"np.linalg.norm is not supported"),
        (lambda x: x.mean(bogus=x > 0), r"x.mean\(\): got an unexpected keyword argument"),
    ]:
        with pytest.raises(shardc.ShardcError, match=what) as e:
            shardc.jit(fn)(x)
        assert "test_numpy_protocol.py:" in str(e.value), str(e.value)


def test_where_keyword_of_reductions():
    """np.var/np.mean(where=) and x.mean(where=) run as jax's (issue 16 added where=)."""
    import jax
    import jax.numpy as jnp
    x = np.arange(128, dtype=np.float32).reshape(8, 16) % 7
    for fn in (lambda m, x: m.var(x, where=x > 2), lambda m, x: x.mean(where=x > 2),
               lambda m, x: m.std(x, axis=0, where=x > 1, correction=1)):
        np.testing.assert_allclose(shardc.jit(lambda x: fn(np, x))(x),
                                   jax.jit(lambda x: fn(jnp, x))(x), rtol=1e-6)


def test_numpy_ufuncs_by_their_own_names():
    # np.fmax/fmin skip NaNs (they were maximum/minimum: NaN where NumPy gives 2); any
    # ufunc shardc.numpy has traces, shifts of NumPy scalars included
    x = np.array([1.0, np.nan, 3.0], np.float32)
    y = np.array([np.nan, 2.0, 1.0], np.float32)
    i = np.array([1, 2], np.int32)
    for f, args in ((np.fmax, (x, y)), (np.fmin, (x, y)), (np.hypot, (x, y)),
                    (np.logaddexp2, (x, y)), (lambda a: np.int32(3) << a, (i,)),
                    (lambda a: np.int32(256) >> a, (i,))):
        with np.errstate(all="ignore"):
            want = f(*args)
        np.testing.assert_allclose(np.asarray(shardc.jit(f)(*args)), want, rtol=1e-6)
