"""Memory kinds (pinned host memory) as jax has them: arrays on the host in and out of
jit, device_put to a memory kind or jax.memory.Space inside it, out_shardings and
in_shardings with a memory kind, eager ops, the lowering (memory_kind attributes; XLA's
placement custom call for GPUs), and remat policies that offload residuals -- each
against jax.jit's result memory kind and values."""
import re

import jax
import jax.ad_checkpoint
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp
from tests.test_saved_residuals import make as _f   # two named dots


@pytest.fixture(scope="module")
def spaces(mesh2x4):
    x = jax.device_put(np.arange(32, dtype=np.float32).reshape(8, 4),
                       NamedSharding(mesh2x4, P("x")))
    host = NamedSharding(mesh2x4, P("x"), memory_kind="pinned_host")
    dev = NamedSharding(mesh2x4, P("x"), memory_kind="device")
    return x, jax.device_put(x, host), host, dev


def _kinds(out):
    return [o.sharding.memory_kind for o in jax.tree_util.tree_leaves(out)]


def _same(mk, args, **kw):
    """mk(numpy module) under jax.jit and shardc.jit (called twice: the cached call
    too): the same values and result memory kinds."""
    want = jax.jit(mk(jnp), **kw)(*args)
    f = shardc.jit(mk(snp), **kw)
    for got in (f(*args), f(*args)):
        assert _kinds(got) == _kinds(want), (_kinds(got), _kinds(want))
        for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    return want


CASES = {
    "host_in_host_out": lambda x, y, host, dev: (lambda m: lambda y: y * 3, (y,), {}),
    "to_host_in_jit": lambda x, y, host, dev: (
        lambda m: lambda x: jax.device_put(x * 2, host), (x,), {}),
    "space_host": lambda x, y, host, dev: (
        lambda m: lambda x: jax.device_put(x, jax.memory.Space.Host), (x,), {}),
    "back_to_device": lambda x, y, host, dev: (
        lambda m: lambda y, x: (jax.device_put(y, dev) + x, y), (y, x), {}),
    "out_shardings": lambda x, y, host, dev: (lambda m: lambda x: x * 2, (x,),
                                               {"out_shardings": host}),
    "out_shardings_device": lambda x, y, host, dev: (lambda m: lambda y: y, (y,),
                                                      {"out_shardings": dev}),
    "in_shardings_numpy": lambda x, y, host, dev: (lambda m: lambda a: a + 1,
                                                    (np.asarray(x),), {"in_shardings": host}),
    "reduction": lambda x, y, host, dev: (lambda m: lambda y: m.sum(y, axis=0), (y,), {}),
    # scalars take the memory of what they meet; all scalars: the device's (jax's rule)
    "host_scalar": lambda x, y, host, dev: (lambda m: lambda y, x: (
        x * m.sum(y), m.sum(y) * 2, y[0, 0] * 2, m.where(y[0, 0] > 0, x, 2 * x)), (y, x), {}),
    "constant_to_host": lambda x, y, host, dev: (lambda m: lambda a: (
        a, jax.device_put(np.ones((8, 4), np.float32), host)), (x,), {}),
    "unpinned_out": lambda x, y, host, dev: (lambda m: lambda a: a * 2, (x,), {
        "out_shardings": NamedSharding(host.mesh, P("x"), memory_kind="unpinned_host")}),
    # regions: a body's results are where it puts them
    "map_to_device": lambda x, y, host, dev: (lambda m: lambda y: jax.lax.map(
        lambda w: jax.device_put(w, jax.memory.Space.Device) * 2, y), (y,), {}),
    "scan_to_device": lambda x, y, host, dev: (lambda m: lambda y: jax.lax.scan(
        lambda c, w: (c, jax.device_put(w, jax.memory.Space.Device) * 2), 0.0, y)[1], (y,),
        {}),
    "cond_to_host": lambda x, y, host, dev: (lambda m: lambda x: jax.lax.cond(
        x[0, 0] > 0, lambda v: jax.device_put(v, jax.memory.Space.Host),
        lambda v: jax.device_put(v * 2, jax.memory.Space.Host), x), (x,), {}),
    "fori_host_carry": lambda x, y, host, dev: (lambda m: lambda y: jax.lax.fori_loop(
        0, 2, lambda i, c: jax.device_put(jax.device_put(c, jax.memory.Space.Device) * 2,
                                          jax.memory.Space.Host), y), (y,), {}),
    "grad_of_host_argument": lambda x, y, host, dev: (lambda m: (
        jax.grad if m is jnp else shardc.grad)(lambda a: m.sum(
            jax.device_put(a, jax.memory.Space.Device) ** 2)), (y,), {}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_result_memory_kinds_are_jaxs(spaces, name):
    mk, args, kw = CASES[name](*spaces)
    _same(mk, args, **kw)


def test_checkpoint_and_shard_map_bodies_put_results_on_the_host(spaces, mesh2x4):
    x, _, _, _ = spaces
    H = jax.memory.Space.Host
    _same(lambda m: lambda a: (jax.checkpoint if m is jnp else shardc.checkpoint)(
        lambda v: jax.device_put(v * 2, H))(a), (x,))
    _same(lambda m: lambda a: (jax.shard_map if m is jnp else shardc.shard_map)(
        lambda v: jax.device_put(v * 2, H), mesh=mesh2x4, in_specs=P("x"),
        out_specs=P("x"))(a), (x,))


def test_single_device_host_arrays(spaces):
    y1 = jax.device_put(np.arange(8, dtype=np.float32), jax.memory.Space.Host)
    _same(lambda m: lambda v: v * 2, (y1,))


def test_the_cache_tells_host_arrays_from_numpy_placed_there(spaces):
    """in_shardings places a NumPy argument in host memory but types it as the device's;
    an array already there is typed as the host's (jax's): two programs."""
    x, y, host, _ = spaces
    for order in ((np.asarray(x), y), (y, np.asarray(x))):
        f, g = jax.jit(lambda a: a * 3, in_shardings=host), \
            shardc.jit(lambda a: a * 3, in_shardings=host)
        assert [_kinds(g(a)) for a in order] == [_kinds(f(a)) for a in order]


def test_jax_code_sees_host_types(spaces):
    _, y, _, _ = spaces
    got = []
    shardc.jit(lambda v: got.append(jax.typeof(v).memory_space) or v)(y)
    assert got == [jax.memory.Space.Host]


def test_in_shardings_memory_kind_must_match_the_array(spaces):
    x, _, host, _ = spaces
    with pytest.raises(ValueError, match="Memory kinds passed to jax.jit does not match"):
        jax.jit(lambda a: a + 1, in_shardings=host)(x)
    with pytest.raises(shardc.ShardcError, match="has memory kind pinned_host but the array "
                       "passed is in device memory"):
        shardc.jit(lambda a: a + 1, in_shardings=host)(x)


def test_eager_ops_keep_host_arrays_on_the_host(spaces):
    _, y, _, _ = spaces
    assert snp.sin(y).sharding.memory_kind == jnp.sin(y).sharding.memory_kind == "pinned_host"
    np.testing.assert_array_equal(np.asarray(snp.sin(y)), np.asarray(jnp.sin(y)))


def _memory_attrs(text):
    """The memory kinds the main function's signature names, in order."""
    (main,) = [ln for ln in text.splitlines() if "func.func public @main" in ln]
    return re.findall(r'mhlo.memory_kind = "(\w+)"', main)


def test_lowering_names_host_arguments_and_results_as_jax(spaces):
    x, y, host, _ = spaces
    ours = shardc.jit(lambda y, x: (y * 2, x + 1)).lower(y, x).as_text()
    theirs = jax.jit(lambda y, x: (y * 2, x + 1)).lower(y, x).as_text()
    # jax names the device's memory too; shardc only the host's
    assert _memory_attrs(ours) == [k for k in _memory_attrs(theirs) if k != "device"] == \
        ["pinned_host", "pinned_host"]


def test_for_a_gpu_moves_are_xlas_placement_calls(spaces, monkeypatch):
    """Lowered for a GPU (not run here): jax's annotate_device_placement custom call for
    each move inside the program and for a result on the host."""
    x, _, host, dev = spaces
    monkeypatch.setattr("shardc.api.jit.target_platform", lambda: "cuda")
    text = shardc.jit(lambda x: (jax.device_put(jax.device_put(x, host) * 2, dev),
                                 jax.device_put(x, host))).lower(x).as_text()
    calls = re.findall(r'annotate_device_placement.*_xla_buffer_placement = "(\w+)"', text)
    assert calls == ["pinned_host", "device", "pinned_host", "pinned_host"], calls
    _, y, _, _ = spaces    # a host argument returned on the device: XLA moves it
    text = shardc.jit(lambda y: y * 2, out_shardings=dev).lower(y).as_text()
    calls = re.findall(r'annotate_device_placement.*_xla_buffer_placement = "(\w+)"', text)
    assert calls == ["device"], calls


def test_the_ir_names_arguments_and_results_memory_and_round_trips(spaces):
    """The IR text shows where each argument and result lives (device memory is the
    default, written only for a result out_shardings moves back there); parsing it
    back gives the same text and the same lowering."""
    from shardc.ir.parse import parse_program
    from shardc.ir.program import print_program
    from shardc.lower.emit import lower
    x, y, host, dev = spaces
    f = shardc.jit(lambda y, x: (y * 2, x + 1, y - 1), out_shardings=(None, host, dev))
    p = f.trace(y, x).propagate().program
    text = print_program(p)
    head = text.splitlines()[1]
    assert head.count("memory=pinned_host") == 3 and head.count("memory=device") == 1, head
    assert "%x: f32[8,4] [{x}, {}])" in head    # a device argument: nothing written
    q = parse_program(text)
    assert print_program(q) == text
    def main(text):
        return [ln for ln in text.splitlines() if "func.func public @main" in ln]
    assert main(lower(q)) == main(lower(p)) and _memory_attrs(lower(q)) == ["pinned_host"] * 3


# ---------------------------------------------------------------- remat offloading

X = np.linspace(0, 1, 64, dtype=np.float32).reshape(8, 8)
W = np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)


def _policies(cp):
    return {"save_and_offload": cp.save_and_offload_only_these_names(
        names_which_can_be_saved=["a"], names_which_can_be_offloaded=["b"],
        offload_src="device", offload_dst="pinned_host"),
        "offload_dots": cp.offload_dot_with_no_batch_dims("device", "pinned_host")}


@pytest.mark.parametrize("policy", ["save_and_offload", "offload_dots"])
def test_offloading_policies(policy, capsys):
    """shardc's policies, jax's passed to shardc.checkpoint, and jax's in jax code under
    shardc.jit: jax.grad's values; the offloaded residuals are moved to the host and
    back (print_saved_residuals marks them <host>)."""
    want = jax.jit(jax.grad(jax.checkpoint(_f(jnp, jax.ad_checkpoint.checkpoint_name),
                                           policy=_policies(jax.checkpoint_policies)[policy]),
                            argnums=(0, 1)))(X, W)
    sname = shardc.ad_checkpoint.checkpoint_name
    variants = {
        "shardc": shardc.checkpoint(_f(snp, sname),
                                    policy=_policies(shardc.checkpoint_policies)[policy]),
        "jax policy": shardc.checkpoint(_f(snp, sname),
                                        policy=_policies(jax.checkpoint_policies)[policy]),
        "jax code": jax.checkpoint(_f(jnp, jax.ad_checkpoint.checkpoint_name),
                                   policy=_policies(jax.checkpoint_policies)[policy]),
    }
    for what, g in variants.items():
        got = shardc.jit(shardc.grad(g, argnums=(0, 1)))(X, W)
        for a, b in zip(got, want):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, err_msg=what)
        text = shardc.jit(shardc.grad(g)).trace(X, W).traced_ir
        assert "memory_put" in text and "kind='pinned_host'" in text and \
            "kind='device'" in text, what
        shardc.ad_checkpoint.print_saved_residuals(g, X, W)
        lines = capsys.readouterr().out.splitlines()
        host = [ln for ln in lines if "<host>" in ln]
        if policy == "save_and_offload":
            assert host == [ln for ln in lines if "named 'b'" in ln] and len(host) == 1, lines
            assert any("named 'a'" in ln and "<host>" not in ln for ln in lines), lines
        else:
            assert len(host) == 2 and all("output of dot_general" in ln for ln in host), lines


def test_a_policy_answering_as_jax_does():
    """jax's pe.Saveable and pe.Recompute answers from a policy given to
    shardc.checkpoint (Recompute is a truthy object: it used to mean saved)."""
    from jax._src.interpreters import partial_eval as pe

    def policy(prim, *_, **params):
        if prim is shardc.ad_checkpoint.checkpoint_name.__globals__["name_p"]:
            return pe.Saveable if params["name"] == "a" else pe.Recompute
        return pe.Recompute
    g = shardc.checkpoint(_f(snp, shardc.ad_checkpoint.checkpoint_name), policy=policy)
    from shardc.api.residuals import saved_residuals
    srcs = [src for _, src in saved_residuals(g, X, W)]
    assert len(srcs) == 3 and "named 'a'" in srcs[2], srcs


def test_offload_policy_names_must_not_overlap():
    with pytest.raises(shardc.ShardcError, match="should be exclusive"):
        shardc.checkpoint_policies.save_and_offload_only_these_names(
            names_which_can_be_saved=["a"], names_which_can_be_offloaded=["a", "b"],
            offload_src="device", offload_dst="pinned_host")


def test_a_jit_inside_a_trace_keeps_its_results_types(spaces):
    """A nested jit's out_shardings memory kind leaves its result's type as it is (as
    jax's: the nested jit is traced in place)."""
    x, _, host, _ = spaces
    _same(lambda m: lambda x: jax.jit(lambda v: v * 2, out_shardings=host)(x) + 1
          if m is jnp else shardc.jit(lambda v: v * 2, out_shardings=host)(x) + 1, (x,))
