"""Every op family; importing this registers all primitives."""
from . import elementwise, indexing, linalg, reduce, shape, special  # noqa: F401
from . import manual  # noqa: E402,F401
from . import custom, manual_region  # noqa: E402,F401
from . import control, remat, scan  # noqa: E402,F401
from . import control_batch  # noqa: E402,F401
