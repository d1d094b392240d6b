"""jit's side of `shardc.AUTO`: what a traced program asks the sharding search for
(`request`, kept in `program.meta["auto_request"]`), and the search run between
tracing and propagation (`solve`): the choice is written into the program as the
auto inputs' shardings and sharding constraints (Solution.apply), the Solution kept
in `program.meta["auto"]` for explain and the report; propagation, lowering and
compilation then go as for any program."""
from __future__ import annotations

import json
import numbers
import warnings

import jax

from ..errors import ArgumentError, ShardcError, user_loc
from ..runtime.autospec import is_auto
from ..trace import pytree as _tree


def _leaves(shardings):
    return _tree.tree_leaves(shardings, is_leaf=lambda x: x is None or is_auto(x))


def check_budget(budget, in_shardings, out_shardings):
    """jit's memory_budget= (bytes per device): only with an AUTO leaf to choose."""
    if budget is None:
        return None
    if isinstance(budget, bool) or not isinstance(budget, numbers.Real) or budget <= 0:
        raise ArgumentError(f"memory_budget={budget!r}: expected a positive number of bytes "
                            "per device")
    if not any(map(is_auto, _leaves(in_shardings) + _leaves(out_shardings))):
        raise ArgumentError("memory_budget= bounds the sharding search, which runs only for "
                            "in_shardings / out_shardings given as shardc.AUTO; add "
                            "shardc.AUTO where the compiler should choose, or drop "
                            "memory_budget")
    return int(budget)


def check_mesh(mesh, what):
    """An AUTO sharding needs a mesh, of Auto axes (Explicit ones fix types at trace)."""
    if mesh.mesh is None:
        raise ShardcError(f"{what} is shardc.AUTO but there is no mesh to shard over; pass "
                          "shardc.AUTO(mesh), or call inside `with shardc.set_mesh(mesh):`")
    if mesh.shape.explicit:
        raise ShardcError(
            f"{what} is shardc.AUTO, but the mesh's axes {sorted(mesh.shape.explicit)} are "
            "Explicit (make_mesh's default), whose shardings are fixed in the types as "
            "the program is traced; make the mesh with "
            "axis_types=(shardc.AxisType.Auto,) * n")


def _hardware(in_shardings, out_shardings, mesh):
    """The Hardware the search weighs: the AUTO leaves' (one), else the platform's."""
    from ..auto import costmodel as cm
    given = {id(a.hardware): a.hardware for a in _leaves(in_shardings) + _leaves(out_shardings)
             if is_auto(a) and a.hardware is not None}
    if len(given) > 1:
        raise ArgumentError("the shardc.AUTO leaves name different hardware "
                            f"({', '.join(getattr(h, 'name', str(h)) for h in given.values())});"
                            " the search weighs one: give the same hardware= to each")
    if given:
        return next(iter(given.values()))
    platform = mesh.devices[0].platform
    return {"tpu": cm.TPU_ICI, "gpu": cm.GPU_NVLINK, "cuda": cm.GPU_NVLINK,
            "rocm": cm.GPU_NVLINK}.get(platform, cm.CPU)


def request(program, auto_inputs, auto_outputs, in_shardings, out_shardings, budget, mesh):
    """Note in `program` what the search is to choose (nothing if no leaf is AUTO)."""
    if not auto_inputs and not auto_outputs:
        return
    check_mesh(mesh, "an out_shardings leaf")
    program.meta["auto_request"] = dict(
        inputs=list(auto_inputs), outputs=list(auto_outputs), memory_budget=budget,
        hardware=_hardware(in_shardings, out_shardings, mesh))


def solve(program, devices=None):
    """Run the search `program` asks for (if any) and write its choice into it. Over
    the `devices` of several processes, the lowest process's choice is every one's."""
    req = program.meta.pop("auto_request", None)
    if req is None:
        return None
    from ..auto.solve import solve as search
    sol = search(program, auto=req["inputs"], hw=req["hardware"],
                 memory_budget=req["memory_budget"], agree=_agreement(devices))
    sol.memory_budget = req["memory_budget"]
    sol.hw = req["hardware"]
    sol.auto_outputs = req["outputs"]
    sol.apply(program)
    program.meta["auto"] = sol
    return sol


def warn_over_budget(program):
    """After propagation: warn when the memory model puts the program's peak over the
    memory_budget its search solved under (the search weighs its own estimate of the
    choice, before propagation fills in the rest; explain() shows the model's peak
    against the budget)."""
    sol = program.meta.get("auto")
    budget = getattr(sol, "memory_budget", None)
    if budget is None:
        return
    from ..auto.costmodel import CPU
    from ..auto.memory import peak_memory
    peak = peak_memory(program, sol.hw or CPU)
    if peak > budget:
        loc = user_loc()
        warnings.warn_explicit(
            f"shardc.AUTO: the chosen shardings' peak memory is {peak} B per device by the "
            f"memory model, over memory_budget={int(budget)} (the search estimated "
            f"{sol.predicted.peak_bytes} B before propagation); lower memory_budget by "
            f"the difference to leave room, or see explain()", UserWarning,
            loc.file, loc.line)


def _agreement(devices):
    """None on one process; else the function making every process take the lowest
    one's choice (a list of ints, one per class of the problem)."""
    from ..runtime.backend import spans_processes
    if not devices or not spans_processes(devices):
        return None
    from ..runtime.distributed import agree

    def agreed(choice):
        out = agree(json.dumps(choice).encode(), devices, "the sharding search's choice")
        return json.loads(out)
    return agreed


def mesh_search(in_given, out_shardings):
    """(axis names, devices or None) when an AUTO leaf asks for the mesh's shape too."""
    asks = {(a.axis_names, a.devices) for a in list(in_given) + _leaves(out_shardings)
            if is_auto(a) and a.axis_names is not None}
    if len(asks) > 1:
        raise ArgumentError("the shardc.AUTO leaves name different axis_names or devices "
                            f"({', '.join(str(n) for n, _ in asks)}); give them all the same")
    return next(iter(asks)) if asks else None


def search_meshes(jitted, ctx):
    """The traced program, solved, on the cheapest mesh shape: every factorization of
    the devices into the named axes is traced and solved (a shape whose sizes do not
    divide the arguments, say, is skipped); the Solution lists them all."""
    from ..auto.solve import factorizations
    from ..runtime.meshes import MeshInfo, make_mesh
    names, devices = ctx["mesh_search"]
    devices = devices or tuple(jax.devices())
    tried, found = {}, {}
    agreed = _agreement(devices)
    for shape in factorizations(len(devices), len(names)):
        mesh = MeshInfo(make_mesh(shape, names, (jax.sharding.AxisType.Auto,) * len(names),
                                  devices=devices))
        try:
            c = dict(ctx, mesh=mesh, specs=jitted._specs(ctx["leaves"], ctx["given"], mesh))
            t = jitted._stage_traced(c)
            sol = solve(t._program, devices)
        except ShardcError as e:
            tried[shape] = e
            continue
        tried[shape] = sol.objective
        found[shape] = (t, sol)
    if not found:
        raise ShardcError(
            f"no shape of a mesh of {len(devices)} devices over {names} admits the program: "
            + "; ".join(f"{dict(zip(names, k))}: {v}" for k, v in tried.items()))
    shape = min(found, key=lambda k: tried[k])
    if agreed is not None:      # the processes take the lowest one's shape
        shape = tuple(agreed(list(shape)))
        if shape not in found:
            raise ShardcError("the processes traced different programs: their mesh "
                              "searches disagree; every process must trace the same one")
    best = (tried[shape],) + found[shape]
    best[2].mesh_shapes = {tuple(zip(names, k)): v for k, v in tried.items()}
    return best[1]
