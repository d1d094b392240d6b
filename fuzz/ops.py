"""More step kinds for the fuzzer: the ops whose factor rules and lowerings do more than
map dims one to one (sorts, scans along a dim, reversals, traced-offset slices and
updates, top_k, multi-axis and statistical reductions, matrix parts, repeats, einsum
patterns, pads by mode, size-bounded set ops, linear algebra's basis-free results, FFTs,
pooling windows, convolutions, multi-operand sorts, quantiles, integer arithmetic). Each
returns one expression over earlier values (`vK`), or None when no value fits;
jax.eval_shape rejects the rest."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np


def _numeric(a):
    return a.dtype != jnp.bool_


class OpSteps:
    """Mixed into Gen: needs self.rng, self.choice, self.pick."""

    def more_op(self, avals, mesh):
        return self.choice(self.op_kinds())(avals, mesh)

    def op_kinds(self):
        return [self.sort_, self.flip, self.scan_dim, self.dyn_slice, self.dyn_update,
                self.top_k, self.stat_reduce, self.matrix_part, self.repeat, self.einsum,
                self.pad_mode, self.set_op, self.take_along, self.linalg, self.fft,
                self.window, self.conv, self.multi_sort, self.quantile, self.int_arith]

    def _dim(self, a):
        return int(self.rng.integers(a.ndim))

    def _traced_index(self, k, n):
        """A traced start in [0, n): from the data, so it is unknown to the compiler."""
        return f"(m.argmax(v{k}.reshape(-1)) % {max(n, 1)})"

    def sort_(self, avals, mesh):
        k = self.pick(avals, lambda a: a.ndim > 0)
        if k is None:
            return None
        d = self._dim(avals[k])
        return self.choice([f"m.sort(v{k}, axis={d})", f"m.argsort(v{k}, axis={d})",
                            f"m.sort(v{k}, axis={d}, descending=True)",
                            f"m.median(v{k}, axis={d})"])

    def flip(self, avals, mesh):
        k = self.pick(avals, lambda a: a.ndim > 0)
        if k is None:
            return None
        a = avals[k]
        d = self._dim(a)
        shift = int(self.rng.integers(-a.shape[d] - 1, a.shape[d] + 2))
        return self.choice([f"m.flip(v{k}, axis={d})", f"m.roll(v{k}, {shift}, axis={d})",
                            f"m.roll(v{k}, {self._traced_index(k, a.shape[d])}, axis={d})"])

    def scan_dim(self, avals, mesh):
        k = self.pick(avals, lambda a: a.ndim > 0 and _numeric(a))
        if k is None:
            return None
        d = self._dim(avals[k])
        rev = self.choice(["False", "True"])
        return self.choice([f"m.cumprod(m.tanh(v{k}) + 1, axis={d})",
                            f"L.cummax(v{k}, axis={d}, reverse={rev})",
                            f"L.cummin(v{k}, axis={d}, reverse={rev})",
                            f"L.cumsum(v{k}, axis={d}, reverse={rev})",
                            f"L.cumlogsumexp(m.tanh(v{k}), axis={d})"])

    def dyn_slice(self, avals, mesh):
        k = self.pick(avals, lambda a: a.ndim > 0 and a.shape[0] > 0)
        if k is None:
            return None
        a = avals[k]
        d = self._dim(a)
        n = a.shape[d]
        size = int(self.rng.integers(1, n + 1)) if n else 0
        return f"L.dynamic_slice_in_dim(v{k}, {self._traced_index(k, n + 2)}, {size}, {d})"

    def dyn_update(self, avals, mesh):
        k = self.pick(avals, lambda a: a.ndim > 0 and all(a.shape))
        if k is None:
            return None
        a = avals[k]
        d = self._dim(a)
        size = int(self.rng.integers(1, a.shape[d] + 1))
        upd = f"(L.slice_in_dim(v{k}, 0, {size}, axis={d}) * 2).astype(v{k}.dtype)"
        start = self._traced_index(k, a.shape[d] + 2)
        return f"L.dynamic_update_slice_in_dim(v{k}, {upd}, {start}, {d})"

    def top_k(self, avals, mesh):
        k = self.pick(avals, lambda a: a.ndim > 0 and a.shape[-1] > 0 and _numeric(a))
        if k is None:
            return None
        n = avals[k].shape[-1]
        j = int(self.rng.integers(1, n + 1))
        return self.choice([f"L.top_k(v{k}, {j})[0]", f"L.top_k(v{k}, {j})[1]"])

    def stat_reduce(self, avals, mesh):
        k = self.pick(avals, lambda a: a.ndim > 0 and _numeric(a))
        if k is None:
            return None
        a = avals[k]
        n = int(self.rng.integers(1, a.ndim + 1))
        axes = tuple(int(x) for x in sorted(self.rng.choice(a.ndim, n, replace=False)))
        kd = self.choice(["", ", keepdims=True"])
        f = self.choice(["m.var", "m.std", "m.mean", "m.sum", "m.max", "nn.logsumexp",
                         "m.ptp", "m.count_nonzero", "m.nanmean", "m.argmin"])
        if f == "m.argmin":
            return f"m.argmin(v{k}, axis={axes[0]}{kd})"
        return f"{f}(v{k}, axis={axes}{kd})"

    def matrix_part(self, avals, mesh):
        k = self.pick(avals, lambda a: a.ndim >= 2)
        if k is None:
            return None
        off = int(self.rng.integers(-2, 3))
        return self.choice([f"m.triu(v{k}, {off})", f"m.tril(v{k}, {off})",
                            f"m.diagonal(v{k}, {off}, -2, -1)", f"m.trace(v{k}, {off})",
                            f"m.swapaxes(v{k}, 0, -1)", f"m.linalg.matrix_transpose(v{k})"])

    def repeat(self, avals, mesh):
        k = self.pick(avals, lambda a: a.ndim > 0)
        if k is None:
            return None
        a = avals[k]
        d = self._dim(a)
        reps = tuple(int(self.choice([1, 1, 2])) for _ in range(a.ndim))
        per = [int(x) for x in self.rng.integers(0, 3, a.shape[d])]
        return self.choice([f"m.repeat(v{k}, 2, axis={d})", f"m.tile(v{k}, {reps})",
                            f"m.repeat(v{k}, np.array({per}), axis={d}, "
                            f"total_repeat_length={sum(per)})"])

    def einsum(self, avals, mesh):
        k = self.pick(avals, lambda a: a.ndim >= 2)
        if k is None:
            return None
        a = avals[k]
        letters = "abcd"[:a.ndim]
        same = [j for j, b in enumerate(avals) if b.shape == a.shape]
        j = self.choice(same)
        perm = "".join(letters[int(i)] for i in self.rng.permutation(a.ndim))
        keep = "".join(c for c in letters if self.rng.random() < 0.5)
        return self.choice([f"m.einsum('{letters}->{perm}', v{k})",
                            f"m.einsum('{letters}->{keep}', v{k})",
                            f"m.einsum('{letters},{letters}->{keep}', v{k}, v{j})",
                            f"m.einsum('{letters},{perm}->{keep}', v{k}, m.einsum('"
                            f"{letters}->{perm}', v{j}))"])

    def pad_mode(self, avals, mesh):
        k = self.pick(avals, lambda a: a.ndim > 0 and all(a.shape) and _numeric(a))
        if k is None:
            return None
        a = avals[k]
        widths = [(int(self.rng.integers(0, 3)), int(self.rng.integers(0, 3))) for _ in a.shape]
        mode = self.choice(["'edge'", "'reflect'", "'symmetric'", "'wrap'", "'maximum'",
                            "'linear_ramp'", "'constant'"])
        return f"m.pad(v{k}, {widths}, mode={mode})"

    def set_op(self, avals, mesh):
        k = self.pick(avals, lambda a: a.ndim > 0 and _numeric(a))
        if k is None:
            return None
        n = int(np.prod(avals[k].shape))
        size = int(self.rng.integers(1, min(n, 16) + 1))
        return self.choice([f"m.unique(m.round(v{k}), size={size}, fill_value=0)",
                            f"m.nonzero(m.ravel(v{k}) > 0, size={size}, fill_value=-1)[0]",
                            f"m.searchsorted(m.sort(m.ravel(v{k})), v{k})",
                            f"m.bincount(m.ravel(m.abs(v{k})).astype(m.int32) % 5, "
                            "length=5)"])

    def take_along(self, avals, mesh):
        k = self.pick(avals, lambda a: a.ndim > 0 and all(a.shape))
        if k is None:
            return None
        a = avals[k]
        d = self._dim(a)
        n = a.shape[d]
        idx = [int(i) for i in self.rng.integers(-n, n, int(self.rng.integers(1, 4)))]
        return self.choice([f"m.take_along_axis(v{k}, m.argsort(v{k}, axis={d}), axis={d})",
                            f"m.take(v{k}, np.array({idx}), axis={d})",
                            f"m.take(v{k}, {self._traced_index(k, n)} + np.array([0, 1]), "
                            f"axis={d}, mode='clip')",
                            f"m.take(v{k}, {self._traced_index(k, n)} - np.array([0, {n}]), "
                            f"axis={d}, mode='fill', fill_value=0)"])


    def linalg(self, avals, mesh):
        """Results that do not depend on a basis choice (no eigenvector signs)."""
        k = self.pick(avals, lambda a: a.ndim >= 2 and _numeric(a) and a.shape[-1] > 0
                      and a.shape[-2] > 0)
        if k is None:
            return None
        a = avals[k]
        n = a.shape[-1]
        r = min(a.shape[-2:])
        sq = f"(v{k}[..., :{r}, :{r}].astype(m.float32))"
        spd = f"({sq} @ m.swapaxes({sq}, -1, -2) + {r} * m.eye({r}))"
        return self.choice([f"m.linalg.cholesky({spd})", f"m.linalg.inv({spd})",
                            f"m.linalg.det({spd})", f"m.linalg.eigvalsh({spd})",
                            f"m.linalg.svd(v{k}.astype(m.float32), compute_uv=False)",
                            f"m.abs(m.linalg.qr(v{k}.astype(m.float32), mode='r'))",
                            f"m.linalg.solve({spd}, {sq}[..., :1])",
                            f"m.linalg.norm(v{k}.astype(m.float32), axis=(-2, -1))",
                            f"m.linalg.slogdet({spd})[1]",
                            f"m.linalg.matrix_power({spd} / {n + 4}, 3)"])

    def fft(self, avals, mesh):
        k = self.pick(avals, lambda a: a.ndim > 0 and _numeric(a) and a.shape[-1] > 1)
        if k is None:
            return None
        d = self._dim(avals[k])
        x = f"v{k}.astype(m.float32)"
        return self.choice([f"m.abs(m.fft.fft({x}, axis={d}))",
                            f"m.fft.rfft({x}, axis={d}).real",
                            f"m.fft.irfft(m.fft.rfft({x}, axis=-1), n={avals[k].shape[-1]})",
                            f"m.fft.ifft(m.fft.fft({x}, axis={d}), axis={d}).real",
                            f"m.abs(m.fft.fft2({x}))" if avals[k].ndim >= 2 else
                            f"m.fft.fftshift({x})"])

    def window(self, avals, mesh):
        k = self.pick(avals, lambda a: a.ndim > 0 and _numeric(a) and min(a.shape) > 1)
        if k is None:
            return None
        a = avals[k]
        win = tuple(int(self.choice([1, 2, min(3, s)])) for s in a.shape)
        stride = tuple(int(self.choice([1, 1, 2])) for _ in a.shape)
        pad = self.choice(["'SAME'", "'VALID'"])
        x = f"v{k}.astype(m.float32)"
        return self.choice([f"L.reduce_window({x}, -m.inf, L.max, {win}, {stride}, {pad})",
                            f"L.reduce_window({x}, 0.0, L.add, {win}, {stride}, {pad})",
                            f"L.reduce_window({x}, m.inf, L.min, {win}, (1,) * {a.ndim}, "
                            f"{pad})"])

    def conv(self, avals, mesh):
        k = self.pick(avals, lambda a: a.ndim == 3 and _numeric(a) and a.shape[2] > 2)
        if k is None:
            return None
        c = avals[k].shape[1]
        o = int(self.choice([1, 2, 4]))
        w = f"m.cos(m.arange({o * c * 3}.0)).reshape({o}, {c}, 3)"
        x = f"v{k}.astype(m.float32)"
        return self.choice([f"L.conv({x}, {w}, (1,), 'SAME')",
                            f"L.conv_general_dilated({x}, {w}, (2,), 'VALID', "
                            f"rhs_dilation=(1,))",
                            f"L.conv_general_dilated({x}, {w}, (1,), [(1, 2)], lhs_dilation=(2,))"])

    def multi_sort(self, avals, mesh):
        k = self.pick(avals, lambda a: a.ndim > 0)
        if k is None:
            return None
        a = avals[k]
        same = [j for j, b in enumerate(avals) if b.shape == a.shape]
        j = self.choice(same)
        d = self._dim(a)
        nk = self.choice([1, 2])
        return self.choice([f"L.sort((v{k}, v{j}), dimension={d}, num_keys={nk})[1]",
                            f"m.lexsort((v{j}, v{k}), axis={d})",
                            f"m.partition(v{k}, {a.shape[-1] // 2}, axis=-1)"
                            f"[..., {a.shape[-1] // 2}:{a.shape[-1] // 2 + 1}]"])

    def quantile(self, avals, mesh):
        k = self.pick(avals, lambda a: a.ndim > 0 and _numeric(a))
        if k is None:
            return None
        d = self._dim(avals[k])
        q = self.choice(["30", "0", "100", "np.array([10, 90])"])
        meth = self.choice(["'linear'", "'lower'", "'higher'", "'nearest'", "'midpoint'"])
        return self.choice([f"m.percentile(v{k}, {q}, axis={d}, method={meth})",
                            f"m.nanquantile(v{k}.astype(m.float32), 0.25, axis={d})"])

    def int_arith(self, avals, mesh):
        k = self.pick(avals, lambda a: a.dtype == jnp.int32)
        if k is None:
            return None
        c = self.choice(["3", "-3", "7"])
        return self.choice([f"m.floor_divide(v{k}, {c})", f"m.remainder(v{k}, {c})",
                            f"m.fmod(v{k}, {c})", f"v{k} << 2", f"v{k} >> 1",
                            f"L.population_count(v{k})", f"m.right_shift(v{k}, m.abs(v{k}) % 5)",
                            f"m.gcd(v{k}, 12)", f"m.lcm(v{k} % 7, 4)", f"v{k} ** 2",
                            f"m.bitwise_xor(v{k}, 5)", f"L.clz(v{k})"])
