"""flash_mlir.tuning on the host: tune() with explicit candidates, the table it
records (exact and class keys), attention() running the recorded choice against
a float64 reference, wrong and unbuildable candidates, a corrupt table,
explicit options over the table, prebuild(tune=True), and argument errors.
Times are replaced by fixed ones where a test needs a known winner."""
import json
import os
import warnings

import numpy as np
import pytest

import flash_mlir
from flash_mlir import _attention, tuning
from reference import attention_ref

F32_TOL = 1e-5

# Lq != Lk != D != Dv; GQA (4 query heads on 2 K/V heads).
QS, KS, VS = (2, 4, 40, 24), (2, 2, 56, 24), (2, 2, 56, 20)
# Another shape of the same class: batch·heads <= 8, Lq <= 64, Lk <= 64.
QS2, KS2, VS2 = (1, 8, 33, 24), (1, 4, 61, 24), (1, 4, 61, 20)


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FLASH_MLIR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(tuning, "SHIPPED_TABLE", str(tmp_path / "no-shipped-table.json"))
    tuning.reload()
    yield
    tuning.reload()


def rand(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def qkv(rng, shapes=(QS, KS, VS)):
    return tuple(rand(rng, s) for s in shapes)


def rel_err(got, want):
    return np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30)


def fixed_times(monkeypatch, times):
    """tune()'s measurement returns times[canonical options] µs instead of timing."""
    calls = []

    def measure(fns, device, warmup, iters, repeats):
        out = []
        for fn in fns:
            fn()
            key = tuple(sorted(current[0].items()))
            calls.append(key)
            out.append(times[key])
        return out

    current = [None]
    real_run = tuning._run

    def run(q, k, v, call, options):
        current[0] = options
        return real_run(q, k, v, call, options)

    monkeypatch.setattr(tuning, "_measure", measure)
    monkeypatch.setattr(tuning, "_run", run)
    return calls


def used_options(fn):
    """The option strings of the kernels one attention() call builds or takes,
    observed in a process that holds no kernels before it."""
    _attention._forget_kernels()
    out = fn()
    return out, sorted(k.options for k in _attention._kernels.values())


def test_tune_chooses_the_fastest_and_records_both_keys(rng, monkeypatch):
    q, k, v = qkv(rng)
    fixed_times(monkeypatch, {(): 100.0, (("block_q", 32),): 60.0, (("block_kv", 32),): 80.0})
    res = flash_mlir.tune(q, k, v, causal=True,
                          candidates=[{"block_q": 32}, {"block_kv": 32}])
    assert res.options == {"block_q": 32}
    assert [t.options for t in res.trials] == [{}, {"block_q": 32}, {"block_kv": 32}]
    assert [t.status for t in res.trials] == ["ok", "ok", "ok"]
    assert [t.us for t in res.trials] == [100.0, 60.0, 80.0]
    assert res.chip == tuning.chip_id("cpu") == flash_mlir.host_target()
    exact, klass = tuning.problem_keys(QS, KS, VS, "f32", causal=True)
    assert (res.exact_key, res.class_key) == (exact, klass)
    assert "q2x4x40x24" in exact and "k2x2x56x24" in exact and "G2" in exact
    assert "BH<=8 Lq<=64 Lk<=64" in klass and "causal/top_left" in klass
    assert "**block_q=32** ←" in res.markdown()

    assert res.recorded == tuning.table_path()
    with open(tuning.table_path()) as f:
        table = json.load(f)
    node = table["chips"][res.chip]
    assert node["device"] == "cpu"
    assert node["exact"][exact]["options"] == {"block_q": 32}
    assert node["class"][klass]["options"] == {"block_q": 32}
    assert node["exact"][exact]["us"] == 60.0 and node["exact"][exact]["heuristic_us"] == 100.0
    assert node["class"][klass]["from"] == exact


def test_a_close_candidate_does_not_replace_the_heuristic(rng, monkeypatch):
    q, k, v = qkv(rng)
    fixed_times(monkeypatch, {(): 100.0, (("block_q", 32),): 99.5})
    res = flash_mlir.tune(q, k, v, candidates=[{"block_q": 32}])
    assert res.options == {}
    exact, _ = tuning.problem_keys(QS, KS, VS, "f32")
    with open(tuning.table_path()) as f:
        assert json.load(f)["chips"][res.chip]["exact"][exact]["options"] == {}


def test_attention_runs_the_tuned_options(rng, monkeypatch):
    q, k, v = qkv(rng)
    fixed_times(monkeypatch, {(): 100.0, (("block_q", 32),): 60.0})
    flash_mlir.tune(q, k, v, causal=True, candidates=[{"block_q": 32}])
    tuning.reload()  # read from the file, as a new process would
    assert tuning.options_for(q, k, v, causal=True) == {"block_q": 32}
    assert tuning.options_for(q, k, v) == {}  # not tuned without the mask
    q, k, v = qkv(rng)  # fresh inputs of the same shapes
    out, used = used_options(lambda: flash_mlir.attention(q, k, v, causal=True))
    assert used == ["block-q=32"]
    assert rel_err(out, attention_ref(q, k, v, causal=True)[0]) <= F32_TOL
    # The kernel came from the cache entry built for that option.
    kernel = next(iter(_attention._kernels.values()))
    with open(kernel.path[:-len(".so")] + ".json") as f:
        assert json.load(f)["options"] == "block-q=32"
    # Later calls of the key take the remembered kernel.
    q, k, v = qkv(rng)
    assert rel_err(flash_mlir.attention(q, k, v, causal=True),
                   attention_ref(q, k, v, causal=True)[0]) <= F32_TOL
    # Without the mask the table has nothing: the heuristic.
    _, used = used_options(lambda: flash_mlir.attention(q, k, v))
    assert used == [""]


def test_a_shape_of_the_same_class_takes_the_class_entry(rng, monkeypatch):
    q, k, v = qkv(rng)
    fixed_times(monkeypatch, {(): 100.0, (("block_kv", 32),): 50.0})
    flash_mlir.tune(q, k, v, window=9, align="bottom_right", candidates=[{"block_kv": 32}])
    kw = dict(window=9, align="bottom_right")
    q2, k2, v2 = qkv(rng, (QS2, KS2, VS2))
    assert tuning.problem_keys(QS2, KS2, VS2, "f32", **kw)[1] == \
        tuning.problem_keys(QS, KS, VS, "f32", **kw)[1]
    assert tuning.options_for(q2, k2, v2, **kw) == {"block_kv": 32}
    out, used = used_options(lambda: flash_mlir.attention(q2, k2, v2, **kw))
    assert used == ["block-kv=32"]
    assert rel_err(out, attention_ref(q2, k2, v2, **kw)[0]) <= F32_TOL
    # Another class (Lq 65 -> 128), another window, the other alignment: the heuristic.
    q3 = rand(rng, (2, 4, 65, 24))
    assert tuning.options_for(q3, k, v, **kw) == {}
    assert tuning.options_for(q, k, v, window=8, align="bottom_right") == {}
    assert tuning.options_for(q, k, v, window=9) == {}
    _, used = used_options(lambda: flash_mlir.attention(q3, k, v, **kw))
    assert used == [""]


def test_an_exact_entry_beats_the_class_entry(rng, monkeypatch):
    q, k, v = qkv(rng)
    q2, k2, v2 = qkv(rng, (QS2, KS2, VS2))
    fixed_times(monkeypatch, {(): 100.0, (("block_q", 32),): 50.0, (("block_kv", 32),): 50.0})
    flash_mlir.tune(q, k, v, candidates=[{"block_q": 32}])
    flash_mlir.tune(q2, k2, v2, candidates=[{"block_kv": 32}])
    # The second tune replaced the class entry, not the first shape's exact one.
    assert tuning.options_for(q, k, v) == {"block_q": 32}
    assert tuning.options_for(q2, k2, v2) == {"block_kv": 32}
    q4 = rand(rng, (2, 4, 50, 24))
    assert tuning.options_for(q4, k, v) == {"block_kv": 32}


def test_a_wrong_candidate_is_rejected(rng, monkeypatch):
    q, k, v = qkv(rng)
    real_run = tuning._run

    def run(q, k, v, call, options):
        out, lse = real_run(q, k, v, call, options)
        if options == {"block_kv": 32}:
            out = out.copy()
            out[0, 1, 5, 3] += 0.05 * np.max(np.abs(out))
        return out, lse

    monkeypatch.setattr(tuning, "_run", run)
    # The wrong one would win on time.
    times = {(): 100.0, (("block_q", 32),): 90.0, (("block_kv", 32),): 10.0}
    # Only the right ones are timed: the heuristic, then block_q=32.
    measured = [{}, {"block_q": 32}]
    monkeypatch.setattr(tuning, "_measure", lambda fns, *a: [
        times[tuple(sorted(m.items()))] for m in measured[:len(fns)]])
    res = flash_mlir.tune(q, k, v, return_lse=True,
                          candidates=[{"block_kv": 32}, {"block_q": 32}])
    status = {tuple(sorted(t.options.items())): t for t in res.trials}
    assert status[(("block_kv", 32),)].status == "wrong"
    assert status[(("block_kv", 32),)].us is None
    assert "out differs" in status[(("block_kv", 32),)].error
    assert status[(("block_q", 32),)].status == "ok"
    assert res.options == {"block_q": 32}
    with open(tuning.table_path()) as f:
        text = f.read()
    assert "block_kv" not in text and "block_q" in text


def test_a_wrong_lse_is_rejected(rng, monkeypatch):
    q, k, v = qkv(rng)
    real_run = tuning._run

    def run(q, k, v, call, options):
        out, lse = real_run(q, k, v, call, options)
        if options:
            lse = lse + 0.01
        return out, lse

    monkeypatch.setattr(tuning, "_run", run)
    res = flash_mlir.tune(q, k, v, return_lse=True, candidates=[{"block_q": 32}],
                          iters=2, repeats=1, record=False)
    assert res.trials[1].status == "wrong" and "lse differs" in res.trials[1].error
    assert res.options == {} and res.recorded is None
    assert not os.path.exists(tuning.table_path())


def test_an_unbuildable_candidate_is_skipped_and_reported(rng):
    q, k, v = qkv(rng)
    res = flash_mlir.tune(q, k, v, causal=True, iters=2, repeats=1,
                          candidates=[{"block_q": -3}, {"block_q": 32}])
    bad = res.trials[1]
    assert bad.options == {"block_q": -3} and bad.status == "failed"
    assert "block-q" in bad.error and bad.us is None
    assert [t.status for t in res.trials] == ["ok", "failed", "ok"]
    assert res.trials[0].us > 0 and res.trials[2].us > 0
    assert res.options in ({}, {"block_q": 32})
    assert "block_q=-3" in res.markdown() and "failed" in res.markdown()


def test_an_unavailable_kernel_is_skipped(rng, monkeypatch):
    """Where no compiler loads, a candidate whose kernel is not in the cache is
    not tried (the heuristic's kernel is, from the cache)."""
    q, k, v = qkv(rng)
    flash_mlir.attention(q, k, v)  # the heuristic's kernel in the cache
    real = tuning._kernel_available
    monkeypatch.setattr(tuning, "_kernel_available", lambda ir, device, opts:
                        opts == "" and real(ir, device, opts))
    res = flash_mlir.tune(q, k, v, candidates=[{"block_q": 32}], iters=2, repeats=1)
    assert res.trials[1].status == "unavailable" and "no compiler" in res.trials[1].error
    assert res.options == {}
    # Without the heuristic's kernel there is nothing to check a candidate against.
    monkeypatch.setattr(tuning, "_kernel_available", lambda ir, device, opts: False)
    with pytest.raises(flash_mlir.FlashError, match=r"heuristic.*prebuild\(\.\.\., tune=True\)"):
        flash_mlir.tune(q, k, v, causal=True, candidates=[{"block_q": 32}])


def test_a_corrupt_table_falls_back_to_the_heuristic_with_one_warning(rng):
    path = tuning.table_path()
    with open(path, "w") as f:
        f.write('{"chips": {"x": [1, 2')
    tuning.reload()
    q, k, v = qkv(rng)
    with pytest.warns(RuntimeWarning, match="tuning table .* is not valid JSON"):
        out, used = used_options(lambda: flash_mlir.attention(q, k, v, causal=True))
    assert used == [""]
    assert rel_err(out, attention_ref(q, k, v, causal=True)[0]) <= F32_TOL
    q2, k2, v2 = qkv(rng, (QS2, KS2, VS2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per problem, not per call or shape
        flash_mlir.attention(q2, k2, v2)
    # Recording replaces what is not a table (and says so).
    with pytest.warns(RuntimeWarning, match="replacing"):
        res = flash_mlir.tune(q, k, v, candidates=[], iters=2, repeats=1)
    with open(path) as f:
        table = json.load(f)
    assert table["chips"][res.chip]["exact"][res.exact_key]["options"] == {}
    assert "x" not in table["chips"]


def test_malformed_entries_and_options_that_do_not_build(rng):
    chip = tuning.chip_id("cpu")
    exact, klass = tuning.problem_keys(QS, KS, VS, "f32")
    exact2, _ = tuning.problem_keys(QS2, KS2, VS2, "f32")
    with open(tuning.table_path(), "w") as f:
        json.dump({"format": 1, "chips": {chip: {"device": "cpu", "exact": {
            exact: {"options": {"block_q": 0}},
            exact2: {"options": {"block_q": "32 reference=true"}}}}}}, f)
    tuning.reload()
    q, k, v = qkv(rng)
    q2, k2, v2 = qkv(rng, (QS2, KS2, VS2))
    with pytest.warns(RuntimeWarning, match="malformed entry"):
        out, used = used_options(lambda: flash_mlir.attention(q2, k2, v2))
    assert used == [""]
    with pytest.warns(RuntimeWarning, match="do not build here"):
        out, used = used_options(lambda: flash_mlir.attention(q, k, v))
    assert "" in used and "block-q=0" not in used
    assert rel_err(out, attention_ref(q, k, v)[0]) <= F32_TOL


def test_explicit_options_win_over_the_table(rng, monkeypatch):
    q, k, v = qkv(rng)
    fixed_times(monkeypatch, {(): 100.0, (("block_q", 32),): 60.0})
    flash_mlir.tune(q, k, v, candidates=[{"block_q": 32}])
    out, used = used_options(lambda: flash_mlir.attention(q, k, v, block_kv=32))
    assert used == ["block-kv=32"]
    assert rel_err(out, attention_ref(q, k, v)[0]) <= F32_TOL
    _, used = used_options(lambda: flash_mlir.attention(q, k, v, block_q=64))
    assert used == ["block-q=64"]
    _, used = used_options(lambda: flash_mlir.attention(
        q, k, v, pipeline="flash-cpu-pipeline"))
    assert used == [""]
    _, used = used_options(lambda: flash_mlir.attention(q, k, v, dynamic=True))
    assert used == [""]
    _, used = used_options(lambda: flash_mlir.attention(q, k, v, softcap=5.0))
    assert used == [""]
    _, used = used_options(lambda: flash_mlir.attention(q, k, v))
    assert used == ["block-q=32"]


def test_the_shipped_table_is_below_the_cache_table(rng, tmp_path, monkeypatch):
    chip = tuning.chip_id("cpu")
    exact, klass = tuning.problem_keys(QS, KS, VS, "f32")
    shipped = tmp_path / "tuned.json"
    shipped.write_text(json.dumps({"format": 1, "chips": {chip: {"device": "cpu", "class": {
        klass: {"options": {"block_kv": 32}}}}}}))
    monkeypatch.setattr(tuning, "SHIPPED_TABLE", str(shipped))
    tuning.reload()
    q, k, v = qkv(rng)
    assert tuning.options_for(q, k, v) == {"block_kv": 32}
    fixed_times(monkeypatch, {(): 100.0, (("block_q", 32),): 60.0})
    flash_mlir.tune(q, k, v, candidates=[{"block_q": 32}])
    assert tuning.options_for(q, k, v) == {"block_q": 32}
    q2, k2, v2 = qkv(rng, (QS2, KS2, VS2))
    assert tuning.options_for(q2, k2, v2) == {"block_q": 32}  # the cache's class entry


def test_tuning_torch_cpu_tensors(rng, monkeypatch):
    torch = pytest.importorskip("torch")
    q, k, v = (torch.from_numpy(x) for x in qkv(rng))
    fixed_times(monkeypatch, {(): 100.0, (("block_q", 32),): 60.0})
    res = flash_mlir.tune(q, k, v, causal=True, candidates=[{"block_q": 32}])
    assert res.options == {"block_q": 32}
    assert tuning.options_for(q, k, v, causal=True) == {"block_q": 32}
    out, used = used_options(lambda: flash_mlir.attention(q, k, v, causal=True))
    assert used == ["block-q=32"]
    assert rel_err(out.numpy(), attention_ref(q.numpy(), k.numpy(), v.numpy(),
                                              causal=True)[0]) <= F32_TOL


def test_chip_ids_and_devices(rng):
    assert tuning._device_of("cuda:1") == ("cuda", 1)
    assert tuning._device_of("cuda") == ("cuda", None)
    assert tuning._device_of(3) == ("cuda", 3)
    assert tuning._device_of(rand(rng, (2, 3))) == ("cpu", None)
    assert tuning.chip_id("cpu") == tuning.chip_id(rand(rng, (2, 3))) == flash_mlir.host_target()
    with pytest.raises(ValueError, match="device"):
        tuning._device_of("cpu:0")
    with pytest.raises(TypeError, match="device"):
        tuning._device_of(True)


def test_default_candidates():
    cpu = tuning.candidates("cpu", (2, 4, 200, 32), (2, 4, 300, 32), (2, 4, 300, 16))
    assert cpu[0] == {} and 1 < len(cpu) <= 6
    assert all(set(c) <= {"block_q", "block_kv"} for c in cpu)
    assert all(v in (32, 64, 128) for c in cpu for v in c.values())
    assert tuning.candidates("cpu", QS, KS, VS)[0] == {}
    gpu = tuning.candidates("cuda", (16, 16, 1024, 128), (16, 16, 1024, 128),
                            (16, 16, 1024, 128), "bf16", causal=True)
    assert gpu[0] == {} and 4 <= len(gpu) <= 8
    assert {"persistent": 1} in gpu and {"persistent": 0} in gpu
    assert {"q_buffers": 0} in gpu
    assert len({tuple(sorted(c.items())) for c in gpu}) == len(gpu)
    small = tuning.candidates("cuda", (8, 16, 1024, 64), (8, 16, 1024, 64),
                              (8, 16, 1024, 64), "f16", causal=True)
    assert small[0] == {} and len(small) <= 8 and {"block_m": 128} in small
    # Decode: the wgmma decode form's split merge either way, whichever kernel the
    # compiler takes (test_decode_candidates_the_compiler_ignores_are_the_same).
    for q, k, kw in (((1, 32, 1, 128), (1, 8, 4096, 128), {}),
                     ((1, 32, 1, 128), (1, 8, 4096, 128), {"causal": True}),
                     ((1, 32, 16, 128), (1, 2, 4096, 128), {})):
        assert tuning.candidates("cuda", q, k, k, "bf16", **kw) == \
            [{}, {"fused_combine": 1}, {"fused_combine": 0}], (q, k, kw)
    # Float32 (the portable kernel) and D past 256: nothing to try.
    assert tuning.candidates("cuda", (2, 4, 512, 64), (2, 4, 512, 64), (2, 4, 512, 64),
                             "f32") == [{}]
    assert tuning.candidates("cuda", (1, 8, 1, 320), (1, 8, 4096, 320),
                             (1, 8, 4096, 320), "bf16") == [{}]


def test_prebuild_tune_builds_every_candidate_and_the_tuned_choice(rng, monkeypatch):
    shapes = ((2, 2, 100, 16), (2, 2, 90, 16), (2, 2, 90, 8))
    ir = _attention.attention_ir(*shapes, "f32", causal=True)
    cands = tuning.candidates("cpu", *shapes, "f32", causal=True)
    assert len(cands) >= 4
    for c in cands:
        assert _attention._library_cached(ir, "cpu", None, flash_mlir.compiler.format_options(
            c)) is None
    path = flash_mlir.prebuild(*shapes, "f32", device="cpu", causal=True, tune=True)
    assert path == _attention._library_cached(ir, "cpu", None, "")
    for c in cands:
        assert _attention._library_cached(ir, "cpu", None, flash_mlir.compiler.format_options(
            c)) is not None, c
    # A choice no candidate list holds, in the table: prebuild builds it too.
    chip = tuning.chip_id("cpu")
    exact, _ = tuning.problem_keys(*shapes, "f32", causal=True)
    with open(tuning.table_path(), "w") as f:
        json.dump({"format": 1, "chips": {chip: {"device": "cpu", "exact": {
            exact: {"options": {"block_q": 16, "block_kv": 48}}}},
            "NVIDIA Imaginary/7": {"device": "cuda", "exact": {
                exact: {"options": {"block_m": 128}}}}}}, f)
    tuning.reload()
    assert flash_mlir.prebuild(*shapes, "f32", device="cpu", causal=True) == path
    assert _attention._library_cached(ir, "cpu", None, "block-q=16 block-kv=48") is not None
    build = tuning.build_candidates(*shapes, "f32", device="cpu", causal=True,
                                    candidates=[{"block_q": 0}])
    assert build[0][0] == {} and build[0][1] == path and build[0][2] is None
    assert build[1][1] is None and "block-q" in build[1][2]


def test_argument_errors(rng):
    q, k, v = qkv(rng)
    cases = [
        (dict(warmup=-1), ValueError, "warmup"),
        (dict(iters=0), ValueError, "iters"),
        (dict(iters=2.5), TypeError, "iters"),
        (dict(repeats=True), TypeError, "repeats"),
        (dict(record="yes"), TypeError, "record"),
        (dict(causal=1), TypeError, "causal"),
        (dict(return_lse=None), TypeError, "return_lse"),
        (dict(align="middle"), ValueError, "align"),
        (dict(window=2.5), TypeError, "window"),
        (dict(window=0), ValueError, "window"),
        (dict(scale=float("nan")), ValueError, "scale"),
        (dict(candidates={"block_q": 32}), TypeError, "candidates"),
        (dict(candidates=[{"causal": True}]), ValueError, r"candidates\[0\]"),
        (dict(candidates=[{}, {"block_q": 1.5}]), TypeError, r"candidates\[1\]"),
        (dict(candidates=[{"block_q": "32 reference=true"}]), ValueError, r"candidates\[0\]"),
        (dict(candidates=[{"Block-Q": 32}]), ValueError, r"candidates\[0\]"),
        (dict(candidates=[["block_q", 32]]), TypeError, r"candidates\[0\]"),
    ]
    for kw, exc, match in cases:
        with pytest.raises(exc, match=match):
            flash_mlir.tune(q, k, v, **kw)
    with pytest.raises(TypeError, match="q"):
        flash_mlir.tune(q.tolist(), k, v)
    with pytest.raises(TypeError, match="same kind"):
        flash_mlir.tune(q, k.astype(np.float16), v)
    with pytest.raises(ValueError, match="device"):
        tuning.chip_id("tpu")
    with pytest.raises(TypeError, match="device"):
        tuning.chip_id(1.5)
    with pytest.raises(TypeError, match="dtype"):
        tuning.problem_keys(QS, KS, VS, "int8")
    with pytest.raises(TypeError, match="q_shape"):
        tuning.problem_keys((2, 2.5, 3), KS, VS, "f32")
    with pytest.raises(ValueError, match="k_shape"):
        tuning.candidates("cpu", QS, (5,), VS)
    with pytest.raises(TypeError, match="tune"):
        flash_mlir.prebuild(QS, KS, VS, "f32", device="cpu", tune="yes")
    with pytest.raises(ValueError, match="tune=True"):
        flash_mlir.prebuild(QS, KS, VS, "f32", device="cpu", tune=True, block_q=32)
    with pytest.raises(ValueError, match="tune=True"):
        flash_mlir.prebuild(QS, KS, VS, "f32", device="cpu", tune=True, softcap=3.0)
    assert not os.path.exists(tuning.table_path())


def test_gpu_prebuild_builds_the_candidates_and_every_chips_choice():
    """GPU kernels compile without a device: a cache folder for a GPU machine
    holds every candidate and each CUDA chip's recorded choice."""
    import shutil
    cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    if not (flash_mlir.is_registered("flash-gpu-pipeline") and
            (os.path.exists(os.path.join(cuda_home, "bin", "ptxas")) or shutil.which("ptxas"))):
        pytest.skip("no flash-gpu-pipeline or no ptxas (CUDA toolkit)")
    shapes = ((1, 4, 256, 64), (1, 2, 256, 64), (1, 2, 256, 64))
    ir = _attention.attention_ir(*shapes, "bf16", causal=True)
    cands = tuning.candidates("cuda", *shapes, "bf16", causal=True)
    assert len(cands) > 1
    exact, klass = tuning.problem_keys(*shapes, "bf16", causal=True)
    with open(tuning.table_path(), "w") as f:
        json.dump({"format": 1, "chips": {
            "NVIDIA A/132": {"device": "cuda", "exact": {exact: {"options": {"block_n": 32}}}},
            "NVIDIA B/114": {"device": "cuda", "class": {klass: {"options": {"stages": 4}}}}}},
            f)
    tuning.reload()
    path = flash_mlir.prebuild(*shapes, "bf16", causal=True, tune=True)
    assert path == _attention._library_cached(ir, "cuda", None, "")
    for opts in cands + [{"block_n": 32}, {"stages": 4}]:
        text = flash_mlir.compiler.format_options(opts)
        assert _attention._library_cached(ir, "cuda", None, text) is not None, opts


def test_decode_candidates_the_compiler_ignores_are_the_same():
    """The decode candidates do not restate which kernel the compiler takes: where
    it is not the wgmma decode form (a causal decode, one query head per K/V
    head, D = 256) fused_combine builds the heuristic's kernel byte for byte,
    which tune() marks "same"; where it is (256 packed rows), a kernel of its own."""
    import shutil
    cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    if not (flash_mlir.is_registered("flash-gpu-pipeline") and
            (os.path.exists(os.path.join(cuda_home, "bin", "ptxas")) or shutil.which("ptxas"))):
        pytest.skip("no flash-gpu-pipeline or no ptxas (CUDA toolkit)")
    cases = (((1, 32, 1, 128), (1, 8, 1000, 128), {"causal": True}, False),
             ((1, 8, 1, 128), (1, 8, 1000, 128), {}, False),
             ((1, 32, 1, 256), (1, 8, 1000, 256), {}, False),
             ((1, 32, 8, 64), (1, 2, 1000, 64), {}, True))
    for q, k, kw, decode_form in cases:
        ir = _attention.attention_ir(q, k, k, "bf16", **kw)
        ids = []
        for opts in tuning.candidates("cuda", q, k, k, "bf16", **kw):
            flash_mlir.prebuild(q, k, k, "bf16", **kw, **opts)
            ids.append(tuning._kernel_identity(ir, "cuda", opts))
        assert None not in ids, (q, k, kw)
        assert (ids[1] != ids[0]) == decode_form, (q, k, kw)


def test_a_candidate_with_the_heuristics_kernel_is_not_timed_again(rng, monkeypatch):
    """block_kv=64 is the CPU pipeline's default: the same library byte for byte, so
    it is marked "same" with the heuristic's time and never chosen, however the
    clock would have read it."""
    q, k, v = qkv(rng)
    calls = fixed_times(monkeypatch, {(): 100.0, (("block_q", 32),): 90.0})
    res = flash_mlir.tune(q, k, v, candidates=[{"block_kv": 64}, {"block_q": 32}])
    same, other = res.trials[1], res.trials[2]
    assert same.status == "same" and "heuristic" in same.error and same.us == 100.0
    assert other.status == "ok" and res.options == {"block_q": 32}
    assert (("block_kv", 64),) not in calls
    assert "same: the kernel of the heuristic" in res.markdown()


def test_measure_times_the_candidates_in_rounds(monkeypatch):
    """Every round times each function once, in turn, so drift over the run
    reaches all of them alike; the result is each one's median."""
    order = []
    clock = iter(range(1000))
    monkeypatch.setattr(tuning.time, "perf_counter", lambda: next(clock))
    fns = [lambda i=i: order.append(i) for i in range(3)]
    times = tuning._measure(fns, "cpu", warmup=1, iters=2, repeats=4)
    assert order == [0, 1, 2] + [0, 0, 1, 1, 2, 2] * 4
    assert times == [1e6 / 2] * 3


def test_a_candidate_that_fails_while_timed_is_failed_and_the_rest_go_on(rng, monkeypatch):
    """It ran once (checked), then raises in the timing rounds: "failed", no time,
    the other candidates timed and the choice made among them."""
    q, k, v = qkv(rng)
    real_run = tuning._run
    runs = {"n": 0}

    def run(q, k, v, call, options):
        if options == {"block_kv": 32}:
            runs["n"] += 1
            if runs["n"] > 1:  # the check passes, the timing does not
                raise RuntimeError("launch failed\nmore")
        return real_run(q, k, v, call, options)

    monkeypatch.setattr(tuning, "_run", run)
    res = flash_mlir.tune(q, k, v, candidates=[{"block_kv": 32}, {"block_q": 32}],
                          warmup=1, iters=1, repeats=2, record=False)
    bad, other = res.trials[1], res.trials[2]
    assert bad.status == "failed" and bad.error == "launch failed" and bad.us is None
    assert other.status == "ok" and other.us > 0 and res.trials[0].us > 0
    assert res.options in ({}, {"block_q": 32})
