"""jax.image: resize and scale_and_translate, with jax's kernels and numerics.

A resize along a dim is a (input, output) weight matrix contracted with the image (one
einsum over every resized dim, so sharded batch and channel dims stay sharded): each
weight is the kernel at the distance between an output pixel's sample point and an
input pixel, normalized per output pixel, zero where the sample point falls outside the
input. Nearest neighbour is a gather instead. Python scalars stay Python arithmetic where
jax's do (the scale of a resize), so the weights round as jax's do.
"""
from __future__ import annotations

import numpy as np
from jax.image import ResizeMethod

from ..errors import ArgumentError
from ..trace import core
from . import numpy as snp
from .lax_special import Precision
from .numpy._util import promote_dtypes_inexact

HIGHEST = Precision.HIGHEST


def _lanczos(radius, x):
    y = radius * snp.sin(np.pi * x) * snp.sin(np.pi * x / radius)
    out = snp.where(x > 1e-3, snp.divide(y, snp.where(x != 0, np.pi ** 2 * x ** 2, 1)), 1)
    return snp.where(x > radius, 0., out)


def _keys_cubic(x):
    out = ((1.5 * x - 2.5) * x) * x + 1.
    out = snp.where(x >= 1., ((-0.5 * x + 2.5) * x - 4.) * x + 2., out)
    return snp.where(x >= 2., 0., out)


def _opencv_cubic(x):
    a = -0.75
    out = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    out = snp.where(x >= 1.0, ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a, out)
    return snp.where(x >= 2.0, 0.0, out)


def _triangle(x):
    return snp.maximum(0, 1 - snp.abs(x))


_AREA = object()
_KERNELS = {   # method: (radius, kernel)
    ResizeMethod.LINEAR: (1, _triangle),
    ResizeMethod.LANCZOS3: (3, lambda x: _lanczos(3., x)),
    ResizeMethod.LANCZOS5: (5, lambda x: _lanczos(5., x)),
    ResizeMethod.CUBIC: (2, _keys_cubic),
    ResizeMethod.CUBIC_PYTORCH: (2, _opencv_cubic),
    ResizeMethod.AREA: (1, _AREA),
}


def _normalized(weights):
    """Each output pixel's weights over their sum (zero where the sum is ~0)."""
    total = snp.sum(weights, axis=0, keepdims=True)
    return snp.where(snp.abs(total) > 1000. * float(np.finfo(np.float32).eps),
                     snp.divide(weights, snp.where(total != 0, total, 1)), 0)


def _weights(m, n, scale, translation, kernel, antialias, edge_padding, radius):
    """The (m, n) weights of input pixel i for output pixel j along one dim."""
    dtype = snp.result_type(scale, translation)
    inv_scale = 1. / scale
    kernel_scale = snp.maximum(inv_scale, 1.) if antialias else 1.
    sample_f = ((snp.arange(n, dtype=dtype) + 0.5) * inv_scale - translation * inv_scale
                - 0.5)
    k = radius if edge_padding else 0     # input pixels repeated past each edge
    expanded = snp.arange(-k, m + k, dtype=dtype)
    if kernel is _AREA:     # the overlap of output pixel j's span with input pixel i's
        lo_out = snp.arange(n, dtype=dtype) * inv_scale - translation * inv_scale
        hi_out = lo_out + inv_scale
        lo_in = snp.arange(m, dtype=dtype)
        weights = snp.maximum(0.0, snp.minimum(hi_out[None, :], (lo_in + 1.0)[:, None])
                              - snp.maximum(lo_out[None, :], lo_in[:, None]))
    else:
        weights = kernel(snp.abs(sample_f[None, :] - expanded[:, None]) / kernel_scale)
    if edge_padding:        # the repeated pixels' weights added onto the edge pixels
        clamped = snp.clip(expanded.astype(snp.int32), 0, m - 1)
        cols = snp.broadcast_to(snp.arange(n)[None, :], (m + 2 * k, n))
        mat = snp.zeros((m, n), dtype=dtype).at[clamped[:, None], cols].add(weights)
        return _normalized(mat)
    weights = _normalized(weights)
    inside = snp.logical_and(sample_f >= -0.5, sample_f <= m - 0.5)
    return snp.where(inside[None, :], weights, 0)


def _scale_and_translate(x, shape, spatial_dims, scale, translation, kernel, antialias,
                         precision, edge_padding=False, radius=None):
    if not spatial_dims:
        return x
    nd = len(shape)
    args, out_idx = [x, list(range(nd))], list(range(nd))
    for i, d in enumerate(spatial_dims):
        d = d % x.ndim
        w = _weights(x.shape[d], shape[d], scale[i], translation[i], kernel, antialias,
                     edge_padding, radius).astype(x.dtype)
        args += [w, [d, nd + i]]
        out_idx[d] = nd + i
    return snp.einsum(*args, out_idx, precision=precision)


def _method(method):
    if isinstance(method, str):
        try:
            return ResizeMethod.from_string(method)
        except ValueError as e:
            raise ArgumentError(f"{e}; the methods are {[m.name.lower() for m in ResizeMethod]}"
                                ) from None
    if not isinstance(method, ResizeMethod):
        raise ArgumentError(f"method must be a ResizeMethod or its name, got {method!r}")
    return method


def _shape(image, shape):
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
    if len(shape) != snp.ndim(image):
        raise ArgumentError("shape must have length equal to the number of dimensions of "
                            f"x;  {shape} vs {snp.shape(image)}")
    return shape


def _resize_nearest(x, shape):
    for d in range(len(shape)):
        m, n = x.shape[d], shape[d]
        if m == n:
            continue
        # in float32 at any precision, as jax's (float64 rounds differently on CPU)
        offsets = (snp.arange(n, dtype=np.float32) + 0.5) * m / n
        offsets = snp.floor(offsets.astype(np.float32)).astype(np.int32)
        x = x[(slice(None),) * d + (offsets,)]
    return x


def resize(image, shape, method, antialias=True, precision=HIGHEST):
    """jax.image.resize: every dim whose size changes is resampled (batch and channel
    dims keep their sizes); NEAREST keeps the dtype, the others give a float."""
    image = image if core.is_tracer(image) else snp.asarray(image)
    shape = _shape(image, shape)
    method = _method(method)
    if method == ResizeMethod.NEAREST:
        return _resize_nearest(image, shape)
    image, = promote_dtypes_inexact(image)
    dims = tuple(i for i in range(len(shape)) if image.shape[i] != shape[i])
    if method == ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    radius, kernel = _KERNELS[method]
    scale = [1.0 if shape[d] == 0 else shape[d] / image.shape[d] for d in dims]
    return _scale_and_translate(image, shape, dims, scale, [0.] * len(dims), kernel,
                                antialias, precision,
                                edge_padding=method == ResizeMethod.CUBIC_PYTORCH and
                                not antialias, radius=radius)


def scale_and_translate(image, shape, spatial_dims, scale, translation, method,
                        antialias=True, precision=HIGHEST):
    """jax.image.scale_and_translate: output location y samples the input at
    (y - translation) / scale along each of `spatial_dims` (half-centred pixels)."""
    image = image if core.is_tracer(image) else snp.asarray(image)
    shape = _shape(image, shape)
    method = _method(method)
    if method == ResizeMethod.NEAREST:
        raise ArgumentError("Nearest neighbor resampling is not currently supported for "
                            "scale_and_translate.")
    spatial_dims = tuple(spatial_dims)
    if method == ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    radius, kernel = _KERNELS[method]
    image, = promote_dtypes_inexact(image)
    scale, translation = promote_dtypes_inexact(scale, translation)
    if not (len(spatial_dims) == snp.shape(scale)[0] == snp.shape(translation)[0]):
        raise ArgumentError(f"scale_and_translate: {len(spatial_dims)} spatial dims, "
                            f"{snp.shape(scale)[0]} scales and {snp.shape(translation)[0]} "
                            "translations")
    return _scale_and_translate(image, shape, spatial_dims, scale, translation, kernel,
                                antialias, precision,
                                edge_padding=method == ResizeMethod.CUBIC_PYTORCH and
                                not antialias, radius=radius)


__all__ = ["ResizeMethod", "resize", "scale_and_translate"]
