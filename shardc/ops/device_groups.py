"""Device groups of a mesh, and the collectives shardc's own lowerings emit inside manual
computations (a sum, a shift to neighbours). Devices are numbered in mesh order
(row-major over the mesh axes)."""
from __future__ import annotations

from math import prod

import numpy as np

from ..lower.emit import tensor_type


def device_groups(mesh, axes):
    """Groups of device ids that differ only along `axes` (in the order of `axes`)."""
    names = list(mesh.names)
    ids = np.arange(mesh.size).reshape([s for _, s in mesh.axes])
    rest = [names.index(a) for a in names if a not in axes]
    moved = np.transpose(ids, rest + [names.index(a) for a in axes])
    return moved.reshape(-1, prod(mesh.sizes[a] for a in axes))


def groups_attr(groups) -> str:
    rows = ", ".join("[" + ", ".join(str(int(d)) for d in g) + "]" for g in groups)
    return f"dense<[{rows}]> : tensor<{groups.shape[0]}x{groups.shape[1]}xi64>"


def channel(ctx):
    return f"#stablehlo.channel_handle<handle = {ctx.lowering.next_channel()}, type = 1>"


def pairs_attr(pairs) -> str:
    return ("dense<[" + ", ".join(f"[{a}, {b}]" for a, b in pairs) +
            f"]> : tensor<{len(pairs)}x2xi64>" if pairs else "dense<> : tensor<0x2xi64>")


def summed(ctx, x, aval, axes):
    """`x` (of `aval`, in a manual computation over `axes`) summed over `axes`."""
    from .reduce import monoid_region
    t = tensor_type(aval)
    (r,) = ctx.op("stablehlo.all_reduce", [x], [t], [t],
                  {"channel_handle": channel(ctx),
                   "replica_groups": groups_attr(device_groups(ctx.mesh, axes)),
                   "use_global_device_ids": "unit"},
                  regions=[monoid_region(ctx, "add", aval)], sharding=False)
    return r


def shifted(ctx, x, aval, axes, step):
    """`x` (of `aval`, in a manual computation over `axes`) as the device `step` places
    before along `axes` (their linear index, major first) holds it; zeros where there is
    no such device."""
    pairs = [(int(g[k - step]), int(g[k])) for g in device_groups(ctx.mesh, axes)
             for k in range(len(g)) if 0 <= k - step < len(g)]
    t = tensor_type(aval)
    (r,) = ctx.op("stablehlo.collective_permute", [x], [t], [t],
                  {"channel_handle": channel(ctx), "source_target_pairs": pairs_attr(pairs)},
                  sharding=False)
    return r
