"""Shared harness for the explicit-sharding tutorial tests: each cell is written once
against a library namespace `L` (jax or shardc) and run on both, on the same mesh; the
strings the cell logs (typeof's, inside traces too), its outputs' values, shardings and
types, or its errors, are compared."""
from __future__ import annotations

import types as _types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

import shardc
import shardc.lax as slax
import shardc.numpy as snp
from shardc.api.explicit import abstract_mesh_now
from shardc.api.explicit import auto_axes as s_auto_axes
from shardc.api.explicit import explicit_axes as s_explicit_axes

EXPLICIT = (AxisType.Explicit, AxisType.Explicit)
AUTO = (AxisType.Auto, AxisType.Auto)


def _shardc_mesh_now():
    sh = getattr(shardc, "sharding", None)
    if sh is not None and hasattr(sh, "get_abstract_mesh"):
        return sh.get_abstract_mesh()
    m = abstract_mesh_now()
    if m is None:       # top level: only shardc.sharding.get_abstract_mesh knows it
        raise NotImplementedError("shardc.sharding.get_abstract_mesh is missing")
    return m


JAX = _types.SimpleNamespace(
    name="jax", jit=jax.jit, np=jnp, lax=jax.lax, typeof=jax.typeof,
    reshard=jax.sharding.reshard, set_mesh=jax.set_mesh, auto_axes=jax.sharding.auto_axes,
    explicit_axes=jax.sharding.explicit_axes, mesh_now=jax.sharding.get_abstract_mesh,
    grad=jax.grad, vmap=jax.vmap, random=jax.random, shard_map=jax.shard_map, jvp=jax.jvp,
    vjp=jax.vjp)
SHARDC = _types.SimpleNamespace(
    name="shardc", jit=shardc.jit, np=snp, lax=slax, typeof=shardc.typeof,
    reshard=shardc.reshard, set_mesh=shardc.set_mesh, auto_axes=s_auto_axes,
    explicit_axes=s_explicit_axes, mesh_now=_shardc_mesh_now, grad=shardc.grad,
    vmap=shardc.vmap, random=shardc.random, shard_map=shardc.shard_map, jvp=shardc.jvp,
    vjp=shardc.vjp)
LIBS = (JAX, SHARDC)


def mesh_of(shape=(2, 4), names=("X", "Y"), axis_types=EXPLICIT):
    return jax.make_mesh(shape, names, axis_types=axis_types)


def mesh_info(m):
    """An abstract mesh as (sizes, names, types): jax's str adds device_kind etc."""
    return (tuple(m.axis_sizes), tuple(m.axis_names), tuple(m.axis_types))


def put(mesh, a, *spec):
    return jax.device_put(np.asarray(a), NamedSharding(mesh, P(*spec)))


def padded(spec, ndim):
    """A spec with its trailing Nones spelled out (jax spells an explicit type's spec
    at full rank, an auto one trimmed; the exact spelling is tested on its own)."""
    parts = tuple(spec) + (None,) * (ndim - len(tuple(spec)))
    return parts, spec.unreduced if hasattr(spec, "unreduced") else None


def run(cell, mesh, *args):
    """`cell(L, log, *args)` under `L.set_mesh(mesh)` (mesh None: no mesh) for jax and
    shardc; returns [(log, out, types)] with the outputs' types read under the mesh."""
    res = []
    for L in LIBS:
        log = []
        if mesh is None:
            out = cell(L, log, *args)
            tys = [str(L.typeof(o)) for o in jax.tree_util.tree_leaves(out)]
        else:
            with L.set_mesh(mesh):
                out = cell(L, log, *args)
                tys = [str(L.typeof(o)) for o in jax.tree_util.tree_leaves(out)]
        res.append((log, out, tys))
    return res


def same(cell, mesh, *args, rtol=1e-6):
    """Run `cell` on both; logs, types, values and shardings must agree."""
    (jlog, jout, jtys), (slog, sout, stys) = run(cell, mesh, *args)
    assert slog == jlog, ("shardc", slog, "jax", jlog)
    assert stys == jtys, ("shardc", stys, "jax", jtys)
    jl, jt = jax.tree_util.tree_flatten(jout)
    sl, st = jax.tree_util.tree_flatten(sout)
    assert st == jt, (st, jt)
    for j, s in zip(jl, sl):
        np.testing.assert_allclose(np.asarray(s), np.asarray(j), rtol=rtol)
        assert np.asarray(s).dtype == np.asarray(j).dtype, (s.dtype, j.dtype)
        if isinstance(j, jax.Array):
            if isinstance(j.sharding, NamedSharding):
                assert isinstance(s.sharding, NamedSharding), s.sharding
                assert padded(s.sharding.spec, j.ndim) == padded(j.sharding.spec, j.ndim), \
                    (s.sharding.spec, j.sharding.spec)
            else:
                assert type(s.sharding) is type(j.sharding)
                assert s.sharding.device_set == j.sharding.device_set
    return jlog, jout


def errors(cell, mesh, words, *args):
    """Both raise a ShardingTypeError whose message has each of `words`; shardc's names
    the user's line."""
    got = []
    for L in LIBS:
        with L.set_mesh(mesh):
            with pytest.raises(Exception) as ei:
                cell(L, [], *args)
        got.append(ei.value)
    je, se = got
    assert type(je).__name__ == "ShardingTypeError", je
    assert type(se).__name__ == "ShardingTypeError", se
    for w in words:
        assert w.lower() in str(je).lower(), (w, str(je))
        assert w.lower() in str(se).lower(), (w, str(se))
    assert ".py:" in str(se), str(se)
    return je, se
