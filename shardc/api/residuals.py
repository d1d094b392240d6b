"""jax.ad_checkpoint.print_saved_residuals: what a gradient of `f` keeps from its
forward pass for the backward pass, and where each comes from (an argument, a named
value, an op at a line) -- to see what a checkpoint policy saves.

The residuals are the leaves of the function vjp returns (shardc.api.vjp_fn): the
values its backward pass reads. A residual that is an argument (or its copy) is named
by the argument; one is listed once however often the backward pass reads it.
"""
from __future__ import annotations

from ..errors import api_boundary
from ..ir.program import Lit
from ..ops.memory import memory_put_p
from ..ops.remat import checkpoint_p, name_p
from ..transforms.ad import copy_p
from ..trace import pytree as _tree


def _producers(ops, into):
    """value id -> the op making it, for `ops` and the checkpoint regions among them."""
    for op in ops:
        for v in op.outputs:
            into[id(v)] = op
        if op.prim is checkpoint_p:
            _producers(op.regions[0].ops, into)
    return into


def _source(v, producer):
    """What `v` is: an argument's copy is the argument (vjp's fresh primal), a value
    moved to the host is that value, and a checkpoint's result is the value its region
    yields (what the policy saved). Also whether it is kept on the host (offloaded)."""
    host = None
    while type(v) is not Lit and id(v) in producer:
        op = producer[id(v)]
        if op.prim is memory_put_p and host is None:
            host = op.params["kind"] == "pinned_host"
        if op.prim is copy_p or op.prim is memory_put_p:
            v = op.inputs[0]
        elif op.prim is checkpoint_p:
            region = op.regions[0]
            u = region.outputs[[id(o) for o in op.outputs].index(id(v))]
            if type(u) is not Lit and u in region.inputs:
                u = op.inputs[region.inputs.index(u)]
            v = u
        else:
            break
    return v, bool(host)


def _arg_names(f, args, kwargs):
    """jax's names of the arguments' leaves: the parameter, then the path in it."""
    import inspect
    try:
        params = list(inspect.signature(f).parameters)
    except (TypeError, ValueError):
        params = []
    names = []
    for i, a in enumerate(args):
        base = params[i] if i < len(params) else f"args[{i}]"
        names += [base + _tree.keystr(p) for p, _ in _tree.tree_flatten_with_path(a)[0]]
    for k in sorted(kwargs):
        names += [k + _tree.keystr(p) for p, _ in _tree.tree_flatten_with_path(kwargs[k])[0]]
    return names


@api_boundary
def saved_residuals(f, *args, **kwargs):
    """[(its type as a jax ShapedArray, where it comes from)] for a gradient
    of `f` at `args` (arrays or ShapeDtypeStructs; nothing runs)."""
    import jax

    from .grad import vjp
    from .jit import jit

    def run(a, k):
        return vjp(lambda *a: f(*a, **k), *a)[1]
    program = jit(run).trace(args, dict(sorted(kwargs.items())))._program
    producer = _producers(program.ops, {})
    names = _arg_names(f, args, kwargs)
    position = {id(v): i for i, v in enumerate(program.inputs)}
    found, host = {}, set()
    for v in program.outputs:
        v, on_host = _source(v, producer)
        found.setdefault(id(v), v)
        if on_host:
            host.add(id(v))
    order = dict(position)
    for op in program.ops:
        for v in op.outputs:
            order.setdefault(id(v), len(order))
        if op.prim is checkpoint_p:
            for v in op.regions[0].ops:
                for u in v.outputs:
                    order.setdefault(id(u), len(order))
    out = []
    for v in sorted(found.values(), key=lambda v: order.get(id(v), -1)):
        if type(v) is Lit:
            src = "from a literal"
        elif id(v) in position:
            i = position[id(v)]
            src = f"from the argument {names[i] if i < len(names) else i}"
        else:
            op = producer[id(v)]
            where = f" from {op.loc}" if op.loc is not None else ""
            src = (f"named '{op.params['name']}'{where}" if op.prim is name_p
                   else f"output of {op.prim.name}{where}")
        space = jax.memory.Space.Host if id(v) in host else jax.memory.Space.Device
        out.append((jax.core.ShapedArray(v.aval.shape, v.aval.dtype, memory_space=space),
                    src))
    return out


@api_boundary
def print_saved_residuals(f, *args, **kwargs):
    """Print what a gradient of `f` at `args` saves from its forward pass, one line
    per residual: its type and where it comes from (as jax's)."""
    for aval, src in saved_residuals(f, *args, **kwargs):
        print(f"{aval.str_short(short_dtypes=True)} {src}")

