"""lax.ragged_all_to_all against the semantics jax documents (XLA:CPU cannot run jax's
own): random well-formed exchanges over one axis, two axes and a vmap's axis, dtypes,
gradients against jax.vjp of a dense reference, vmap, jax code under shardc.jit, and
jax's argument errors."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp
from shardc import lax as slax


def exchange(rng, ndev, per, n, m, feat=(3,), dtype=np.float32):
    """A well-formed exchange among `ndev` devices, `per` slices to each peer: every
    device's operand holds its slices with gaps, every receiver lays out what it gets
    with gaps, senders in a random order. Arrays have a leading device dim."""
    k = ndev * per
    sizes = rng.integers(0, 3, size=(ndev, ndev, per))     # sender, receiver, slot
    io, ss, oo, rs = (np.zeros((ndev, k), np.int32) for _ in range(4))
    for s in range(ndev):
        pos = 0
        for i in range(k):
            pos += rng.integers(0, 2)
            io[s, i], ss[s, i] = pos, sizes[s, i // per, i % per]
            pos += ss[s, i]
        assert pos <= n
    for d in range(ndev):
        pos = 0
        for s in rng.permutation(ndev):
            for q in range(per):
                pos += rng.integers(0, 2)
                oo[s, d * per + q], rs[d, s * per + q] = pos, sizes[s, d, q]
                pos += sizes[s, d, q]
        assert pos <= m
    op = (rng.normal(size=(ndev, n) + feat) * 8).astype(dtype)
    out = (rng.normal(size=(ndev, m) + feat) * 8).astype(dtype)
    return op, out, io, ss, oo, rs


def reference(op, out, io, ss, oo, rs, xp=np):
    """jax's docstring's SEND/RECEIVE pseudocode, on every device at once."""
    ndev, k = io.shape
    per = k // ndev
    res = out.copy() if xp is np else out
    for s in range(ndev):
        for i in range(k):
            d, a, b, n = i // per, int(io[s, i]), int(oo[s, i]), int(ss[s, i])
            if xp is np:
                res[d, b:b + n] = op[s, a:a + n]
            else:
                res = res.at[d, b:b + n].set(op[s, a:a + n])
    return res


def _body(op, out, io, ss, oo, rs, axis="y"):
    r = slax.ragged_all_to_all(op[0], out[0], io[0], ss[0], oo[0], rs[0], axis_name=axis)
    return r[None]


def _over(mesh, axis):
    return shardc.jit(shardc.shard_map(lambda *a: _body(*a, axis=axis), mesh=mesh,
                                       in_specs=P(axis), out_specs=P(axis)))


CASES = [("y", 1, (3,), np.float32), ("y", 2, (), np.float32), ("x", 3, (2, 3), np.float32),
         (("x", "y"), 1, (3,), np.float32), (("y", "x"), 2, (2,), np.int32),
         ("y", 2, (4,), jnp.bfloat16)]


@pytest.mark.parametrize("axis,per,feat,dtype", CASES, ids=str)
def test_matches_the_documented_semantics(mesh2x4, axis, per, feat, dtype):
    ndev = int(np.prod([mesh2x4.shape[a] for a in np.atleast_1d(axis)]))
    f = _over(mesh2x4, axis)
    for seed in range(3):
        args = exchange(np.random.default_rng(seed), ndev, per, 3 * ndev * per,
                        3 * ndev * per + 2, feat, dtype)
        got = f(*args)
        assert got.dtype == dtype and got.shape == args[1].shape
        np.testing.assert_array_equal(np.asarray(got), reference(*args))


def test_jax_docstring_example(mesh2x4):
    mesh = shardc.make_mesh((2,), ("y",), axis_types=(shardc.AxisType.Auto,))
    args = (np.array([[1, 2, 2], [3, 4, 0]], np.float32), np.zeros((2, 4), np.float32),
            np.array([[0, 1], [0, 1]], np.int32), np.array([[1, 2], [1, 1]], np.int32),
            np.array([[0, 0], [1, 2]], np.int32), np.array([[1, 1], [2, 1]], np.int32))
    np.testing.assert_array_equal(np.asarray(_over(mesh, "y")(*args)),
                                  [[1, 3, 0, 0], [2, 2, 4, 0]])


def test_rows_outside_the_slices_keep_the_output(mesh2x4):
    """Nothing sent: the output comes back unchanged (sizes all zero)."""
    op, out, io, ss, oo, rs = exchange(np.random.default_rng(5), 4, 1, 12, 12)
    z = np.zeros_like(ss)
    np.testing.assert_array_equal(np.asarray(_over(mesh2x4, "y")(op, out, io, z, oo, z)), out)


def test_gradient_is_jaxs(mesh2x4):
    """Against jax.vjp of the dense reference: the operand's rows get the cotangent of
    where they land; written output rows get none."""
    args = exchange(np.random.default_rng(1), 4, 2, 24, 26)
    w = np.random.default_rng(2).normal(size=args[1].shape).astype(np.float32)
    body = shardc.shard_map(_body, mesh=mesh2x4, in_specs=P("y"), out_specs=P("y"))

    def loss(op, out):
        return snp.sum(body(op, out, *args[2:]) * w)
    g_op, g_out = shardc.jit(shardc.grad(loss, argnums=(0, 1)))(*args[:2])
    _, vjp = jax.vjp(lambda a, b: reference(a, b, *args[2:], xp=jnp), *map(jnp.asarray,
                                                                           args[:2]))
    want_op, want_out = vjp(jnp.asarray(w))
    np.testing.assert_allclose(np.asarray(g_op), want_op, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(g_out), want_out)


def test_vmap_inside_the_body(mesh2x4):
    """A batch of independent exchanges per device (jax merges them into one)."""
    rng = np.random.default_rng(3)
    cases = [exchange(rng, 4, 1, 12, 14) for _ in range(3)]
    stacked = [np.stack([c[i] for c in cases], axis=1) for i in range(6)]   # dev, batch

    def body(*a):
        f = shardc.vmap(lambda *b: slax.ragged_all_to_all(*b, axis_name="y"))
        return f(*(v[0] for v in a))[None]
    f = shardc.jit(shardc.shard_map(body, mesh=mesh2x4, in_specs=P("y"), out_specs=P("y")))
    got = np.asarray(f(*stacked))
    for j, c in enumerate(cases):
        np.testing.assert_array_equal(got[:, j], reference(*c))


def test_over_a_vmaps_axis_name():
    """The examples of a named vmap are the devices (jax's vmap cannot do this one)."""
    args = exchange(np.random.default_rng(4), 5, 2, 25, 30)
    f = shardc.vmap(lambda *a: slax.ragged_all_to_all(*a, axis_name="v"), axis_name="v")
    np.testing.assert_array_equal(np.asarray(shardc.jit(f)(*args)), reference(*args))


def test_partial_manual_body_keeps_the_auto_axis(mesh2x4):
    """Manual over y only; the feature dim, sharded over the auto axis x, stays so."""
    from jax.sharding import NamedSharding
    op, out, io, ss, oo, rs = exchange(np.random.default_rng(6), 4, 1, 12, 14, feat=(4,))
    on_x = NamedSharding(mesh2x4, P("y", None, "x"))
    f = shardc.jit(shardc.shard_map(_body, mesh=mesh2x4, in_specs=P("y"), out_specs=P("y"),
                                    axis_names={"y"}))
    got = f(jax.device_put(op, on_x), jax.device_put(out, on_x), io, ss, oo, rs)
    np.testing.assert_array_equal(np.asarray(got), reference(op, out, io, ss, oo, rs))
    assert got.sharding.is_equivalent_to(on_x, 3), got.sharding


def _jax_body(op, out, io, ss, oo, rs):
    zero = jnp.zeros_like(out[0])       # invariant, as a typical MoE layer makes it
    r = jax.lax.ragged_all_to_all(op[0], zero, io[0], ss[0], oo[0], rs[0], axis_name="y")
    return (r + out[0])[None]


def test_jax_code_under_shardc_jit(mesh2x4):
    """jax's primitive in a jax.shard_map body (variance checked) and under jax.vmap."""
    args = exchange(np.random.default_rng(7), 4, 2, 24, 28)
    f = jax.shard_map(_jax_body, mesh=mesh2x4, in_specs=P("y"), out_specs=P("y"))
    zeros = np.zeros_like(args[1])
    np.testing.assert_array_equal(
        np.asarray(shardc.jit(f)(*args)),
        reference(args[0], zeros, *args[2:]) + args[1])

    cases = [exchange(np.random.default_rng(8 + j), 4, 1, 12, 14) for j in range(2)]
    stacked = [np.stack([c[i] for c in cases], axis=1) for i in range(6)]
    g = jax.shard_map(lambda *a: jax.vmap(lambda *b: jax.lax.ragged_all_to_all(
        *b, axis_name="y"))(*(v[0] for v in a))[None], mesh=mesh2x4, in_specs=P("y"),
        out_specs=P("y"))
    got = np.asarray(shardc.jit(g)(*stacked))
    for j, c in enumerate(cases):
        np.testing.assert_array_equal(got[:, j], reference(*c))


def _call(op=(8, 3), out=(8, 3), meta=((4,),) * 4, dtypes=(np.int32,) * 4, axis="y",
          groups=None, mesh=None):
    metas = [np.zeros(s, d) for s, d in zip(meta, dtypes)]

    def body(a, b):
        return slax.ragged_all_to_all(a, b, *metas, axis_name=axis,
                                      axis_index_groups=groups)
    f = shardc.shard_map(body, mesh=mesh, in_specs=P(), out_specs=P(), check_vma=False)
    return shardc.jit(f)(np.zeros(op, np.float32), np.zeros(out, np.float32))


@pytest.mark.parametrize("kw,match", [
    ({"dtypes": (np.float32,) + (np.int32,) * 3}, "input_offsets must be integer type"),
    ({"meta": ((4,), (4, 1), (4,), (4,))}, "send_sizes must be rank 1 with positive"),
    ({"meta": ((4,), (4,), (0,), (0,))}, "output_offsets must be rank 1 with positive"),
    ({"meta": ((4,),) * 3 + ((8,),)}, "must have the same length"),
    ({"meta": ((6,),) * 4}, "the 6 slices do not divide among the 4 devices"),
    ({"out": (8, 2)}, "same dtype and the same shape"),
    ({"groups": [[0, 1], [2, 3]]}, "axis_index_groups is not supported"),
    ({"axis": "z"}, "z"),
])
def test_errors(mesh2x4, kw, match):
    with pytest.raises(shardc.ShardcError, match=match):
        _call(mesh=mesh2x4, **kw)


def test_outside_a_mapped_context():
    with pytest.raises(shardc.ShardcError, match="not bound here"):
        slax.ragged_all_to_all(np.zeros(4), np.zeros(4), *[np.zeros(1, np.int32)] * 4,
                               axis_name="y")


# ---------------------------------------------------------------- GPU and TPU: XLA's op

def _custom_calls(text):
    import re
    return [re.sub(r"%\w+|, sdy.sharding = .*?\]>\]>", "", ln).strip() for ln in
            text.splitlines() if "@ragged_all_to_all" in ln]


def test_for_a_gpu_it_lowers_to_xlas_op_as_jax_does(mesh2x4, monkeypatch):
    """Lowered for a GPU (not run here): jax's custom call, word for word; its gradient
    and a vmap inside the body are XLA's op too (jax's transpose and batching)."""
    monkeypatch.setattr("shardc.api.collectives.target_platform", lambda: "cuda")
    args = [np.zeros((4, 12, 3), np.float32), np.zeros((4, 14, 3), np.float32)] + \
        [np.zeros((4, 8), np.int32)] * 4
    ours = shardc.shard_map(_body, mesh=mesh2x4, in_specs=P("y"), out_specs=P("y"))
    theirs = jax.shard_map(lambda *a: jax.lax.ragged_all_to_all(
        *(v[0] for v in a), axis_name="y")[None], mesh=mesh2x4, in_specs=P("y"),
        out_specs=P("y"))
    want = _custom_calls(jax.jit(theirs).lower(*args).as_text())
    assert len(want) == 1 and _custom_calls(shardc.jit(ours).lower(*args).as_text()) == want
    text = shardc.jit(shardc.grad(lambda *a: snp.sum(ours(*a) ** 2), argnums=(0, 1))).lower(
        *args).as_text()
    assert len(_custom_calls(text)) == 2 and "all_to_all" in text.replace("@ragged_all", "")
    vm = shardc.shard_map(lambda *a: shardc.vmap(lambda *b: slax.ragged_all_to_all(
        *b, axis_name="y"))(*(v[0] for v in a))[None], mesh=mesh2x4, in_specs=P("y"),
        out_specs=P("y"))
    vargs = [np.stack([a, a], 1) for a in args]
    (line,) = _custom_calls(shardc.jit(vm).lower(*vargs).as_text())
    assert "(tensor<24x3xf32>, tensor<28x3xf32>, tensor<16xi32>" in line
    assert "-> tensor<28x3xf32>" in line


def _decomposed(axis):
    return lambda *a: slax.ragged_all_to_all(*a, axis_name=axis)


def test_xla_ops_gradient_rule_is_jaxs(mesh2x4):
    """The GPU op's transpose, run on CPU with the dense ragged_all_to_all in its place,
    against jax.vjp of the dense reference."""
    from shardc.ops import ragged_collective as rc
    args = exchange(np.random.default_rng(11), 4, 2, 24, 26)
    ct = np.random.default_rng(12).normal(size=args[1].shape).astype(np.float32)

    def body(ct, io, ss, oo, rs):
        op_aval = shardc.ShapeDtypeStruct(args[0].shape[1:], np.float32)
        got = rc.transpose(snp.asarray(ct[0]), op_aval, *(v[0] for v in (io, ss, oo, rs)),
                           ("y",), (4,), _decomposed("y"))
        return tuple(g[None] for g in got)
    f = shardc.jit(shardc.shard_map(body, mesh=mesh2x4, in_specs=P("y"),
                                    out_specs=(P("y"), P("y"))))
    g_op, g_out = f(ct, *args[2:])
    _, vjp = jax.vjp(lambda a, b: reference(a, b, *args[2:], xp=jnp),
                     *map(jnp.asarray, args[:2]))
    want_op, want_out = vjp(jnp.asarray(ct))
    np.testing.assert_allclose(np.asarray(g_op), want_op, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(g_out), want_out)


def test_xla_ops_batching_rule_is_jaxs(mesh2x4):
    """The GPU op's batching (the batch merged into one exchange), run on CPU with the
    dense ragged_all_to_all in its place, against each exchange alone."""
    from shardc.ops import ragged_collective as rc
    rng = np.random.default_rng(13)
    cases = [exchange(rng, 4, 2, 24, 26) for _ in range(3)]
    stacked = [np.stack([c[i] for c in cases], axis=1) for i in range(6)]   # dev, batch

    def body(op, out, *meta):
        return rc.merge_batch(3, snp.asarray(op[0]), snp.asarray(out[0]),
                              [snp.asarray(v[0]) for v in meta], _decomposed("y"))[None]
    got = np.asarray(shardc.jit(shardc.shard_map(body, mesh=mesh2x4, in_specs=P("y"),
                                                 out_specs=P("y")))(*stacked))
    for j, c in enumerate(cases):
        np.testing.assert_array_equal(got[:, j], reference(*c))
