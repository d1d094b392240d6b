"""shardc.lax.conv_general_dilated (and conv, conv_transpose, numpy convolve/correlate) vs
jax.jit: values, dtypes and output shardings under layouts sharding the batch, the
features, a spatial dim (halos) and the kernel; gradients vs jax.grad; bad inputs."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import Case, compare_cases, data


def lax_of(m):
    return {snp: shardc.lax, jnp: jax.lax}[m._base]


def R(*shape, seed=0, dtype=np.float32):
    return data(shape, dtype, seed=seed)


# (id, lhs shape, rhs shape, params)
CONVS = [
    ("nhwc_same", (8, 8, 8, 4), (3, 3, 4, 8),
     dict(window_strides=(1, 1), padding="SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    ("nchw_valid_strided", (8, 4, 9, 9), (8, 4, 3, 3),
     dict(window_strides=(2, 2), padding="VALID")),
    ("dilated", (8, 8, 8, 4), (3, 3, 4, 4),
     dict(window_strides=(1, 2), padding=[(2, 1), (0, 2)], lhs_dilation=(2, 1),
          rhs_dilation=(1, 2), dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    ("groups", (8, 4, 8, 8), (8, 2, 3, 3),
     dict(window_strides=(1, 1), padding="SAME", feature_group_count=2)),
    ("depthwise_1d", (8, 8, 16), (8, 1, 3),
     dict(window_strides=(1,), padding="SAME", feature_group_count=8,
          dimension_numbers=("NCH", "OIH", "NCH"))),
    ("batch_groups", (8, 4, 16), (8, 4, 3),
     dict(window_strides=(1,), padding=[(1, 1)], batch_group_count=2)),
]
LAYOUTS = [("batch", P("x"), P()), ("batch2", P(("x", "y")), P()),
           ("spatial", None, P()), ("kernel_out", P(), "out"), ("rep", P(), P())]


def _spec(lid, lhs_spec, rhs_spec, params, shape):
    nd = len(shape)
    dn = params.get("dimension_numbers")
    lspec = dn[0] if dn else "NC" + "HWD"[:nd - 2]
    rspec = dn[1] if dn else "OI" + "HWD"[:nd - 2]
    if lhs_spec is None:                       # shard the first spatial dim (if it divides)
        s = [None] * nd
        s[lspec.index("H")] = "y"
        lhs_spec = P(*s) if shape[lspec.index("H")] % 4 == 0 else P()
    if rhs_spec == "out":
        s = [None] * nd
        s[rspec.index("O")] = "x"
        rhs_spec = P(*s)
    return lhs_spec, rhs_spec


@pytest.mark.parametrize("lid,ls,rs", LAYOUTS, ids=[lay[0] for lay in LAYOUTS])
def test_conv_per_layout(mesh2x4, lid, ls, rs):
    cases = []
    for name, lsh, rsh, params in CONVS:
        lspec, rspec = _spec(lid, ls, rs, params, lsh)
        cases.append(Case(f"{name}-{lid}",
                          lambda m, a, b, p=params: lax_of(m).conv_general_dilated(a, b, **p),
                          [R(*lsh), R(*rsh, seed=1)], [lspec, rspec], numpy_ref=False))
    compare_cases(cases, mesh2x4)


DTYPE_CASES = [
    ("bf16", "bfloat16", None), ("f16", np.float16, None),
    ("bf16_pref_f32", "bfloat16", np.float32), ("i32", np.int32, None),
]


@pytest.mark.parametrize("name,dt,pref", DTYPE_CASES, ids=[d[0] for d in DTYPE_CASES])
def test_conv_dtypes(mesh2x4, name, dt, pref):
    a, b = data((8, 4, 8), dt, "small"), data((4, 4, 3), dt, "small", seed=1)
    case = Case(name, lambda m, a, b: lax_of(m).conv_general_dilated(
        a, b, (1,), "SAME", preferred_element_type=pref), [a, b], [P("x"), P()],
        numpy_ref=False)
    compare_cases([case], mesh2x4)


def test_conv_wrappers(mesh2x4):
    x, k = R(8, 4, 8, 8), R(4, 4, 3, 3, seed=1)
    xt, kt = R(8, 5, 5, 4), R(3, 3, 4, 2, seed=1)
    cases = [
        Case("conv", lambda m, a, b: lax_of(m).conv(a, b, (2, 1), "SAME"), [x, k],
             [P("x"), P()], numpy_ref=False),
        Case("general_padding", lambda m, a, b: lax_of(m).conv_with_general_padding(
            a, b, (1, 1), [(1, 0), (2, 2)], (2, 1), (1, 2)), [x, k], [P("x"), P()],
            numpy_ref=False),
        Case("transpose_same", lambda m, a, b: lax_of(m).conv_transpose(a, b, (2, 2), "SAME"),
             [xt, kt], [P("x"), P()], numpy_ref=False),
        Case("transpose_valid_tk", lambda m, a, b: lax_of(m).conv_transpose(
            a, b, (2, 1), "VALID", transpose_kernel=True), [xt, R(3, 3, 2, 4, seed=2)],
            [P("x"), P()], numpy_ref=False),
        Case("transpose_pads", lambda m, a, b: lax_of(m).conv_transpose(
            a, b, (1, 2), [(1, 1), (0, 2)], rhs_dilation=(2, 1)), [xt, kt], [P("x"), P()],
            numpy_ref=False),
    ]
    compare_cases(cases, mesh2x4)


@pytest.mark.parametrize("fn", ["convolve", "correlate"])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_numpy_convolve(mesh8, fn, mode):
    a, v = R(16), R(5, seed=1)
    cases = [Case(f"{fn}-{mode}", lambda m, a, v: getattr(m, fn)(a, v, mode=mode), [a, v],
                  [P("x"), P()]),
             Case(f"{fn}-{mode}-swapped", lambda m, a, v: getattr(m, fn)(v, a, mode=mode),
                  [a, v], [P(), P()]),
             Case(f"{fn}-{mode}-int", lambda m, a, v: getattr(m, fn)(a, v, mode=mode),
                  [data((8,), np.int32, "small"), data((3,), np.int32, "small", seed=2)],
                  [P(), P()])]
    compare_cases(cases, mesh8)


def test_conv_dimension_numbers_as_jax():
    for dn in [None, ("NCHW", "OIHW", "NCHW"), ("NHWC", "HWIO", "NHWC"),
               ("NWHC", "WHIO", "NCWH")]:
        ours = shardc.lax.conv_dimension_numbers((1, 2, 3, 4), (1, 2, 3, 4), dn)
        ref = jax.lax.conv_dimension_numbers((1, 2, 3, 4), (1, 2, 3, 4), dn)
        assert tuple(map(tuple, ours)) == tuple(map(tuple, ref))


# ---------------------------------------------------------------- gradients

@pytest.mark.parametrize("name", [c[0] for c in CONVS])
def test_conv_grad_matches_jax(mesh2x4, name):
    _, lsh, rsh, params = next(c for c in CONVS if c[0] == name)
    x, k = R(*lsh), R(*rsh, seed=1)
    out = jax.eval_shape(lambda a, b: jax.lax.conv_general_dilated(a, b, **params), x, k)
    w = R(*out.shape, seed=2)

    def loss(lax, a, b):
        return (lax.conv_general_dilated(a, b, **params) ** 2 * w).sum()
    # values vs one device: jax.jit's kernel gradients of the grouped ones are 4x (its
    # partitioner sums them over the replicated 'y' axis too)
    ref = jax.jit(jax.grad(lambda a, b: loss(jax.lax, a, b), argnums=(0, 1)))(x, k)
    x = jax.device_put(x, NamedSharding(mesh2x4, P("x")))
    got = shardc.jit(shardc.grad(lambda a, b: loss(shardc.lax, a, b), argnums=(0, 1)))(x, k)
    want = jax.jit(jax.grad(lambda a, b: loss(jax.lax, a, b), argnums=(0, 1)))(x, k)
    for g, r, o in zip(got, want, ref):
        np.testing.assert_allclose(np.asarray(g), np.asarray(o), rtol=1e-4, atol=1e-3)
        if name != "batch_groups":   # (shardc ties a gradient to its primal's sharding, the
            #                          replicated kernel; jax shards this one's out-features)
            assert g.sharding.is_equivalent_to(r.sharding, g.ndim), (g.sharding, r.sharding)


def test_convolve_grad():
    a, v = R(9), R(4, seed=1)
    got = shardc.jit(shardc.grad(lambda a, v: (snp.convolve(a, v) ** 2).sum(),
                                 argnums=(0, 1)))(a, v)
    want = jax.jit(jax.grad(lambda a, v: (jnp.convolve(a, v) ** 2).sum(), argnums=(0, 1)))(a, v)
    for g, r in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-4, atol=1e-4)


def test_spatially_sharded_conv_has_halo_not_gather(mesh8):
    """A conv whose spatial dim is sharded stays sharded (a halo exchange, no all-gather
    of the whole input), as jax's."""
    x = jax.device_put(R(2, 4, 64), NamedSharding(mesh8, P(None, None, "x")))
    k = R(4, 4, 3, seed=1)
    f = shardc.jit(lambda a, b: shardc.lax.conv_general_dilated(a, b, (1,), "SAME"))
    out = f(x, k)
    ref = jax.jit(lambda a, b: jax.lax.conv_general_dilated(a, b, (1,), "SAME"))(x, k)
    np.testing.assert_allclose(np.asarray(out), np.asarray(ref), rtol=1e-5, atol=1e-5)
    assert out.sharding.is_equivalent_to(ref.sharding, 3), (out.sharding, ref.sharding)
    assert "all-gather" not in f.lower(x, k).compile().as_text()


# ---------------------------------------------------------------- bad inputs

BAD = [
    ("rank", lambda: shardc.lax.conv_general_dilated(snp.ones((1, 2, 3)), snp.ones((1, 2)),
                                                     (1,), "SAME"), "ndim"),
    ("groups", lambda: shardc.lax.conv_general_dilated(snp.ones((1, 3, 5)),
                                                       snp.ones((4, 1, 2)), (1,), "SAME",
                                                       feature_group_count=2), "divide"),
    ("in_features", lambda: shardc.lax.conv_general_dilated(snp.ones((1, 3, 5)),
                                                            snp.ones((4, 2, 2)), (1,),
                                                            "VALID"), "input feature"),
    ("strides", lambda: shardc.lax.conv_general_dilated(snp.ones((1, 3, 5)),
                                                        snp.ones((4, 3, 2)), (1, 1),
                                                        "VALID"), "window_strides"),
    ("padding", lambda: shardc.lax.conv_general_dilated(snp.ones((1, 3, 5)),
                                                        snp.ones((4, 3, 2)), (1,),
                                                        "BOGUS"), "padding"),
    ("dn", lambda: shardc.lax.conv_general_dilated(snp.ones((1, 3, 5)), snp.ones((4, 3, 2)),
                                                   (1,), "VALID",
                                                   dimension_numbers=("NCH", "OIX", "NCH")),
     "spatial"),
    ("convolve_2d", lambda: snp.convolve(snp.ones((2, 2)), snp.ones(2)), "1-dimensional"),
    ("convolve_mode", lambda: snp.convolve(snp.ones(4), snp.ones(2), mode="x"), "mode"),
]


@pytest.mark.parametrize("name", [b[0] for b in BAD])
@pytest.mark.parametrize("jit", [True, False])
def test_bad_conv_input_names_user_line(name, jit):
    _, fn, match = next(b for b in BAD if b[0] == name)
    with pytest.raises(shardc.ShardcError, match=match) as e:
        (shardc.jit(fn) if jit else fn)()
    assert e.value.loc is not None and e.value.loc.file.endswith("test_conv.py"), e.value.loc


def test_conv_eager(mesh2x4):
    """Outside jit the ops run at once, with jax's values and shardings."""
    cases = [Case(f"eager-{name}", lambda m, a, b, p=params: lax_of(m).conv_general_dilated(
        a, b, **p), [R(*ls), R(*rs, seed=1)], [P("x"), P()], numpy_ref=False)
        for name, ls, rs, params in CONVS[:3]]
    cases.append(Case("eager-convolve", lambda m, a, v: m.convolve(a, v), [R(16), R(3, seed=1)],
                      [P("x"), P()]))
    compare_cases(cases, mesh2x4, eager=True)


@pytest.mark.parametrize("precision", [None, "highest", jax.lax.Precision.HIGH,
                                       (jax.lax.Precision.DEFAULT, jax.lax.Precision.HIGHEST)])
def test_conv_precision_as_jax(precision):
    """the precision reaches the HLO as jax's precision_config."""
    x, k = R(2, 4, 8), R(3, 4, 3, seed=1)

    def f(lax):
        return lambda a, b: lax.conv_general_dilated(a, b, (1,), "SAME", precision=precision)
    ours = shardc.jit(f(shardc.lax)).lower(x, k).as_text()
    ref = jax.jit(f(jax.lax)).lower(x, k).as_text()

    def config(text):
        line = next(ln for ln in text.splitlines() if "convolution" in ln)
        return line[line.index("precision_config"):].split("]")[0] if \
            "precision_config" in line else None
    assert config(ours) == config(ref), (config(ours), config(ref))
    np.testing.assert_allclose(np.asarray(shardc.jit(f(shardc.lax))(x, k)),
                               np.asarray(jax.jit(f(jax.lax))(x, k)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kw", [
    dict(filter_shape=(3, 2), window_strides=(1, 1), padding="SAME"),
    dict(filter_shape=(2, 2), window_strides=(2, 1), padding="VALID", rhs_dilation=(1, 2)),
    dict(filter_shape=(3, 3), window_strides=(1, 1), padding="SAME",
         dimension_numbers=("NHWC", "OIHW", "NCHW"))], ids=["same", "dilated", "nhwc"])
def test_conv_general_dilated_patches(mesh2x4, kw):
    x = R(2, 4, 8, 6) if "dimension_numbers" not in kw else R(2, 8, 6, 4)
    compare_cases([Case("patches", lambda m, x: lax_of(m).conv_general_dilated_patches(x, **kw),
                        [x], [P("x")], numpy_ref=False)], mesh2x4)


def test_conv_shape_utilities_as_jax():
    dn = ("NHWC", "HWIO", "NHWC")
    for pad in ("SAME", "VALID", [(1, 2), (0, 1)]):
        args = ((2, 9, 9, 4), (3, 3, 4, 8), (2, 1), pad, dn)
        assert shardc.lax.conv_general_shape_tuple(*args) == \
            tuple(map(int, jax.lax.conv_general_shape_tuple(*args)))
        assert shardc.lax.conv_transpose_shape_tuple(*args) == \
            tuple(map(int, jax.lax.conv_transpose_shape_tuple(*args)))
        if not isinstance(pad, str):
            a = ((4, 4, 9, 9), (8, 4, 3, 3), (2, 2), pad, 2)
            assert shardc.lax.conv_shape_tuple(*a) == tuple(map(int,
                                                                jax.lax.conv_shape_tuple(*a)))
    assert shardc.lax.conv_general_permutations(dn) == jax.lax.conv_general_permutations(dn)


@pytest.mark.parametrize("dn", [None, ("NHWC", "HWIO", "NHWC")], ids=["nchw", "nhwc"])
def test_conv_general_dilated_local(mesh2x4, dn):
    xs = (2, 3, 6, 4) if dn is None else (2, 6, 4, 3)
    fs = (3, 2)
    x = R(*xs)
    d = jax.lax.conv_dimension_numbers(xs, (1, 1) + fs, dn)
    out = jax.eval_shape(lambda x: jax.lax.conv_general_dilated_patches(
        x, fs, (1, 1), "SAME", dimension_numbers=dn), x)
    kshape = [0] * 4
    kshape[d.rhs_spec[0]], kshape[d.rhs_spec[1]] = 4, xs[d.lhs_spec[1]] * 6
    for i, k in enumerate(d.rhs_spec[2:]):
        kshape[k] = out.shape[d.out_spec[2 + i]]
    case = Case("local", lambda m, x, k: lax_of(m).conv_general_dilated_local(
        x, k, (1, 1), "SAME", fs, dimension_numbers=dn), [x, R(*kshape, seed=1)], [P("x"), P()],
        numpy_ref=False)
    compare_cases([case], mesh2x4)


@pytest.mark.parametrize("spec", [P(), P("x"), P(None, "x"), P("x", None, "y")],
                         ids=["replicated", "batch", "features", "batch_H"])
def test_out_sharding_in_explicit_mode(spec):
    """out_sharding= sets the result's type, as jax's: the way out of an ambiguous
    convolution (lhs and kernel split along the contracted features), which explicit
    mode's error suggests. It was accepted and ignored."""
    a = np.random.RandomState(0).randint(-3, 4, (4, 4, 8, 8)).astype(np.float32)
    k = np.random.RandomState(1).randint(-2, 3, (4, 4, 3, 3)).astype(np.float32)
    kw = dict(window_strides=(1, 1), padding="SAME")
    ref = jax.lax.conv_general_dilated(a, k, **kw)
    types = []
    for m, lax in ((shardc, shardc.lax), (jax, jax.lax)):
        mesh = m.make_mesh((4, 2), ("x", "y"), axis_types=(m.sharding.AxisType.Explicit,) * 2)
        args = [jax.device_put(v, NamedSharding(mesh, P(None, "y"))) for v in (a, k)]
        with m.set_mesh(mesh):
            out = m.jit(lambda v, w: lax.conv_general_dilated(v, w, **kw, out_sharding=spec))(
                *args)
        types.append(str(jax.typeof(out)))
        np.testing.assert_array_equal(np.asarray(out), ref)
    assert types[0] == types[1]
    with shardc.set_mesh(mesh):      # (jax's mesh: the last one made) by position too
        out = shardc.jit(lambda v, w: shardc.lax.conv_general_dilated(
            v, w, (1, 1), "SAME", None, None, None, 1, 1, None, None, spec))(*args)
    assert str(jax.typeof(out)) == types[1]
    with pytest.raises(shardc.ShardcError, match="ambiguous"):
        with shardc.set_mesh(shardc.make_mesh((4, 2), ("x", "y"), axis_types=(
                shardc.AxisType.Explicit,) * 2)) as mesh:
            v = jax.device_put(a, NamedSharding(mesh, P(None, "y")))
            shardc.jit(lambda v: shardc.lax.conv_general_dilated(v, v[:, :, :3, :3], **kw))(v)
