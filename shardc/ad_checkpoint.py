"""shardc.ad_checkpoint: jax.ad_checkpoint's API (implemented in shardc.api.remat)."""
from .api.remat import (checkpoint, checkpoint_name, checkpoint_policies,  # noqa: F401
                        remat)
from .api.residuals import print_saved_residuals  # noqa: F401
