"""flash_mlir.distributed on the CPU: ring attention over real gloo process
groups of 1-4 ranks, forward (output and log-sum-exp) and backward (dq, dk,
dv) against float64 attention of the whole sequence in one process, on fresh
random inputs — causal and not, the contiguous layout with uneven slices
(an empty one included) and the zigzag layout, GQA, MQA and MHA, D != Dv
!= L, bf16, lengths= instead of the gather, and the errors each rank raises.
Without processes: the step plans cover every visible (query, key) pair once
and balance the zigzag layout, shard/unshard, attention_backward's shares of
a split key set, and simulate_ring.

The ranks of each world size are processes started once for the module
(spawn, gloo over a FileStore, one OpenMP thread each); every test sends
each rank its slices and gets its results back. They share the session's
kernel cache (FLASH_MLIR_CACHE_DIR), so a kernel is compiled once."""
import datetime
import os
import queue
import sys
import traceback

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import flash_mlir  # noqa: E402
from reference import attention_ref  # noqa: E402

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)

from flash_mlir import distributed as fd  # noqa: E402

pytestmark = pytest.mark.skipif(not flash_mlir.compiler_available(),
                                reason="no compiler in this build")

F32_TOL = 2e-5
BF16_TOL = 2e-2
ANSWER_S = 90


def rel_err(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    return np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30)


# --- the ranks ----------------------------------------------------------------

def _serve(rank, world, init, jobs, results):
    # Each rank gets one of the two cores' worth of threads, not all of them.
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=30))
    while True:
        job = jobs.get()
        if job is None:
            break
        name, arg = job
        try:
            results.put((rank, True, globals()[name](rank, world, arg)))
        except BaseException:  # noqa: B902 - the test reports it
            results.put((rank, False, traceback.format_exc()))
    dist.destroy_process_group()


class _Ranks:
    """`world` gloo processes; run(job, args) runs job(rank, world, args[rank])
    on every rank and returns the results in rank order."""

    def __init__(self, world, directory):
        import torch.multiprocessing as mp
        ctx = mp.get_context("spawn")
        self.world = world
        self.jobs = [ctx.SimpleQueue() for _ in range(world)]
        self.results = ctx.Queue()
        init = "file://" + os.path.join(directory, "store-%d-%d" % (world, os.getpid()))
        self.procs = [ctx.Process(target=_serve, daemon=True,
                                  args=(r, world, init, self.jobs[r], self.results))
                      for r in range(world)]
        for p in self.procs:
            p.start()
        self.broken = False

    def run(self, job, args):
        for r in range(self.world):
            self.jobs[r].put((job, args[r]))
        got = {}
        while len(got) < self.world:
            try:
                r, ok, payload = self.results.get(timeout=ANSWER_S)
            except queue.Empty:
                self.broken = True
                raise AssertionError("ranks %s did not answer %s within %d s"
                                     % (sorted(set(range(self.world)) - set(got)), job,
                                        ANSWER_S))
            got[r] = (ok, payload)
        failed = {r: p for r, (ok, p) in got.items() if not ok}
        if failed:
            # A rank that raised may have left the others inside a collective.
            self.broken = True
            raise AssertionError("\n".join("rank %d:\n%s" % (r, p)
                                           for r, p in sorted(failed.items())))
        return [got[r][1] for r in range(self.world)]

    def close(self):
        for q in self.jobs:
            q.put(None)
        for p in self.procs:
            p.join(timeout=10 if not self.broken else 0.1)
            if p.is_alive():
                p.terminate()
                p.join()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    pools = {}
    directory = str(tmp_path_factory.mktemp("ring"))

    def get(world):
        pool = pools.get(world)
        if pool is None or pool.broken:
            if pool is not None:
                pool.close()
            pool = pools[world] = _Ranks(world, directory)
        return pool
    yield get
    for pool in pools.values():
        pool.close()


# --- jobs (run on each rank) -----------------------------------------------------

def _tensor(a, dtype):
    t = torch.from_numpy(a)
    return t.to(getattr(torch, dtype))


def _job_ring(rank, world, a):
    """ring_attention on this rank's slices; with a cotangent, its backward."""
    q, k, v = (_tensor(a[n], a["dtype"]) for n in "qkv")
    grad = a.get("do") is not None
    for x in (q, k, v):
        x.requires_grad_(grad)
    o, lse = fd.ring_attention(q, k, v, return_lse=True, **a["kw"])
    res = {"o": o.detach().float().numpy(), "lse": lse.numpy(), "dtype": str(o.dtype)}
    if grad:
        (o * _tensor(a["do"], a["dtype"])).sum().backward()
        for n, x in zip(("dq", "dk", "dv"), (q, k, v)):
            res[n] = x.grad.float().numpy()
            res[n + "_dtype"] = str(x.grad.dtype)
    return res


def _job_refused(rank, world, a):
    """The exception ring_attention raises here (type name, message), or None."""
    q, k, v = (_tensor(a[n], "float32") for n in "qkv")
    kw = dict(a["kw"])
    if kw.pop("group_of", None) is not None:
        # new_group is collective: every rank creates it, even those outside.
        kw["group"] = dist.new_group(a["members"])
    try:
        fd.ring_attention(q, k, v, **kw)
    except Exception as e:  # noqa: B902 - the test checks the type
        return type(e).__name__, str(e)
    return None


def _job_schedule(rank, world, a):
    """The order in which a rank issues transfers, runs attention kernels and
    waits for transfers, forward and backward."""
    log = []
    issue, fwd, bwd = fd.dist.batch_isend_irecv, fd.am.attention, fd.attention_backward

    class Req:
        def __init__(self, req):
            self.req = req

        def wait(self):
            log.append("wait")
            return self.req.wait()

    def batch(ops):
        log.append("issue")
        return [Req(r) for r in issue(ops)]

    def attention(*args, **kw):
        log.append("attention")
        return fwd(*args, **kw)

    def backward(*args, **kw):
        log.append("backward")
        return bwd(*args, **kw)
    fd.dist.batch_isend_irecv, fd.am.attention, fd.attention_backward = batch, attention, backward
    try:
        x = torch.randn(1, 2, 4, 8, requires_grad=True)
        fd.ring_attention(x, x, x, lengths=[4] * world).sum().backward()
    finally:
        fd.dist.batch_isend_irecv, fd.am.attention, fd.attention_backward = issue, fwd, bwd
    return log


# --- the whole sequence in float64 ---------------------------------------------

def _reference(q, k, v, do, causal):
    """(o, lse, dq, dk, dv) of the whole sequence: forward from the package's
    float64 reference, gradients by float64 torch autograd."""
    o, lse = attention_ref(q, k, v, causal=causal)
    qt, kt, vt = (torch.from_numpy(np.asarray(x, np.float64)).requires_grad_()
                  for x in (q, k, v))
    g = qt.shape[1] // kt.shape[1]
    kk, vv = kt.repeat_interleave(g, 1), vt.repeat_interleave(g, 1)
    s = qt @ kk.transpose(-1, -2) / qt.shape[-1] ** 0.5
    if causal:
        lq, lk = s.shape[-2:]
        s = s.masked_fill(torch.arange(lk)[None, :] > torch.arange(lq)[:, None],
                          float("-inf"))
    ot = torch.softmax(s, -1) @ vv
    assert np.max(np.abs(ot.detach().numpy() - o)) <= 1e-12  # the two references agree
    (ot * torch.from_numpy(np.asarray(do, np.float64))).sum().backward()
    return o, lse, qt.grad.numpy(), kt.grad.numpy(), vt.grad.numpy()


def _run_ring(ranks, rng, world, b, hq, hkv, d, dv, q_lengths, kv_lengths, causal, layout,
              dtype="float32", grad=True, **kw):
    """Shards fresh random inputs, runs the ring on `world` ranks, unshards,
    and returns (got, want) dicts of o, lse, dq, dk, dv."""
    lq, lk = sum(q_lengths), sum(kv_lengths)
    q = rng.standard_normal((b, hq, lq, d)).astype(np.float32)
    k = rng.standard_normal((b, hkv, lk, d)).astype(np.float32)
    v = rng.standard_normal((b, hkv, lk, dv)).astype(np.float32)
    do = rng.standard_normal((b, hq, lq, dv)).astype(np.float32)
    if dtype == "bfloat16":  # the reference sees the inputs the ranks see
        q, k, v, do = (torch.from_numpy(x).bfloat16().float().numpy() for x in (q, k, v, do))

    def parts(x, lengths):
        return [p.numpy() for p in fd.shard(torch.from_numpy(x), world, layout=layout,
                                            lengths=lengths)]
    qp, kp, vp, dop = parts(q, q_lengths), parts(k, kv_lengths), parts(v, kv_lengths), \
        parts(do, q_lengths)
    args = [dict(q=qp[r], k=kp[r], v=vp[r], do=dop[r] if grad else None, dtype=dtype,
                 kw=dict(causal=causal, layout=layout, **kw)) for r in range(world)]
    res = ranks(world).run("_job_ring", args)
    for r in res:
        assert r["dtype"] == "torch." + dtype
        if grad:
            assert {r[n + "_dtype"] for n in ("dq", "dk", "dv")} == {"torch." + dtype}

    def whole(name):
        return fd.unshard([torch.from_numpy(r[name]) for r in res], layout=layout,
                          dim=-1 if name == "lse" else -2).numpy()
    want = dict(zip(("o", "lse", "dq", "dk", "dv"), _reference(q, k, v, do, causal)))
    got = {n: whole(n) for n in (("o", "lse", "dq", "dk", "dv") if grad else ("o", "lse"))}
    return got, want


def _check(got, want, tol):
    for name in got:
        assert rel_err(got[name], want[name]) <= tol, name


# Uneven contiguous slices per world size (kernels are compiled per slice shape).
UNEVEN = {1: [7], 2: [5, 3], 3: [2, 6, 3], 4: [4, 1, 5, 3]}


@pytest.mark.parametrize("layout", ["contiguous", "zigzag"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_ring_matches_whole_sequence(ranks, rng, world, causal, layout):
    """GQA 4:2, D = 12, Dv = 5, L neither: forward and backward."""
    if layout == "zigzag":
        lengths = fd.split_lengths(2 * world * int(rng.integers(1, 4)), world, "zigzag")
    else:
        lengths = UNEVEN[world]
    got, want = _run_ring(ranks, rng, world, 1, 4, 2, 12, 5, lengths, lengths, causal, layout)
    _check(got, want, F32_TOL)


@pytest.mark.parametrize("name,world,b,hq,hkv,layout", [
    ("mha-batch2", 2, 2, 3, 3, "zigzag"),
    ("mqa", 3, 1, 4, 1, "contiguous"),
    ("gqa3", 4, 1, 6, 2, "zigzag"),
])
def test_heads(ranks, rng, name, world, b, hq, hkv, layout):
    lengths = fd.split_lengths(4 * world, world, layout)
    got, want = _run_ring(ranks, rng, world, b, hq, hkv, 8, 8, lengths, lengths, True, layout)
    _check(got, want, F32_TOL)


def test_empty_slice(ranks, rng):
    """A rank that holds no positions still forwards K/V and gradients."""
    got, want = _run_ring(ranks, rng, 3, 1, 2, 1, 8, 4, [4, 0, 5], [4, 0, 5], True,
                          "contiguous")
    _check(got, want, F32_TOL)


def test_queries_and_keys_of_different_lengths(ranks, rng):
    """Without a mask a rank's queries need not be its keys' positions."""
    got, want = _run_ring(ranks, rng, 3, 1, 2, 2, 8, 3, [3, 1, 4], [5, 2, 4], False,
                          "contiguous")
    _check(got, want, F32_TOL)


def test_lengths_argument(ranks, rng):
    """lengths= replaces the gather (and is checked against this rank's k)."""
    lengths = [3, 5, 2]
    got, want = _run_ring(ranks, rng, 3, 1, 2, 2, 8, 8, lengths, lengths, True, "contiguous",
                          lengths=lengths)
    _check(got, want, F32_TOL)


def test_bf16(ranks, rng):
    got, want = _run_ring(ranks, rng, 2, 1, 4, 2, 16, 16, [8, 8], [8, 8], True, "zigzag",
                          dtype="bfloat16")
    _check(got, want, BF16_TOL)


def test_forward_only(ranks, rng):
    got, want = _run_ring(ranks, rng, 2, 1, 2, 2, 8, 8, [6, 4], [6, 4], True, "contiguous",
                          grad=False)
    _check(got, want, F32_TOL)


def test_transfers_run_under_the_steps(ranks):
    """Each step's transfer is issued before its kernel and waited after it:
    forward K/V for the next step, backward also the previous block's dK/dV;
    one more hop takes the last accumulator home."""
    for log in ranks(3).run("_job_schedule", [None] * 3):
        step = lambda kernel, n: ["issue"] + [kernel] + ["wait"] * n  # noqa: E731
        # Two ranks' worth of sends and receives per transfer: 2 tensors, 2 directions.
        fwd = step("attention", 4) * 2 + ["attention"]
        bwd = step("backward", 4) + step("backward", 8) + step("backward", 4) + \
            ["issue"] + ["wait"] * 4
        assert log == fwd + bwd, log


def _refusals(ranks, world, shapes, **kw):
    args = [dict(q=np.zeros(qs, np.float32), k=np.zeros(ks, np.float32),
                 v=np.zeros(ks, np.float32), kw=kw, members=kw.get("group_of"))
            for qs, ks in shapes]
    return ranks(world).run("_job_refused", args)


def test_every_rank_refuses_disagreeing_shapes(ranks):
    res = _refusals(ranks, 2, [((1, 2, 4, 8), (1, 2, 4, 8)), ((1, 2, 4, 16), (1, 2, 4, 16))])
    for r in res:
        assert r[0] == "ValueError" and "rank 1 holds" in r[1] and "head dims" in r[1], r


def test_every_rank_refuses_causal_with_other_positions(ranks):
    res = _refusals(ranks, 2, [((1, 2, 4, 8), (1, 2, 4, 8)), ((1, 2, 3, 8), (1, 2, 4, 8))],
                    causal=True)
    for r in res:
        assert r[0] == "ValueError" and "rank 1 holds 3 queries but 4 keys" in r[1], r


def test_every_rank_refuses_an_uneven_zigzag(ranks):
    res = _refusals(ranks, 2, [((1, 2, 4, 8), (1, 2, 4, 8)), ((1, 2, 6, 8), (1, 2, 6, 8))],
                    causal=True, layout="zigzag")
    for r in res:
        assert r[0] == "ValueError" and "same even number" in r[1], r


def test_wrong_lengths_argument(ranks):
    # Each rank checks its own entry (the others it cannot see without a collective).
    res = _refusals(ranks, 2, [((1, 2, 4, 8), (1, 2, 4, 8))] * 2, lengths=[5, 5])
    for r, (kind, msg) in enumerate(res):
        assert kind == "ValueError" and "lengths[%d] = 5" % r in msg


def test_a_group_the_caller_is_not_in(ranks):
    res = _refusals(ranks, 2, [((1, 2, 4, 8), (1, 2, 4, 8))] * 2, group_of=[0])
    assert res[0] is None  # rank 0 is a ring of one
    assert res[1][0] == "ValueError" and res[1][1].startswith("group:"), res[1]


# --- without processes -----------------------------------------------------------

def test_bad_arguments():
    q, k = torch.zeros(1, 4, 6, 8), torch.zeros(1, 2, 6, 8)
    cases = [
        (dict(q=np.zeros((1, 4, 6, 8), np.float32)), TypeError, "q must be a torch tensor"),
        (dict(k=k.double()), TypeError, "k is torch.float64 but q is torch.float32"),
        (dict(q=q.double(), k=k.double(), v=k.double()), TypeError, "q is torch.float64"),
        (dict(v=k.half()), TypeError, "v is torch.float16"),
        (dict(q=torch.zeros(1, 3, 6, 8)), ValueError, "3 heads are not a multiple of"),
        (dict(q=torch.zeros(4, 6, 8)), ValueError, r"q must be \[B, H, L, D\]"),
        (dict(k=torch.zeros(1, 2, 6, 4)), ValueError, "head dim D = 4"),
        (dict(v=torch.zeros(1, 2, 5, 8)), ValueError, "same heads and positions"),
        (dict(k=torch.zeros(2, 2, 6, 8), v=torch.zeros(2, 2, 6, 8)), ValueError,
         "k has batch size 2"),
        (dict(layout="ring"), ValueError, "layout must be one of 'contiguous', 'zigzag'"),
        (dict(causal=1), TypeError, "causal must be True or False"),
        (dict(scale=True), TypeError, "scale"),
        (dict(window=4), ValueError, "does not take window="),
        (dict(bias=torch.zeros(6, 6)), ValueError, "does not take bias="),
    ]
    for change, exc, msg in cases:
        a = dict(q=q, k=k, v=k)
        a.update(change)
        with pytest.raises(exc, match=msg):
            fd.ring_attention(a.pop("q"), a.pop("k"), a.pop("v"), **a)


def test_needs_an_initialized_process_group():
    if dist.is_initialized():
        pytest.skip("this process is in a process group")
    x = torch.zeros(1, 2, 4, 8)
    with pytest.raises(RuntimeError, match="init_process_group"):
        fd.ring_attention(x, x, x)


def _covered(plan, w, causal):
    """How often each (query position, key position) pair is computed over
    every rank's steps, and with which mask, from the plans alone."""
    lq, lk = sum(plan.q_lengths), sum(plan.kv_lengths)
    count = np.zeros((lq, lk), int)
    pos_q = [fd.shard_positions(lq, w, r, layout=plan.layout, lengths=plan.q_lengths).numpy()
             for r in range(w)]
    pos_k = [fd.shard_positions(lk, w, r, layout=plan.layout, lengths=plan.kv_lengths).numpy()
             for r in range(w)]
    for r in range(w):
        for c in range(w):
            for qa, qb, ka, kb, mask in plan.calls(r, c):
                i = np.arange(qa, qb)[:, None]
                j = np.arange(ka, kb)[None, :]
                seen = (j <= i) if mask else np.ones((qb - qa, kb - ka), bool)
                count[np.ix_(pos_q[r][qa:qb], pos_k[c][ka:kb])] += seen
    return count


@pytest.mark.parametrize("layout", ["contiguous", "zigzag"])
@pytest.mark.parametrize("world", [1, 2, 3, 5])
def test_plans_cover_each_visible_pair_once(rng, world, layout):
    for causal in (False, True):
        if layout == "zigzag":
            ql = kl = fd.split_lengths(2 * world * 3, world, layout)
        else:
            ql = kl = [int(n) for n in rng.integers(0, 6, world)]
            if not causal:
                ql = [int(n) for n in rng.integers(0, 6, world)]
        plan = fd._Plan(ql, kl, causal, layout, None, None, {}, False)
        count = _covered(plan, world, causal)
        lq, lk = count.shape
        want = np.tril(np.ones((lq, lk), int)) if causal else np.ones((lq, lk), int)
        assert np.array_equal(count, want), (ql, kl, causal)


def test_zigzag_balances_the_causal_mask():
    """Every rank computes the same area at every step: its own 2c x 2c
    slice causal, then c x 2c of each visiting slice; with contiguous
    slices rank r computes r + 1 blocks."""
    w, c = 4, 3
    plan = fd._Plan([2 * c] * w, [2 * c] * w, True, "zigzag", None, None, {}, False)
    for r in range(w):
        for t in range(w):
            calls = plan.calls(r, (r - t) % w)
            assert len(calls) == 1
            qa, qb, ka, kb, mask = calls[0]
            assert mask == (t == 0)
            assert (qb - qa) * (kb - ka) == (4 * c * c if t == 0 else 2 * c * c)
    plan = fd._Plan([c] * w, [c] * w, True, "contiguous", None, None, {}, False)
    for r in range(w):
        assert sum(len(plan.calls(r, x)) for x in range(w)) == r + 1


def test_shard_and_unshard():
    x = torch.arange(2 * 3 * 12 * 2).reshape(2, 3, 12, 2)
    parts = fd.shard(x, 3, layout="zigzag")
    assert [p.shape[2] for p in parts] == [4, 4, 4]
    # Chunks of two: rank 0 holds chunks 0 and 5, rank 1 chunks 1 and 4, rank 2 2 and 3.
    assert fd.shard_positions(12, 3, 1, layout="zigzag").tolist() == [2, 3, 8, 9]
    assert torch.equal(parts[0][0, 0, :, 0], x[0, 0, [0, 1, 10, 11], 0])
    assert torch.equal(fd.unshard(parts, layout="zigzag"), x)
    parts = fd.shard(x, 3, lengths=[5, 0, 7])
    assert [p.shape[2] for p in parts] == [5, 0, 7]
    assert torch.equal(fd.unshard(parts), x)
    assert fd.split_lengths(10, 4) == [3, 3, 2, 2]
    lse = torch.randn(2, 3, 12)
    assert torch.equal(fd.unshard(fd.shard(lse, 2, layout="zigzag", dim=-1),
                                  layout="zigzag", dim=-1), lse)
    with pytest.raises(ValueError, match="not a multiple"):
        fd.shard(x, 4, layout="zigzag")
    with pytest.raises(ValueError, match="summing to 12"):
        fd.shard(x, 3, lengths=[5, 5, 5])
    with pytest.raises(ValueError, match="same even number"):
        fd.unshard([x[:, :, :4], x[:, :, 4:]], layout="zigzag")


def test_attention_backward_shares_of_split_keys(rng):
    """The unit of the ring's backward: with the whole row's output and lse,
    each part of a split key set gives its share of dq and its exact dk, dv."""
    q = torch.from_numpy(rng.standard_normal((1, 4, 9, 8)).astype(np.float32))
    k = torch.from_numpy(rng.standard_normal((1, 2, 9, 8)).astype(np.float32))
    v = torch.from_numpy(rng.standard_normal((1, 2, 9, 5)).astype(np.float32))
    do = torch.from_numpy(rng.standard_normal((1, 4, 9, 5)).astype(np.float32))
    o, lse = flash_mlir.attention(q, k, v, causal=True, return_lse=True)
    want = flash_mlir.attention_backward(q, k, v, o, do, lse, causal=True)
    a = 4
    g1 = flash_mlir.attention_backward(q, k[..., :a, :], v[..., :a, :], o, do, lse,
                                       causal=True)
    # Keys a.. seen by the whole sequence's causal mask: bottom-right aligned.
    g2 = flash_mlir.attention_backward(q, k[..., a:, :], v[..., a:, :], o, do, lse,
                                       causal=True, align="bottom_right")
    assert rel_err((g1[0] + g2[0]).numpy(), want[0].numpy()) <= F32_TOL
    for i in (1, 2):
        assert rel_err(torch.cat([g1[i], g2[i]], -2).numpy(), want[i].numpy()) <= F32_TOL
    ref = _reference(q.numpy(), k.numpy(), v.numpy(), do.numpy(), True)
    for got, r in zip(want, ref[2:]):
        assert rel_err(got.numpy(), r) <= F32_TOL
    with pytest.raises(TypeError, match="lse must be float32"):
        flash_mlir.attention_backward(q, k, v, o, do, lse.double())
    with pytest.raises(TypeError, match="k is torch.float64"):
        flash_mlir.attention_backward(q, k.double(), v, o, do, lse)


@pytest.mark.parametrize("layout", ["contiguous", "zigzag"])
def test_simulate_ring(rng, layout):
    """The single-device form the GPU tests run: same plans and merges."""
    w = 3
    lengths = [3, 5, 4] if layout == "contiguous" else [4, 4, 4]
    q = torch.from_numpy(rng.standard_normal((1, 4, 12, 8)).astype(np.float32))
    k = torch.from_numpy(rng.standard_normal((1, 2, 12, 8)).astype(np.float32))
    v = torch.from_numpy(rng.standard_normal((1, 2, 12, 6)).astype(np.float32))
    do = torch.from_numpy(rng.standard_normal((1, 4, 12, 6)).astype(np.float32))
    sh = lambda x: fd.shard(x, w, layout=layout, lengths=lengths)  # noqa: E731
    outs, grads = fd.simulate_ring(sh(q), sh(k), sh(v), causal=True, layout=layout,
                                   dos=sh(do))
    ref = _reference(q.numpy(), k.numpy(), v.numpy(), do.numpy(), True)
    got = [fd.unshard([o for o, _ in outs], layout=layout),
           fd.unshard([l for _, l in outs], layout=layout, dim=-1)]
    got += [fd.unshard([g[i] for g in grads], layout=layout) for i in range(3)]
    for x, r in zip(got, ref):
        assert rel_err(x.numpy(), r) <= F32_TOL
