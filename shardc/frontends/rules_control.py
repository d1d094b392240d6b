"""jax's primitives with jaxprs in their params: loops, branches, remat and custom rules.

Each becomes shardc's own construct (lax.scan, while_loop, switch, checkpoint,
custom_jvp, custom_vjp) whose Python functions translate the jaxprs, so shardc traces
the regions, propagates through them and differentiates them with its own rules.
"""
from __future__ import annotations

from jax._src import core as jcore
from jax._src.custom_derivatives import SymbolicZero

from ..ir.dtypes import is_inexact
from ..ops.while_loop import bind_while
from ..trace import core
from ..trace import pytree as _tree
from .translate import eval_closed, eval_jaxpr, rule


@rule("scan")
def _scan(*args, jaxpr, num_consts, num_carry, length, reverse, unroll, linear=None,
          _split_transpose=False):
    from ..api.control import scan
    consts, init, xs = (list(args[:num_consts]), list(args[num_consts:num_consts + num_carry]),
                        list(args[num_consts + num_carry:]))

    def body(carry, x):
        outs = eval_closed(jaxpr, consts + list(carry) + list(x))
        return outs[:num_carry], outs[num_carry:]
    carry, ys = scan(body, init, xs, length=length, reverse=reverse,
                     unroll=unroll if isinstance(unroll, int) else 1)
    return list(carry) + list(ys)


@rule("while")
def _while(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    from ..api.control import while_loop
    cc = list(args[:cond_nconsts])
    bc = list(args[cond_nconsts:cond_nconsts + body_nconsts])
    init = list(args[cond_nconsts + body_nconsts:])
    if cond_jaxpr.out_avals[0].shape:
        return _batched_while(cc, bc, init, cond_jaxpr, body_jaxpr)
    out = while_loop(lambda c: eval_closed(cond_jaxpr, cc + list(c))[0],
                     lambda c: eval_closed(body_jaxpr, bc + list(c)), init)
    return list(out)


def _batched_while(cc, bc, init, cond_jaxpr, body_jaxpr):
    """jax's while with a predicate per example (vmap of a loop whose predicate
    depends on the example), as jax's lowering runs it: while any example's predicate
    holds, a step updates the carries of the examples whose predicate does (the
    predicate's dims lead every carry's) and leaves the others: a masked loop."""
    from ..api.lax import broadcast_in_dim, select
    from ..api.numpy import any as any_

    def pred(c):
        return eval_closed(cond_jaxpr, cc + list(c))[0]

    def body(c):
        p = pred(c)
        new = eval_closed(body_jaxpr, bc + list(c))
        lead = tuple(range(core.aval_of(p).ndim))
        return [select(broadcast_in_dim(p, core.aval_of(n).shape, lead), n, o)
                for n, o in zip(_tree.tree_leaves(new), _tree.tree_leaves(c))]
    # the loop carries arrays: typed keys as their data (their key dim is last)
    flat, tree = _tree.tree_flatten(list(init))

    def carry(xs):
        return _tree.tree_unflatten(tree, list(xs))
    return carry(bind_while(lambda *xs: any_(pred(carry(xs))), lambda *xs: body(carry(xs)),
                            flat, masked=True))


@rule("cond")
def _cond(index, *ops, branches, **_params):
    from ..api.control import switch
    fns = [(lambda br: lambda *xs: eval_closed(br, list(xs)))(br) for br in branches]
    return list(switch(index, fns, *ops))


@rule("remat2", "checkpoint")
def _remat(*args, jaxpr, prevent_cse=True, differentiated=False, policy=None):
    from ..api.remat import _from_jax, checkpoint

    def body(*xs):
        if isinstance(jaxpr, jcore.ClosedJaxpr):
            return eval_closed(jaxpr, list(xs))
        return eval_jaxpr(jaxpr, (), list(xs))
    policy = _from_jax(policy, jax_code=True)
    return list(checkpoint(body, prevent_cse=prevent_cse, policy=policy)(*args))


@rule("name")
def _name(x, *, name):
    from ..api.remat import checkpoint_name
    return checkpoint_name(x, name)


# ---------------------------------------------------------------- custom rules

def _zeros_like(x):
    from ..ops import lax as L
    a = core.aval_of(x)
    return L.zeros(a.shape, a.dtype)


def _instantiate(t, like):
    if t is None or isinstance(t, SymbolicZero) or type(t).__name__ == "Zero":
        return _zeros_like(like)
    return t


@rule("custom_jvp_call")
def _custom_jvp_call(*args, call_jaxpr, jvp_jaxpr_fun, num_consts, symbolic_zeros):
    """A jax.custom_jvp function: shardc's custom_jvp, whose rule is the jaxpr jax
    traces from the user's jvp (all input tangents nonzero)."""
    from ..transforms.custom_jvp import custom_jvp
    consts, primals = list(args[:num_consts]), list(args[num_consts:])

    def fun(*xs):
        return eval_closed(call_jaxpr, consts + list(xs))

    def jvp(ps, ts):
        zeros = [False] * len(ps)
        jaxpr, jconsts, out_zeros = jvp_jaxpr_fun.call_wrapped(*zeros)
        out = eval_jaxpr(jaxpr, jconsts, list(ps) + [_instantiate(t, p)
                                                     for t, p in zip(ts, ps)])
        n = len(out_zeros)
        outs, nz = out[:n], iter(out[n:])
        tans = [_zeros_like(o) if z else next(nz) for o, z in zip(outs, out_zeros)]
        return outs, tans
    f = custom_jvp(fun)
    f.defjvp(jvp)
    return list(f(*primals))


@rule("custom_vjp_call", "custom_vjp_call_jaxpr")
def _custom_vjp_call(*args, call_jaxpr, fwd_jaxpr_thunk, bwd, num_consts, out_trees,
                     symbolic_zeros):
    """A jax.custom_vjp function (an equation): shardc's custom_vjp with the fwd jaxpr
    jax traces and the user's bwd (run on shardc's values when shardc differentiates)."""
    consts, primals = list(args[:num_consts]), list(args[num_consts:])

    def fwd_outs(xs):
        jaxpr, jconsts = fwd_jaxpr_thunk.call_wrapped(*[True] * len(xs))
        return eval_jaxpr(jaxpr, jconsts, list(xs))
    return custom_vjp_of(consts, primals, fwd_outs, bwd, out_trees,
                         lambda xs: eval_closed(call_jaxpr, consts + list(xs)))


_IN_FWD: list = []    # the user bwd functions of the custom_vjp calls whose fwd translates


def custom_vjp_of(consts, primals, fwd_outs, bwd, out_trees, primal=None):
    """shardc's custom_vjp over translated jax pieces: fwd_outs(primals) gives jax's
    fwd outputs (residuals not forwarded from inputs, then the outputs); bwd is jax's
    flat bwd (residuals, output cotangents -> input cotangents, consts' first)."""
    from ..transforms.ad import custom_vjp
    key = _origin(bwd)
    if primal is not None and key in _IN_FWD:
        # fwd calling its own function (`return f(x), res`, jax's usual pattern): the
        # function, as shardc's own custom_vjp does; a new custom rule would trace fwd
        # again, without end
        return list(primal(primals))

    def split(xs):
        _IN_FWD.append(key)
        try:
            outs = fwd_outs(xs)
        finally:
            _IN_FWD.pop()
        _, res_tree, input_fwds = out_trees()
        n_res = res_tree.num_leaves - sum(f is not None for f in input_fwds)
        it = iter(outs[:n_res])
        full = consts + list(xs)
        return outs[n_res:], [next(it) if f is None else full[f] for f in input_fwds]

    def fun(*xs):
        return primal(xs) if primal is not None else split(xs)[0]

    def fwd(*xs):
        return split(xs)

    def bwd_(res, cts):
        got = list(bwd.call_wrapped(*res, *[_instantiate(c, c) for c in cts]))
        return tuple(_zero_ct(g, p) for g, p in zip(got[-len(primals):], primals))
    f = custom_vjp(fun)
    f.defvjp(fwd, bwd_)
    return list(f(*primals))


def _origin(bwd):
    """The user's bwd function behind jax's `bwd` (a WrappedFun): where it is defined,
    which vmap's re-wrapping keeps (a batched bwd is a fresh closure)."""
    info = getattr(bwd, "debug_info", None)
    where = getattr(info, "func_src_info", None)
    return where if where else id(getattr(bwd, "f", bwd))


def _zero_ct(g, p):
    if g is None or isinstance(g, SymbolicZero) or type(g).__name__ == "Zero":
        return _zeros_like(p) if is_inexact(core.aval_of(p).dtype) else None
    return g


@rule("custom_vmap_call")
def _custom_vmap_call(*args, call, rule, in_tree, out_tree):
    """jax.custom_batching.custom_vmap: shardc's custom_vmap of the call's jaxpr on the
    flat operands (jax's consts first), whose rule is jax's, run on shardc's values."""
    from ..trace.pytree import tree_unflatten

    from ..api.custom_batching import custom_vmap, flat_outputs
    def fun(*xs):
        return eval_closed(call, list(xs))
    fun.__name__ = getattr(rule, "__name__", "custom_vmap")
    f = custom_vmap(fun)

    @f.def_vmap
    def flat_rule(axis_size, in_batched, *xs):
        out, out_batched = rule(axis_size, tree_unflatten(in_tree, in_batched),
                                *tree_unflatten(in_tree, xs))
        return flat_outputs(rule, out_tree, out, out_batched)
    return list(f(*args))


@rule("custom_linear_solve")
def _linear_solve(*args, const_lengths, jaxprs):
    """shardc's custom_linear_solve on the flat right-hand side, each function a
    translated jaxpr over its consts (the transposed solve's jaxpr has jax's vecmat
    inside, so the vecmat shardc passes it goes unused)."""
    from ..api.lax_solve import custom_linear_solve
    n_mv, n_vm, n_sv, n_tv = const_lengths
    mvc = list(args[:n_mv])
    svc = list(args[n_mv + n_vm:n_mv + n_vm + n_sv])
    tvc = list(args[n_mv + n_vm + n_sv:n_mv + n_vm + n_sv + n_tv])
    b = list(args[n_mv + n_vm + n_sv + n_tv:])
    nb = len(b)
    has_aux = len(jaxprs.solve.out_avals) > nb

    def solver(jaxpr, consts):
        def run(_, r):
            outs = eval_closed(jaxpr, consts + list(r))
            return (outs[:nb], outs[nb:]) if has_aux else outs
        return run
    tsolve = None if jaxprs.transpose_solve is None else solver(jaxprs.transpose_solve, tvc)
    out = custom_linear_solve(lambda x: eval_closed(jaxprs.matvec, mvc + list(x)), b,
                              solver(jaxprs.solve, svc), tsolve, has_aux=has_aux)
    return list(out[0]) + list(out[1]) if has_aux else list(out)
