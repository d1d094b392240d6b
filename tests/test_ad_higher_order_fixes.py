"""Forward mode and second derivatives that differed from jax's, each checked against
jax.jit at the exact points where they went wrong: cumlogsumexp (NaN: its gradient
rule took the log of the cotangent's positive part, not linear in it), prod at zeros
(its gradient's zero-count branches had the wrong derivatives), a clamped out-of-bounds
gather's forward mode (0: the transpose of its gradient's scatter, which drops the
window; jax's tangent is the clamped element's), and max/min pools at ties (their
second derivatives split a tie between the tied elements; jax's picks the first)."""
import jax
import numpy as np
import pytest

import shardc

NINF = -np.inf


def _close(got, want, tol=1e-5):
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol,
                                   equal_nan=True)


def _derivs(M, f, x, t, outer):
    """f's jvp, jacfwd, grad of grad and hessian of a scalar loss, in one program."""
    def loss(x):
        y = f(x)
        w = 1 + np.arange(y.size, dtype=y.dtype).reshape(y.shape)
        return (outer(M, y) * w).sum()

    def all_(x, t):
        return (M.jvp(f, (x,), (t,))[1], M.jacfwd(f)(x),
                M.grad(lambda x: M.grad(loss)(x).sum())(x), M.hessian(loss)(x))
    return M.jit(all_)(x, t)


def _check(make, x, t, outer=lambda M, y: y ** 2, tol=1e-5):
    _close(_derivs(shardc, make(shardc), x, t, outer),
           _derivs(jax, make(jax), x, t, outer), tol)


LSE_X = {
    "plain": [[1., 2., 3.], [-1., 0., 5.]],
    "wide": [[60., 0., -60.], [1., 1., 1.]],      # exp(60) overflows float32
    "neg_inf": [[NINF, 0., 1.], [0., NINF, 2.]],
}


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("name", list(LSE_X))
def test_cumlogsumexp_forward_and_second_order(name, reverse):
    x = np.array(LSE_X[name], np.float32)
    t = np.array([[-2., -1., 0.5], [1., 2., 3.]], np.float32)
    # (a loss finite at -inf: the square's is infinite, so is its gradient there)
    outer = (lambda M, y: M.numpy.tanh(y)) if name == "neg_inf" else (lambda M, y: y ** 2)
    _check(lambda M: lambda x: M.lax.cumlogsumexp(x, axis=1, reverse=reverse), x, t, outer)


PROD_X = {
    "one_zero": [[0., 2., 3.], [1.5, 0., -2.]],
    "two_zeros": [[0., 0., 5.], [2., 1., -3.]],
    "all_zeros": [[0., 0., 0.], [0., 0., 0.]],
}


@pytest.mark.parametrize("axis", [None, 1, (0, 1)])
@pytest.mark.parametrize("name", list(PROD_X))
def test_prod_second_order_at_zeros(name, axis):
    x = np.array(PROD_X[name], np.float32)
    t = np.array([[1., -2., 0.5], [3., 1., -1.]], np.float32)
    # (y + y^2: the square alone hides the product's hessian where the product is 0)
    _check(lambda M: lambda x: M.numpy.prod(x, axis=axis), x, t, lambda M, y: y + y ** 2)


def test_prod_hessian_at_zeros_over_split_axes():
    # reduced dims not adjacent, the kept one between them
    x = np.array([[[0., 2.], [1., 3.]], [[4., 0.], [0., -1.]]], np.float32)
    _check(lambda M: lambda x: M.numpy.prod(x, axis=(0, 2)), x, x + 1, lambda M, y: y + y ** 2)


IDX = np.array([0, 6, -9, 2], np.int32)        # 6 and -9 clamp to 3 and 0
DN = jax.lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                    start_index_map=(0,))
GATHERS = {
    "getitem": lambda M: lambda x: x[IDX] * x[IDX[::-1]],
    "promise": lambda M: lambda x: M.numpy.sin(M.lax.gather(x, IDX[:, None], DN, (1, 3))),
    "clip": lambda M: lambda x: M.lax.gather(x, IDX[:, None], DN, (1, 3), mode="clip") ** 3,
    "fill": lambda M: lambda x: M.lax.gather(x, IDX[:, None], DN, (1, 3), mode="fill",
                                             fill_value=0.) * 2,
    "window": lambda M: lambda x: M.lax.gather(x, np.array([[1], [3]], np.int32), DN._replace(
        collapsed_slice_dims=(), offset_dims=(1, 2)), (2, 3)),     # the second one ends past x
}


@pytest.mark.parametrize("name", list(GATHERS))
def test_out_of_bounds_gather_forward_mode(name):
    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 4
    _check(GATHERS[name], x, x + 1, lambda M, y: y * M.numpy.cos(y))


def test_out_of_bounds_gather_forward_mode_batched():
    def run(M):
        f = GATHERS["getitem"](M)
        def one(x, t):
            return M.jvp(f, (x,), (t,))[1], M.jacrev(M.jacfwd(lambda x: f(x).sum()))(x)
        return M.jit(M.vmap(one))(xs, xs[::-1] + 1)
    xs = np.arange(24, dtype=np.float32).reshape(2, 4, 3) / 4
    _close(run(shardc), run(jax))


POOL_X = np.array([[1., 1., 5., 2.], [3., 0., 3., 3.], [2., 2., 2., 2.]], np.float32)
POOLS = {   # (init, computation, window, strides, padding, base dilation, window dilation)
    "max": (-np.inf, "max", (1, 2), (1, 1), "VALID", None, None),
    "min_2d": (np.inf, "min", (2, 2), (1, 1), "SAME", None, None),
    "max_strided_padded": (-np.inf, "max", (2, 3), (1, 2), ((1, 0), (1, 1)), None, None),
    "max_dilated": (-np.inf, "max", (1, 3), (1, 1), "VALID", (1, 2), None),  # (jax: not window)
}


@pytest.mark.parametrize("name", list(POOLS))
def test_pool_second_order_at_ties(name):
    init, op, *cfg = POOLS[name]

    def make(M):
        return lambda x: M.lax.reduce_window(x, init, getattr(M.lax, op), *cfg)
    _check(make, POOL_X, np.arange(12, dtype=np.float32).reshape(3, 4) - 5)
