"""Emitting the decompositions' StableHLO: LAPACK custom calls as jaxlib's CPU lowerings
(the `lapack_*_ffi` targets, their layouts and attributes) and the few ops around them
(triangle masks, NaN where LAPACK reported failure). Every op is sharded on the leading
batch dims only: the matrix dims are whole (the factor rules replicate them)."""
from __future__ import annotations

import numpy as np

from ..ir import dtypes
from ..ir.program import Aval
from ..ir.sharding import Sharding
from ..lower.emit import tensor_type
from .common import i64_array

_I32 = dtypes.int32
_PREFIX = {dtypes.float32: "s", dtypes.float64: "d"}
for _n, _p in (("complex64", "c"), ("complex128", "z")):
    if hasattr(dtypes, _n):
        _PREFIX[getattr(dtypes, _n)] = _p
_NAMES = "ijklmnopqrstuvwxyzabcdefgh"


_READY = []


def _init_lapack():
    """jaxlib's LAPACK kernels find their routines (scipy's) only once initialized, as
    jax's lowering does (lapack.prepare_lapack_call); an uninitialized call crashes."""
    if not _READY:
        from jax._src.lib import lapack
        lapack._lapack.initialize()
        _READY.append(True)


def lapack_prefix(dtype):
    return _PREFIX.get(dtype)


def _layout(rank, nb):
    """jaxlib's layouts: matrices column-major within each batch, the rest row-major."""
    order = [nb, nb + 1] + list(range(nb - 1, -1, -1)) if rank == nb + 2 else \
        list(range(rank - 1, -1, -1))
    return f"dense<[{', '.join(map(str, order))}]> : tensor<{rank}xindex>" if order else \
        "dense<> : tensor<0xindex>"


class Em:
    """Emits ops for one decomposition: values are (name, Aval) pairs."""

    def __init__(self, ctx, nb):
        self.ctx, self.nb = ctx, nb
        sh = ctx.out_shardings[0]
        self.bdims = tuple(sh.dims[:nb]) if sh is not None else ((),) * nb

    def sh(self, rank):
        k = min(rank, self.nb)
        return Sharding(self.bdims[:k] + ((),) * (rank - k))

    def op(self, name, ins, out_avals, props=None, attrs=None, regions=None, shard=True):
        names = self.ctx.op(name, [n for n, _ in ins], [tensor_type(a) for _, a in ins],
                            [tensor_type(a) for a in out_avals], props,
                            [self.sh(a.ndim) for a in out_avals] if shard else False,
                            regions=regions, attrs=attrs)
        for n, a in zip(names, out_avals):
            self.ctx.lowering.types[n] = tensor_type(a)
        return list(zip(names, out_avals))

    def custom_call(self, target, ins, out_avals, config, alias_operand=0):
        """A LAPACK call. `config` values are ui8 codes or typed attribute text ("3 : i32",
        "true"); `alias_operand` is the operand result 0 reuses, None, or a dict of
        result index -> operand index."""
        _init_lapack()
        nb = self.nb
        multi = len(out_avals) > 1
        pairs = {0: alias_operand} if isinstance(alias_operand, int) else alias_operand or {}
        alias = "[" + ", ".join(
            "#stablehlo.output_operand_alias<output_tuple_indices = "
            f"{f'[{o}]' if multi else '[]'}, operand_index = {i}, operand_tuple_indices = []>"
            for o, i in sorted(pairs.items())) + "]"
        props = {
            "api_version": "1 : i32", "backend_config": '""',
            "call_target_name": f'"{target}"', "called_computations": "[]",
            "has_side_effect": "false",
            "operand_layouts": "[" + ", ".join(_layout(a.ndim, nb) for _, a in ins) + "]",
            **({"output_operand_aliases": alias} if pairs else {}),
            "result_layouts": "[" + ", ".join(_layout(a.ndim, nb) for a in out_avals) + "]",
        }
        cfg = ", ".join(f"{k} = {v if isinstance(v, str) else f'{v} : ui8'}"
                        for k, v in sorted(config.items()))
        attrs = {"mhlo.backend_config": "{" + cfg + "}",
                 "mhlo.frontend_attributes": f'{{num_batch_dims = "{nb}"}}',
                 "sdy.sharding_rule": self._sdy_rule([a for _, a in ins], out_avals)}
        return self.op("stablehlo.custom_call", ins, out_avals, props, attrs)

    def _sdy_rule(self, ins, outs):
        """jax's rule for these calls: batch dims shared, every other dim its own."""
        sizes = []

        def fac(n):
            sizes.append(n)
            return _NAMES[len(sizes) - 1] if len(sizes) <= 26 else f"z_{len(sizes)}"
        batch = [fac(n) for n in ins[0].shape[:self.nb]]

        def tensor(a):
            return "[" + ", ".join(batch[:self.nb] + [fac(n) for n in a.shape[self.nb:]]) + "]"
        lhs = ", ".join(tensor(a) for a in ins)
        rhs = ", ".join(tensor(a) for a in outs)
        names = [_NAMES[i] if i < 26 else f"z_{i + 1}" for i in range(len(sizes))]
        return (f"#sdy.op_sharding_rule<({lhs})->({rhs}) {{"
                + ", ".join(f"{n}={s}" for n, s in zip(names, sizes)) + "}, custom>")

    # ------------------------------------------------------------ small ops
    def const(self, value, aval):
        n = self.ctx.constant(value, aval, self.sh(aval.ndim))
        return (n, aval)

    def iota(self, aval, dim):
        return self.op("stablehlo.iota", [], [aval], {"iota_dimension": f"{dim} : i64"})[0]

    def binary(self, name, a, b):
        return self.op(f"stablehlo.{name}", [a, b], [a[1]])[0]

    def compare(self, direction, a, b):
        kind = "FLOAT" if dtypes.is_float(a[1].dtype) else \
            "SIGNED" if dtypes.is_signed(a[1].dtype) else "UNSIGNED"
        out = a[1].update(dtype=dtypes.bool_, weak=False)
        return self.op("stablehlo.compare", [a, b], [out],
                       {"comparison_direction": f"#stablehlo<comparison_direction {direction}>",
                        "compare_type": f"#stablehlo<comparison_type {kind}>"})[0]

    def select(self, p, a, b):
        return self.op("stablehlo.select", [p, a, b], [a[1]])[0]

    def bcast(self, x, shape, dims):
        out = x[1].update(shape=tuple(shape))
        return self.op("stablehlo.broadcast_in_dim", [x], [out],
                       {"broadcast_dimensions": i64_array(dims)})[0]

    def slice(self, x, start, limit):
        out = x[1].update(shape=tuple(b - a for a, b in zip(start, limit)))
        arr = i64_array
        return self.op("stablehlo.slice", [x], [out],
                       {"start_indices": arr(start), "limit_indices": arr(limit),
                        "strides": arr([1] * len(start))})[0]

    def pad(self, x, high):
        """Zero padding at the end of each dim by `high`."""
        zero = self.const(0, Aval((), x[1].dtype))
        out = x[1].update(shape=tuple(n + h for n, h in zip(x[1].shape, high)))
        arr = i64_array
        return self.op("stablehlo.pad", [x, zero], [out],
                       {"edge_padding_low": arr([0] * len(high)), "edge_padding_high": arr(high),
                        "interior_padding": arr([0] * len(high))})[0]

    def triangle(self, x, lower, k=0):
        """tril(x, k) if lower else triu(x, k): the rest zero."""
        nb = self.nb
        ia = x[1].update(dtype=_I32, weak=False)
        r, c = self.iota(ia, nb), self.iota(ia, nb + 1)
        if k:
            r = self.binary("add", r, self.const(k, ia))
        keep = self.compare("GE" if lower else "LE", r, c)
        return self.select(keep, x, self.const(0, x[1]))

    def nan_unless_ok(self, x, info, direction="EQ"):
        """x where LAPACK's info (per batch element) compares `direction` 0, else NaN."""
        ok = self.compare(direction, info, self.const(0, info[1]))
        okb = self.bcast(ok, x[1].shape, range(self.nb))
        return self.select(okb, x, self.const(float("nan"), x[1]))

    def region(self, avals, body):
        return self.ctx.region(avals, body)


def aval_np(shape, dtype):
    return Aval(tuple(shape), np.dtype(dtype))
