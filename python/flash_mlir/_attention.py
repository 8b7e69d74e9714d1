"""attention(q, k, v, ...): build the flash.attention IR for the arguments'
shapes and dtypes, compile it once (cached on disk and in memory) and run it:
NumPy arrays (and CPU torch tensors) on the host, CUDA torch tensors on the GPU.
"""
import collections
import math
import numbers
import operator
import os
import re
import shutil
import threading

from . import _capi, cache
from ._capi import FlashError
from .compiler import format_options

__all__ = ["attention", "attention_ir", "paged_attention_ir", "varlen_attention_ir", "prebuild", "AttentionKernel", "FUNC_NAME"]

FUNC_NAME = "flash_attention"
CPU_PIPELINE = "flash-cpu-pipeline"
GPU_PIPELINE = "flash-gpu-pipeline"

_NUMPY_TYPES = {"float32": "f32", "float16": "f16"}
_TORCH_TYPES = {"torch.float32": "f32", "torch.float16": "f16", "torch.bfloat16": "bf16"}
_TYPE_NAMES = {"f32": "f32", "f16": "f16", "bf16": "bf16", "float32": "f32",
               "float16": "f16", "bfloat16": "bf16", "half": "f16"}


def _dims(shape):
    return "x".join("?" if d is None else str(d) for d in shape)


def _memref(shape, elt):
    return "memref<%sx%s>" % (_dims(shape), elt) if shape else "memref<%s>" % elt


def _tensor(shape, elt):
    return "tensor<%sx%s>" % (_dims(shape), elt) if shape else "tensor<%s>" % elt


def _dynamic(shape):
    """Lengths and leading batch dims become dynamic; the head dim (last batch
    dim, which fixes the GQA group) and D / Dv stay static."""
    n = len(shape)
    return tuple(None if (i < n - 3 or i == n - 2) else d for i, d in enumerate(shape))


# Python counts True as 1 and 2.7 truncates to 2 under int(): both would
# compile a kernel the caller did not ask for, so arguments are checked by
# kind before they are used.
def _check_dim(name, d):
    if isinstance(d, bool):
        raise TypeError("%s must hold integer sizes, got %r" % (name, d))
    try:
        d = operator.index(d)
    except TypeError:
        raise TypeError("%s must hold integer sizes, got %r" % (name, d)) from None
    if d < 0:
        raise ValueError("%s must hold sizes >= 0, got %r" % (name, d))
    return d


def _check_scale(scale):
    if scale is None:
        return None
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise TypeError("scale must be a real number, got %r" % (scale,))
    scale = float(scale)
    if not math.isfinite(scale):
        raise ValueError("scale must be finite, got %r" % scale)
    return scale


_MAX_WINDOW = 1 << 62  # the op's bound: longer than any sequence


def _check_window(window):
    if window is None:
        return None
    if isinstance(window, bool):
        raise TypeError("window must be an integer number of keys, got %r" % (window,))
    try:
        w = operator.index(window)
    except TypeError:
        raise TypeError("window must be an integer number of keys, got %r"
                        % (window,)) from None
    if not 0 < w < _MAX_WINDOW:
        raise ValueError("window must be a positive number of keys below 2**62, got %r"
                         % (window,))
    return w


def _mask_clause(causal, window, align):
    if align not in ("top_left", "bottom_right"):
        raise ValueError("align must be 'top_left' or 'bottom_right', got %r" % (align,))
    window = _check_window(window)
    if window is not None:
        return " mask(sliding_window, %d, %s)" % (window, align)
    if causal:
        return " mask(causal, %s)" % align
    return ""


def _checked_signature(q_shape, k_shape, v_shape, scale):
    """The shapes as tuples of sizes and the scale (default 1/sqrt(D)),
    checked by kind."""
    q_shape, k_shape, v_shape = (tuple(_check_dim(n, d) for d in s) for n, s in
                                 (("q_shape", q_shape), ("k_shape", k_shape),
                                  ("v_shape", v_shape)))
    if len(q_shape) < 2:
        raise ValueError("q must have shape [batch..., Lq, D], got %s" % (q_shape,))
    scale = _check_scale(scale)
    if scale is None:
        scale = 1.0 / math.sqrt(q_shape[-1]) if q_shape[-1] else 1.0
    return q_shape, k_shape, v_shape, scale


def _bias_plan(q_shape, k_shape, bias_shape):
    """Which score dims [batch..., Lq, Lk] an additive bias of `bias_shape`
    varies along (right-aligned broadcasting: each of its dims is 1 or the
    score's), and the shape of the capture that holds just those dims."""
    bias_shape = tuple(_check_dim("bias shape", d) for d in bias_shape)
    score = tuple(q_shape[:-1]) + (k_shape[-2],)
    if len(bias_shape) > len(score):
        raise ValueError("bias must broadcast to the scores' shape %s, got %s"
                         % (score, bias_shape))
    lead = len(score) - len(bias_shape)
    dims = []
    for i, d in enumerate(bias_shape):
        target = score[lead + i]
        if d == 1 and target != 1:
            continue
        if d != target:
            raise ValueError("bias must broadcast to the scores' shape %s, got %s"
                             % (score, bias_shape))
        if d != 1:
            dims.append(lead + i)
    return tuple(dims), tuple(score[i] for i in dims)


def _check_softcap(softcap):
    if softcap is None:
        return None
    if isinstance(softcap, bool) or not isinstance(softcap, numbers.Real):
        raise TypeError("softcap must be a real number, got %r" % (softcap,))
    softcap = float(softcap)
    if not (math.isfinite(softcap) and softcap > 0):
        raise ValueError("softcap must be positive and finite, got %r" % softcap)
    return softcap


def _alibi_dims(q_shape, slopes_shape):
    """The query batch dims an ALiBi slope tensor is indexed by: [Hq] by the
    heads, [B, Hq] by the last two batch dims."""
    nb = len(q_shape) - 2
    slopes_shape = tuple(_check_dim("alibi_slopes shape", d) for d in slopes_shape)
    n = len(slopes_shape)
    if nb < 1 or n not in (1, 2) or n > nb or slopes_shape != tuple(q_shape[nb - n:nb]):
        raise ValueError("alibi_slopes must have shape [heads] or [batch, heads] of q's "
                         "batch dims %s, got %s" % (tuple(q_shape[:nb]), slopes_shape))
    return tuple(range(nb - n, nb)), slopes_shape


def _captures_clause(caps):
    if not caps:
        return ""
    return " captures(%s : %s)" % (", ".join("%%%s_t" % n for n, _, _ in caps),
                                   ", ".join(_tensor(sh, e) for _, sh, e in caps))


def traced_score_mod(fn, q_shape, arg_specs):
    """attention()'s score_mod=fn traced for q of `q_shape` and arguments of
    (shape, element type) `arg_specs`: (captures, region) as attention_ir's
    score_mod= takes them."""
    from . import score
    region = score.trace(fn, len(q_shape) - 2, arg_specs)
    return [("m%d" % n, tuple(sh), e) for n, (sh, e) in enumerate(arg_specs)], region


def _score_mod_ir(q_shape, k_shape, bias=None, softcap=None, alibi_slopes=None,
                  traced=None, lens=False):
    """The captures [(name, shape, element type)] and the `captures(...)` and
    `score_mod {...}` clauses of attention()'s score conveniences, in the
    order they apply to the scaled score t: softcap·tanh(t / softcap), then
    + bias, then − slope[h]·|i + Lk − Lq − j| (ALiBi as FlashAttention
    defines it); or of a traced score_mod=fn ((captures, region), which
    excludes the conveniences). lens: a paged cache, whose sequence b has
    its own Lk, read for ALiBi from one more capture, the i32 lengths [B]
    (k_shape's Lk is then the table's capacity, which a bias spans)."""
    if traced is not None:
        caps, region = traced
        return caps, _captures_clause(caps), region
    softcap = _check_softcap(softcap)
    nb = len(q_shape) - 2
    caps, reads = [], []
    if bias is not None:
        dims, cap_shape = _bias_plan(q_shape, k_shape, bias[0])
        caps.append(("bias", cap_shape, bias[1]))
        reads.append(dims)
    if alibi_slopes is not None:
        dims, shape = _alibi_dims(q_shape, alibi_slopes)
        caps.append(("slopes", shape, "f32"))
        reads.append(dims)
        if lens:
            caps.append(("seqlens", tuple(q_shape[:1]), "i32"))
            reads.append((0,))
    if not caps and softcap is None:
        return [], "", ""
    types = [_tensor(sh, e) for _, sh, e in caps]
    x = ["%%x%d" % i for i in range(nb + 2)]
    args = ", ".join(["%s: f32" % "%s"] + ["%s: index" % n for n in x] +
                     ["%%c%d: %s" % (n, t) for n, t in enumerate(types)])
    lines, cur = [], "%s"
    if softcap is not None:
        lines += ["    %%cap = arith.constant %.9e : f32" % softcap,
                  "    %%sd = arith.divf %s, %%cap : f32" % cur,
                  "    %th = math.tanh %sd : f32",
                  "    %st = arith.mulf %th, %cap : f32"]
        cur = "%st"
    for n, ((name, shape, elt), dims) in enumerate(zip(caps, reads)):
        if name == "seqlens":  # read with the slopes
            continue
        read = "    %%e%d = tensor.extract %%c%d[%s] : %s" % (
            n, n, ", ".join(x[d] for d in dims), types[n])
        lines.append(read)
        val = "%%e%d" % n
        if elt != "f32":
            lines.append("    %%w%d = arith.extf %s : %s to f32" % (n, val, elt))
            val = "%%w%d" % n
        if name == "bias":
            lines.append("    %%b%d = arith.addf %s, %s : f32" % (n, cur, val))
            cur = "%%b%d" % n
            continue
        # ALiBi: the key's distance from the query's diagonal (bottom-right).
        lines += ["    %%ii = arith.index_cast %s : index to i64" % x[nb],
                  "    %%ji = arith.index_cast %s : index to i64" % x[nb + 1],
                  "    %if = arith.sitofp %ii : i64 to f32",
                  "    %jf = arith.sitofp %ji : i64 to f32"]
        if lens:
            # Sequence b's queries are its last Lq positions: off = n[b] - Lq.
            lines += ["    %%nb = tensor.extract %%c%d[%s] : %s" % (n + 1, x[0], types[n + 1]),
                      "    %nf = arith.sitofp %nb : i32 to f32",
                      "    %%lqf = arith.constant %.1f : f32" % float(q_shape[-2]),
                      "    %off = arith.subf %nf, %lqf : f32"]
        else:
            lines.append("    %%off = arith.constant %.1f : f32"
                         % float(k_shape[-2] - q_shape[-2]))
        lines += ["    %id = arith.addf %if, %off : f32",
                  "    %dist = arith.subf %id, %jf : f32",
                  "    %adist = math.absf %dist : f32",
                  "    %%pen = arith.mulf %s, %%adist : f32" % val,
                  "    %%a%d = arith.subf %s, %%pen : f32" % (n, cur)]
        cur = "%%a%d" % n
    lines.append("    flash.yield %s : f32" % cur)
    region = " score_mod {\n  ^bb0(%s):\n%s\n  }" % (args, "\n".join(lines))
    return caps, _captures_clause(caps), region


def _sinks_ir(q_shape, dtype, sinks, heads_dim=-3):
    """attention_ir's sinks=(shape, element type), checked against q: [Hq] of
    float32 or q's element type, Hq = q_shape[heads_dim] (-3 for [batch...,
    Hq, Lq, D], 1 for a packed varlen q [Tq, Hq, D])."""
    shape, elt = sinks
    shape = tuple(_check_dim("sinks shape", d) for d in shape)
    name = _TYPE_NAMES.get(str(elt).replace("torch.", ""))
    if name not in ("f32", dtype):
        raise TypeError("sinks must be float32 or q's dtype (%s), got %r" % (dtype, elt))
    if len(q_shape) < 3:
        raise ValueError("sinks are one logit per query head: q needs a heads dim "
                         "[batch..., Hq, Lq, D], got q of shape %s" % (tuple(q_shape),))
    if shape != (q_shape[heads_dim],):
        raise ValueError("sinks must have shape [Hq] = (%d,) (q's heads, q.shape[%d]), got %s"
                         % (q_shape[heads_dim], heads_dim, shape))
    return shape, name


def attention_ir(q_shape, k_shape, v_shape, dtype="f32", *, scale=None, causal=False,
                 window=None, align="top_left", lse=False, dynamic=False, bias=None,
                 softcap=None, alibi_slopes=None, score_mod=None, sinks=None,
                 name=FUNC_NAME):
    """The module attention() compiles: one function in destination-passing
    style on memrefs (q, k, v, out[, lse]) with a C interface, the form both
    flash-cpu-pipeline and flash-gpu-pipeline take.

    Shapes are [batch..., L, D]; the last batch dim of k/v may divide q's
    (grouped-query attention). dtype is the MLIR element type (f32, f16, bf16).
    scale defaults to 1/sqrt(D). window (sliding window of `window` keys)
    implies the causal bound; align places the diagonal when Lq != Lk.
    dynamic: Lq, Lk and the batch dims before the heads are `?`, so one
    compiled kernel serves every length (the memref descriptors carry them).
    The score conveniences become one score_mod region (_score_mod_ir):
    softcap=c; bias=(shape, dtype), an additive bias broadcast to the scores
    [batch..., Lq, Lk], read from an argument after the outputs that holds
    its non-broadcast dims (its shape without the size-1 dims);
    alibi_slopes=shape ([heads] or [batch, heads], f32), read after it.
    score_mod=(captures, region), traced_score_mod's, instead of those: the
    region and its captures, read after the outputs in order.
    sinks=(shape, element type): one learned logit per query head ([Hq],
    float32 or dtype), counted in each row's softmax denominator as a key of
    value zero (gpt-oss); the last argument, after lse and the captures."""
    q_shape, k_shape, v_shape, scale = _checked_signature(q_shape, k_shape, v_shape, scale)
    if sinks is not None:
        sinks = _sinks_ir(q_shape, dtype, sinks)
    if dynamic and (bias is not None or softcap is not None or alibi_slopes is not None
                    or score_mod is not None):
        raise ValueError("bias=, softcap=, alibi_slopes= and score_mod= need static shapes "
                         "(dynamic=False)")
    caps, captures, score_mod = _score_mod_ir(q_shape, k_shape, bias, softcap, alibi_slopes,
                                              score_mod)
    o_shape = q_shape[:-1] + v_shape[-1:]
    l_shape = q_shape[:-1]
    if dynamic:
        q_shape, k_shape, v_shape, o_shape = map(_dynamic, (q_shape, k_shape, v_shape, o_shape))
        l_shape = o_shape[:-1]
    args = [("q", q_shape, dtype, False), ("k", k_shape, dtype, False),
            ("v", v_shape, dtype, False), ("o", o_shape, dtype, True)]
    if lse:
        args.append(("lse", l_shape, "f32", True))
    n_out = len(args) - 3
    args += [(n, sh, e, False) for n, sh, e in caps]
    sinks_clause = ""
    if sinks is not None:
        args.append(("sinks", sinks[0], sinks[1], False))
        sinks_clause = " sinks(%%sinks_t : %s)" % _tensor(*sinks)
    sig = ", ".join("%%%s: %s" % (n, _memref(s, e)) for n, s, e, _ in args)
    body = []
    for n, s, e, writable in args:
        body.append("  %%%s_t = bufferization.to_tensor %%%s restrict%s : %s to %s" % (
            n, n, " writable" if writable else "", _memref(s, e), _tensor(s, e)))
    ins = "%q_t, %k_t, %v_t : " + ", ".join(_tensor(s, e) for _, s, e, _ in args[:3])
    outs_args = args[3:3 + n_out]
    outs = ", ".join("%%%s_t" % n for n, _, _, _ in outs_args) + " : " + \
        ", ".join(_tensor(s, e) for _, s, e, _ in outs_args)
    results = ", ".join(_tensor(s, e) for _, s, e, _ in outs_args)
    res = "%r:2" if lse else "%r"
    body.append("  %s = flash.attention ins(%s) outs(%s)%s%s scale(%.9e)%s%s -> %s" % (
        res, ins, outs, captures, sinks_clause, scale, _mask_clause(causal, window, align),
        score_mod, results))
    for i, (n, s, e, _) in enumerate(outs_args):
        value = "%%r#%d" % i if lse else "%r"
        body.append("  bufferization.materialize_in_destination %s in restrict writable %%%s"
                    " : (%s, %s) -> ()" % (value, n, _tensor(s, e), _memref(s, e)))
    return ("func.func @%s(%s) attributes {llvm.emit_c_interface} {\n%s\n  return\n}\n"
            % (name, sig, "\n".join(body)))


def _destination_func(args, n_in, op, attrs, name, n_after=0):
    """A func.func in destination-passing style on memrefs around one op:
    args (name, shape, element type, writable); the first n_in are `ins`,
    the writable ones its outs (output, then lse), the rest the operands
    that follow in the op's `extra` clause, but for the last n_after, which
    `attrs` names itself; `op` is (op name, clause keyword), attrs the text
    after outs."""
    outs_args = [a for a in args if a[3]]
    extra = [a for a in args[n_in:len(args) - n_after] if not a[3]]
    sig = ", ".join("%%%s: %s" % (n, _memref(s, e)) for n, s, e, _ in args)
    body = []
    for n, s, e, writable in args:
        body.append("  %%%s_t = bufferization.to_tensor %%%s restrict%s : %s to %s" % (
            n, n, " writable" if writable else "", _memref(s, e), _tensor(s, e)))
    types = lambda xs: ", ".join(_tensor(s, e) for _, s, e, _ in xs)
    names = lambda xs: ", ".join("%%%s_t" % n for n, _, _, _ in xs)
    lse = len(outs_args) == 2
    res = "%r:2" if lse else "%r"
    body.append("  %s = %s ins(%s : %s) %s(%s : %s) outs(%s : %s)%s -> %s" % (
        res, op[0], names(args[:n_in]), types(args[:n_in]), op[1], names(extra), types(extra),
        names(outs_args), types(outs_args), attrs, types(outs_args)))
    for i, (n, s, e, _) in enumerate(outs_args):
        value = "%%r#%d" % i if lse else "%r"
        body.append("  bufferization.materialize_in_destination %s in restrict writable %%%s"
                    " : (%s, %s) -> ()" % (value, n, _tensor(s, e), _memref(s, e)))
    return ("func.func @%s(%s) attributes {llvm.emit_c_interface} {\n%s\n  return\n}\n"
            % (name, sig, "\n".join(body)))


def paged_attention_ir(q_shape, cache_k_shape, cache_v_shape, table_shape, dtype="f32", *,
                       scale=None, causal=False, window=None, lse=False, sinks=None,
                       bias=None, softcap=None, alibi_slopes=None, score_mod=None,
                       name=FUNC_NAME):
    """The module of attention() against a paged KV cache: flash.paged_attention
    in destination-passing style on memrefs (q, k_cache, v_cache, out[, lse],
    block_table, seq_lens[, captures...][, sinks]). q [B, Hq, Lq, D]; caches
    [num_pages, page_size, Hkv, D] / [..., Dv]; block_table [B, max_pages]
    and seq_lens [B], i32. A mask (causal, window) sits at each sequence's
    own diagonal: the Lq queries are its last Lq positions. sinks=(shape,
    element type), bias=, softcap=, alibi_slopes= and score_mod= as for
    attention_ir, with the key index the key's position in its sequence: a
    bias spans the table's capacity max_pages · page_size, ALiBi's diagonal
    is each sequence's own (it reads seq_lens as one more capture)."""
    q_shape, k_shape, v_shape, scale = _checked_signature(q_shape, cache_k_shape,
                                                          cache_v_shape, scale)
    table_shape = tuple(_check_dim("block_table", d) for d in table_shape)
    if len(q_shape) != 4:
        raise ValueError("with block_table=, q must be [B, Hq, Lq, D], got %s" % (q_shape,))
    for what, sh in (("k", k_shape), ("v", v_shape)):
        if len(sh) != 4:
            raise ValueError("with block_table=, %s must be a paged cache [num_pages, "
                             "page_size, Hkv, D], got %s" % (what, sh))
    if len(table_shape) != 2:
        raise ValueError("block_table must be [B, max_pages], got %s" % (table_shape,))
    keys = paged_keys_shape(q_shape, k_shape, table_shape)
    caps, captures, region = _score_mod_ir(q_shape, keys, bias, softcap, alibi_slopes,
                                           score_mod, lens=True)
    o_shape = q_shape[:-1] + v_shape[-1:]
    args = [("q", q_shape, dtype, False), ("k", k_shape, dtype, False),
            ("v", v_shape, dtype, False), ("o", o_shape, dtype, True)]
    if lse:
        args.append(("lse", q_shape[:-1], "f32", True))
    args += [("table", table_shape, "i32", False), ("lens", q_shape[:1], "i32", False)]
    args += [(n, sh, e, False) for n, sh, e in caps]
    sinks_clause = ""
    if sinks is not None:
        sinks = _sinks_ir(q_shape, dtype, sinks)
        args.append(("sinks", sinks[0], sinks[1], False))
        sinks_clause = " sinks(%%sinks_t : %s)" % _tensor(*sinks)
    return _destination_func(
        args, 3, ("flash.paged_attention", "pages"), "%s%s scale(%.9e)%s%s" % (
            captures, sinks_clause, scale, _mask_clause(causal, window, "bottom_right"),
            region), name, n_after=len(caps) + (1 if sinks is not None else 0))


def paged_keys_shape(q_shape, cache_k_shape, table_shape):
    """The keys of a paged cache as a score_mod and a bias see them: [B, Hkv,
    max_pages · page_size, D], key j at its position in its sequence."""
    return (q_shape[0], cache_k_shape[2], table_shape[1] * cache_k_shape[1],
            cache_k_shape[3])


def varlen_attention_ir(q_shape, k_shape, v_shape, num_seqs, dtype="f32", *, scale=None,
                        causal=False, window=None, align="top_left", lse=False, sinks=None,
                        name=FUNC_NAME):
    """The module of attention() on a packed batch of variable-length
    sequences: flash.varlen_attention in destination-passing style on memrefs
    (q, k, v, out[, lse], cu_seqlens_q, cu_seqlens_k[, sinks]). q [Tq, Hq, D],
    k [Tk, Hkv, D], v [Tk, Hkv, Dv]; the offsets are i32 [num_seqs + 1]; lse
    is [Hq, Tq]. A mask aligns within each sequence. sinks=(shape, element
    type): one logit per query head, [Hq]."""
    q_shape, k_shape, v_shape, scale = _checked_signature(q_shape, k_shape, v_shape, scale)
    for what, sh, layout in (("q", q_shape, "[Tq, Hq, D]"), ("k", k_shape, "[Tk, Hkv, D]"),
                             ("v", v_shape, "[Tk, Hkv, Dv]")):
        if len(sh) != 3:
            raise ValueError("with cu_seqlens_q=, %s must be packed tokens %s, got %s"
                             % (what, layout, sh))
    num_seqs = _check_dim("the number of sequences", num_seqs)
    o_shape = q_shape[:-1] + v_shape[-1:]
    args = [("q", q_shape, dtype, False), ("k", k_shape, dtype, False),
            ("v", v_shape, dtype, False), ("o", o_shape, dtype, True)]
    if lse:
        args.append(("lse", (q_shape[1], q_shape[0]), "f32", True))
    args += [("cu_q", (num_seqs + 1,), "i32", False), ("cu_k", (num_seqs + 1,), "i32", False)]
    sinks_clause = ""
    if sinks is not None:
        sinks = _sinks_ir(q_shape, dtype, sinks, heads_dim=1)
        args.append(("sinks", sinks[0], sinks[1], False))
        sinks_clause = " sinks(%%sinks_t : %s)" % _tensor(*sinks)
    return _destination_func(args, 3, ("flash.varlen_attention", "seqlens"),
                             "%s scale(%.9e)%s" % (sinks_clause, scale,
                                                   _mask_clause(causal, window, align)),
                             name, n_after=1 if sinks is not None else 0)


def attention_grad_ir(q_shape, k_shape, v_shape, dtype="f32", *, scale=None, causal=False,
                      window=None, align="top_left", bias=None, softcap=None,
                      alibi_slopes=None, score_mod=None, capture_grads=None,
                      name=FUNC_NAME + "_grad"):
    """The module of attention()'s backward: flash.attention_grad in
    destination-passing style on memrefs (q, k, v, o, do, lse[, bias] -> dq, dk,
    dv[, dbias]), P recomputed from the forward's log-sum-exp. Arguments as
    attention_ir; each capture (bias, alibi slopes) follows lse, and its
    gradient follows dv, in the capture's shape (the bias's without its
    size-1 dims). capture_grads: one bool per float capture, whether its
    gradient is wanted (default all); an unwanted one is no argument and its
    result is left unread, so the kernels do not compute it."""
    q_shape, k_shape, v_shape, scale = _checked_signature(q_shape, k_shape, v_shape, scale)
    o_shape = q_shape[:-1] + v_shape[-1:]
    ins = [("q", q_shape, dtype), ("k", k_shape, dtype), ("v", v_shape, dtype),
           ("o", o_shape, dtype), ("do", o_shape, dtype), ("lse", q_shape[:-1], "f32")]
    outs = [("dq", q_shape, dtype), ("dk", k_shape, dtype), ("dv", v_shape, dtype)]
    caps, captures, score_mod = _score_mod_ir(q_shape, k_shape, bias, softcap, alibi_slopes,
                                              score_mod)
    # Float captures get a gradient; integer and i1 ones (masks, lengths) none.
    dcaps = [("d" + n, sh, e) for n, sh, e in caps if e in ("f32", "f16", "bf16")]
    if capture_grads is None:
        capture_grads = (True,) * len(dcaps)
    if len(capture_grads) != len(dcaps):
        raise ValueError("capture_grads has %d entries for %d float captures"
                         % (len(capture_grads), len(dcaps)))
    outs += dcaps
    wanted = outs[:3] + [x for x, w in zip(dcaps, capture_grads) if w]
    sig = ", ".join("%%%s: %s" % (n, _memref(s, e)) for n, s, e in ins + caps + wanted)
    body = []
    for n, s, e in ins + caps + outs:
        if (n, s, e) in outs and (n, s, e) not in wanted:
            body.append("  %%%s_t = tensor.empty() : %s" % (n, _tensor(s, e)))
            continue
        body.append("  %%%s_t = bufferization.to_tensor %%%s restrict%s : %s to %s" % (
            n, n, " writable" if (n, s, e) in outs else "", _memref(s, e), _tensor(s, e)))
    types = lambda xs: ", ".join(_tensor(s, e) for _, s, e in xs)
    body.append("  %%r:%d = flash.attention_grad ins(%s : %s) outs(%s : %s)%s scale(%.9e)%s%s"
                " -> %s"
                % (len(outs), ", ".join("%%%s_t" % n for n, _, _ in ins), types(ins),
                   ", ".join("%%%s_t" % n for n, _, _ in outs), types(outs), captures, scale,
                   _mask_clause(causal, window, align), score_mod, types(outs)))
    for i, (n, s, e) in enumerate(outs):
        if (n, s, e) in wanted:
            body.append("  bufferization.materialize_in_destination %%r#%d in restrict "
                        "writable %%%s : (%s, %s) -> ()" % (i, n, _tensor(s, e), _memref(s, e)))
    return ("func.func @%s(%s) attributes {llvm.emit_c_interface} {\n%s\n  return\n}\n"
            % (name, sig, "\n".join(body)))


def _lib_dir():
    return os.path.dirname(_capi.library_path())


class AttentionKernel:
    """One compiled attention configuration. Call it with (q, k, v) of the
    shapes it was built for; returns out, or (out, lse)."""

    def __init__(self, ir, device, pipeline, options, lse, path):
        self.ir, self.device, self.pipeline, self.options = ir, device, pipeline, options
        self.lse, self.path = lse, path
        self._launch = None
        # A kernel compiled for static shapes is only ever called with those
        # (attention() keys it by them): its output shapes and descriptors
        # are computed once instead of per call.
        signature = ir.split(" attributes", 1)[0]
        self._static = "?" not in signature
        self._arg_shapes = _signature_shapes(signature) if self._static else None
        if device == "cpu":
            from .cpu import HostLibrary
            self._lib = HostLibrary(path)
        else:
            from .gpu import KernelLibrary
            self._lib = KernelLibrary(path)

    @classmethod
    def build(cls, ir, device, pipeline=None, options="", lse=False, use_cache=True,
              opt_level=3):
        path = _library_for(ir, device, pipeline, options, use_cache, opt_level)
        return cls(ir, device, pipeline or _default_pipeline(device), options, lse, path)

    def __call__(self, q, k, v, out=None, lse_out=None, captures=()):
        """captures: the arrays the kernel's score_mod reads (attention()'s bias,
        reshaped to the capture's shape), passed after the outputs."""
        if self.device == "cpu":
            return self._call_host(q, k, v, out, lse_out, captures)
        return self._call_cuda(q, k, v, out, lse_out, captures)

    def _call_host(self, q, k, v, out, lse_out, captures):
        import numpy as np
        q, k, v = (np.ascontiguousarray(x) for x in (q, k, v))
        static = self._arg_shapes
        if static is not None:
            o_shape, l_shape = static[3], static[4] if self.lse else None
        else:
            o_shape, l_shape = q.shape[:-1] + v.shape[-1:], q.shape[:-1]
        if out is None:
            out = np.empty(o_shape, q.dtype)
        _check_out(out, o_shape, q.dtype, out.flags.c_contiguous)
        args = [q, k, v, out]
        if self.lse:
            if lse_out is None:
                lse_out = np.empty(l_shape, np.float32)
            args.append(lse_out)
        args += [np.ascontiguousarray(c) for c in captures]
        self._lib.call(FUNC_NAME, *args)
        return (out, lse_out) if self.lse else out

    def _call_cuda(self, q, k, v, out, lse_out, captures):
        import torch
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        device = q.device
        if k.device != device or v.device != device:
            raise ValueError("q, k and v must be on one device, got %s, %s, %s"
                             % (device, k.device, v.device))
        static = self._arg_shapes
        if static is not None:
            o_shape, l_shape = static[3], static[4] if self.lse else None
        else:
            o_shape, l_shape = q.shape[:-1] + v.shape[-1:], q.shape[:-1]
        if out is None:
            out = torch.empty(o_shape, dtype=q.dtype, device=device)
        else:
            _check_out(out, o_shape, q.dtype, out.is_contiguous())
            if out.device != device:
                raise ValueError("out is on %s, q on %s" % (out.device, device))
        args = [q, k, v, out]
        if self.lse:
            if lse_out is None:
                lse_out = torch.empty(l_shape, dtype=torch.float32, device=device)
            args.append(lse_out)
        for c in captures:
            if c.device != device:
                raise ValueError("an array the score_mod or the block table reads is on %s, q on %s"
                                 % (c.device, device))
            args.append(c.contiguous())
        if static is not None:
            # The descriptors carry the compiled shapes, so the tensors must
            # have them (attention() guarantees it; a direct caller may not).
            if len(args) != len(static):
                raise ValueError("this kernel takes %d arrays, got %d" % (len(static), len(args)))
            for i, a in enumerate(args):
                if a.shape != static[i]:
                    raise ValueError("argument %d has shape %s; this kernel was compiled for %s"
                                     % (i, tuple(a.shape), static[i]))
        launch = self._launch
        if launch is None:
            from .gpu import current_stream_handle
            self._stream = current_stream_handle
            launch = self._launch = self._lib.launcher(FUNC_NAME, [a.dim() for a in args],
                                                       shapes=static)
        index = device.index
        launch(args, self._stream(index), index)
        return (out, lse_out) if self.lse else out


def _signature_shapes(signature):
    """The static shapes of the memref arguments of a func.func signature."""
    return [tuple(int(d) for d in m.group(1).split("x")[:-1])
            for m in re.finditer(r"%\w+: memref<([^>]*)>", signature)]


def _default_pipeline(device):
    return CPU_PIPELINE if device == "cpu" else GPU_PIPELINE


def _library_key(ir, device, pipeline, options, opt_level=3):
    pipeline = pipeline or _default_pipeline(device)
    target = _capi.host_target() if device == "cpu" else "cuda"
    return cache.key(ir, pipeline, options, target, (opt_level, device))


def _library_cached(ir, device, pipeline, options, opt_level=3):
    """The cached library _library_for would return, or None (nothing is built)."""
    if device == "cpu" and not _capi.available():
        return None  # host code is built for this CPU: no compiler, no host kernel
    return cache.lookup(_library_key(ir, device, pipeline, options, opt_level))


def _library_for(ir, device, pipeline, options, use_cache=True, opt_level=3):
    """Path of the compiled library for this IR: from the cache, else built now.

    GPU kernels are keyed without the host: a cache folder filled where the
    compiler is (flash_mlir.prebuild) serves a GPU machine that has none."""
    pipeline = pipeline or _default_pipeline(device)
    # Host code is built for this CPU, so it needs the compiler here.
    target = _capi.host_target() if device == "cpu" else "cuda"
    k = _library_key(ir, device, pipeline, options, opt_level)
    path = cache.lookup(k) if use_cache else None
    if path is not None:
        return path
    if not _capi.available():
        raise FlashError(
            "flash_mlir: no compiled kernel for this configuration in %s, and no compiler "
            "here to build one (%s). Build it where flash-mlir is installed with "
            "flash_mlir.prebuild(...) into a cache folder and point FLASH_MLIR_CACHE_DIR "
            "at a copy of that folder. The kernel's IR:\n%s"
            % (cache.cache_dir(), _capi.unavailable_reason(), ir))
    return cache.store_file(
        k, lambda tmp: _compile_to_library(ir, device, pipeline, options, opt_level, tmp),
        meta={"pipeline": pipeline, "options": options, "target": target, "ir": ir})


def _check_out(out, shape, dtype, contiguous):
    # The compiled code writes through a descriptor of exactly this layout.
    if tuple(out.shape) != tuple(shape) or out.dtype != dtype or not contiguous:
        raise ValueError("out must be a contiguous %s array of shape %s, got %s %s%s"
                         % (dtype, tuple(shape), out.dtype, tuple(out.shape),
                            "" if contiguous else " (not contiguous)"))


def _compile_to_library(ir, device, pipeline, options, opt_level, out_path):
    if device != "cpu":
        # ptxas comes from the CUDA toolkit; the pipeline finds it through CUDA_HOME.
        os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    if not _capi.is_registered(pipeline.split("{")[0].strip()):
        raise FlashError("flash_mlir: pipeline '%s' is not registered in this build (%s)"
                         % (pipeline, _capi.version()))
    with _capi.Context() as ctx:
        module = ctx.parse(ir, "attention.mlir")
        module.run(pipeline, options)
        obj = module.emit("object", opt_level)
    if device == "cpu":
        from .cpu import link_host_object
        link_host_object(obj, out_path)
        return
    from .cpu import link_shared
    rt = os.path.join(_lib_dir(), "libflash_cuda_runtime.so")
    if not os.path.exists(rt):
        raise FlashError("flash_mlir: libflash_cuda_runtime.so not found next to %s"
                         % _capi.library_path())
    # The runtime travels with the kernel (found through $ORIGIN), so cached
    # kernels load where there is no LLVM.
    bundled = os.path.join(os.path.dirname(out_path), "libflash_cuda_runtime.so")
    if not os.path.exists(bundled) or os.path.getmtime(bundled) < os.path.getmtime(rt):
        shutil.copy2(rt, bundled + ".tmp")
        os.replace(bundled + ".tmp", bundled)
    link_shared(obj, out_path, ["-L" + os.path.dirname(bundled), "-lflash_cuda_runtime"],
                rpaths=["$ORIGIN"])


_kernels = {}
_kernels_lock = threading.Lock()


def _classify(x):
    """('numpy' | 'torch-cpu' | 'torch-cuda', element type)."""
    mod = type(x).__module__
    if mod.startswith("torch"):
        elt = _TORCH_TYPES.get(str(x.dtype))
        if elt is None:
            raise TypeError("unsupported torch dtype %s (float32, float16, bfloat16)" % x.dtype)
        return ("torch-cuda" if x.is_cuda else "torch-cpu"), elt
    import numpy as np
    if not isinstance(x, np.ndarray):
        raise TypeError("expected NumPy arrays or torch tensors, got %s" % type(x).__name__)
    elt = _NUMPY_TYPES.get(str(x.dtype))
    if elt is None:
        raise TypeError("unsupported NumPy dtype %s (float32, float16)" % x.dtype)
    return "numpy", elt


_fast_kernels = {}
# The plain calls on CUDA tensors: _plain_key's key -> (launch, stream handle
# of a device ordinal, out's shape, the lse's shape or None).
_plain_calls = {}
_is_compiling = None


def _plain_key(q, k, v, scale, causal, window, align, return_lse):
    """The key of a plain call on contiguous CUDA tensors that autograd and a
    graph capture do not see, or None (the general path then decides)."""
    global _is_compiling
    try:
        if not (q.is_cuda and k.is_cuda and v.is_cuda):
            return None
        if q.requires_grad or k.requires_grad or v.requires_grad:
            return None
        if _is_compiling is None:
            import torch
            compiler = getattr(torch, "compiler", None)
            _is_compiling = getattr(compiler, "is_compiling", None) or (lambda: False)
        if _is_compiling():
            return None
        # type(scale): True == 1 and 2.0 == 2 as dictionary keys.
        return (q.shape, k.shape, v.shape, q.dtype, k.dtype, v.dtype, q.get_device(),
                k.get_device(), v.get_device(), type(scale), scale, causal, type(window),
                window, align, return_lse, os.environ.get("FLASH_MLIR_CACHE_DIR"))
    except (AttributeError, TypeError):  # not torch tensors, or an unhashable argument
        return None


def _flex_call_key(plain, score_mod, mask_mod, args, sinks, pages=()):
    """The key of a Flex-style call (score_mod=, mask_mod=, their arrays, sinks) on
    top of its plain key, and the arrays the kernel reads after the outputs, in
    order: pages (a paged call's block table and lengths), score_mod_args, the
    arrays score_mod then mask_mod read from their closures and globals, sinks.
    None where the general path must decide: a
    callable that is not a Python function (autograd's own FlexMods, made anew
    for every call, or an object whose key is itself: either would add an entry
    per call), a function traced on every call, an array that is no CUDA tensor
    or that autograd sees."""
    from . import score
    if any(f is not None and not hasattr(f, "__code__") for f in (score_mod, mask_mod)):
        return None
    s_key, s_found = score.function_scan(score_mod)
    m_key, m_found = score.function_scan(mask_mod)
    if (score_mod is not None and s_key is None) or (mask_mod is not None and m_key is None):
        return None
    extra = tuple(pages) + tuple(args) + tuple(a for _, a in s_found) + \
        tuple(a for _, a in m_found)
    if sinks is not None:
        extra += (sinks,)
    try:
        sigs = tuple((a.dtype, a.shape, a.get_device(), a.requires_grad) for a in extra)
    except AttributeError:  # not a torch tensor
        return None
    if any(sig[2] < 0 or sig[3] for sig in sigs):
        return None
    return (plain, s_key, m_key, len(pages), len(args), sinks is not None, sigs), extra


def _plain_launch(entry, q, k, v, captures=()):
    launch, stream, o_shape, l_shape = entry
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    out = q.new_empty(o_shape)
    device = q.get_device()
    caps = tuple(c.contiguous() for c in captures)
    if l_shape is None:
        launch((q, k, v, out) + caps, stream(device), device)
        return out
    import torch
    lse = q.new_empty(l_shape, dtype=torch.float32)
    launch((q, k, v, out, lse) + caps, stream(device), device)
    return out, lse


def _forget_kernels():
    """Drops the kernels this process holds (the disk cache stays)."""
    with _kernels_lock:
        _kernels.clear()
        _fast_kernels.clear()
        _plain_calls.clear()


def _forget_choices():
    """Forgets which kernel each call key took (the kernels themselves stay), so
    that the next call of a key chooses again: after the tuning table changed."""
    with _kernels_lock:
        _fast_kernels.clear()
        _plain_calls.clear()


def _requires_grad(*xs):
    """Whether torch autograd must see this call (torch is imported only if
    an array requires grad, which NumPy arrays never do)."""
    for x in xs:
        if getattr(x, "requires_grad", False):
            import torch
            return torch.is_grad_enabled()
    return False


def _array_key(x):
    # dtype and shape objects of torch and NumPy are hashable themselves.
    return (type(x), x.dtype, x.shape, getattr(x, "is_cuda", False))


def bias_type(bias, kind, elt):
    """The MLIR element type of a bias array: float32 or the dtype of q."""
    bkind, belt = _classify(bias)
    if bkind != kind:
        raise TypeError("bias must be the same kind of array as q (%s), got %s" % (kind, bkind))
    if belt not in ("f32", elt):
        raise TypeError("bias must be float32 or q's dtype, got %s" % bias.dtype)
    return belt


def bias_capture(q, k, bias):
    """The bias as the kernel reads it: without its size-1 (broadcast) dims."""
    _, cap_shape = _bias_plan(tuple(q.shape), tuple(k.shape), tuple(bias.shape))
    return bias.reshape(cap_shape)


def slopes_type(slopes, kind):
    skind, selt = _classify(slopes)
    if skind != kind:
        raise TypeError("alibi_slopes must be the same kind of array as q (%s), got %s"
                        % (kind, skind))
    if selt != "f32":
        raise TypeError("alibi_slopes must be float32, got %s" % slopes.dtype)
    return tuple(slopes.shape)


def sinks_type(sinks, kind, elt, q_shape, heads_dim=-3):
    """attention_ir's sinks=(shape, element type) of a sinks array: q's kind,
    float32 or q's dtype, one per query head ([Hq], q.shape[heads_dim])."""
    skind, sdt = _array_kind("sinks", sinks)
    if skind != kind:
        raise TypeError("sinks must be the same kind of array as q (%s), got %s" % (kind, skind))
    selt = _ARG_TYPES.get(sdt)
    if selt not in ("f32", elt):
        raise TypeError("sinks must be float32 or q's dtype, got %s" % sinks.dtype)
    return _sinks_ir(tuple(q_shape), elt, (tuple(sinks.shape), selt), heads_dim)


def _array_kind(name, x):
    """('numpy' | 'torch-cpu' | 'torch-cuda', dtype name without 'torch.') of
    an argument array of any dtype; a TypeError naming it for anything else."""
    if type(x).__module__.startswith("torch"):
        return ("torch-cuda" if x.is_cuda else "torch-cpu"), str(x.dtype).replace("torch.", "")
    import numpy as np
    if not isinstance(x, np.ndarray):
        raise TypeError("%s must be a NumPy array or a torch tensor, got %s"
                        % (name, type(x).__name__))
    return "numpy", str(x.dtype)


def _check_index_array(name, x, kind, shape):
    """A block table or length array: int32, q's kind of array, `shape`."""
    xkind, dt = _array_kind(name, x)
    is_i32 = dt == "int32"
    if xkind != kind:
        raise TypeError("%s must be the same kind of array as q (%s), got %s" % (name, kind, xkind))
    if not is_i32:
        raise TypeError("%s must be int32, got %s" % (name, x.dtype))
    if len(x.shape) != len(shape) or any(e is not None and d != e for d, e in zip(x.shape, shape)):
        raise ValueError("%s must have shape %s, got %s" % (
            name, "[%s]" % ", ".join("?" if e is None else str(e) for e in shape), tuple(x.shape)))


_ARG_TYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "bool": "i1",
              "int32": "i32", "int64": "i64"}


def score_mod_arg_specs(args, kind):
    """(shape, MLIR element type) of each score_mod argument, checked to be q's
    kind of array with a supported dtype."""
    specs = []
    for n, a in enumerate(args):
        akind, dt = _array_kind("score_mod_args[%d]" % n, a)
        if akind != kind:
            raise TypeError("score_mod_args[%d] must be the same kind of array as q (%s), "
                            "got %s" % (n, kind, akind))
        elt = _ARG_TYPES.get(dt)
        if elt is None:
            raise TypeError("score_mod_args[%d] has dtype %s (float32, float16, bfloat16, "
                            "bool, int32 or int64)" % (n, dt))
        specs.append((tuple(a.shape), elt))
    return specs


_mask_kinds = {}


def _flex_mods(q, k, score_mod, args, mask_mod, causal, window, align, paged=False):
    """score_mod= and mask_mod= as one score_mod (a score.FlexMods, or None), its
    arguments (score_mod_args, then the arrays the functions read from their
    closures and globals), and causal, window, align: a mask_mod proved causal
    or a window on these shapes becomes that structured mask. paged: k is a
    page pool, and a mask_mod stays a score_mod (a structured mask there sits
    at each sequence's end, not where the function's indices put it)."""
    from . import score
    if isinstance(score_mod, score.FlexMods):  # autograd's own call: lowered already
        return score_mod, args, causal, window, align
    kind = ("mod",) if paged and mask_mod is not None else None
    if mask_mod is not None and not paged:
        lq, lk = q.shape[-2], k.shape[-2]
        key = score.function_key(mask_mod)
        key = None if key is None else (key, len(q.shape) - 2, lq, lk)
        kind = _mask_kinds.get(key) if key is not None else None
        if kind is None:
            kind = score.mask_kind(mask_mod, len(q.shape) - 2, lq, lk) or ("mod",)
            if key is not None:
                _mask_kinds[key] = kind
        if kind[0] == "causal":
            causal, align = True, kind[1]
        elif kind[0] == "window":
            window, align = kind[1], kind[2]
    structured = kind is not None and kind[0] != "mod"
    if score_mod is None and structured:
        return None, (), causal, window, align
    flex = score.FlexMods(score_mod, mask_mod, len(args), with_mask=not structured)
    return flex, args + flex.arrays, causal, window, align


def _mods_ir(q, bias, alibi_slopes, score_mod, score_mod_args, kind, elt):
    """What the IR generators take for a call's bias, ALiBi slopes and
    score_mod: (shape, element type), the slopes' shape, (captures, region)."""
    bias_ir = None if bias is None else (tuple(bias.shape), bias_type(bias, kind, elt))
    slopes_ir = None if alibi_slopes is None else slopes_type(alibi_slopes, kind)
    traced = None
    if score_mod is not None:
        traced = traced_score_mod(score_mod, tuple(q.shape),
                                  score_mod_arg_specs(score_mod_args, kind))
    return bias_ir, slopes_ir, traced


def _kernel_for(q, k, v, scale, causal, window, align, return_lse, dynamic, pipeline, cache,
                options, bias=None, softcap=None, alibi_slopes=None, block_table=None,
                seq_lens=None, score_mod=None, score_mod_args=(), cu_seqlens_q=None,
                cu_seqlens_k=None, sinks=None, tuned=False):
    """The kernel for these arrays and arguments, built or read from the
    cache, with the kind of array and the element type. tuned: the caller
    passed no options or pipeline, so a plain forward call runs the tuning
    table's choice for its chip and shapes where there is one (tuning.py)."""
    kinds = [_classify(x) for x in (q, k, v)]
    if len({kd for kd, _ in kinds}) != 1 or len({e for _, e in kinds}) != 1:
        raise TypeError("q, k and v must be the same kind of array with the same dtype, got %s"
                        % [(kd, e) for kd, e in kinds])
    kind, elt = kinds[0]
    device = "cuda" if kind == "torch-cuda" else "cpu"
    if cu_seqlens_q is not None:
        for name, x, layout in (("q", q, "[Tq, Hq, D]"), ("k", k, "[Tk, Hkv, D]"),
                                ("v", v, "[Tk, Hkv, Dv]")):
            if len(x.shape) != 3:
                raise ValueError("with cu_seqlens_q=, %s must be packed tokens %s, got %s"
                                 % (name, layout, tuple(x.shape)))
        _check_index_array("cu_seqlens_q", cu_seqlens_q, kind, (None,))
        _check_index_array("cu_seqlens_k", cu_seqlens_k, kind, (cu_seqlens_q.shape[0],))
        if cu_seqlens_q.shape[0] == 0:
            raise ValueError("cu_seqlens_q must hold B + 1 >= 1 offsets, got none")
        sinks_ir = None if sinks is None else sinks_type(sinks, kind, elt, q.shape,
                                                         heads_dim=1)
        ir = varlen_attention_ir(q.shape, k.shape, v.shape, cu_seqlens_q.shape[0] - 1, elt,
                                 scale=scale, causal=causal, window=window, align=align,
                                 lse=return_lse, sinks=sinks_ir)
    elif block_table is not None:
        if len(q.shape) != 4:
            raise ValueError("with block_table=, q must be [B, Hq, Lq, D], got %s"
                             % (tuple(q.shape),))
        _check_index_array("block_table", block_table, kind, (q.shape[0], None))
        _check_index_array("seq_lens", seq_lens, kind, (q.shape[0],))
        bias_ir, slopes_ir, traced = _mods_ir(q, bias, alibi_slopes, score_mod,
                                              score_mod_args, kind, elt)
        sinks_ir = None if sinks is None else sinks_type(sinks, kind, elt, q.shape)
        ir = paged_attention_ir(q.shape, k.shape, v.shape, block_table.shape, elt, scale=scale,
                                causal=causal, window=window, lse=return_lse, sinks=sinks_ir,
                                bias=bias_ir, softcap=softcap, alibi_slopes=slopes_ir,
                                score_mod=traced)
    else:
        bias_ir, slopes_ir, traced = _mods_ir(q, bias, alibi_slopes, score_mod,
                                              score_mod_args, kind, elt)
        sinks_ir = None if sinks is None else sinks_type(sinks, kind, elt, q.shape)
        ir = attention_ir(q.shape, k.shape, v.shape, elt, scale=scale, causal=causal,
                          window=window, align=align, lse=return_lse, dynamic=dynamic,
                          bias=bias_ir, softcap=softcap, alibi_slopes=slopes_ir,
                          score_mod=traced, sinks=sinks_ir)
        if tuned and not options and pipeline is None and not dynamic and bias_ir is None \
                and slopes_ir is None and traced is None and sinks_ir is None \
                and softcap is None:
            from . import tuning
            kernel = tuning._tuned_kernel(ir, device, q, (tuple(q.shape), tuple(k.shape),
                                                          tuple(v.shape)),
                                          elt, causal, window, align, return_lse, cache)
            if kernel is not None:
                return kernel, kind, elt
    return _cached_kernel(ir, device, pipeline, format_options(options), return_lse, cache), \
        kind, elt


def _cached_kernel(ir, device, pipeline, opts, lse, use_cache=True):
    """The AttentionKernel of this IR and option string, held in memory per cache folder."""
    key = (ir, device, pipeline, opts, os.environ.get("FLASH_MLIR_CACHE_DIR"))
    with _kernels_lock:
        kernel = _kernels.get(key) if use_cache else None
        if kernel is None:
            kernel = AttentionKernel.build(ir, device, pipeline, opts, lse=lse,
                                           use_cache=use_cache)
            if use_cache:
                _kernels[key] = kernel
    return kernel


def attention(q, k, v, *, scale=None, causal=False, window=None, align=None,
              return_lse=False, out=None, dynamic=False, pipeline=None, cache=True, bias=None,
              softcap=None, alibi_slopes=None, block_table=None, seq_lens=None,
              score_mod=None, score_mod_args=(), mask_mod=None, cu_seqlens_q=None,
              cu_seqlens_k=None, sinks=None, **options):
    """Scaled dot-product attention through flash.attention.

    q [batch..., Lq, D], k [batch..., Lk, D], v [batch..., Lk, Dv]: NumPy
    arrays (float32/float16; run on the host) or torch tensors (CPU tensors
    run on the host, CUDA tensors on the GPU on torch's current stream). The
    last batch dim (heads) of k/v may divide q's (grouped-query attention).

    scale: multiplies q.kT, default 1/sqrt(D). causal: key j is visible to
    query i when j <= i + off; window=W: i + off - W < j <= i + off; off is 0
    with align="top_left" (torch SDPA's is_causal) or Lk - Lq with
    "bottom_right". bias: an additive bias on the scaled scores (before the
    mask), any array of q's kind, float32 or q's dtype, that broadcasts to
    [batch..., Lq, Lk] (each dim 1 or the scores'; e.g. [Lq, Lk], [Hq, 1, Lk]
    for ALiBi-like per-head biases); it takes part in autograd on the CPU.
    softcap=c: the scaled scores become c·tanh(s / c) (Gemma 2), before the
    bias. alibi_slopes: float32 [Hq] or [B, Hq], ALiBi as FlashAttention
    defines it, − slope·|i + Lk − Lq − j| added after the bias.
    sinks: attention sinks (gpt-oss), one learned logit per query head: a
    1-D array [Hq] (Hq = q.shape[-3], so q needs a batch dim; q.shape[1]
    of a packed varlen q) of q's kind,
    float32 or q's dtype. Each row's softmax counts sinks[h] as one more
    key whose value is zero: p_j = exp(s_j) / (exp(sinks[h]) + sum_k
    exp(s_k)), and the lse includes it; a row that sees no key gives 0 and
    lse = sinks[h]. With every mask, score modification, GQA, out= and
    dynamic; under autograd it gets its gradient; with block_table (a paged
    cache, as gpt-oss is served) and with cu_seqlens_q (a packed prefill).
    score_mod=fn, score_mod_args=(tensors...): any elementwise function of
    the scaled score, written in Python: fn(score, *batch_indices, q_idx,
    kv_idx, *args) is traced once (per function, closure and argument
    shapes) into the op's score_mod region, so every kernel fuses it and
    autograd on the CPU differentiates it (and the float args); see
    flash_mlir.score for what fn may do: its operators, NumPy ufuncs
    (np.tanh, np.where, ...) and torch functions (torch.tanh, torch.where,
    ...), so a FlexAttention score_mod runs unchanged. Arrays fn reads from
    its closure or its module's globals (of q's kind) are captures too,
    read in the kernel, after score_mod_args. mask_mod=fn(*batch_indices,
    q_idx, kv_idx) -> comparison: FlexAttention's mask_mod; one that is
    causal or a sliding window on these shapes (proved by evaluating it on
    every (q_idx, kv_idx) once per function and shape) becomes that
    structured mask, whose empty tiles every kernel skips; any other masks
    the scores (where(visible, score, -inf)). Not with causal/window
    (write them in mask_mod). Neither with bias/softcap/alibi_slopes
    (write them in fn) nor dynamic. With block_table, kv_idx is the key's
    position in its sequence and q_idx the query's row (its position is
    q_idx + seq_lens[b] - Lq), and a mask_mod always masks the scores.
    block_table, seq_lens: attention against a paged KV cache (decode, as
    vLLM and FlashInfer keep it). k and v are then the page pools
    [num_pages, page_size, Hkv, D] / [..., Dv], q is [B, Hq, Lq, D],
    block_table int32 [B, max_pages] lists each sequence's pages in order
    and seq_lens int32 [B] its length; the Lq queries are the last Lq
    positions of their sequence, so causal and window align bottom_right to
    each sequence's own length. Lengths past the table's capacity are
    clamped to it and page numbers into the pool. With a paged cache a bias
    broadcasts to [B, Hq, Lq, max_pages · page_size] (key j at its position
    in its sequence), ALiBi aligns to each sequence's length, and score_mod
    and mask_mod apply as above; no gradients through it yet.
    cu_seqlens_q, cu_seqlens_k: a packed batch of variable-length sequences
    (prefill without padding, FlashAttention's varlen layout). q is then
    [Tq, Hq, D], k [Tk, Hkv, D], v [Tk, Hkv, Dv], the tokens of all
    sequences one after another; the offsets are int32 [B + 1],
    non-decreasing: sequence b is q rows cu_seqlens_q[b]:cu_seqlens_q[b+1]
    against k/v rows cu_seqlens_k[b]:cu_seqlens_k[b+1], never seeing another
    sequence's keys; causal and window align (align=) within each sequence.
    The lse is [Hq, Tq]. Rows of out outside cu_seqlens_q[0]:cu_seqlens_q[-1]
    are not written (pass out= to choose what they hold). Offsets are
    checked on NumPy and CPU tensors; on CUDA tensors they are clamped into
    the tensors, so bad offsets give wrong rows, never an out-of-bounds
    read. No bias/softcap/alibi, score_mod, dynamic or gradients with it yet.
    return_lse: also return the f32 row log-sum-exp. out: a
    preallocated output. dynamic: compile one kernel for all sequence lengths
    (and leading batch sizes) instead of one per shape. pipeline: override flash-cpu-pipeline /
    flash-gpu-pipeline; **options: their options (block_q=32, parallel=False,
    reference=True; block_m=..., stages=... on the GPU). Without options or
    pipeline, a plain forward call (no score arguments, sinks, paged or packed
    arrays, dynamic or autograd) runs the options flash_mlir.tune() recorded
    for its chip and shapes (or shape class) where there are some.

    The kernel for each (shapes, dtype, scale, mask, options) is compiled
    once, cached on disk (see flash_mlir.cache.cache_dir) and in memory.
    Raises FlashError with the MLIR diagnostics if it cannot be compiled."""
    # The plain call on CUDA tensors (no out=, conveniences, score_mod, paged
    # or packed arrays, options) that this process has made before with the
    # same shapes, dtypes, devices and arguments goes straight to its launch:
    # what the general path below checked holds for the same key.
    plain = None
    if not options and out is None and cache and not dynamic and pipeline is None and \
            bias is None and softcap is None and alibi_slopes is None and \
            block_table is None and seq_lens is None and score_mod is None and \
            mask_mod is None and cu_seqlens_q is None and cu_seqlens_k is None and \
            sinks is None and not score_mod_args:
        plain = _plain_key(q, k, v, scale, causal, window, align, return_lse)
        entry = _plain_calls.get(plain) if plain is not None else None
        if entry is not None:
            return _plain_launch(entry, q, k, v)
    # The same for a Flex-style call: its functions' keys (code, closure values,
    # the arrays' shapes) and its arrays' types and devices join the key; the
    # arrays themselves are read afresh, as the kernel's captures.
    flex_plain = None
    if (score_mod is not None or mask_mod is not None) and not options and out is None and \
            cache and not dynamic and pipeline is None and bias is None and softcap is None \
            and alibi_slopes is None and block_table is None and seq_lens is None and \
            cu_seqlens_q is None and cu_seqlens_k is None and \
            not (mask_mod is not None and (causal or window is not None)):
        base = _plain_key(q, k, v, scale, causal, window, align, return_lse)
        flex_plain = None if base is None else _flex_call_key(
            base, score_mod, mask_mod, score_mod_args, sinks)
        entry = _plain_calls.get(flex_plain[0]) if flex_plain is not None else None
        if entry is not None:
            return _plain_launch(entry, q, k, v, flex_plain[1])
    # The same for a call against a paged KV cache (decode, where the kernel is often
    # shorter than the general path): the block table and the lengths join the key by
    # type, shape and device, and the kernel reads them afresh as its first captures.
    elif block_table is not None and seq_lens is not None and not options and \
            out is None and cache and not dynamic and pipeline is None and bias is None \
            and softcap is None and alibi_slopes is None and cu_seqlens_q is None and \
            cu_seqlens_k is None and align in (None, "bottom_right") and \
            not (mask_mod is not None and (causal or window is not None)):
        base = _plain_key(q, k, v, scale, causal, window, align, return_lse)
        flex_plain = None if base is None else _flex_call_key(
            base, score_mod, mask_mod, score_mod_args, sinks, pages=(block_table, seq_lens))
        entry = _plain_calls.get(flex_plain[0]) if flex_plain is not None else None
        if entry is not None:
            return _plain_launch(entry, q, k, v, flex_plain[1])
    # A kernel already built is found by what determines it — the arrays'
    # types, shapes and dtypes and the arguments — without generating and
    # hashing its IR on every call.
    # Before the kernel lookup: True == 1 and 2.0 == 2 as dictionary keys.
    _check_scale(scale)
    _check_window(window)
    if _capturing(q) and out is None and not dynamic and pipeline is None and cache and \
            all(x is None for x in (bias, softcap, alibi_slopes, block_table, seq_lens,
                                    score_mod, mask_mod, cu_seqlens_q, cu_seqlens_k, sinks)):
        # torch.compile / torch.export: one node of the graph, not our ctypes calls.
        from . import torch_library
        torch_library.register()
        import torch
        o, lse = torch.ops.flash_mlir.attention(
            q, k, v, scale, bool(causal), window, align or "top_left",
            torch_library.options_string(options))
        return (o, lse) if return_lse else o
    softcap = _check_softcap(softcap)
    mods = [n for n, x in (("bias", bias), ("softcap", softcap),
                           ("alibi_slopes", alibi_slopes)) if x is not None]
    if mods and dynamic:
        raise ValueError("%s= needs static shapes (dynamic=False)" % mods[0])
    if score_mod is not None or mask_mod is not None:
        for name, fn in (("score_mod", score_mod), ("mask_mod", mask_mod)):
            if fn is not None and not callable(fn):
                raise TypeError("%s must be a function, got %s" % (name, type(fn).__name__))
        what = "score_mod" if score_mod is not None else "mask_mod"
        if mods:
            raise ValueError("%s= replaces %s=: write it in the function" % (what, mods[0]))
        if dynamic:
            raise ValueError("%s= needs static shapes (dynamic=False)" % what)
        if cu_seqlens_q is not None or cu_seqlens_k is not None:
            raise ValueError("%s= is not supported with cu_seqlens_q= yet" % what)
        if mask_mod is not None and (causal or window is not None):
            raise ValueError("mask_mod= replaces causal= and window=: write the mask in it")
        if score_mod_args and score_mod is None:
            raise ValueError("score_mod_args= without score_mod=")
        score_mod_args = tuple(score_mod_args)
        score_mod, score_mod_args, causal, window, align = _flex_mods(
            q, k, score_mod, score_mod_args, mask_mod, causal, window, align,
            paged=block_table is not None or seq_lens is not None)
    elif score_mod_args:
        raise ValueError("score_mod_args= without score_mod=")
    paged = block_table is not None or seq_lens is not None
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    if sinks is not None:
        # Before autograd can see a torch tensor beside NumPy arrays.
        skind, qkind = _array_kind("sinks", sinks)[0], _array_kind("q", q)[0]
        if skind != qkind:
            raise TypeError("sinks must be the same kind of array as q (%s), got %s"
                            % (qkind, skind))
    if varlen:
        if cu_seqlens_q is None or cu_seqlens_k is None:
            raise ValueError("cu_seqlens_q= and cu_seqlens_k= go together (a packed batch "
                             "needs the offsets of both), got only %s=" % (
                                 "cu_seqlens_q" if cu_seqlens_k is None else "cu_seqlens_k"))
        if paged:
            raise ValueError("cu_seqlens_q= cannot be combined with block_table=")
        if mods:
            raise ValueError("%s= is not supported with cu_seqlens_q= yet" % mods[0])
        if dynamic:
            raise ValueError("dynamic=True is not supported with cu_seqlens_q= (the token "
                             "counts and the number of sequences are part of the kernel)")
        if _requires_grad(q, k, v):
            raise NotImplementedError(
                "flash_mlir.attention: gradients of a packed varlen batch (cu_seqlens_q=) "
                "are not implemented; detach the inputs or call it under torch.no_grad()")
        if align is None:
            align = "top_left"
    if paged:
        if block_table is None or seq_lens is None:
            raise ValueError("block_table= and seq_lens= go together (a paged KV cache needs "
                             "both), got only %s=" % ("block_table" if seq_lens is None
                                                      else "seq_lens"))
        if dynamic:
            raise ValueError("dynamic=True is not supported with block_table= (the page pool "
                             "and table sizes are part of the kernel)")
        if align not in (None, "bottom_right"):
            raise ValueError("with block_table= the queries are the last Lq positions of each "
                             "sequence: align must be 'bottom_right', got %r" % (align,))
        align = "bottom_right"
        if _requires_grad(q, k, v):
            raise NotImplementedError(
                "flash_mlir.attention: gradients through a paged KV cache (block_table=) are "
                "not implemented; detach the inputs or call it under torch.no_grad()")
    elif align is None:
        align = "top_left"
    grads = [x for x in (q, k, v, bias, alibi_slopes, sinks) + tuple(score_mod_args)
             if x is not None]
    if _requires_grad(*grads):
        if out is not None:
            raise ValueError("out= cannot be used when q, k or v require grad")
        from ._autograd import attention_with_grad
        return attention_with_grad(q, k, v, scale=scale, causal=causal, window=window,
                                   align=align, return_lse=return_lse, dynamic=dynamic,
                                   pipeline=pipeline, cache=cache, options=options,
                                   bias=bias, softcap=softcap, alibi_slopes=alibi_slopes,
                                   score_mod=score_mod, score_mod_args=score_mod_args,
                                   sinks=sinks)
    fast = None
    if cache:
        try:
            fast = (_array_key(q), _array_key(k), _array_key(v), scale, causal, window, align,
                    return_lse, dynamic, pipeline, tuple(options.items()),
                    os.environ.get("FLASH_MLIR_CACHE_DIR"),
                    None if bias is None else _array_key(bias), softcap,
                    None if alibi_slopes is None else _array_key(alibi_slopes),
                    None if block_table is None else _array_key(block_table),
                    None if seq_lens is None else _array_key(seq_lens),
                    None if cu_seqlens_q is None else _array_key(cu_seqlens_q),
                    None if cu_seqlens_k is None else _array_key(cu_seqlens_k),
                    None if sinks is None else _array_key(sinks))
            if score_mod is not None:
                fn_key = score_mod.key
                if fn_key is None:
                    raise TypeError  # traced on every call: the general path
                fast += (fn_key, tuple(_array_key(a) for a in score_mod_args))
            hit = _fast_kernels.get(fast)
        except TypeError:  # an unhashable argument: take the general path
            fast = hit = None
    else:
        hit = None
    if hit is not None:
        kernel, kind, elt = hit
    else:
        kernel, kind, elt = _kernel_for(q, k, v, scale, causal, window, align, return_lse,
                                        dynamic, pipeline, cache, options, bias, softcap,
                                        alibi_slopes, block_table, seq_lens, score_mod,
                                        score_mod_args, cu_seqlens_q, cu_seqlens_k, sinks,
                                        tuned=not options and pipeline is None)
        if fast is not None:
            _fast_kernels[fast] = (kernel, kind, elt)
    named = ((("block_table", block_table), ("seq_lens", seq_lens)) if paged else
             (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)) if varlen
             else ()) + \
        (("bias", bias), ("alibi_slopes", alibi_slopes), ("sinks", sinks)) + tuple(
            ("score_mod_args[%d]" % n, a) for n, a in enumerate(score_mod_args))
    if kind == "torch-cuda":
        for name, c in named:
            if c is not None and c.device != q.device:
                raise ValueError("%s is on %s, q on %s" % (name, c.device, q.device))
    if paged:
        captures = (block_table, seq_lens)
        if score_mod is not None:
            captures += tuple(score_mod_args)
        else:
            if bias is not None:
                keys = paged_keys_shape(tuple(q.shape), tuple(k.shape),
                                        tuple(block_table.shape))
                captures += (bias.reshape(_bias_plan(tuple(q.shape), keys,
                                                     tuple(bias.shape))[1]),)
            if alibi_slopes is not None:
                captures += (alibi_slopes, seq_lens)
    elif varlen:
        if kind != "torch-cuda":
            _check_offsets(q, k, cu_seqlens_q, cu_seqlens_k)
        captures = (cu_seqlens_q, cu_seqlens_k)
    elif score_mod is not None:
        captures = score_mod_args
    else:
        captures = tuple(c for c in (None if bias is None else bias_capture(q, k, bias),
                                     alibi_slopes) if c is not None)
    if sinks is not None:
        # The kernel's last argument, after the captures.
        captures = tuple(captures) + (sinks,)
    if (plain is not None or flex_plain is not None) and kind == "torch-cuda":
        res = kernel(q, k, v, out, captures=captures)
        if kernel._launch is not None:
            o_shape = tuple(q.shape[:-1]) + (v.shape[-1],)
            entry = (kernel._launch, kernel._stream, o_shape,
                     o_shape[:-1] if return_lse else None)
            if flex_plain is None:
                _plain_calls[plain] = entry
            elif len(flex_plain[1]) == len(captures) and \
                    all(a is c for a, c in zip(flex_plain[1], captures)):
                # The fast path passes the same arrays in the same order.
                _plain_calls[flex_plain[0]] = entry
        return res
    if kind == "torch-cpu":
        import torch
        res = kernel(_host_view(q), _host_view(k), _host_view(v),
                     None if out is None else _host_view(out),
                     captures=[_host_view(c.contiguous()) for c in captures])
        cooked = _from_host_view if elt == "bf16" else torch.from_numpy
        o = out if out is not None else cooked(res[0] if return_lse else res)
        return (o, torch.from_numpy(res[1])) if return_lse else o
    return kernel(q, k, v, out, captures=captures)


def _score():
    from . import score
    return score


class _FlexSpecs:
    """prebuild's (shape, dtype) arguments of a FlexMods: the given ones, then one per
    array its functions read (the stand-ins prebuild's caller made)."""

    def __init__(self, flex, specs):
        self.flex = flex
        self.specs = list(specs) + [(tuple(a.shape), str(a.dtype).replace("torch.", ""))
                                    for a in flex.arrays]


_torch_op_registered = False


def _capturing(q):
    """Whether torch is capturing a graph through this call (torch.compile, export). The
    first call on torch tensors registers torch.ops.flash_mlir.attention, so that a
    capture later finds it registered."""
    global _torch_op_registered
    if not type(q).__module__.startswith("torch"):
        return False
    import torch
    compiler = getattr(torch, "compiler", None)
    capturing = bool(compiler is not None and getattr(compiler, "is_compiling", None)
                     and compiler.is_compiling())
    if not _torch_op_registered:
        if capturing:
            # Registering is not something a graph capture can trace.
            raise RuntimeError(
                "flash_mlir.attention under torch.compile/export needs its operator "
                "registered first: import torch before flash_mlir, call attention() once "
                "outside the capture, or call flash_mlir.torch_library.register()")
        from . import torch_library
        torch_library.register()
        _torch_op_registered = True
    return capturing


def _check_offsets(q, k, cu_q, cu_k):
    """Host offsets of a packed batch: non-decreasing, from >= 0, within the
    token counts (a ValueError naming the argument otherwise)."""
    import numpy as np
    for name, cu, total in (("cu_seqlens_q", cu_q, q.shape[0]),
                            ("cu_seqlens_k", cu_k, k.shape[0])):
        a = np.asarray(cu.detach().numpy() if hasattr(cu, "detach") else cu)
        if a.size and (a[0] < 0 or a[-1] > total or np.any(np.diff(a) < 0)):
            raise ValueError("%s must be non-decreasing offsets in [0, %d] (the tokens of %s), "
                             "got %s" % (name, total, "q" if name.endswith("q") else "k and v",
                                         a.tolist()))


def _host_view(t):
    """A CPU tensor as the NumPy array the compiled code reads: NumPy has no
    bfloat16, so bf16 tensors cross as their 16-bit patterns."""
    import torch
    t = t.detach()
    return t.view(torch.int16).numpy() if t.dtype == torch.bfloat16 else t.numpy()


def _from_host_view(a):
    import torch
    return torch.from_numpy(a).view(torch.bfloat16)


def prebuild(q_shape, k_shape, v_shape, dtype, *, device="cuda", scale=None, causal=False,
             window=None, align="top_left", return_lse=False, dynamic=False, pipeline=None,
             grad=False, bias=None, softcap=None, alibi_slopes=None, block_table=None,
             score_mod=None, score_mod_args=(), mask_mod=None, cu_seqlens=None,
             capture_grads=None, sinks=None, tune=False, **options):
    """Compiles, into the cache, the kernel attention() would run for arrays of
    these shapes and dtype ("bf16" / "bfloat16", "f16" / "float16", "f32" /
    "float32", or a torch or NumPy dtype) with these arguments, and returns its
    path. Needs the compiler but no GPU: fill a cache folder
    (FLASH_MLIR_CACHE_DIR) here, copy it to a GPU machine without LLVM, and
    attention() there finds its kernels in it.

    bias=(shape, dtype): the kernel of a call with a bias of that shape and
    dtype (float32 or the dtype of q); softcap=c; alibi_slopes=shape.

    sinks=(shape, dtype): the kernel of a call with sinks of that shape
    ([Hq]) and dtype (float32 or the dtype of q). With grad=True only the
    forward takes them: the backward is the one without sinks (autograd
    gets the sinks' gradient from the forward's lse and output).

    score_mod=fn, score_mod_args=[(shape, dtype), ...]: the kernel of a call
    with that score_mod and arguments of those shapes and dtypes (float32,
    float16, bfloat16, bool, int32, int64).

    block_table=(B, max_pages): the kernel of a call against a paged KV cache
    (k_shape, v_shape the page pools [num_pages, page_size, Hkv, D]; seq_lens
    is then [B]); the mask aligns bottom-right to each sequence; with any of
    the score arguments above.

    cu_seqlens=(B + 1,): the kernel of a call on a packed varlen batch
    (q_shape [Tq, Hq, D], k_shape/v_shape [Tk, Hkv, D/Dv]; both offsets
    arrays have that shape).

    grad=True: the kernels of a call that autograd differentiates instead —
    the forward with its log-sum-exp and the backward — and returns both
    paths (forward, backward). With float captures (bias, alibi_slopes, float
    score_mod_args) the backward is built twice: computing every capture's
    gradient (the path returned) and none (for captures that do not require
    grad); capture_grads=(bool per float capture, in that order) builds just
    the backward that computes the ones marked True.

    A plain forward call (none of the arguments above, no options or
    pipeline) also gets the kernel of each tuned choice for it in the visible
    tuning tables (flash_mlir.tuning: this device's chips), so that a cache
    built here holds the kernel attention() chooses there. tune=True compiles
    every candidate of tuning.candidates too, for tuning.tune() on a machine
    without the compiler; a candidate that does not compile is warned about
    and left out."""
    if not isinstance(tune, bool):
        raise TypeError("tune must be a bool, got %r" % (tune,))
    if tune and (options or pipeline is not None or grad or dynamic or any(
            x is not None for x in (bias, softcap, alibi_slopes, block_table, score_mod,
                                    mask_mod, cu_seqlens, sinks))):
        raise ValueError("tune=True applies to plain forward calls only (no options, "
                         "pipeline, grad, dynamic, score arguments, sinks, paged or packed "
                         "arrays): those keep the heuristic")
    name = str(dtype).replace("torch.", "")
    elt = _TYPE_NAMES.get(name)
    if elt is None:
        raise TypeError("unsupported dtype %r (bf16, f16, f32)" % (dtype,))
    if device not in ("cpu", "cuda"):
        raise ValueError("device must be 'cpu' or 'cuda', got %r" % (device,))
    bias_ir = None
    if bias is not None:
        shape, bdtype = bias
        belt = _TYPE_NAMES.get(str(bdtype).replace("torch.", ""))
        if belt not in ("f32", elt):
            raise TypeError("bias dtype must be float32 or q's dtype, got %r" % (bdtype,))
        bias_ir = (tuple(shape), belt)
    sinks_ir = None if sinks is None else _sinks_ir(
        tuple(q_shape), elt, sinks, heads_dim=1 if cu_seqlens is not None else -3)
    if cu_seqlens is not None:
        if grad or bias is not None or softcap is not None or alibi_slopes is not None \
                or dynamic or block_table is not None or score_mod is not None:
            raise ValueError("cu_seqlens= takes no grad, bias, softcap, alibi_slopes, "
                             "block_table, score_mod or dynamic")
        (n,) = tuple(cu_seqlens)
        if n < 1:
            raise ValueError("cu_seqlens must be (B + 1,) with B + 1 >= 1, got %s"
                             % (tuple(cu_seqlens),))
        ir = varlen_attention_ir(q_shape, k_shape, v_shape, n - 1, elt, scale=scale,
                                 causal=causal, window=window, align=align, lse=return_lse,
                                 sinks=sinks_ir)
        return _library_for(ir, device, pipeline, format_options(options))
    if block_table is not None and (grad or dynamic):
        raise ValueError("block_table= takes no grad or dynamic")
    traced = None
    if mask_mod is not None:
        if causal or window is not None:
            raise ValueError("mask_mod= replaces causal= and window=: write the mask in it")
        shape = collections.namedtuple("shape", "shape")
        score_mod, flex_args, causal, window, align = _flex_mods(
            shape(tuple(q_shape)), shape(tuple(k_shape)), score_mod, (), mask_mod, causal,
            window, align, paged=block_table is not None)
        if score_mod is not None:
            score_mod = _FlexSpecs(score_mod, score_mod_args)
    if score_mod is not None:
        if isinstance(score_mod, _FlexSpecs):
            score_mod, score_mod_args = score_mod.flex, score_mod.specs
        elif not isinstance(score_mod, _score().FlexMods):
            flex = _score().FlexMods(score_mod, None, len(score_mod_args))
            score_mod, score_mod_args = flex, _FlexSpecs(flex, score_mod_args).specs
        specs = []
        for n, (shape, adt) in enumerate(score_mod_args):
            aelt = _ARG_TYPES.get(str(adt).replace("torch.", ""), None)
            if aelt is None and str(adt) in _TYPE_NAMES:
                aelt = _TYPE_NAMES[str(adt)]
            if aelt is None:
                raise TypeError("score_mod_args[%d] dtype %r is not supported (float32, "
                                "float16, bfloat16, bool, int32, int64)" % (n, adt))
            specs.append((tuple(shape), aelt))
        traced = traced_score_mod(score_mod, tuple(q_shape), specs)
    if block_table is not None:
        ir = paged_attention_ir(q_shape, k_shape, v_shape, block_table, elt, scale=scale,
                                causal=causal, window=window, lse=return_lse,
                                sinks=sinks_ir, bias=bias_ir, softcap=softcap,
                                alibi_slopes=alibi_slopes, score_mod=traced)
        return _library_for(ir, device, pipeline, format_options(options))
    if grad:
        from ._autograd import grad_library, split_options
        fwd, bwd = split_options(options, device == "cuda")
        ir = attention_ir(q_shape, k_shape, v_shape, elt, scale=scale, causal=causal,
                          window=window, align=align, lse=True, dynamic=dynamic, bias=bias_ir,
                          softcap=softcap, alibi_slopes=alibi_slopes, score_mod=traced,
                          sinks=sinks_ir)
        forward = _library_for(ir, device, pipeline, format_options(fwd))
        # With float captures, the backward that computes all their gradients and the
        # one that computes none (captures that do not require grad), unless told which.
        caps, _, _ = _score_mod_ir(q_shape, k_shape, bias_ir, softcap, alibi_slopes, traced)
        n = sum(e in ("f32", "f16", "bf16") for _, _, e in caps)
        if capture_grads is not None:
            variants = [tuple(bool(x) for x in capture_grads)]
        else:
            variants = [None] + ([(False,) * n] if n else [])
        backward = [grad_library(q_shape, k_shape, v_shape, elt, device, scale, causal,
                                 window, align, pipeline, bwd, bias=bias_ir, softcap=softcap,
                                 alibi_slopes=alibi_slopes, score_mod=traced,
                                 capture_grads=c)[1] for c in variants]
        return forward, backward[0]
    ir = attention_ir(q_shape, k_shape, v_shape, elt, scale=scale, causal=causal,
                      window=window, align=align, lse=return_lse, dynamic=dynamic,
                      bias=bias_ir, softcap=softcap, alibi_slopes=alibi_slopes,
                      score_mod=traced, sinks=sinks_ir)
    path = _library_for(ir, device, pipeline, format_options(options))
    plain = not options and pipeline is None and not dynamic and bias_ir is None and \
        softcap is None and alibi_slopes is None and traced is None and sinks_ir is None
    if plain:
        from . import tuning
        tuning._prebuild(ir, device, (tuple(q_shape), tuple(k_shape), tuple(v_shape)), elt,
                         bool(causal), window, align, bool(return_lse), tune)
    return path
