"""Every primitive's factor rule against XLA's own Shardy, op by op.

For each primitive with a sharding rule, tiny programs of that one op: its operands
sharded in a few ways (forwards), or its result fixed and its operands open
(backwards; the open operands are returned too, so their decided shardings are
visible). shardc propagates the IR text; XLA's Shardy propagates the same StableHLO
with only the sources annotated (tests/oracle.py); every result sharding must agree.
The collectives only exist inside shard_map, so theirs are whole shard_map programs."""
import pytest

from oracle import shardy_for_text
from shardc.ir.primitive import PRIMITIVES
from shardc.ir.rules import no_rule

MESH = "mesh <x=2, y=4>"

# operand sharding patterns per rank (every dim here is a multiple of 8)
PATTERNS = {
    1: ["[{x, y}]", "[{y}]"],
    2: ["[{x}, {y}]", "[{y}, {x}]", "[{}, {x, y}]"],
    3: ["[{x}, {}, {y}]", "[{}, {y}, {x}]"],
}

F, I, B = "f32[8,16]", "i32[8,16]", "bool[8,16]"
FLOAT_UNARY = ("abs acos asin atan ceil cos cosh erfc exp expm1 floor log log1p logistic "
               "neg round round_afz rsqrt sign sin sinh sqrt square tan tanh copy "
               "stop_gradient custom_vjp_out").split()
FLOAT_BINARY = "add sub mul div rem pow max min atan2 logaddexp".split()
INT_BINARY = "and or xor shift_left shift_right_arithmetic shift_right_logical mulhi".split()
COMPARE = "eq ne lt le gt ge eq_to lt_to le_to".split()

# primitive -> [(operand types, result types, params text)]
OPS: dict[str, list] = {}
for _n in FLOAT_UNARY:
    OPS[_n] = [([F], [F], "")]
for _n in FLOAT_BINARY:
    OPS[_n] = [([F, F], [F], "")]
for _n in INT_BINARY:
    OPS[_n] = [([I, I], [I], "")]
for _n in COMPARE:
    OPS[_n] = [([F, F], [B], "")]
OPS.update({
    "not": [([B], [B], "")],
    "is_finite": [([F], [B], "")],
    "name": [([F], [F], "{name='h'}")],
    "memory_put": [([F], [F], "{kind='pinned_host'}")],
    "optimization_barrier": [([F, F], [F, F], ""), ([F, "f32[16]"], [F, "f32[16]"], "")],
    "select": [([B, F, F], [F], "")],
    "clamp": [([F, F, F], [F], ""), (["f32[]", F, "f32[]"], [F], "")],
    "asinh": [([F], [F], "")], "acosh": [([F], [F], "")], "atanh": [([F], [F], "")],
    "convert_element_type": [([F], [I], "{new_dtype=i32, weak_type=False}")],
    "integer_pow": [([F], [F], "{y=3}")],
    "inspect_sharding": [([F], [F], "{callback=<callback>}")],
    "sharding_constraint": [([F], ["f32[8,16] [{?}, {?}]"], "{sharding=[{?}, {?}]}")],
    "reduce_sum": [([F], ["f32[16]"], "{axes=(0,)}"),
                   (["f32[8,16,8]"], ["f32[8,8]"], "{axes=(1,)}")],
    "reduce_max": [([F], ["f32[8]"], "{axes=(1,)}")],
    "reduce_min": [([F], ["f32[16]"], "{axes=(0,)}")],
    "reduce_prod": [(["f32[8,16,8]"], ["f32[16]"], "{axes=(0, 2)}")],
    "reduce_and": [([B], ["bool[16]"], "{axes=(0,)}")],
    "reduce_or": [([B], ["bool[8]"], "{axes=(1,)}")],
    "argmax": [([F], ["i32[16]"], "{axis=0, index_dtype=i32}")],
    "argmin": [([F], ["i32[8]"], "{axis=1, index_dtype=i32}")],
    "cumsum": [([F], [F], "{axis=0, reverse=False}"), ([F], [F], "{axis=1, reverse=True}")],
    "dot_general": [
        (["f32[8,16]", "f32[16,32]"], ["f32[8,32]"],
         "{contracting=((1,), (0,)), batch=((), ())}"),
        (["f32[8,8,16]", "f32[8,16,32]"], ["f32[8,8,32]"],
         "{contracting=((2,), (1,)), batch=((0,), (0,))}"),
        (["f32[16,8]", "f32[32,16]"], ["f32[8,32]"],
         "{contracting=((0,), (1,)), batch=((), ())}"),
        (["f32[8]", "f32[16]"], ["f32[8,16]"], "{contracting=((), ()), batch=((), ())}"),
    ],
    "reshape": [
        ([F], ["f32[128]"], "{shape=(128,)}"),
        (["f32[128]"], [F], "{shape=(8, 16)}"),
        ([F], ["f32[8,2,8]"], "{shape=(8, 2, 8)}"),
        (["f32[8,2,8]"], ["f32[16,8]"], "{shape=(16, 8)}"),
        (["f32[8]"], ["f32[2,4]"], "{shape=(2, 4)}"),
    ],
    "transpose": [([F], ["f32[16,8]"], "{permutation=(1, 0)}"),
                  (["f32[8,16,8]"], ["f32[8,8,16]"], "{permutation=(2, 0, 1)}")],
    "broadcast_in_dim": [
        (["f32[16]"], [F], "{shape=(8, 16), broadcast_dimensions=(1,)}"),
        (["f32[1,16]"], [F], "{shape=(8, 16), broadcast_dimensions=(0, 1)}"),
        ([F], ["f32[8,8,16]"], "{shape=(8, 8, 16), broadcast_dimensions=(0, 2)}"),
    ],
    "slice": [([F], ["f32[8,8]"], "{start_indices=(0, 8), limit_indices=(8, 16)}"),
              ([F], ["f32[4,16]"], "{start_indices=(2, 0), limit_indices=(6, 16)}")],
    "pad": [([F, "f32[]"], ["f32[16,16]"], "{padding_config=((4, 4, 0), (0, 0, 0))}"),
            ([F, "f32[]"], ["f32[8,31]"], "{padding_config=((0, 0, 0), (0, 0, 1))}")],
    "concatenate": [([F, F], ["f32[16,16]"], "{dimension=0}"),
                    ([F, F, F], ["f32[8,48]"], "{dimension=1}")],
    "rev": [([F], [F], "{dimensions=(0,)}"), ([F], [F], "{dimensions=(0, 1)}")],
    "gather": [
        ([F, "i32[8,1]"], [F], "{offset_dims=(1,), collapsed_slice_dims=(0,), "
         "start_index_map=(0,), index_vector_dim=1, slice_sizes=(1, 16)}"),
        ([F, "i32[8,1]"], ["f32[8,8]"], "{offset_dims=(0,), collapsed_slice_dims=(1,), "
         "start_index_map=(1,), index_vector_dim=1, slice_sizes=(8, 1)}"),
        ([F, "i32[8,1]"], ["f32[8,8]"], "{offset_dims=(1,), collapsed_slice_dims=(0,), "
         "start_index_map=(0,), index_vector_dim=1, slice_sizes=(1, 8)}"),
        # batching dims (vmap of a dynamic_slice): operand dim 0 pairs with the indices'
        ([F, "i32[8,1]"], ["f32[8,4]"], "{offset_dims=(1,), collapsed_slice_dims=(), "
         "start_index_map=(1,), index_vector_dim=1, slice_sizes=(1, 4), "
         "operand_batching_dims=(0,), start_indices_batching_dims=(0,)}"),
        (["f32[8,16,4]", "i32[8,4,1]"], ["f32[8,4,4]"], "{offset_dims=(2,), "
         "collapsed_slice_dims=(1,), start_index_map=(1,), index_vector_dim=2, "
         "slice_sizes=(1, 1, 4), operand_batching_dims=(0,), "
         "start_indices_batching_dims=(0,)}"),
    ],
    "scatter_add": [
        ([F, "i32[8,1]", F], [F], "{update_window_dims=(1,), inserted_window_dims=(0,), "
         "scatter_dims_to_operand_dims=(0,), index_vector_dim=1}"),
        (["f32[128]", "i32[64,1]", "f32[64]"], ["f32[128]"], "{update_window_dims=(), "
         "inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,), index_vector_dim=1}"),
        ([F, "i32[8,1]", "f32[8,4]"], [F], "{update_window_dims=(1,), "
         "inserted_window_dims=(), scatter_dims_to_operand_dims=(1,), index_vector_dim=1, "
         "operand_batching_dims=(0,), scatter_indices_batching_dims=(0,)}"),
    ],})
# the combiners share scatter_add's rule; XLA's factors for them are checked the same way
OPS.update({k: OPS["scatter_add"] for k in ("scatter", "scatter_mul", "scatter_min",
                                            "scatter_max")})
# sorting, dynamic slices, cumulative ops, take_along_axis (shardc.ops.sort/dynamic/
# cumulative/take)
_S = "i32[]"
OPS.update({
    "sort": [([F], [F], "{dimension=1, is_stable=True, num_keys=1}"),
             ([F, I], [F, I], "{dimension=0, is_stable=False, num_keys=1}")],
    "top_k": [([F], ["f32[8,3]", "i32[8,3]"], "{k=3}"), ([F], [F, I], "{k=16}")],
    "approx_top_k": [([F], ["f32[2,16]", "i32[2,16]"], "{k=2, reduction_dimension=0, "
                      "is_max_k=True, recall_target=0.95, aggregate_to_topk=True, "
                      "reduction_input_size_override=-1}")],
    "dynamic_slice": [([F, _S, _S], ["f32[2,16]"], "{slice_sizes=(2, 16)}"),
                      ([F, _S, _S], ["f32[8,8]"], "{slice_sizes=(8, 8)}")],
    "dynamic_update_slice": [([F, "f32[2,16]", _S, _S], [F], ""),
                             ([F, "f32[8,8]", _S, _S], [F], "")],
    "cumprod": [([F], [F], "{axis=1, reverse=False}")],
    "cummax": [([F], [F], "{axis=0, reverse=True}")],
    "cummin": [([F], [F], "{axis=1, reverse=False}")],
    "cumlogsumexp": [([F], [F], "{axis=0, reverse=False}")],
    "gather_along": [([F, "i32[8,8]"], ["f32[8,8]"], "{axis=1}")],
    "scatter_add_along": [([F, "i32[8,8]", "f32[8,8]"], [F], "{axis=1}")],
})

C = "c64[8,16]"
OPS.update({      # complex parts, the newer elementwise ops, fft
    "complex": [([F, F], [C], "")], "real": [([C], [F], "")], "imag": [([C], [F], "")],
    "conj": [([C], [C], "")], "clz": [([I], [I], "")], "population_count": [([I], [I], "")],
    "cbrt": [([F], [F], "")], "nextafter": [([F, F], [F], "")],
    "reduce_precision": [([F], [F], "{exponent_bits=5, mantissa_bits=10}")],
    "fft": [([C], [C], "{fft_type='FFT', fft_lengths=(16,)}"),
            (["c64[8,16,8]"], ["c64[8,16,8]"], "{fft_type='IFFT', fft_lengths=(16, 8)}"),
            ([F], ["c64[8,9]"], "{fft_type='RFFT', fft_lengths=(16,)}"),
            (["c64[8,9]"], [F], "{fft_type='IRFFT', fft_lengths=(16,)}")],
})

M = "f32[8,16,16]"      # a stack of matrices: the batch dim passes, matrix dims replicate
OPS.update({      # special functions, bitcasts, decompositions, convolution
    "erf_inv": [([F], [F], "")], "lgamma": [([F], [F], "")], "digamma": [([F], [F], "")],
    "bessel_i1e": [([F], [F], "")], "polygamma": [([F, F], [F], "")],
    "zeta": [([F, F], [F], "")],
    "bitcast_convert_type": [([F], [I], "{new_dtype=i32}"),
                             (["f32[8,16]"], ["u8[8,16,4]"], "{new_dtype=u8}")],
    "cholesky": [([M], [M], "")],
    "triangular_solve": [([M, M], [M], "{left_side=True, lower=True, transpose_a=False, "
                          "conjugate_a=False, unit_diagonal=False}")],
    "lu": [([M], [M, "i32[8,16]", "i32[8,16]"], "")],
    "lu_pivots_to_permutation": [(["i32[8,16]"], ["i32[8,16]"], "{permutation_size=16}")],
    "qr": [([M], [M, M], "{full_matrices=True}")],
    "geqrf": [([M], [M, "f32[8,16]"], "")],
    "householder_product": [(["f32[8,16,8]", "f32[8,4]"], ["f32[8,16,8]"], "")],
    "schur": [([M], [M, M], "{compute_schur_vectors=True}")],
    "hessenberg": [([M], [M, "f32[8,15]"], "")],
    "tridiagonal": [([M], [M, "f32[8,16]", "f32[8,15]", "f32[8,15]"], "{lower=True}")],
    "geqp3": [(["f32[8,16,8]", "i32[8,8]"], ["f32[8,16,8]", "i32[8,8]", "f32[8,8]"], "")],
    "ormqr": [(["f32[8,16,8]", "f32[8,8]", "f32[8,16,4]"], ["f32[8,16,4]"],
               "{left=True, transpose=False}")],
    "tridiagonal_solve": [(["f32[8,16]"] * 3 + ["f32[8,16,4]"], ["f32[8,16,4]"],
                           "{perturb_singular=False}"),
                          (["f32[8,16]"] * 3 + ["f32[8,16,4]"], ["f32[8,16,4]"],
                           "{perturb_singular=True}")],
    "eigh": [([M], [M, "f32[8,16]"], "{lower=True, sort_eigenvalues=True}")],
    "svd": [([M], ["f32[8,16]", M, M], "{full_matrices=True, compute_uv=True}")],
    "eig": [(["f32[16,16]"], ["c64[16]", "c64[16,16]"], "{compute_left_eigenvectors=False, "
             "compute_right_eigenvectors=True}")],
    "conv_general_dilated": [
        (["f32[8,16,16,8]", "f32[3,3,8,16]"], ["f32[8,16,16,16]"],
         "{window_strides=(1, 1), padding=((1, 1), (1, 1)), lhs_dilation=(1, 1), "
         "rhs_dilation=(1, 1), dimension_numbers=((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2)), "
         "feature_group_count=1, batch_group_count=1}")],
})


def _rank(t):
    dims = t.split("[", 1)[1].split("]", 1)[0]
    return len([d for d in dims.split(",") if d])


def _program(name, ins, outs, params, in_sh, out_sh):
    """One op; operands %a0.. (sharded by in_sh[i] or open), results returned (fixed by
    out_sh[i] if given), open operands returned too."""
    args = ", ".join(f"%a{i}: {t}" + (f" {s}" if s else "") for i, (t, s) in
                     enumerate(zip(ins, in_sh)))
    res = [f"%r{i}: {t}" for i, t in enumerate(outs)]
    rtypes = [t.split(" [")[0] for t in outs]
    returned = [f"%r{i}" for i in range(len(outs))]
    rets = [t + (f" {s}" if s else "") for t, s in zip(rtypes, out_sh)]
    for i, (t, s) in enumerate(zip(ins, in_sh)):
        if s is None and _rank(t):
            returned.append(f"%a{i}")
            rets.append(t)
    ops = ", ".join(f"%a{i}" for i in range(len(ins)))
    return (f"{MESH}\nfunc @f({args}) -> ({', '.join(rets)}) {{\n"
            f"  {', '.join(res)} = {name}({ops}){' ' + params if params else ''}\n"
            f"  return {', '.join(returned)}\n}}\n")


# issue 16's ops (an op family's own entries above, where it has them, win)
M, C = "f32[8,8,8]", "c64[8,16]"
NEW: dict[str, list] = {}
for _n in "erf_inv lgamma digamma bessel_i1e cbrt".split():
    NEW[_n] = [([F], [F], "")]
for _n in "nextafter polygamma zeta".split():
    NEW[_n] = [([F, F], [F], "")]
for _n in "clz population_count".split():
    NEW[_n] = [([I], [I], "")]
for _n in "cumprod cummax cummin cumlogsumexp".split():
    NEW[_n] = [([F], [F], "{axis=0, reverse=False}"), ([F], [F], "{axis=1, reverse=True}")]
_CONV = ("{window_strides=(1,), padding=((4, 3),), lhs_dilation=(1,), rhs_dilation=(1,), "
         "dimension_numbers=((0, 1, 2), (0, 1, 2), (0, 1, 2)), feature_group_count=%d, "
         "batch_group_count=1}")
NEW.update({
    "reduce_precision": [([F], [F], "{exponent_bits=8, mantissa_bits=7}")],
    "rng_bit_generator": [(["u32[4]"], ["u32[4]", "u32[8,16]"],
                           "{shape=(8, 16), dtype=u32, algorithm='RNG_DEFAULT'}")],
    "bitcast_convert_type": [([F], [I], "{new_dtype=i32}"),
                             ([F], ["u8[8,16,4]"], "{new_dtype=u8}"),
                             (["u8[8,16,4]"], [F], "{new_dtype=f32}")],
    "complex": [([F, F], [C], "")],
    "real": [([C], [F], "")],
    "imag": [([C], [F], "")],
    "conj": [([C], [C], "")],
    "fft": [([C], [C], "{fft_type='FFT', fft_lengths=(16,)}"),
            (["c64[8,8,16]"], ["c64[8,8,16]"], "{fft_type='IFFT', fft_lengths=(8, 16)}"),
            ([F], ["c64[8,9]"], "{fft_type='RFFT', fft_lengths=(16,)}")],
    "sort": [([F], [F], "{dimension=1, is_stable=True, num_keys=1}"),
             ([F, I], [F, I], "{dimension=0, is_stable=True, num_keys=1}")],
    "top_k": [([F], ["f32[8,8]", "i32[8,8]"], "{k=8}")],
    "approx_top_k": [([F], ["f32[8,8]", "i32[8,8]"], "{k=8, reduction_dimension=1, "
                      "is_max_k=True, recall_target=0.95, aggregate_to_topk=True, "
                      "reduction_input_size_override=-1}"),
                     (["f32[16]"], ["f32[8]", "i32[8]"], "{k=8, reduction_dimension=0, "
                      "is_max_k=False, recall_target=0.95, aggregate_to_topk=True, "
                      "reduction_input_size_override=-1}")],
    "dynamic_slice": [([F, "i32[]", "i32[]"], ["f32[8,8]"], "{slice_sizes=(8, 8)}")],
    "dynamic_update_slice": [([F, "f32[8,8]", "i32[]", "i32[]"], [F], "")],
    "gather_along": [([F, "i32[8,8]"], ["f32[8,8]"], "{axis=1}")],
    "scatter_add_along": [([F, "i32[8,8]", "f32[8,8]"], [F], "{axis=1}")],
    "conv_general_dilated": [(["f32[8,8,16]", M], ["f32[8,8,16]"], _CONV % 1),
                             (["f32[8,8,16]", "f32[8,1,8]"], ["f32[8,8,16]"], _CONV % 8)],
    "cholesky": [([M], [M], "")],
    "triangular_solve": [([M, "f32[8,8,16]"], ["f32[8,8,16]"], "{left_side=True, lower=True, "
                          "transpose_a=False, conjugate_a=False, unit_diagonal=False}")],
    "lu": [([M], [M, "i32[8,8]", "i32[8,8]"], "")],
    "qr": [([M], [M, M], "{full_matrices=True}")],
    "eigh": [([M], [M, "f32[8,8]"], "{lower=True, sort_eigenvalues=True}")],
    "svd": [([M], ["f32[8,8]", M, M], "{full_matrices=True, compute_uv=True}")],
    "eig": [([M], ["c64[8,8]", "c64[8,8,8]", "c64[8,8,8]"],
             "{compute_left_eigenvectors=True, compute_right_eigenvectors=True}")],
    "lu_pivots_to_permutation": [(["i32[8,8]"], ["i32[8,8]"], "{permutation_size=8}")],
})
for _n, _forms in NEW.items():
    OPS.setdefault(_n, _forms)


def _cases():
    """(id, IR text): per op form, each tensor-operand pattern forwards (other operands
    open), then the result fixed and every operand open (backwards)."""
    out = []
    for name, forms in OPS.items():
        for k, (ins, outs, params) in enumerate(forms):
            cap = 1 if name in FLOAT_UNARY + FLOAT_BINARY + INT_BINARY + COMPARE else 9
            n = 0
            for i, t in enumerate(ins):
                for pat in PATTERNS.get(_rank(t), []):
                    if n >= cap or (i and t.startswith("i32") and name != "scatter_add" and
                                    name not in INT_BINARY):
                        break
                    in_sh = [pat if j == i else None for j in range(len(ins))]
                    out.append((f"{name}/{k}/fwd{n}", _program(name, ins, outs, params, in_sh,
                                                             [None] * len(outs))))
                    n += 1
            rpats = PATTERNS.get(_rank(outs[0].split(" [")[0]), [])
            for m, pat in enumerate(rpats[:2 if cap > 1 else 1]):
                out.append((f"{name}/{k}/bwd{m}", _program(
                    name, ins, outs, params, [None] * len(ins), [pat] + [None] * (len(outs) - 1))))
    return out


CASES = _cases()


def _sm(body_in, body_ops, body_out, outer_in, outer_out, in_spec, out_spec, arg_sh,
        res_sh=""):
    # the map's result type carries its out_specs, open (as the tracer writes it)
    typed = outer_out.split(" [")[0] + " [" + ", ".join(
        "{" + ", ".join([a for a in d.strip("{} ").split(", ") if a] + ["?"]) + "}"
        for d in out_spec[1:-1].split("}, {")) + "]"
    return (f"{MESH}\nfunc @f(%a: {outer_in}{arg_sh}) -> ({outer_out}{res_sh}) {{\n"
            f"  %1: {typed} = shard_map(%a) {{in_specs=({in_spec},), out_specs=({out_spec},), "
            f"manual_axes=('y',), mesh=<x=2, y=4>, check_vma=False}} {{\n"
            f"  ^(%2: {body_in}):\n{body_ops}\n    return %3\n  }}\n  return %1\n}}\n")


# the collectives, inside a shard_map manual over y: x is free to propagate through them
COLLECTIVES = {
    "psum": "    %3: f32[8,4] = psum(%2) {axes=('y',), sizes=(4,)}",
    "pmax": "    %3: f32[8,4] = pmax(%2) {axes=('y',), sizes=(4,)}",
    "pmin": "    %3: f32[8,4] = pmin(%2) {axes=('y',), sizes=(4,)}",
    "pvary": "    %3: f32[8,4] = pvary(%2) {axes=('y',), sizes=(4,)}",
    "ppermute": "    %3: f32[8,4] = ppermute(%2) {axes=('y',), sizes=(4,), "
                "perm=((0, 1), (1, 2), (2, 3), (3, 0))}",
    "axis_index": "    %4: i32[] = axis_index() {axes=('y',), sizes=(4,), auto=('x',)}\n"
                  "    %5: f32[] = convert_element_type(%4) {new_dtype=f32, weak_type=False}\n"
                  "    %3: f32[8,4] = add(%2, %5)",
}
SM_CASES = []
for _n, _body in COLLECTIVES.items():
    for _k, (_arg, _res) in enumerate([(" [{x}, {}]", ""), ("", " [{x}, {y}]")]):
        SM_CASES.append((f"{_n}/{_k}", _sm("f32[8,4]", _body, "f32[8,4]", "f32[8,16]",
                                           "f32[8,16]", "[{}, {y}]", "[{}, {y}]", _arg, _res)))
for _k, _arg in enumerate([" [{}, {x}]", " [{x}, {}]"]):
    SM_CASES += [
        (f"all_gather/tiled{_k}", _sm(
            "f32[8,4]", "    %3: f32[8,16] = all_gather(%2) {axes=('y',), sizes=(4,), axis=1, "
            "tiled=True}", "", "f32[8,16]", "f32[8,16]", "[{}, {y}]", "[{}, {}]", _arg)),
        (f"all_gather/untiled{_k}", _sm(
            "f32[8,4]", "    %3: f32[4,8,4] = all_gather(%2) {axes=('y',), sizes=(4,), axis=0, "
            "tiled=False}", "", "f32[8,16]", "f32[4,8,16]", "[{}, {y}]", "[{}, {}, {y}]",
            _arg)),
        (f"psum_scatter/tiled{_k}", _sm(
            "f32[8,16]", "    %3: f32[8,4] = psum_scatter(%2) {axes=('y',), sizes=(4,), "
            "scatter_dimension=1, tiled=True}", "", "f32[8,16]", "f32[8,16]", "[{}, {}]",
            "[{}, {y}]", _arg)),
        (f"psum_scatter/untiled{_k}", _sm(
            "f32[4,16]", "    %3: f32[16] = psum_scatter(%2) {axes=('y',), sizes=(4,), "
            "scatter_dimension=0, tiled=False}", "", "f32[4,16]", "f32[16]", "[{}, {}]", "[{}]",
            _arg.replace("[{x}, {}]", "[{}, {}]"))),
        (f"all_to_all/{_k}", _sm(
            "f32[8,16]", "    %3: f32[32,4] = all_to_all(%2) {axes=('y',), sizes=(4,), "
            "split_axis=1, concat_axis=0}", "", "f32[8,16]", "f32[32,4]", "[{}, {}]", "[{}, {}]",
            _arg)),
    ]

# known disagreements: id -> why (each a bug to report, not a license)
KNOWN: dict[str, str] = {}


def _check(text):
    bad = [(str(a), str(b)) for a, b in shardy_for_text(text) if a != b]
    assert not bad, f"shardc vs XLA's Shardy (result: shardc, xla):\n{text}\n{bad}"


@pytest.mark.parametrize("text", [pytest.param(t, id=i, marks=[pytest.mark.xfail(
    reason=KNOWN[i], strict=True)] if i in KNOWN else []) for i, t in CASES])
def test_op_against_xla_shardy(text):
    _check(text)


@pytest.mark.parametrize("text", [pytest.param(t, id=i, marks=[pytest.mark.xfail(
    reason=KNOWN[i], strict=True)] if i in KNOWN else []) for i, t in SM_CASES])
def test_collective_in_shard_map_against_xla_shardy(text):
    _check(text)


def test_every_primitive_with_a_rule_is_checked():
    """Every primitive with a factor rule has an op-by-op check here."""
    checked = set(OPS) | {i.split("/")[0] for i, _ in SM_CASES}
    with_rule = {n for n, p in PRIMITIVES.items()
                 if p.sharding_rule is not None and p.sharding_rule is not no_rule}
    # shard_map has no factor rule (its body is propagated through data-flow edges)
    missing = sorted(with_rule - checked)
    assert not missing, f"primitives with a factor rule but no XLA check: {missing}"
