"""Convolutions XLA:CPU gets wrong on one device too (jax the same), which shardc lowers in
forms it gets right (ops/conv_per_device.for_xla): a negative padding (garbage or wrong
values, now and then or always) and an lhs dilation its ConvOperandSwapper mistakes for
a group dim (an abort). The reference pads explicitly (lax.pad) and convolves VALID."""
import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc

R = np.random.RandomState(0)


def _reference(x, k, window_strides, padding, lhs_dilation=None, dimension_numbers=None):
    dn = jax.lax.conv_dimension_numbers(x.shape, k.shape, dimension_numbers)
    cfg = [(0, 0, 0)] * x.ndim
    for i, d in enumerate(dn.lhs_spec[2:]):
        cfg[d] = (*padding[i], (lhs_dilation[i] - 1) if lhs_dilation else 0)
    xp = jax.lax.pad(x, np.zeros((), x.dtype), cfg)
    return jax.lax.conv_general_dilated(xp, k, window_strides, "VALID",
                                        dimension_numbers=dimension_numbers)


def _grads(conv, x, k, **kw):
    return jax.grad(lambda v, w: (conv(v, w, **kw) ** 2).sum(), argnums=(0, 1))(x, k)


def _check(got, ref):
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(r))
        for s in g.addressable_shards:
            np.testing.assert_array_equal(np.asarray(s.data), np.asarray(r)[s.index])


def _wsc(mesh, spec):
    return lambda v: shardc.lax.with_sharding_constraint(v, NamedSharding(mesh, spec))


@pytest.mark.parametrize("mesh_shape", [None, (8,)], ids=["one_device", "replicated"])
def test_gradient_with_negative_padding(mesh_shape):
    """A 1-D convolution padded (2, 0) with 2 taps: its lhs gradient is padded (-1, 1),
    which XLA:CPU convolved into garbage in some runs (NaN, off by 49)."""
    x = R.randint(-3, 4, (2, 4, 8)).astype(np.float32)
    k = R.randint(-2, 3, (4, 4, 2)).astype(np.float32)
    kw = dict(window_strides=(1,), padding=((2, 0),))
    if mesh_shape is None:
        conv = shardc.lax.conv_general_dilated
    else:
        w = _wsc(shardc.make_mesh(mesh_shape, ("x",), axis_types=(shardc.AxisType.Auto,)),
                 P(None, None, None))
        conv = lambda v, k, **kw: w(shardc.lax.conv_general_dilated(w(v), w(k), **kw))  # noqa
    f = shardc.jit(shardc.grad(lambda v, w: (conv(v, w, **kw) ** 2).sum(), argnums=(0, 1)))
    ref = _grads(_reference, x, k, **kw)
    for _ in range(20):     # (it was wrong now and then)
        _check(f(x, k), ref)


@pytest.mark.parametrize("case", ["split_H_pad_W", "nhwc_2x2x2"])
def test_negative_padding_on_a_mesh(case):
    """A result split along H (blocks that do not line up) with W padded (-1, 1): off
    by 22 on every shard; an NHWC lhs-dilated convolution padded (3, -2) on a 2x2x2
    mesh: its lhs gradient off by thousands."""
    if case == "split_H_pad_W":
        mesh = shardc.make_mesh((4, 2), ("x", "y"), axis_types=(shardc.AxisType.Auto,) * 2)
        x = R.randint(-3, 4, (2, 4, 16, 8)).astype(np.float32)
        k = R.randint(-2, 3, (4, 4, 3, 1)).astype(np.float32)
        kw = dict(window_strides=(1, 1), padding=((1, 1), (-1, 1)))
        ls, ks = P(None, None, "x"), None
    else:
        mesh = shardc.make_mesh((2, 2, 2), ("x", "y", "z"),
                                axis_types=(shardc.AxisType.Auto,) * 3)
        x = R.randint(-3, 4, (2, 6, 8, 4)).astype(np.float32)
        k = R.randint(-2, 3, (3, 1, 4, 8)).astype(np.float32)
        kw = dict(window_strides=(1, 1), padding=((3, 2), (3, -2)), lhs_dilation=(2, 1),
                  dimension_numbers=("NHWC", "HWIO", "NHWC"))
        ls, ks = P("y", "z"), P("z")

    def conv(v, w, **kw):
        w = w if ks is None else _wsc(mesh, ks)(w)
        return _wsc(mesh, ls)(shardc.lax.conv_general_dilated(_wsc(mesh, ls)(v), w, **kw))
    _check([shardc.jit(lambda v, w: conv(v, w, **kw))(x, k)], [_reference(x, k, **kw)])
    f = shardc.jit(shardc.grad(lambda v, w: (conv(v, w, **kw) ** 2).sum(), argnums=(0, 1)))
    _check(f(x, k), _grads(_reference, x, k, **kw))


def test_lhs_dilation_xla_takes_for_a_group_dim():
    """The lhs gradient of a (2, 1)-strided convolution of a 2x3 kernel over a (12, 4)
    input: an lhs dilation of 2 (the kernel's size) with stride 1 and no padding, which
    XLA's ConvOperandSwapper mistakes for a group dim: the process aborted (jax.grad
    on one device aborts the same); and the kernel gradient of a convolution split
    over a 2x2x2 mesh, whose per-device convolution had that form."""
    x = R.randint(-3, 4, (2, 4, 12, 4)).astype(np.float32)
    k = R.randint(-2, 3, (4, 4, 2, 3)).astype(np.float32)
    kw = dict(window_strides=(2, 1), padding=((1, 1), (0, 0)))
    f = shardc.jit(shardc.grad(lambda v, w: (shardc.lax.conv_general_dilated(v, w, **kw)
                                             ** 2).sum(), argnums=(0, 1)))
    _check(f(x, k), _grads(_reference, x, k, **kw))

    mesh = shardc.make_mesh((2, 2, 2), ("x", "y", "z"), axis_types=(shardc.AxisType.Auto,) * 3)
    x = R.randint(-3, 4, (4, 4, 2, 2)).astype(np.float32)
    k = R.randint(-2, 3, (4, 4, 1, 4)).astype(np.float32)
    kw = dict(window_strides=(1, 1), padding=((3, -1), (2, 2)), lhs_dilation=(2, 2))
    w = _wsc(mesh, P("x", None, "z", "y"))
    f = shardc.jit(shardc.grad(lambda v, k: (w(shardc.lax.conv_general_dilated(w(v), k, **kw))
                                             ** 2).sum(), argnums=(0, 1)))
    _check(f(x, k), _grads(_reference, x, k, **kw))


NHWC = ("NHWC", "HWIO", "NHWC")


@pytest.mark.parametrize("xs,ks,kw", [
    ((2, 12, 4, 4), (2, 3, 4, 4), dict(window_strides=(2, 1), padding=((1, 1), (0, 0)))),
    ((2, 7, 2, 4), (2, 3, 4, 4), dict(window_strides=(1, 1), padding=((0, 0), (2, 2)),
                                      lhs_dilation=(2, 1))),
    # a negative padding sliced off leaves the form
    ((2, 7, 2, 4), (2, 3, 4, 4), dict(window_strides=(1, 1), padding=((-2, 0), (2, 2)),
                                      lhs_dilation=(2, 1))),
], ids=["grad", "dilated", "cropped"])
def test_lhs_dilation_xla_takes_for_a_group_dim_channels_last(xs, ks, kw):
    """In NHWC an interior pad for the dilation is folded back into the convolution by
    XLA: such a dim gets a window more instead (sliced off), also after a negative
    padding's rows are sliced off (the process aborted, jax's too)."""
    x, k = R.randint(-3, 4, xs).astype(np.float32), R.randint(-2, 3, ks).astype(np.float32)
    kw = dict(kw, dimension_numbers=NHWC)
    _check([shardc.jit(lambda v, w: shardc.lax.conv_general_dilated(v, w, **kw))(x, k)],
           [_reference(x, k, **kw)])
    f = shardc.jit(shardc.grad(lambda v, w: (shardc.lax.conv_general_dilated(v, w, **kw)
                                             ** 2).sum(), argnums=(0, 1)))
    _check(f(x, k), _grads(_reference, x, k, **kw))


@pytest.mark.parametrize("xs,ks,kw", [
    ((1, 1, 2), (1, 1, 1), dict(window_strides=(1,), padding=((-1, -1),), lhs_dilation=(4,))),
    ((1, 1, 2), (1, 1, 1), dict(window_strides=(1,), padding=((2, -3),))),
    ((2, 4, 4), (2, 4, 8), dict(window_strides=(3,), padding=((2, -4),),
                                dimension_numbers=("NHC", "HIO", "NHC"))),
    ((2, 12, 4, 4), (3, 2, 4, 4), dict(window_strides=(2, 3), padding=((-4, -4), (3, -3)),
                                       dimension_numbers=NHWC)),
], ids=["holes", "overdrop", "grad_1d", "grad_2d"])
def test_negative_padding_that_leaves_no_row(xs, ks, kw):
    """A negative padding that keeps only dilation holes, or crops past the lhs into the
    other side's padding: the result reads padding only (zeros). The rows sliced off
    left an lhs of no rows or a negative size (a compile error)."""
    x, k = R.randint(-3, 4, xs).astype(np.float32), R.randint(-2, 3, ks).astype(np.float32)
    _check([shardc.jit(lambda v, w: shardc.lax.conv_general_dilated(v, w, **kw))(x, k)],
           [_reference(x, k, **kw)])
    f = shardc.jit(shardc.grad(lambda v, w: (shardc.lax.conv_general_dilated(v, w, **kw)
                                             ** 2).sum(), argnums=(0, 1)))
    _check(f(x, k), _grads(_reference, x, k, **kw))
