"""Checkpoints of sharded arrays and train states, with orbax-checkpoint.

shardc's programs take and return ordinary (sharded) jax Arrays, so orbax, the jax
ecosystem's checkpoint library, saves them as they are: each process writes the
shards its devices hold, in parallel, and process 0 writes the metadata (array
shapes, dtypes, the tree's structure). Restoring reads, on each device, just the
slice its new sharding asks for: a checkpoint restores onto any mesh, any sharding
and any number of processes, not only the one it was saved from.

This module is a small layer over orbax's StandardCheckpointer: absolute paths,
blocking saves, a layout given as `target=` (arrays or ShapeDtypeStructs) and/or
`shardings=` (a tree prefix of Shardings or PartitionSpecs), and errors that say which
leaf of the tree is wrong. orbax is imported only here, when a checkpoint is saved or
restored: `import shardc` does not need it (`pip install shardc[checkpoint]`).
"""
from __future__ import annotations

import numbers
import os

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec, Sharding

from ..errors import ShardcError, api_boundary
from ..trace.core import Tracer
from .meshes import current_mesh

__all__ = ["save", "restore", "metadata"]


def _orbax():
    try:
        import orbax.checkpoint as ocp
    except ImportError as e:
        raise ShardcError(
            "shardc.checkpoints needs orbax-checkpoint, which is not installed: "
            "`pip install shardc[checkpoint]` (or `pip install orbax-checkpoint`)"
            f" ({e})") from None
    return ocp


def _path(path, what) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise ShardcError(f"{what}: the path must be a str or os.PathLike, got "
                          f"{type(path).__name__}")
    # orbax wants absolute paths; every process resolves the same relative path
    # (`shardc launch` starts them all in one directory).
    return os.path.abspath(os.path.expanduser(os.fspath(path)))


def _first_line(e: BaseException) -> str:
    s = str(e).strip()
    return s.splitlines()[0] if s else type(e).__name__


# ---------------------------------------------------------------- tree paths


def _key(k) -> str:
    """One step of a jax key path as orbax names it on disk (dict keys, attribute
    names, sequence indices, all as strings)."""
    for attr in ("key", "name", "idx"):
        if hasattr(k, attr):
            return str(getattr(k, attr))
    return str(k)


def _leaves(tree, is_leaf=None):
    """{path (tuple of str): (jax key path, leaf)} of a pytree."""
    flat, _ = jax.tree_util.tree_flatten_with_path(tree, is_leaf=is_leaf)
    return {tuple(_key(k) for k in p): (p, x) for p, x in flat}


def _show(path) -> str:
    return "/".join(path) if path else "(the root)"


# ---------------------------------------------------------------- save


_SCALARS = (numbers.Number, np.generic)


@api_boundary
def save(path, tree, *, force=False) -> str:
    """Save a pytree of (sharded) arrays, NumPy arrays and scalars to the directory
    `path`, and wait until it is written. Returns the absolute path.

    In a multi-process run every process calls it with the same path and a tree of
    the same structure; each writes the shards its devices hold. The directory
    appears only once all of it is written (an interrupted save leaves no
    checkpoint behind). With force=True an existing checkpoint at `path` is
    replaced; without, it is an error."""
    path = _path(path, "shardc.checkpoints.save")
    for p, (kp, x) in _leaves(tree).items():
        if isinstance(x, (Tracer, jax.core.Tracer)):
            raise ShardcError(
                f"shardc.checkpoints.save: leaf {_show(p)} is a traced value: save "
                "outside shardc.jit (save the arrays the jitted function returns)")
        if not isinstance(x, (jax.Array, np.ndarray) + _SCALARS):
            raise ShardcError(
                f"shardc.checkpoints.save: leaf {_show(p)} is a {type(x).__name__}; a "
                "checkpoint holds arrays (jax or NumPy) and numbers only")
    if os.path.exists(path) and not force:
        raise ShardcError(
            f"shardc.checkpoints.save: {path} already exists; pass force=True to replace "
            "it, or save each step to its own directory (e.g. f'{root}/{step}')")
    ocp = _orbax()
    try:
        with ocp.StandardCheckpointer() as ckpt:
            ckpt.save(path, tree, force=force)
            ckpt.wait_until_finished()
    except ShardcError:
        raise
    except Exception as e:  # noqa: BLE001 -- orbax and tensorstore raise their own
        raise ShardcError(f"shardc.checkpoints.save: could not save to {path}: "
                          f"{_first_line(e)}") from e
    return path


# ---------------------------------------------------------------- restore


def _checkpoint(path, what):
    path = _path(path, what)
    if not os.path.isdir(path):
        raise ShardcError(f"{what}: there is no checkpoint at {path}")
    return path


@api_boundary
def metadata(path):
    """The checkpoint's tree, as saved, with a jax.ShapeDtypeStruct (no sharding) for
    each array and number. Dicts stay dicts; tuples, lists and namedtuples come back
    as lists, other pytree nodes (dataclasses) as dicts of their fields."""
    path = _checkpoint(path, "shardc.checkpoints.metadata")
    return jax.tree_util.tree_map(_abstract, _saved_tree(path, "shardc.checkpoints.metadata"),
                                  is_leaf=_is_meta)


def _saved_tree(path, what):
    ocp = _orbax()
    try:
        with ocp.StandardCheckpointer() as ckpt:
            return ckpt.metadata(path).item_metadata.tree
    except Exception as e:  # noqa: BLE001
        raise ShardcError(f"{what}: {path} is not a readable checkpoint: "
                          f"{_first_line(e)}") from e


def _is_meta(x) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, jax.Array)


def _abstract(m):
    return jax.ShapeDtypeStruct(tuple(m.shape), np.dtype(m.dtype))


def _restorable(m):
    """What to ask orbax for, without a target: a number for a number (orbax saves
    Python and NumPy scalars as scalars), else the array's shape and dtype."""
    if type(m).__name__ == "ScalarMetadata":
        return np.dtype(m.dtype).type(0).item()
    return _abstract(m)


def _resolve(s, mesh, where):
    """A jax Sharding from a shardings= leaf."""
    if isinstance(s, PartitionSpec):
        mesh = mesh if mesh is not None else current_mesh()
        if mesh is None:
            raise ShardcError(
                f"shardc.checkpoints.restore: shardings= gives {where} a bare "
                "PartitionSpec, which needs a mesh: pass mesh=, use "
                "`with shardc.set_mesh(mesh):`, or give NamedSharding(mesh, spec)")
        return NamedSharding(mesh, s)
    if isinstance(s, Sharding):
        return s
    raise ShardcError(f"shardc.checkpoints.restore: shardings= gives {where} a "
                      f"{type(s).__name__}; expected a jax Sharding or a PartitionSpec")


def _layouts(shardings, leaf_paths, mesh):
    """{leaf path: sharding} from `shardings`, a tree prefix of the leaves' tree
    (matched by key names, so it may spell tuples and namedtuples as lists and
    dicts)."""
    is_leaf = lambda x: isinstance(x, (Sharding, PartitionSpec))
    given = _leaves(shardings, is_leaf=is_leaf)
    out = {}
    for p in leaf_paths:
        for n in range(len(p), -1, -1):     # the longest prefix given wins
            if p[:n] in given:
                out[p] = _resolve(given[p[:n]][1], mesh, _show(p))
                break
    used = {q for p in out for q in [p[:n] for n in range(len(p) + 1)]}
    unused = [q for q in given if q not in used]
    if unused:
        raise ShardcError(
            f"shardc.checkpoints.restore: shardings= names {_show(unused[0])}, which is "
            f"not in the tree being restored (its leaves: "
            f"{', '.join(_show(p) for p in list(leaf_paths)[:8])}"
            f"{', ...' if len(leaf_paths) > 8 else ''})")
    return out


def _target_leaf(x, p):
    if isinstance(x, jax.ShapeDtypeStruct):
        return x
    if isinstance(x, jax.Array):
        return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding)
    if isinstance(x, np.generic):
        return np.asarray(x)     # orbax keeps NumPy scalars as 0-d arrays (see restore)
    if isinstance(x, (np.ndarray, numbers.Number)):
        return x            # restored as a NumPy array / a number of its type
    raise ShardcError(
        f"shardc.checkpoints.restore: target leaf {_show(p)} is a {type(x).__name__}; "
        "expected an array, a jax.ShapeDtypeStruct (with .sharding: where to put it) or "
        "a number")


def _check_against(saved, want, path):
    """Same leaves, same shapes (dtypes may differ: orbax casts)."""
    missing = [p for p in saved if p not in want]
    extra = [p for p in want if p not in saved]
    if missing or extra:
        parts = []
        if extra:
            parts.append("the target has " + ", ".join(_show(p) for p in extra[:6]) +
                         " which the checkpoint has not")
        if missing:
            parts.append("the checkpoint has " + ", ".join(_show(p) for p in missing[:6]) +
                         " which the target has not")
        raise ShardcError(f"shardc.checkpoints.restore: the target's tree does not match "
                          f"the checkpoint at {path}: {'; '.join(parts)}")
    for p, (_, m) in saved.items():
        x = want[p][1]
        shape = tuple(np.shape(x))
        if tuple(m.shape) != shape:
            raise ShardcError(
                f"shardc.checkpoints.restore: {_show(p)} has shape {tuple(m.shape)} in the "
                f"checkpoint at {path} but shape {shape} in the target")


@api_boundary
def restore(path, target=None, *, shardings=None, mesh=None):
    """Restore the checkpoint at `path`, onto any mesh and sharding.

    - `target`: a pytree like the one saved, whose leaves say what to make of each
      value: a jax Array or a jax.ShapeDtypeStruct with .sharding -> a jax Array with
      that sharding (and dtype: a different dtype casts); a NumPy array or a
      ShapeDtypeStruct without sharding -> a NumPy array; a number -> a number. The
      result has the target's structure (namedtuples, dataclasses, ...).
    - `shardings`: Shardings or PartitionSpecs (on `mesh`, or the `shardc.set_mesh`
      mesh) for the arrays, as a tree prefix of the target's tree (or, without a
      target, of the checkpoint's: see `metadata`), e.g. one NamedSharding for all,
      or {"params": P("x"), "opt_state": P()}. It overrides the target's shardings.
    - neither: each array comes back with the sharding it was saved with, which needs
      this run to have the devices it was saved from.

    Every process of a multi-process run calls it with the same arguments."""
    what = "shardc.checkpoints.restore"
    path = _checkpoint(path, what)
    saved_tree = _saved_tree(path, what)
    saved = _leaves(saved_tree, is_leaf=_is_meta)
    if target is None and shardings is None:
        item = None
    else:
        if target is None:
            want_tree = jax.tree_util.tree_map(_restorable, saved_tree, is_leaf=_is_meta)
        else:
            want_tree = jax.tree_util.tree_map_with_path(
                lambda kp, x: _target_leaf(x, tuple(_key(k) for k in kp)), target)
        want = _leaves(want_tree)
        _check_against(saved, want, path)
        layout = {} if shardings is None else _layouts(shardings, list(want), mesh)
        item = jax.tree_util.tree_map_with_path(
            lambda kp, x: _place(x, tuple(_key(k) for k in kp), layout, saved), want_tree)
    ocp = _orbax()
    try:
        with ocp.StandardCheckpointer() as ckpt:
            out = ckpt.restore(path, item)
    except Exception as e:  # noqa: BLE001
        msg = _first_line(e)
        if item is None and "topology" in msg.lower():
            raise ShardcError(
                f"{what}: the checkpoint at {path} was saved on other devices than this "
                "run has, so it cannot come back with the shardings it was saved with: "
                "say where to put it, with target= (arrays or jax.ShapeDtypeStructs with "
                ".sharding) or shardings= (e.g. shardings=P(), mesh=mesh)") from e
        raise ShardcError(f"{what}: could not restore {path}: {msg}") from e
    if target is None:
        return out
    # a NumPy scalar in the target comes back as one (not as the 0-d array orbax gives)
    return jax.tree_util.tree_map(
        lambda t, x: x[()] if isinstance(t, np.generic) and isinstance(x, np.ndarray) else x,
        target, out)


def _place(x, p, layout, saved):
    """The target leaf at path `p` with the sharding shardings= gives it, if any."""
    sharding = layout.get(p)
    if sharding is None or isinstance(x, numbers.Number):   # numbers stay numbers
        return x
    shape = tuple(np.shape(x))
    dtype = x.dtype if hasattr(x, "dtype") else np.dtype(saved[p][1].dtype)
    spec = getattr(sharding, "spec", None)
    if spec is not None and len(spec) > len(shape):
        raise ShardcError(
            f"shardc.checkpoints.restore: shardings= gives {_show(p)} (shape {shape}) the "
            f"spec {spec}, which has more entries than the array has dimensions")
    return jax.ShapeDtypeStruct(shape, dtype, sharding=sharding)
