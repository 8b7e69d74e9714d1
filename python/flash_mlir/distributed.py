"""Context-parallel (ring) attention over torch.distributed.

When one sequence does not fit one device, its tokens are sharded over the
ranks of a process group: each rank holds a slice of Q, K and V. Attention
of a query slice against all keys is the merge of its attentions against
each K/V slice (flash_mlir.merge_attention), so the K/V slices travel around
the ring — rank r sends what it holds to r + 1 and receives from r - 1 — and
each of the W steps is one flash_mlir.attention(..., return_lse=True) call on
(local Q, visiting K/V), merged into the running result. The transfer for
step t + 1 is started before step t's attention and waited after it, so it
runs under the compute: on gloo (CPU) the requests progress on the
transport's threads, on NCCL on the process group's own CUDA streams, which
wait for torch's current stream when the transfer is issued and are waited
by the current stream (not the host) after it.

Causal masks come from global positions: a K/V slice wholly before the
queries is attended without a mask, the rank's own slice with the causal
mask, a slice wholly after not at all. With the contiguous layout rank r
holds positions [s_r, s_r + n_r) (any lengths: they are exchanged first,
or passed as lengths=), and under a causal mask rank r computes r + 1 of the
W blocks, so the last rank sets the pace. The zigzag layout splits the
sequence into 2W equal chunks and gives rank r chunks r and 2W - 1 - r:
every rank then computes the same area at every step (its own slice causal,
then half of each visiting slice), which is the load-balanced order.

The backward runs the ring again: K/V travel as in the forward, and beside
them accumulators of dK and dV, each collecting every rank's share of its
block's gradient and arriving at the block's owner after W steps. Every
share is one flash_mlir.attention_backward call with the global output and
log-sum-exp of the queries (P = exp(s - lse) and rowsum(dO * O) are then
the whole row's), so no partial statistics have to be reconciled.

Shapes are [B, H, L_local, D] (K/V may have fewer heads: grouped-query
attention); every rank must pass arguments of one kind (dtype, heads, head
dims, mask, layout), or ranks refuse them one by one while the others wait.
"""
import torch
import torch.distributed as dist

from . import _attention as am
from ._autograd import attention_backward, split_options
from .merge import merge_attention

__all__ = ["LAYOUTS", "prebuild", "ring_attention", "shard", "shard_positions",
           "simulate_ring", "split_lengths", "unshard"]

LAYOUTS = ("contiguous", "zigzag")

# Keywords of attention() whose meaning is per call (local indices) or that
# the ring's kernels cannot take; each step's mask is the ring's to decide.
_PER_CALL_KEYWORDS = ("window", "align", "bias", "softcap", "alibi_slopes", "score_mod",
                      "score_mod_args", "block_table", "seq_lens", "cu_seqlens_q",
                      "cu_seqlens_k", "out", "dynamic", "return_lse", "causal")


def _check_layout(layout):
    if layout not in LAYOUTS:
        raise ValueError("layout must be one of %s, got %r" % (", ".join(map(repr, LAYOUTS)),
                                                               layout))


def _check_lengths(lengths, layout, what="lengths"):
    if layout == "zigzag" and (len(set(lengths)) != 1 or lengths[0] % 2):
        raise ValueError("layout='zigzag' needs every rank to hold the same even number of "
                         "positions (chunks i and 2W-1-i of 2W equal chunks); %s are %s"
                         % (what, list(lengths)))


def split_lengths(total, world_size, layout="contiguous"):
    """How many positions of a sequence of `total` each of `world_size` ranks
    holds: contiguous slices as even as possible (the first total % W ranks
    one more), or for zigzag total / W each (total must divide by 2W)."""
    _check_layout(layout)
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError("world_size must be a positive integer, got %r" % (world_size,))
    if layout == "zigzag":
        if total % (2 * world_size):
            raise ValueError("layout='zigzag' splits the sequence into 2 * world_size = %d "
                             "equal chunks; its length %d is not a multiple of that"
                             % (2 * world_size, total))
        return [total // world_size] * world_size
    return [total // world_size + (r < total % world_size) for r in range(world_size)]


def _segments(lengths, layout):
    """Per rank, the runs (global start, length) of positions it holds, in
    the order it holds them (increasing positions in both layouts)."""
    if layout == "zigzag":
        w, c = len(lengths), lengths[0] // 2
        return [[(r * c, c), ((2 * w - 1 - r) * c, c)] for r in range(w)]
    runs, start = [], 0
    for n in lengths:
        runs.append([(start, n)])
        start += n
    return runs


def shard_positions(total, world_size, rank, *, layout="contiguous", lengths=None,
                    device=None):
    """The global positions (int64, in local order) of the tokens `rank`
    holds of a sequence of `total`: what it needs for its position ids (RoPE).
    lengths: each rank's count for uneven contiguous slices."""
    lengths = _layout_lengths(total, world_size, layout, lengths)
    if not 0 <= rank < world_size:
        raise ValueError("rank must be in [0, %d), got %r" % (world_size, rank))
    return torch.cat([torch.arange(s, s + n, device=device)
                      for s, n in _segments(lengths, layout)[rank]])


def _layout_lengths(total, world_size, layout, lengths):
    if lengths is None:
        return split_lengths(total, world_size, layout)
    _check_layout(layout)
    lengths = [int(n) for n in lengths]
    if len(lengths) != world_size or any(n < 0 for n in lengths) or sum(lengths) != total:
        raise ValueError("lengths must be %d non-negative counts summing to %d, got %s"
                         % (world_size, total, lengths))
    _check_lengths(lengths, layout)
    return lengths


def shard(x, world_size, *, layout="contiguous", dim=-2, lengths=None):
    """The slices of a full sequence x (positions along dim; -2 in [B, H, L, D])
    that ranks 0 ... world_size - 1 hold in this layout, as a list of
    contiguous tensors."""
    total = x.shape[dim]
    return [x.index_select(dim, shard_positions(total, world_size, r, layout=layout,
                                                lengths=lengths, device=x.device)).contiguous()
            for r in range(world_size)]


def unshard(parts, *, layout="contiguous", dim=-2):
    """The full sequence from every rank's slice (shard's inverse)."""
    parts = list(parts)
    lengths = [p.shape[dim] for p in parts]
    total = sum(lengths)
    positions = torch.cat([shard_positions(total, len(parts), r, layout=layout,
                                           lengths=lengths, device=parts[0].device)
                           for r in range(len(parts))])
    return torch.cat(parts, dim).index_select(dim, torch.argsort(positions))


def _step_calls(q_runs, k_runs, causal):
    """The attention calls of one step: (q rows [qa, qb), K/V rows [ka, kb),
    causal) in local indices, for query runs q_runs against the K/V runs
    k_runs (runs as _segments gives them)."""
    lq, lk = sum(n for _, n in q_runs), sum(n for _, n in k_runs)
    if lq == 0 or lk == 0:
        return []
    if not causal:
        return [(0, lq, 0, lk, False)]
    if q_runs == k_runs:
        # Positions increase along the local slice, so the local causal mask
        # is the global one: one call, the kernel skipping the masked tiles.
        return [(0, lq, 0, lk, True)]
    calls, qa = [], 0
    for qs, qn in q_runs:
        seen, ka = [], 0
        for ks, kn in k_runs:
            if qn and kn:
                if ks + kn <= qs:  # wholly before the queries: no mask
                    if seen and seen[-1][1] == ka:
                        seen[-1][1] = ka + kn
                    else:
                        seen.append([ka, ka + kn])
                elif ks < qs + qn:
                    raise AssertionError("K/V positions [%d, %d) overlap query positions "
                                         "[%d, %d) without being them" % (ks, ks + kn, qs,
                                                                          qs + qn))
            ka += kn
        calls += [[qa, qa + qn, a, b] for a, b in seen]
        qa += qn
    merged = []
    for c in calls:  # adjacent query runs that see the same keys: one call
        if merged and merged[-1][1] == c[0] and merged[-1][2:] == c[2:]:
            merged[-1][1] = c[1]
        else:
            merged.append(c)
    return [(a, b, ka, kb, False) for a, b, ka, kb in merged]


class _Plan:
    """What every rank's steps depend on: lengths, runs, mask, options."""

    def __init__(self, q_lengths, kv_lengths, causal, layout, scale, pipeline, options, cuda):
        if causal and list(q_lengths) != list(kv_lengths):
            bad = next(r for r, (a, b) in enumerate(zip(q_lengths, kv_lengths)) if a != b)
            raise ValueError("with causal=True each rank's q and k/v are the same positions; "
                             "rank %d holds %d queries but %d keys"
                             % (bad, q_lengths[bad], kv_lengths[bad]))
        _check_lengths(kv_lengths, layout, "the ranks' k/v lengths")
        self.q_lengths, self.kv_lengths = list(q_lengths), list(kv_lengths)
        self.causal, self.layout, self.scale, self.pipeline = causal, layout, scale, pipeline
        self.q_runs = _segments(self.q_lengths, layout) if causal else None
        self.kv_runs = _segments(self.kv_lengths, layout) if causal else None
        self.fwd_options, self.bwd_options = split_options(options, cuda)

    @property
    def world_size(self):
        return len(self.kv_lengths)

    def calls(self, r, c):
        """The calls of rank r's queries against rank c's K/V."""
        if not self.causal:
            return _step_calls([(0, self.q_lengths[r])], [(0, self.kv_lengths[c])], False)
        return _step_calls(self.q_runs[r], self.kv_runs[c], True)


def _forward_step(q, k, v, calls, acc, plan):
    """Merges the attention of q against this K/V block into acc = (out f32, lse)."""
    out, lse = acc
    for qa, qb, ka, kb, causal in calls:
        o, l = am.attention(q[..., qa:qb, :], k[..., ka:kb, :], v[..., ka:kb, :],
                            scale=plan.scale, causal=causal, return_lse=True,
                            pipeline=plan.pipeline, **plan.fwd_options)
        o, l = merge_attention([out[..., qa:qb, :], o], [lse[..., qa:qb], l],
                               out_dtype=torch.float32)
        out[..., qa:qb, :] = o
        lse[..., qa:qb] = l


def _new_acc(q, dv):
    shape = tuple(q.shape[:-1])
    return (torch.zeros(shape + (dv,), dtype=torch.float32, device=q.device),
            torch.full(shape, float("-inf"), dtype=torch.float32, device=q.device))


def _backward_step(q, k, v, o, do, lse, calls, grads, plan):
    """Adds this K/V block's share of dq, and q's share of the block's dk and
    dv, into the f32 accumulators grads = (dq, dk, dv)."""
    dq, dk, dv = grads
    for qa, qb, ka, kb, causal in calls:
        gq, gk, gv = attention_backward(
            q[..., qa:qb, :], k[..., ka:kb, :], v[..., ka:kb, :], o[..., qa:qb, :],
            do[..., qa:qb, :], lse[..., qa:qb], scale=plan.scale, causal=causal,
            pipeline=plan.pipeline, **plan.bwd_options)
        dq[..., qa:qb, :] += gq
        dk[..., ka:kb, :] += gk
        dv[..., ka:kb, :] += gv


def _zeros_f32(like, length):
    shape = tuple(like.shape[:-2]) + (length, like.shape[-1])
    return torch.zeros(shape, dtype=torch.float32, device=like.device)


class _Ring:
    """This process's place in the group: its rank, and the global ranks of
    its neighbours (P2P ops name global ranks)."""

    def __init__(self, group):
        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError("ring_attention needs torch.distributed: call "
                               "torch.distributed.init_process_group first")
        rank = dist.get_rank(group)
        if rank < 0:
            raise ValueError("group: this process (global rank %d) is not a member of it"
                             % dist.get_rank())
        self.group, self.rank, self.size = group, rank, dist.get_world_size(group)
        pg = group if group is not None else dist.group.WORLD
        ranks = dist.get_process_group_ranks(pg)
        self.next, self.prev = ranks[(rank + 1) % self.size], ranks[(rank - 1) % self.size]

    def exchange(self, sends, recvs):
        """Starts sending sends[i] to the next rank and receiving recvs[i]
        from the previous one; returns the requests to wait on. Both ends
        know every size, so both skip the empty tensors."""
        ops = []
        for tag, (s, r) in enumerate(zip(sends, recvs)):
            if s.numel():
                ops.append(dist.P2POp(dist.isend, s, self.next, self.group, tag))
            if r.numel():
                ops.append(dist.P2POp(dist.irecv, r, self.prev, self.group, tag))
        return dist.batch_isend_irecv(ops) if ops else []


def _ring_forward(q, k, v, ring, plan):
    w, r = ring.size, ring.rank
    acc = _new_acc(q, v.shape[-1])
    held = (k, v)
    for t in range(w):
        reqs, coming = [], None
        if t + 1 < w:
            n = plan.kv_lengths[(r - t - 1) % w]
            coming = (k.new_empty(k.shape[:-2] + (n, k.shape[-1])),
                      v.new_empty(v.shape[:-2] + (n, v.shape[-1])))
            reqs = ring.exchange(held, coming)
        _forward_step(q, *held, plan.calls(r, (r - t) % w), acc, plan)
        for req in reqs:
            req.wait()
        if coming is not None:
            held = coming
    return acc[0].to(q.dtype), acc[1]


def _ring_backward(q, k, v, o, do, lse, ring, plan):
    w, r = ring.size, ring.rank
    dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    held, travelling = (k, v), None
    for t in range(w):
        c = (r - t) % w
        sends, recvs, coming, arriving = [], [], None, None
        if t + 1 < w:
            n = plan.kv_lengths[(r - t - 1) % w]
            coming = (k.new_empty(k.shape[:-2] + (n, k.shape[-1])),
                      v.new_empty(v.shape[:-2] + (n, v.shape[-1])))
            sends += held
            recvs += coming
        if t > 0:
            # Block c's accumulator, which rank r - 1 finished at its step t - 1,
            # while block c - 1's goes on to rank r + 1.
            arriving = (_zeros_f32(k, plan.kv_lengths[c]), _zeros_f32(v, plan.kv_lengths[c]))
            sends += travelling
            recvs += arriving
        reqs = ring.exchange(sends, recvs)
        share = (_zeros_f32(k, plan.kv_lengths[c]), _zeros_f32(v, plan.kv_lengths[c]))
        _backward_step(q, *held, o, do, lse, plan.calls(r, c), (dq,) + share, plan)
        for req in reqs:
            req.wait()
        if arriving is not None:
            share[0].add_(arriving[0])
            share[1].add_(arriving[1])
        travelling = share
        if coming is not None:
            held = coming
    if w > 1:  # the last accumulator is block r + 1's: one more hop takes it home
        home = (_zeros_f32(k, k.shape[-2]), _zeros_f32(v, v.shape[-2]))
        for req in ring.exchange(travelling, home):
            req.wait()
        travelling = home
    return dq.to(q.dtype), travelling[0].to(k.dtype), travelling[1].to(v.dtype)


class _RingAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, ring, plan):
        q, k, v = q.detach(), k.detach(), v.detach()
        o, lse = _ring_forward(q, k, v, ring, plan)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.ring, ctx.plan = ring, plan
        ctx.mark_non_differentiable(lse)
        return o, lse

    @staticmethod
    def backward(ctx, do, dlse):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = _ring_backward(q, k, v, o, do, lse, ctx.ring, ctx.plan)
        return dq, dk, dv, None, None


def _check_inputs(q, k, v, causal, scale, layout, options):
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor):
            raise TypeError("%s must be a torch tensor, got %s" % (name, type(x).__name__))
        if x.dim() != 4:
            raise ValueError("%s must be [B, H, L, D] (this rank's slice of the sequence), "
                             "got shape %s" % (name, tuple(x.shape)))
    if str(q.dtype) not in am._TORCH_TYPES:
        raise TypeError("q is %s; attention takes float32, float16 or bfloat16" % q.dtype)
    for name, x in (("k", k), ("v", v)):
        if x.dtype != q.dtype:
            raise TypeError("%s is %s but q is %s: q, k and v take one dtype"
                            % (name, x.dtype, q.dtype))
        if x.device != q.device:
            raise ValueError("%s is on %s, q on %s" % (name, x.device, q.device))
        if x.shape[0] != q.shape[0]:
            raise ValueError("%s has batch size %d, q %d" % (name, x.shape[0], q.shape[0]))
    if k.shape[1] != v.shape[1] or k.shape[2] != v.shape[2]:
        raise ValueError("k and v must have the same heads and positions, got k %s, v %s"
                         % (tuple(k.shape), tuple(v.shape)))
    if k.shape[1] == 0 or q.shape[1] % k.shape[1]:
        raise ValueError("q's %d heads are not a multiple of k's and v's %d heads (grouped-"
                         "query attention)" % (q.shape[1], k.shape[1]))
    if k.shape[3] != q.shape[3]:
        raise ValueError("k's head dim D = %d does not match q's D = %d"
                         % (k.shape[3], q.shape[3]))
    if not isinstance(causal, bool):
        raise TypeError("causal must be True or False, got %r" % (causal,))
    am._check_scale(scale)
    _check_layout(layout)
    for name in _PER_CALL_KEYWORDS:
        if name in options:
            raise ValueError("ring_attention does not take %s=: each step's call and mask "
                             "come from the ranks' global positions" % name)


def _gather_lengths(q, k, v, ring):
    """(q lengths, k/v lengths) of every rank, with the shapes checked to agree."""
    mine = torch.tensor([q.shape[2], k.shape[2], q.shape[0], q.shape[1], k.shape[1],
                         q.shape[3], v.shape[3]], dtype=torch.int64, device=q.device)
    every = [torch.empty_like(mine) for _ in range(ring.size)]
    dist.all_gather(every, mine, group=ring.group)
    every = [x.tolist() for x in every]
    for r, info in enumerate(every):
        if info[2:] != every[0][2:]:
            raise ValueError("rank %d holds slices with B, Hq, Hkv, D, Dv = %s and rank 0 %s: "
                             "every rank must hold the same batch, heads and head dims"
                             % (r, info[2:], every[0][2:]))
    return [x[0] for x in every], [x[1] for x in every]


def ring_attention(q, k, v, *, group=None, causal=False, scale=None, return_lse=False,
                   layout="contiguous", lengths=None, pipeline=None, **options):
    """Attention of this rank's queries against the whole sequence, whose
    slices the ranks of `group` hold (torch.distributed; gloo for CPU tensors,
    NCCL for CUDA ones).

    q [B, Hq, Lq, D], k [B, Hkv, Lk, D], v [B, Hkv, Lk, Dv]: this rank's
    slice, Hkv dividing Hq (grouped-query attention). layout: which positions
    a rank holds — "contiguous" (rank r the r-th slice, any lengths) or
    "zigzag" (chunks r and 2W-1-r of 2W equal chunks; the causal mask's load
    balance); shard() and unshard() convert a full sequence.
    causal: query position i sees key positions j <= i, positions global
    (with causal, q and k/v slices are the same positions). lengths: every
    rank's Lk in group order, when the caller knows them; otherwise one
    all_gather of the shapes precedes the ring (and checks they agree).
    scale: default 1/sqrt(D). return_lse: also return the f32 log-sum-exp
    [B, Hq, Lq] over the whole sequence. pipeline, **options: as attention()'s
    (grad_* ones configure the GPU backward).

    Returns this rank's output [B, Hq, Lq, Dv] in q's dtype (and lse). When
    q, k or v require grad, the backward runs the ring again and gives each
    rank the gradients of its own slices."""
    _check_inputs(q, k, v, causal, scale, layout, options)
    ring = _Ring(group)
    if lengths is None:
        q_lengths, kv_lengths = _gather_lengths(q, k, v, ring)
    else:
        kv_lengths = [int(n) for n in lengths]
        if len(kv_lengths) != ring.size or any(n < 0 for n in kv_lengths):
            raise ValueError("lengths must hold the %d ranks' k/v lengths, got %s"
                             % (ring.size, list(lengths)))
        if kv_lengths[ring.rank] != k.shape[2]:
            raise ValueError("lengths[%d] = %d but this rank's k holds %d positions"
                             % (ring.rank, kv_lengths[ring.rank], k.shape[2]))
        # Only a causal mask reads other ranks' query lengths, and then they are these.
        q_lengths = list(kv_lengths) if causal else \
            [q.shape[2] if r == ring.rank else 0 for r in range(ring.size)]
        if causal and q.shape[2] != k.shape[2]:
            raise ValueError("with causal=True each rank's q and k/v are the same positions; "
                             "this rank holds %d queries but %d keys" % (q.shape[2], k.shape[2]))
    plan = _Plan(q_lengths, kv_lengths, causal, layout, scale, pipeline, options, q.is_cuda)
    if torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v)):
        o, lse = _RingAttention.apply(q, k, v, ring, plan)
    else:
        with torch.no_grad():
            o, lse = _ring_forward(q, k, v, ring, plan)
    return (o, lse) if return_lse else o


def simulate_ring(qs, ks, vs, *, causal=False, scale=None, layout="contiguous", dos=None,
                  pipeline=None, **options):
    """The ring's arithmetic for W ranks in one process: rank r's slices are
    qs[r], ks[r], vs[r], and every step of every rank runs in turn on their
    device — the same calls and merges as ring_attention, without the
    transport (the GPU tests and benchmarks with one device).

    Returns [(o, lse)] per rank; with dos (each rank's cotangent), also
    [(dq, dk, dv)] per rank, each block's dk and dv summed over the ranks."""
    qs, ks, vs = list(qs), list(ks), list(vs)
    if not qs or not len(qs) == len(ks) == len(vs):
        raise ValueError("qs, ks and vs must hold one slice per rank, got %d, %d and %d"
                         % (len(qs), len(ks), len(vs)))
    for r in range(len(qs)):
        _check_inputs(qs[r], ks[r], vs[r], causal, scale, layout, options)
    w = len(qs)
    plan = _Plan([q.shape[2] for q in qs], [k.shape[2] for k in ks], causal, layout, scale,
                 pipeline, options, qs[0].is_cuda)
    outs = []
    with torch.no_grad():
        for r in range(w):
            acc = _new_acc(qs[r], vs[r].shape[-1])
            for t in range(w):
                c = (r - t) % w
                _forward_step(qs[r], ks[c], vs[c], plan.calls(r, c), acc, plan)
            outs.append((acc[0].to(qs[r].dtype), acc[1]))
        if dos is None:
            return outs
        dks = [_zeros_f32(k, k.shape[-2]) for k in ks]
        dvs = [_zeros_f32(v, v.shape[-2]) for v in vs]
        grads = []
        for r in range(w):
            dq = torch.zeros(qs[r].shape, dtype=torch.float32, device=qs[r].device)
            for t in range(w):
                c = (r - t) % w
                _backward_step(qs[r], ks[c], vs[c], outs[r][0], dos[r], outs[r][1],
                               plan.calls(r, c), (dq, dks[c], dvs[c]), plan)
            grads.append(dq.to(qs[r].dtype))
    return outs, [(dq, dk.to(k.dtype), dv.to(v.dtype))
                  for dq, dk, dv, k, v in zip(grads, dks, dvs, ks, vs)]


def prebuild(q_shape, k_shape, v_shape, dtype, *, world_size, causal=False,
             layout="contiguous", lengths=None, q_lengths=None, grad=False, scale=None,
             device="cuda", pipeline=None, **options):
    """Compiles into the cache (FLASH_MLIR_CACHE_DIR) every kernel that
    ring_attention runs on each of world_size ranks for slices of these
    shapes ([B, H, L, D], L each rank's; lengths= gives every rank's k/v
    length and q_lengths= its q length, by default the k/v ones when lengths=
    is given or the mask is causal, else q_shape's), and with grad=True the
    backward's too; returns their paths. For a GPU machine without LLVM, like
    flash_mlir.prebuild."""
    kv_lengths = list(lengths) if lengths is not None else [k_shape[2]] * world_size
    if q_lengths is None:
        q_lengths = kv_lengths if causal or lengths is not None else [q_shape[2]] * world_size
    plan = _Plan(q_lengths, kv_lengths, causal, layout, scale, pipeline, options,
                 device == "cuda")
    opts = options if grad else plan.fwd_options
    seen, paths = set(), []
    for r in range(world_size):
        for c in range(world_size):
            for qa, qb, ka, kb, mask in plan.calls(r, c):
                shapes = (tuple(q_shape[:2]) + (qb - qa, q_shape[3]),
                          tuple(k_shape[:2]) + (kb - ka, k_shape[3]),
                          tuple(v_shape[:2]) + (kb - ka, v_shape[3]))
                if (shapes, mask) in seen:
                    continue
                seen.add((shapes, mask))
                path = am.prebuild(*shapes, dtype, device=device, scale=scale, causal=mask,
                                   return_lse=True, grad=grad, pipeline=pipeline, **opts)
                paths += list(path) if grad else [path]
    return paths
