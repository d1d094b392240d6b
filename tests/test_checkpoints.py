"""shardc.checkpoints: train states of sharded arrays saved with orbax, restored onto
other meshes and shardings, in one process and under `shardc launch`.

This file is also the multi-process worker: `python tests/test_checkpoints.py save DIR`
run by `shardc launch -n 2 --devices-per-process 4`.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import shardc
from shardc import NamedSharding, P

pytest.importorskip("orbax.checkpoint")
ckpts = shardc.checkpoints


def values():
    rng = np.random.default_rng(0)
    return {"w": rng.standard_normal((8, 16), dtype=np.float32),
            "b": rng.standard_normal((16,), dtype=np.float32),
            "emb": np.arange(64 * 8, dtype=np.int32).reshape(64, 8)}


def put(x, mesh, spec):
    return shardc.make_array_from_callback(x.shape, NamedSharding(mesh, spec), lambda i: x[i])


def state_on(mesh24):
    """A train state: arrays over the (2, 4) mesh, one made by shardc.jit, numbers."""
    v = values()
    w = put(v["w"], mesh24, P("data", "model"))
    b = put(v["b"], mesh24, P("model"))
    emb = shardc.jit(lambda e: e * 2)(put(v["emb"], mesh24, P("data", None)))
    return {"params": {"w": w, "b": b}, "emb": emb, "step": 7, "lr": np.float32(0.5),
            "host": np.arange(5.0)}


def expected():
    v = values()
    return {"params": {"w": v["w"], "b": v["b"]}, "emb": v["emb"] * 2, "step": 7,
            "lr": np.float32(0.5), "host": np.arange(5.0)}


def other_layout():
    """Another mesh (4, 2), other axes split, and the shardings to restore onto."""
    m42 = shardc.make_mesh((4, 2), ("x", "y"), axis_types=(shardc.AxisType.Auto,) * 2)
    return m42, {"params": {"w": NamedSharding(m42, P("y", "x")),
                            "b": NamedSharding(m42, P(None))},
                 "emb": NamedSharding(m42, P(None, ("y", "x")))}


def abstract(tree, shardings):
    import jax
    return jax.tree_util.tree_map(
        lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), tree, shardings)


def check_restored(r, shardings):
    exp = expected()
    for k in ("w", "b"):
        np.testing.assert_array_equal(np.asarray(r["params"][k]), exp["params"][k])
        assert r["params"][k].sharding == shardings["params"][k]
    np.testing.assert_array_equal(np.asarray(r["emb"]), exp["emb"])
    assert r["emb"].sharding == shardings["emb"]
    assert r["emb"].dtype == np.int32


# ---------------------------------------------------------------- one process


@pytest.fixture(scope="module")
def mesh24():
    return shardc.make_mesh((2, 4), ("data", "model"), axis_types=(shardc.AxisType.Auto,) * 2)


@pytest.fixture(scope="module")
def saved(tmp_path_factory, mesh24):
    path = tmp_path_factory.mktemp("ckpt") / "state"
    assert ckpts.save(path, state_on(mesh24)) == str(path)
    return path


def test_train_state_restores_onto_another_mesh_and_sharding(saved, mesh24):
    m42, sh = other_layout()
    state = state_on(mesh24)
    target = {"params": abstract(state["params"], sh["params"]),
              "emb": abstract(state["emb"], sh["emb"]), "step": 0, "lr": np.float32(0),
              "host": np.zeros(5)}
    r = ckpts.restore(saved, target)
    check_restored(r, sh)
    assert r["step"] == 7 and type(r["step"]) is int
    assert isinstance(r["host"], np.ndarray) and r["lr"] == np.float32(0.5)
    assert type(r["lr"]) is np.float32
    np.testing.assert_array_equal(r["host"], np.arange(5.0))


def test_shardings_as_a_tree_prefix(saved, mesh24):
    """Without a target, shardings= (a prefix of the saved tree) says where the arrays
    go; bare PartitionSpecs are on mesh= or the set_mesh mesh."""
    m8 = shardc.make_mesh((8,), ("x",), axis_types=(shardc.AxisType.Auto,))
    r = ckpts.restore(saved, shardings={"params": P("x"), "emb": P(None, "x")}, mesh=m8)
    np.testing.assert_array_equal(np.asarray(r["params"]["w"]), values()["w"])
    assert r["params"]["w"].sharding == NamedSharding(m8, P("x"))
    assert r["params"]["b"].sharding == NamedSharding(m8, P("x"))
    assert r["emb"].sharding == NamedSharding(m8, P(None, "x"))
    assert r["step"] == 7 and isinstance(r["host"], np.ndarray)   # no sharding named
    with shardc.set_mesh(m8):
        r = ckpts.restore(saved, shardings=P())
    assert r["emb"].sharding == NamedSharding(m8, P())
    np.testing.assert_array_equal(np.asarray(r["emb"]), expected()["emb"])
    assert r["step"] == 7                                  # numbers stay numbers


def test_restore_with_the_saved_layout_and_metadata(saved, mesh24):
    r = ckpts.restore(saved)
    assert r["params"]["w"].sharding == NamedSharding(mesh24, P("data", "model"))
    np.testing.assert_array_equal(np.asarray(r["params"]["w"]), values()["w"])
    md = ckpts.metadata(saved)
    assert md["emb"].shape == (64, 8) and md["emb"].dtype == np.int32
    assert md["params"]["w"].shape == (8, 16)


def test_optax_state_round_trips(tmp_path, mesh24):
    """An optax state (namedtuples, an empty state, a step count) after one update,
    restored onto another layout with its own structure, keeps training."""
    import jax
    import optax
    v = values()
    params = {"w": put(v["w"], mesh24, P("data", "model")), "b": put(v["b"], mesh24, P())}
    opt = optax.adam(1e-2)
    grads = jax.tree_util.tree_map(lambda p: p * 0.5, params)
    updates, opt_state = opt.update(grads, opt.init(params), params)
    params = optax.apply_updates(params, updates)
    ckpts.save(tmp_path / "s", {"params": params, "opt": opt_state})

    m8 = shardc.make_mesh((8,), ("x",), axis_types=(shardc.AxisType.Auto,))
    abstract_state = jax.eval_shape(lambda: {"params": params, "opt": opt.init(params)})
    r = ckpts.restore(tmp_path / "s", abstract_state,
                      shardings={"params": NamedSharding(m8, P("x")),
                                 "opt": NamedSharding(m8, P())})
    assert type(r["opt"]) is type(opt_state)
    assert type(r["opt"][0]).__name__ == "ScaleByAdamState"
    assert int(r["opt"][0].count) == 1
    assert r["opt"][0].mu["w"].sharding == NamedSharding(m8, P())
    assert r["params"]["w"].sharding == NamedSharding(m8, P("x"))
    for a, b in zip(jax.tree_util.tree_leaves(r), jax.tree_util.tree_leaves(
            {"params": params, "opt": opt_state})):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # one more step from the restored state = one more step from the original
    u1, _ = opt.update(grads, r["opt"], r["params"])
    u0, _ = opt.update(grads, opt_state, params)
    np.testing.assert_allclose(np.asarray(u1["w"]), np.asarray(u0["w"]), rtol=1e-6)


def test_flax_train_state_round_trips(tmp_path, mesh24):
    """flax's TrainState (a dataclass pytree with static fields: apply_fn, tx) saved
    from one mesh, restored onto another into its own class, keeps training."""
    import jax
    import optax
    from flax import linen as nn
    from flax.training import train_state
    model = nn.Dense(16)
    x = values()["w"]
    params = model.init(jax.random.key(0), x)
    params = jax.device_put(params, NamedSharding(mesh24, P()))
    state = train_state.TrainState.create(apply_fn=model.apply, params=params,
                                          tx=optax.sgd(0.1, momentum=0.9))
    grads = jax.tree_util.tree_map(jax.numpy.ones_like, params)
    state = state.apply_gradients(grads=grads)
    ckpts.save(tmp_path / "s", state)

    m8 = shardc.make_mesh((8,), ("x",), axis_types=(shardc.AxisType.Auto,))
    kernel = NamedSharding(m8, P(None, "x"))
    r = ckpts.restore(tmp_path / "s", state,
                      shardings={"params": {"params": {"kernel": kernel}}, "opt_state": P()},
                      mesh=m8)
    assert type(r) is type(state) and r.apply_fn is state.apply_fn and int(r.step) == 1
    assert r.params["params"]["kernel"].sharding == kernel
    assert r.params["params"]["bias"].sharding == NamedSharding(mesh24, P())   # the target's
    for a, b in zip(jax.tree_util.tree_leaves(r), jax.tree_util.tree_leaves(state)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    s1, s0 = r.apply_gradients(grads=grads), state.apply_gradients(grads=grads)
    np.testing.assert_allclose(np.asarray(s1.params["params"]["kernel"]),
                               np.asarray(s0.params["params"]["kernel"]), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(r.apply_fn(r.params, x)),
                               np.asarray(state.apply_fn(state.params, x)), rtol=1e-6)


def test_force_replaces_a_checkpoint(tmp_path, mesh24):
    ckpts.save(tmp_path / "c", {"a": np.zeros(3)})
    with pytest.raises(shardc.ShardcError, match="already exists; pass force=True") as e:
        ckpts.save(tmp_path / "c", {"a": np.ones(3)})
    assert e.value.loc.file == __file__          # the user's line
    ckpts.save(tmp_path / "c", {"a": np.ones(3)}, force=True)
    np.testing.assert_array_equal(ckpts.restore(tmp_path / "c")["a"], np.ones(3))


def test_home_path_and_dtype_cast(tmp_path, monkeypatch, mesh24):
    monkeypatch.setenv("HOME", str(tmp_path))
    x = put(values()["w"], mesh24, P("data"))
    assert ckpts.save("~/c", {"x": x}) == str(tmp_path / "c")
    import jax
    s = NamedSharding(mesh24, P(None, "model"))
    r = ckpts.restore("~/c", {"x": jax.ShapeDtypeStruct(x.shape, np.float16, sharding=s)})
    assert r["x"].dtype == np.float16 and r["x"].sharding == s   # a target's dtype casts
    np.testing.assert_array_equal(np.asarray(r["x"]), values()["w"].astype(np.float16))


def test_errors(saved, mesh24, tmp_path):
    m8 = shardc.make_mesh((8,), ("x",), axis_types=(shardc.AxisType.Auto,))
    E = shardc.ShardcError
    state = state_on(mesh24)
    bad = dict(state, emb=np.zeros((64, 4), np.int32))
    with pytest.raises(E, match=r"emb has shape \(64, 8\) in the checkpoint .* shape "
                                r"\(64, 4\) in the target") as e:
        ckpts.restore(saved, bad)
    assert e.value.loc.file == __file__
    with pytest.raises(E, match="the target has extra which the checkpoint has not"):
        ckpts.restore(saved, dict(state, extra=np.zeros(2)))
    with pytest.raises(E, match="the checkpoint has host which the target has not"):
        ckpts.restore(saved, {k: v for k, v in state.items() if k != "host"})
    with pytest.raises(E, match="shardings= names params/v, which is not in the tree"):
        ckpts.restore(saved, shardings={"params": {"v": P()}}, mesh=m8)
    with pytest.raises(E, match="bare PartitionSpec, which needs a mesh"):
        ckpts.restore(saved, shardings=P())
    with pytest.raises(E, match="spec .* has more entries than the array has dimensions"):
        ckpts.restore(saved, shardings={"params": {"b": P("x", None)}}, mesh=m8)
    with pytest.raises(E, match="there is no checkpoint at"):
        ckpts.restore(tmp_path / "missing")
    with pytest.raises(E, match="leaf name is a str; a checkpoint holds arrays"):
        ckpts.save(tmp_path / "s", {"name": "adam"})
    with pytest.raises(E, match="leaf 0 is a traced value"):
        shardc.jit(lambda x: ckpts.save(tmp_path / "t", [x]) or x)(np.ones(2))
    assert not os.path.exists(tmp_path / "s") and not os.path.exists(tmp_path / "t")


def test_without_orbax_the_error_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "orbax.checkpoint", None)   # import fails
    with pytest.raises(shardc.ShardcError, match=r"pip install shardc\[checkpoint\]") as e:
        ckpts.save(tmp_path / "c", {"a": np.zeros(2)})
    assert e.value.loc.file == __file__


# ---------------------------------------------------------------- two processes save


def test_two_processes_save_one_restores_on_another_layout(tmp_path):
    from test_distributed import launch
    path = tmp_path / "ckpt"
    rc, so, se, secs = launch(["-n", "2", "--devices-per-process", "4", "--timeout", "100",
                               __file__, "save", str(path)])
    assert rc == 0, so + se
    assert so.count("restored in 2 processes") == 2, so + se
    # here: one process, 8 devices, another mesh and sharding
    m42, sh = other_layout()
    state = state_on(shardc.make_mesh((2, 4), ("data", "model"),
                                      axis_types=(shardc.AxisType.Auto,) * 2))
    target = {"params": abstract(state["params"], sh["params"]),
              "emb": abstract(state["emb"], sh["emb"]), "step": 0, "lr": np.float32(0),
              "host": np.zeros(5)}
    r = ckpts.restore(path, target)
    check_restored(r, sh)
    assert r["step"] == 7
    # the saved shardings name the two processes' devices, which this run lacks
    with pytest.raises(shardc.ShardcError, match="saved on other devices than this run"):
        ckpts.restore(path)


def worker_save(path):
    shardc.distributed.initialize()
    assert shardc.process_count() == 2 and len(shardc.devices()) == 8
    mesh24 = shardc.make_mesh((2, 4), ("data", "model"), axis_types=(shardc.AxisType.Auto,) * 2)
    state = state_on(mesh24)
    assert not state["params"]["w"].is_fully_addressable    # global arrays
    ckpts.save(path, state)
    # ... and back, in both processes, onto an 8-device mesh, split another way
    m8 = shardc.make_mesh((8,), ("x",), axis_types=(shardc.AxisType.Auto,))
    r = ckpts.restore(path, shardings={"params": P(None), "emb": P("x")}, mesh=m8)
    assert r["emb"].sharding == NamedSharding(m8, P("x"))
    got = shardc.process_allgather({"params": r["params"], "emb": r["emb"]})
    exp = expected()
    np.testing.assert_array_equal(got["emb"], exp["emb"])
    np.testing.assert_array_equal(got["params"]["w"], exp["params"]["w"])
    assert r["step"] == 7
    print("restored in 2 processes", flush=True)


if __name__ == "__main__":
    {"save": worker_save}[sys.argv[1]](sys.argv[2])
