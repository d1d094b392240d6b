"""rng_bit_generator: XLA's stateless bit generator (lax.rng_bit_generator, and the bits
of jax's rbg and unsafe_rbg PRNGs).

The key is uint32[4] (jax's form, which needs no x64) or uint64[2] (XLA's); the lowering
bitcasts the first to the second, as jax's. Its results are the next key and the bits.
Shardy's rule: the key is whole on every device (need replication), the next key
shares no factor with it (XLA's Shardy passes no sharding from one to the other), and
the bits' dims are factors of their own, which the SPMD partitioner computes shard by shard so that
every sharding gives the same bits. The bits depend on the backend (XLA's DEFAULT
algorithm is Philox on CPU), so values are checked against jax.jit on the same backend.
"""
from __future__ import annotations

from ..errors import ShardcError
from ..ir import dtypes
from ..ir.primitive import PropKind, nondiff
from ..ir.program import Aval
from ..ir.rules import NEED_REPLICATION, RuleBuilder
from ..ir.sharding import Sharding
from ..lower.emit import tensor_type
from ..trace.core import Primitive

ALGORITHMS = ("RNG_DEFAULT", "RNG_THREE_FRY", "RNG_PHILOX")
_HLO_NAMES = {"RNG_DEFAULT": "DEFAULT", "RNG_THREE_FRY": "THREE_FRY", "RNG_PHILOX": "PHILOX"}
BIT_DTYPES = (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)


def _shape(key, *, shape, dtype, algorithm):
    if not ((key.shape == (4,) and key.dtype == dtypes.uint32) or
            (key.shape == (2,) and key.dtype == dtypes.uint64)):
        raise ShardcError("rng_bit_generator: the key must be uint32[4] (or uint64[2]), got "
                          f"{key.dtype}{list(key.shape)}")
    if dtype not in BIT_DTYPES:
        raise ShardcError(f"rng_bit_generator: unsupported dtype {dtype}; it makes uint8, "
                          "uint16, uint32 or uint64 bits")
    if algorithm not in ALGORITHMS:
        raise ShardcError(f"rng_bit_generator: unknown algorithm {algorithm!r}")
    if any(n < 0 for n in shape):
        raise ShardcError(f"rng_bit_generator: negative dimension in shape {shape}")
    return Aval(key.shape, key.dtype, False), Aval(tuple(shape), dtype, False)


def _rule(ins, outs, *, shape, dtype, algorithm):
    b = RuleBuilder(ins, outs)
    b.factor([0], [None, None], ins[0].shape[0], NEED_REPLICATION)
    b.factor([None], [0, None], ins[0].shape[0])
    for d, n in enumerate(shape):
        b.factor([None], [None, d], n)
    return b.build()


def _lower(ctx, key, *, shape, dtype, algorithm):
    ka, (oka, bits) = ctx.in_avals[0], ctx.out_avals
    u64 = Aval((2,), dtypes.uint64, False)
    pair = Aval((2, 2), dtypes.uint32, False)
    k_sh, bits_sh = ctx.out_shardings
    repl = [Sharding.replicated(1)]
    if ka.dtype == dtypes.uint32:      # u32[4] -> u32[2, 2] -> u64[2], as jax's lowering
        (key,) = ctx.op("stablehlo.reshape", [key], [tensor_type(ka)], [tensor_type(pair)],
                        sharding=[Sharding.replicated(2)])
        (key,) = ctx.op("stablehlo.bitcast_convert", [key], [tensor_type(pair)],
                        [tensor_type(u64)], sharding=repl)
    new_key, out = ctx.op(
        "stablehlo.rng_bit_generator", [key], [tensor_type(u64)],
        [tensor_type(u64), tensor_type(bits)],
        {"rng_algorithm": f"#stablehlo<rng_algorithm {_HLO_NAMES[algorithm]}>"},
        sharding=[Sharding.replicated(1), bits_sh])
    if ka.dtype == dtypes.uint32:
        (new_key,) = ctx.op("stablehlo.bitcast_convert", [new_key], [tensor_type(u64)],
                            [tensor_type(pair)], sharding=[Sharding.replicated(2)])
        (new_key,) = ctx.op("stablehlo.reshape", [new_key], [tensor_type(pair)],
                            [tensor_type(oka)], sharding=[k_sh])
    return [new_key, out]


rng_bit_generator_p = Primitive("rng_bit_generator", shape_rule=_shape, sharding_rule=_rule,
                                lower=_lower, prop_kind=PropKind.NONE,
                                multiple_results=True)
rng_bit_generator_p.vjp = nondiff


def _batch(ctx, args, batched, *, shape, dtype, algorithm):
    """jax's rule, bit for bit: the first example's key makes every example's bits (as
    one draw of shape (n, *shape)), and its next key replaces the first key."""
    from . import lax as L
    from .dynamic import dynamic_update_slice_p
    keys = args[0]
    key = L.reshape(L.slice(keys, (0, 0), (1, L.aval(keys).shape[1])), L.aval(keys).shape[1:])
    new_key, bits = rng_bit_generator_p.bind(key, shape=(ctx.size, *shape), dtype=dtype,
                                             algorithm=algorithm)
    zero = L.zeros((), dtypes.int32)
    new_keys = dynamic_update_slice_p.bind(keys, L.reshape(new_key, (1, *L.aval(new_key).shape)),
                                           zero, zero)
    return [new_keys, bits], [True, True]


rng_bit_generator_p.batch = _batch
