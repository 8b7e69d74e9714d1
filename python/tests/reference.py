"""float64 attention written from the definition (independent of the compiler)."""
import numpy as np


def attention_ref(q, k, v, scale=None, causal=False, window=None, align="top_left",
                  score_mod=None):
    """`score_mod(s, i, j)`, when given, rewrites the scaled scores before the
    mask, as the op's score_mod region does (i, j: broadcastable row/column indices)."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    if scale is None:
        scale = 1.0 / np.sqrt(q.shape[-1])
    if q.ndim >= 3 and k.shape[-3] != q.shape[-3]:
        group = q.shape[-3] // k.shape[-3]
        k = np.repeat(k, group, axis=-3)
        v = np.repeat(v, group, axis=-3)
    s = scale * np.einsum("...id,...jd->...ij", q, k)
    lq, lk = s.shape[-2:]
    i = np.arange(lq)[:, None]
    j = np.arange(lk)[None, :]
    if score_mod is not None:
        s = score_mod(s, i, j)
    if causal or window is not None:
        diag = i + (lk - lq if align == "bottom_right" else 0)
        allowed = j <= diag
        if window is not None:
            allowed &= j > diag - window
        s = np.where(allowed, s, -np.inf)
    # A row is dead when it sees no finite score: no key (Lk = 0, masks) or only -inf;
    # it gives 0 and lse = -inf. NaN and +inf propagate as IEEE arithmetic has them
    # (a NaN score, or +inf - +inf in the max subtraction, makes the row NaN).
    m = s.max(axis=-1, keepdims=True, initial=-np.inf)
    dead = m == -np.inf
    mm = np.where(dead, 0.0, m)
    with np.errstate(invalid="ignore"):
        p = np.where(dead, 0.0, np.exp(s - mm))
        l = p.sum(axis=-1, keepdims=True)
        out = np.where(dead, 0.0, (p @ v) / np.where(dead, 1.0, l))
        lse = np.where(dead[..., 0], -np.inf,
                       np.log(np.where(dead, 1.0, l))[..., 0] + mm[..., 0])
    return out, lse


def paged_attention_ref(q, k_cache, v_cache, block_table, seq_lens, scale=None, causal=False,
                        window=None, score_mod=None):
    """flash.paged_attention from its definition: sequence b's keys are the
    first n = clamp(seq_lens[b], 0, capacity) positions of its pages (page
    numbers clamped into the pool), and its Lq queries are its last Lq
    positions (masks bottom-right at n). score_mod(s, b, h, i, j, n), when
    given, rewrites the scaled scores [Hq, Lq, n] of sequence b before the
    mask (h [Hq, 1, 1], i [Lq, 1], j [1, n]: query head, row, key position)."""
    q = np.asarray(q, dtype=np.float64)
    k_cache, v_cache = (np.asarray(x, dtype=np.float64) for x in (k_cache, v_cache))
    num_pages, page, hkv = k_cache.shape[:3]
    table = np.asarray(block_table, dtype=np.int64)
    capacity = table.shape[1] * page if num_pages else 0
    outs, lses = [], []
    for b in range(q.shape[0]):
        n = int(min(max(int(seq_lens[b]), 0), capacity))
        pages = np.clip(table[b], 0, max(num_pages - 1, 0))
        k = k_cache[pages].reshape(-1, hkv, k_cache.shape[-1])[:n] if num_pages else \
            np.zeros((0, hkv, k_cache.shape[-1]))
        v = v_cache[pages].reshape(-1, hkv, v_cache.shape[-1])[:n] if num_pages else \
            np.zeros((0, hkv, v_cache.shape[-1]))
        mod = None
        if score_mod is not None:
            h = np.arange(q.shape[1])[:, None, None]
            mod = (lambda s, i, j, b=b, n=n: score_mod(s, b, h, i, j, n))
        o, l = attention_ref(q[b], k.transpose(1, 0, 2), v.transpose(1, 0, 2), scale=scale,
                             causal=causal, window=window, align="bottom_right",
                             score_mod=mod)
        outs.append(o)
        lses.append(l)
    return np.stack(outs), np.stack(lses)


def varlen_attention_ref(q, k, v, cu_q, cu_k, out, lse, scale=None, causal=False,
                         window=None, align="top_left"):
    """flash.varlen_attention from its definition, into copies of the inits
    `out` [Tq, Hq, Dv] and `lse` [Hq, Tq]: sequence b is q rows [q0, q1)
    against k/v rows [k0, k1), the offsets clamped into the tensors, the mask
    at that sequence's own lengths; rows no sequence covers keep the inits."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    out, lse = np.array(out, dtype=np.float64), np.array(lse, dtype=np.float64)
    tq, tk = q.shape[0], k.shape[0]
    for b in range(len(cu_q) - 1):
        q0 = min(max(int(cu_q[b]), 0), tq)
        q1 = min(max(int(cu_q[b + 1]), q0), tq)
        k0 = min(max(int(cu_k[b]), 0), tk)
        k1 = min(max(int(cu_k[b + 1]), k0), tk)
        o, l = attention_ref(q[q0:q1].transpose(1, 0, 2), k[k0:k1].transpose(1, 0, 2),
                             v[k0:k1].transpose(1, 0, 2), scale=scale, causal=causal,
                             window=window, align=align)
        out[q0:q1] = o.transpose(1, 0, 2)
        lse[:, q0:q1] = l
    return out, lse


def sinks_attention_ref(q, k, v, sinks, scale=None, causal=False, window=None,
                        align="top_left", score_mod=None, visible=None):
    """(out, lse) of attention with sinks (gpt-oss): the scaled scores with
    sinks[h] appended as one more column, a softmax over that row, the column
    dropped again (the sink is a key whose value is zero). score_mod(s, i, j)
    rewrites the scaled scores before the mask; `visible` (broadcast to the
    scores) masks them further."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    sinks = np.asarray(sinks, dtype=np.float64)
    if scale is None:
        scale = 1.0 / np.sqrt(q.shape[-1])
    group = q.shape[-3] // k.shape[-3]
    k, v = np.repeat(k, group, axis=-3), np.repeat(v, group, axis=-3)
    s = scale * np.einsum("...id,...jd->...ij", q, k)
    lq, lk = s.shape[-2:]
    i = np.arange(lq)[:, None]
    j = np.arange(lk)[None, :]
    if score_mod is not None:
        s = score_mod(s, i, j)
    diag = i + (lk - lq if align == "bottom_right" else 0)
    allowed = np.ones((lq, lk), bool)
    if causal or window is not None:
        allowed = j <= diag
    if window is not None:
        allowed &= j > diag - window
    if visible is not None:
        allowed = allowed & visible
    s = np.where(allowed, s, -np.inf)
    column = np.broadcast_to(sinks.reshape(-1, 1, 1), s.shape[:-1] + (1,))
    t = np.concatenate([s, column], axis=-1)
    m = t.max(axis=-1, keepdims=True)
    e = np.exp(t - m)
    l = e.sum(axis=-1, keepdims=True)
    return (e / l)[..., :-1] @ v, (m + np.log(l))[..., 0]
