"""vectorize: a function of core dims mapped over the broadcast loop dims, as
jnp.vectorize (nested shardc.vmap, one per loop dim)."""
from __future__ import annotations

import functools
import re

from ...errors import ShardcError, ShardcTypeError
from ._creation import asarray
from ._shapes import expand_dims, squeeze

_DIMS = r"\w+"
_CORE = rf"(?:{_DIMS}(?:,{_DIMS})*)?"
_ARG = rf"\({_CORE}\)"
_ARGS = rf"{_ARG}(?:,{_ARG})*"
_SIGNATURE = rf"^{_ARGS}->{_ARGS}$"


def _parse_signature(signature):
    """'(m,n),(n)->(m)' -> ([('m', 'n'), ('n',)], [('m',)])."""
    sig = signature.replace(" ", "")
    if not re.match(_SIGNATURE, sig):
        raise ShardcError(f"not a valid gufunc signature: {signature}")
    ins, outs = sig.split("->")
    parse = lambda s: [tuple(re.findall(_DIMS, a)) for a in re.findall(_ARG, s)]  # noqa: E731
    return parse(ins), parse(outs)


def _broadcast(shapes):
    out = []
    for dims in zip(*[(1,) * (max(map(len, shapes), default=0) - len(s)) + tuple(s)
                      for s in shapes]):
        sizes = {d for d in dims if d != 1}
        if len(sizes) > 1:
            raise ShardcError(f"vectorize: loop dims of shapes {shapes} do not broadcast")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def vectorize(pyfunc, *, excluded=frozenset(), signature=None):
    """`pyfunc` of arrays with core dims (`signature`, numpy's gufunc form; none: all
    dims are loop dims) mapped over the broadcast loop dims of its arguments."""
    if not callable(pyfunc):
        raise ShardcTypeError(f"vectorize requires a callable, got {pyfunc!r}")
    for e in excluded:
        if not isinstance(e, (int, str)):
            raise ShardcTypeError(f"excluded must be ints or strs, got {e!r}")

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        from ..vmap import vmap
        keep = {k: v for k, v in kwargs.items() if k in excluded}
        kwargs = {k: v for k, v in kwargs.items() if k not in excluded}
        if kwargs:      # as jnp.vectorize: keyword arguments must be excluded
            raise ShardcError(f"vectorize: keyword arguments {sorted(kwargs)} must be listed "
                              "in excluded")
        fixed = {i: a for i, a in enumerate(args) if i in excluded}
        dyn = [asarray(a) for i, a in enumerate(args) if i not in excluded]
        n = len(args)

        def full(*xs):
            it = iter(xs)
            return pyfunc(*[fixed[i] if i in fixed else next(it) for i in range(n)], **keep)
        if signature is None:
            cores, out_cores = [()] * len(dyn), None
        else:
            cores, out_cores = _parse_signature(signature)
            if len(cores) != len(dyn):
                raise ShardcError(f"vectorize: signature {signature} has {len(cores)} inputs, "
                                  f"got {len(dyn)} arguments")
        sizes = {}
        for a, core in zip(dyn, cores):
            if a.ndim < len(core):
                raise ShardcError(f"vectorize: argument of shape {a.shape} has fewer dims "
                                  f"than its core dims {core}")
            for name, size in zip(core, a.shape[a.ndim - len(core):]):
                if sizes.setdefault(name, size) != size:
                    raise ShardcError(f"vectorize: core dim {name!r} has sizes "
                                      f"{sizes[name]} and {size}")
        loops = [a.shape[:a.ndim - len(c)] for a, c in zip(dyn, cores)]
        shape = _broadcast(loops)
        fn, squeezed, filled = _checked(full, out_cores, sizes), [], []
        for a, loop in zip(dyn, loops):
            unit = tuple(i for i, s in enumerate(loop) if s == 1)
            squeezed.append(squeeze(a, unit) if unit else a)
            filled.append((1,) * (len(shape) - len(loop)) + tuple(loop))
        expand = []
        for d in reversed(range(len(shape))):      # the innermost loop dim first
            in_axes = tuple(None if f[d] == 1 else 0 for f in filled)
            if all(ax is None for ax in in_axes):
                expand.append(d)
            else:
                fn = vmap(fn, in_axes=in_axes)
        out = fn(*squeezed)
        if not expand:
            return out
        axes = tuple(sorted(expand))
        if isinstance(out, tuple):
            return tuple(expand_dims(o, axes) for o in out)
        return expand_dims(out, axes)
    return wrapped


def _checked(fn, out_cores, sizes):
    """fn whose results are checked against the signature's output core dims."""
    def check(*xs):
        out = fn(*xs)
        if out_cores is None:
            return out
        outs = out if isinstance(out, tuple) else (out,)
        if len(outs) != len(out_cores):
            raise ShardcError(f"vectorize: the function returned {len(outs)} outputs, the "
                              f"signature says {len(out_cores)}")
        for o, core in zip(outs, out_cores):
            shape = tuple(getattr(o, "shape", ()))
            if len(shape) != len(core):
                raise ShardcError(f"vectorize: output of shape {shape} does not have the core "
                                  f"dims {core}")
            for name, size in zip(core, shape):
                if sizes.setdefault(name, size) != size:
                    raise ShardcError(f"vectorize: core dim {name!r} of an output has size "
                                      f"{size}, not {sizes[name]}")
        return out
    return check
