"""shardc.scipy.stats's implementation: jax.scipy.stats (0.10.2) built on shardc's ops.

The distributions are grouped by kind (location, shape, discrete, multivariate); the
public modules under shardc/scipy/stats/ re-export each distribution's functions under
jax's names."""
