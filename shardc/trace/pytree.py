"""Pytrees as shardc's transforms see them: jax.tree_util, except that a leaf type
registered here with `expand` flattens to several arrays.

That type is the in-trace typed PRNG key (api.random._keys.KeyArray). To jax it is a
leaf of dtype key<fry>, so jax's own loops, jits and vmaps inside a shardc trace carry
it as a key, as they carry jax's key arrays. shardc's transforms trace arrays, so here
it flattens to its uint32 data and unflattens to a key again: every shardc API that
flattens a user's pytree (jit, scan, vmap, grad, ...) goes through this module.
"""
from __future__ import annotations

import jax

_tu = jax.tree_util
_EXPANDED: dict[type, tuple[type, object]] = {}    # leaf type -> (node type, to_children)
_NODES: set[type] = set()


def expand(cls, to_children, from_children):
    """Flatten each `cls` leaf to the children of `to_children(x) -> (children, aux)`
    and rebuild it with `from_children(aux, children)` (aux is hashable, as a pytree
    node's, and part of the tree structure)."""
    class Expanded:
        __slots__ = ("children", "aux")

        def __init__(self, flat):
            self.children, self.aux = flat
    Expanded.__name__ = Expanded.__qualname__ = cls.__name__
    _tu.register_pytree_node(Expanded, lambda n: (n.children, n.aux),
                             lambda aux, children: from_children(aux, tuple(children)))
    _EXPANDED[cls] = (Expanded, to_children)
    _NODES.add(Expanded)


def collapse(tree):
    """`tree` with each expanded leaf as its one child: a tree of flags (a custom_vmap
    rule's in_batched) rebuilt through an expanded structure has a flag per key, as
    jax's trees have."""
    def one(x):
        e = _EXPANDED.get(type(x))
        if e is None:
            return x
        children, _ = e[1](x)
        return children[0] if len(children) == 1 else children
    return _tu.tree_map(one, tree)


def _node(x):
    e = _EXPANDED.get(type(x))
    return e[0](e[1](x)) if e else x


def _has(leaves):
    return not _EXPANDED.keys().isdisjoint(map(type, leaves))


def _expanded(tree, is_leaf):
    """`tree` with its expanded leaves as nodes (None if it has none)."""
    if not _has(_tu.tree_leaves(tree, is_leaf=is_leaf)):
        return None
    return _tu.tree_map(_node, tree, is_leaf=is_leaf)


def _leaf_pred(is_leaf):
    if is_leaf is None:
        return None
    return lambda x: type(x) not in _NODES and is_leaf(x)


def tree_flatten(tree, is_leaf=None):
    leaves, treedef = _tu.tree_flatten(tree, is_leaf=is_leaf)
    if not _has(leaves):        # the common case: one C-level flatten
        return leaves, treedef
    return _tu.tree_flatten(_tu.tree_map(_node, tree, is_leaf=is_leaf),
                            is_leaf=_leaf_pred(is_leaf))


def tree_leaves(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf)[1]


def tree_flatten_with_path(tree, is_leaf=None):
    t = _expanded(tree, is_leaf)
    return _tu.tree_flatten_with_path(tree if t is None else t, is_leaf=_leaf_pred(is_leaf))


def tree_leaves_with_path(tree, is_leaf=None):
    return tree_flatten_with_path(tree, is_leaf)[0]


def tree_map(f, tree, *rest, is_leaf=None):
    ts = [_expanded(t, is_leaf) for t in (tree, *rest)]
    ts = [t if e is None else e for t, e in zip((tree, *rest), ts)]
    return _tu.tree_map(f, *ts, is_leaf=_leaf_pred(is_leaf))


def tree_map_with_path(f, tree, *rest, is_leaf=None):
    ts = [_expanded(t, is_leaf) for t in (tree, *rest)]
    ts = [t if e is None else e for t, e in zip((tree, *rest), ts)]
    return _tu.tree_map_with_path(f, *ts, is_leaf=_leaf_pred(is_leaf))


def flatten_up_to(treedef, tree):
    """treedef.flatten_up_to(tree), with expanded leaves as their nodes."""
    t = _expanded(tree, None)
    return treedef.flatten_up_to(tree if t is None else t)


def tree_reduce(f, tree, *args, is_leaf=None):
    import functools
    return functools.reduce(f, tree_leaves(tree, is_leaf), *args)


tree_unflatten = _tu.tree_unflatten
treedef_is_leaf = _tu.treedef_is_leaf
keystr = _tu.keystr
Partial = _tu.Partial
register_pytree_node = _tu.register_pytree_node
register_pytree_node_class = _tu.register_pytree_node_class
