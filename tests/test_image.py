"""shardc.image (jax.image's resize and scale_and_translate) against jax.jit: every method,
up and down, with and without antialiasing, on sharded images (values and shardings),
gradients (through the image, the scale and the translation), dtypes, errors."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc
from helpers import check_outputs, place, sample

METHODS = ["nearest", "linear", "lanczos3", "lanczos5", "cubic", "cubic-pytorch", "area"]
SHAPES = [(4, 17, 7, 8), (4, 4, 24, 8)]      # one dim up, one down; batch and channels kept
CASES = [(m, s, aa) for m in METHODS for s in SHAPES for aa in (True, False)]
IMG = np.random.default_rng(0).normal(size=(4, 9, 12, 8)).astype(np.float32)


@pytest.mark.parametrize("method,shape,antialias", sample(CASES, 3, unpack=True))
def test_resize_as_jax(method, shape, antialias, mesh2x4):
    """A batch sharded over x and channels over y stay so (the weights contract only the
    resized dims)."""
    x, = place(mesh2x4, [IMG], [P("x", None, None, "y")])
    f = lambda m: lambda x: m.resize(x, shape, method, antialias=antialias)  # noqa: E731
    check_outputs(shardc.jit(f(shardc.image))(x), jax.jit(f(jax.image))(x), mesh2x4)
    check_outputs(f(shardc.image)(x), jax.jit(f(jax.image))(x), what="jax (shardc eager)",
                  check_sharding=False)


@pytest.mark.parametrize("method", ["linear", "lanczos3", "cubic", "cubic-pytorch", "area"])
def test_scale_and_translate_and_gradients(method, mesh2x4):
    x, = place(mesh2x4, [IMG], [P("x")])
    s, t = jnp.array([1.7, 0.6]), jnp.array([0.3, -1.2])

    def f(m):
        return lambda x, s, t: m.scale_and_translate(x, (4, 11, 8, 8), (1, 2), s, t, method,
                                                     antialias=False)
    check_outputs(shardc.jit(f(shardc.image))(x, s, t), jax.jit(f(jax.image))(x, s, t),
                  mesh2x4)

    def loss(m, grad):
        return grad(lambda x, s, t: (f(m)(x, s, t) ** 2).sum(), argnums=(0, 1, 2))
    # the weights' sums reach the scale's gradient in another order: f32 rounding
    for o, r in zip(shardc.jit(loss(shardc.image, shardc.grad))(x, s, t),
                    jax.jit(loss(jax.image, jax.grad))(x, s, t)):
        np.testing.assert_allclose(o, r, rtol=2e-5, atol=1e-4 * float(np.abs(r).max()))


@pytest.mark.parametrize("dtype", [np.int32, jnp.bfloat16, np.uint8])
def test_dtypes_as_jax(dtype):
    x = (np.abs(IMG) * 40).astype(dtype)
    for method in ("nearest", "linear"):
        f = lambda m: lambda x: m.resize(x, (4, 5, 20, 8), method)  # noqa: E731
        check_outputs(shardc.jit(f(shardc.image))(x), jax.jit(f(jax.image))(x))


def test_resize_method_enum_and_errors():
    assert shardc.image.ResizeMethod is jax.image.ResizeMethod
    x = IMG[0]
    check_outputs(shardc.image.resize(x, (3, 5, 8), shardc.image.ResizeMethod.LANCZOS3),
                  jax.image.resize(x, (3, 5, 8), jax.image.ResizeMethod.LANCZOS3))
    with pytest.raises(ValueError, match="shape must have length equal"):
        shardc.image.resize(x, (3, 5), "linear")
    with pytest.raises(ValueError, match="Unknown resize method \"bogus\""):
        shardc.image.resize(x, (3, 5, 8), "bogus")
    with pytest.raises(ValueError, match="Nearest neighbor resampling is not"):
        shardc.image.scale_and_translate(x, (3, 5, 8), (0,), jnp.ones(1), jnp.zeros(1),
                                         "nearest")


def test_jax_image_inside_shardc_jit(mesh2x4):
    """jax.image code traced by shardc.jit (the frontend) gives jax.jit's values."""
    x, = place(mesh2x4, [IMG], [P("x")])
    f = lambda x: jax.image.resize(x, (4, 18, 6, 8), "lanczos3")  # noqa: E731
    check_outputs(shardc.jit(f)(x), jax.jit(f)(x), mesh2x4)
