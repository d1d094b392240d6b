"""Every op family; importing this registers all primitives."""
from . import elementwise, indexing, linalg, reduce, shape, special  # noqa: F401
from . import bits, powers, special_math  # noqa: F401
from . import collectives, manual, pvary, ragged_collective  # noqa: E402,F401
from . import memory  # noqa: E402,F401
from . import custom, manual_region  # noqa: E402,F401
from . import control, remat, scan, while_loop  # noqa: E402,F401
from . import control_batch  # noqa: E402,F401
from . import custom_jvp  # noqa: E402,F401
from . import complex, fft, numeric  # noqa: E402,F401
from . import sort  # noqa: E402,F401
from . import dynamic  # noqa: E402,F401
from . import cumulative  # noqa: E402,F401
from . import scatter, take  # noqa: E402,F401
from . import linalg_decomp, linalg_forms, linalg_tridiagonal  # noqa: E402,F401
from . import conv  # noqa: E402,F401
from . import callback, callback_io  # noqa: E402,F401
from . import custom_vmap  # noqa: E402,F401
from . import rng  # noqa: E402,F401
