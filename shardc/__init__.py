"""shardc: a tracing compiler for sharded array programs.

Trace with shardc.numpy (or plain NumPy), propagate shardings over a device mesh,
lower to StableHLO with Shardy shardings, and run with jaxlib.
"""
import os as _os

if "jax" not in __import__("sys").modules and _os.environ.get("SHARDC_CPU_DEVICES"):
    _os.environ["XLA_FLAGS"] = (_os.environ.get("XLA_FLAGS", "") +
                                " --xla_force_host_platform_device_count="
                                + _os.environ["SHARDC_CPU_DEVICES"])

from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

from . import ops as _ops  # noqa: E402,F401  (registers every primitive)
from .runtime import eager as _eager  # noqa: E402,F401  (runs ops outside traces)
from . import debug, lax, nn, numpy  # noqa: E402  (the public modules)
from . import image, random, scipy  # noqa: E402,F401  (public modules)
from .tools import html as _html  # noqa: E402,F401  (notebook views of jit's stages)
from .errors import ShardcError  # noqa: E402
from .api.jit import jit  # noqa: E402
from .api.lax import with_sharding_constraint  # noqa: E402
from .runtime.meshes import make_mesh, set_mesh  # noqa: E402
from .runtime.autospec import AUTO  # noqa: E402
from .api.device import device_put  # noqa: E402
from .api.explicit import reshard, typeof  # noqa: E402
from jax.sharding import AxisType  # noqa: E402
from .api.shard_map import shard_map, smap  # noqa: E402
from .api.pmap import pmap  # noqa: E402
from .transforms.ad import custom_vjp, shard_alike  # noqa: E402
from .api.grad import grad, jvp, value_and_grad, vjp  # noqa: E402
from .api.vmap import vmap  # noqa: E402
from .api.callbacks import pure_callback  # noqa: E402
from .api.closures import closure_convert, custom_gradient  # noqa: E402
from . import experimental  # noqa: E402
from .api.xmap import xmap  # noqa: E402
from .api.remat import checkpoint, checkpoint_policies, remat  # noqa: E402
from . import ad_checkpoint  # noqa: E402
from .api.transforms import (ShapeDtypeStruct, custom_jvp, eval_shape, fwd_and_bwd,  # noqa: E402
                             hessian, jacfwd, jacrev, linearize)
from .api.transpose import linear_transpose  # noqa: E402
from . import custom_batching  # noqa: E402
from jax import named_call, named_scope  # noqa: E402  (ops traced inside carry the name)
from jax import ensure_compile_time_eval  # noqa: E402  (ops on constants run at trace time)
from . import distributed  # noqa: E402
from . import checkpoints  # noqa: E402  (orbax is imported when a checkpoint is used)
from . import sharding  # noqa: E402  (jax.sharding's API)
from . import frontends as _frontends  # noqa: E402,F401  (jax code inside shardc traces)
from .runtime.distributed import (devices, global_array_to_host_local_array,
    host_local_array_to_global_array, local_device_count, local_devices,
    make_array_from_callback, make_array_from_process_local_data,
    make_array_from_single_device_arrays, process_allgather, process_count, process_index)  # noqa: E402

P = PartitionSpec
jacobian = jacrev      # jax.jacobian is jacrev

__all__ = ["Mesh", "NamedSharding", "P", "PartitionSpec", "ShardcError", "debug",
           "device_put", "jit", "lax", "make_mesh", "nn", "numpy", "pmap", "set_mesh",
           "shard_map", "grad", "value_and_grad", "vjp", "jvp", "custom_vjp", "vmap", "xmap",
           "shard_alike", "checkpoint", "remat", "checkpoint_policies", "ad_checkpoint",
           "with_sharding_constraint", "sharding"]
__all__ += ["checkpoints", "devices", "distributed", "global_array_to_host_local_array",
            "host_local_array_to_global_array", "local_device_count", "local_devices",
            "make_array_from_callback", "make_array_from_process_local_data",
            "make_array_from_single_device_arrays", "process_allgather", "process_count",
            "process_index"]
__all__ += ["custom_jvp", "eval_shape", "ShapeDtypeStruct", "linearize", "jacfwd", "jacrev",
            "hessian", "linear_transpose", "named_call", "named_scope",
            "ensure_compile_time_eval"]
__all__ += ["AxisType", "reshard", "typeof", "AUTO", "pure_callback", "experimental",
            "closure_convert", "custom_gradient", "jacobian", "custom_batching", "fwd_and_bwd",
            "smap"]
__version__ = "0.1.0"

from .api import segment as _segment  # noqa: E402
# jax.ops's functions under jax's names (shardc.ops.segment_sum, ...): shardc.ops is the
# op families' package, so they are set on it here, above every layer that uses it
for _name in _segment.__all__:
    setattr(_ops, _name, getattr(_segment, _name))
