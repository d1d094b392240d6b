"""Bad input raises the exception class jax raises (ValueError, TypeError, IndexError),
so code that catches jax's errors catches shardc's; the message still names the user's
line. shardc raised a plain ShardcError (an Exception) for all of these."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shardc
import shardc.numpy as snp

A = np.ones((3, 4), np.float32)
B = np.ones((5,), np.float32)

CASES = {
    "add_broadcast": lambda M, N: N.add(A, B),
    "where_broadcast": lambda M, N: N.where(A > 0, A, B),
    "broadcast_to": lambda M, N: N.broadcast_to(A, (2, 3)),
    "matmul": lambda M, N: N.matmul(A, A),
    "dot": lambda M, N: N.dot(A, B),
    "reshape": lambda M, N: N.reshape(A, (5, 3)),
    "reshape_minus_one": lambda M, N: N.reshape(A, (5, -1)),
    "concatenate": lambda M, N: N.concatenate([A, B]),
    "stack": lambda M, N: N.stack([A, B]),
    "transpose": lambda M, N: N.transpose(A, (0, 0)),
    "einsum": lambda M, N: N.einsum("ij,jk->ik", A, A),
    "split": lambda M, N: N.split(A, 5, axis=1),
    "squeeze": lambda M, N: N.squeeze(A, axis=0),
    "sum_axis": lambda M, N: N.sum(A, axis=3),
    "take_axis": lambda M, N: N.take(A, 0, axis=5),
    "expand_dims_axis": lambda M, N: N.expand_dims(A, 5),
    "swapaxes_axis": lambda M, N: N.swapaxes(A, 0, 4),
    "cumsum_axis": lambda M, N: N.cumsum(A, axis=2),
    "lax_reshape": lambda M, N: M.lax.reshape(A, (5, 3)),
    "lax_transpose": lambda M, N: M.lax.transpose(A, (0, 0)),
    "lax_concatenate": lambda M, N: M.lax.concatenate([A, B], 0),
    "lax_broadcast_in_dim": lambda M, N: M.lax.broadcast_in_dim(A, (2, 3), (0, 1)),
}
_BASES = (TypeError, ValueError, IndexError)


def _raised(fn):
    with pytest.raises(Exception) as info:
        fn()
    return info.value


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_raises_jax_exception_class(name, jit):
    f = CASES[name]
    want = _raised(lambda: f(jax, jnp))
    ours = (lambda: shardc.jit(lambda: f(shardc, snp))()) if jit else \
        (lambda: f(shardc, snp))
    got = _raised(ours)
    bases = [b for b in _BASES if isinstance(want, b)]
    assert bases, want
    assert all(isinstance(got, b) for b in bases), (type(got).__mro__, type(want).__mro__)
    assert isinstance(got, shardc.errors.ShardcError) and "test_error_classes.py" in str(got)
