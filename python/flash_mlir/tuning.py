"""Measured kernel configurations: tune() times the kernel options worth trying
for a call's shapes on this chip, keeps the fastest whose output matches the
heuristic's, and records it; attention() then runs it for calls of those shapes
(or of the same shape class) on that chip, and the compiler's own choice
everywhere else.

What is tuned: plain forward calls — q, k, v with a mask (none, causal, a
window) and possibly the lse. Calls with score_mod / mask_mod that stays a
function, bias, softcap, alibi_slopes, sinks, a paged cache, a packed varlen
batch, dynamic=True, autograd, a pipeline= or explicit options keep the
heuristic (or what the caller asked for).

The table is <cache_dir>/tuning.json; a table shipped with the package
(flash_mlir/tuned.json) is read too, below it. Entries are per chip (chip_id)
and per problem at two levels (problem_keys): the exact shapes, then a class
whose Lq, Lk and batch·heads are rounded up to powers of two.
"""
import contextlib
import hashlib
import json
import math
import os
import platform
import re
import statistics
import tempfile
import threading
import time
import warnings

from . import _capi, cache
from ._capi import FlashError
from .compiler import format_options

__all__ = ["chip_id", "problem_keys", "candidates", "tune", "options_for", "build_candidates",
           "reload", "table_path", "TuneResult", "Trial", "TABLE_NAME", "SHIPPED_TABLE"]

TABLE_NAME = "tuning.json"
SHIPPED_TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tuned.json")
FORMAT = 1
# A candidate must beat the heuristic by this fraction to replace it: closer
# than that is run-to-run noise, and the heuristic needs no table to be found.
MIN_GAIN = 0.01
# Output tolerance against the heuristic's, relative to its largest magnitude:
# another tile order changes the f32 sums in their last bits and the rounding
# of P and of the output in bf16/f16; a wrong kernel is off by O(1).
_TOLERANCE = {"f32": 1e-4, "f16": 5e-3, "bf16": 2e-2}
_LSE_TOLERANCE = 1e-3

# attention()'s own keywords: a candidate is kernel options only.
_CALL_KEYWORDS = frozenset((
    "scale", "causal", "window", "align", "return_lse", "out", "dynamic", "pipeline", "cache",
    "bias", "softcap", "alibi_slopes", "block_table", "seq_lens", "score_mod",
    "score_mod_args", "mask_mod", "cu_seqlens_q", "cu_seqlens_k", "sinks"))
_OPTION_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
# A string value goes into the pass-option string as is: nothing that could
# end it and start another option.
_OPTION_TEXT = re.compile(r"^[A-Za-z0-9_.+-]+$")

_lock = threading.RLock()
_tables = {}        # table path -> {chip: {"device", "exact", "class"}}
_warned = set()     # the table problems warned about since the last reload()
_suspended = 0      # > 0 while tune() measures: attention() sees no table
_chips = {}


# -- chips and keys ---------------------------------------------------------------------

def _device_of(device):
    """('cpu', None) or ('cuda', ordinal or None) for a device name, a torch
    device, a CUDA ordinal or an array."""
    if isinstance(device, bool):
        raise TypeError("device must be 'cpu', 'cuda', 'cuda:N', a torch device or an array, "
                        "got %r" % (device,))
    if isinstance(device, int):
        return "cuda", device
    mod = type(device).__module__
    if mod.startswith("torch") and hasattr(device, "is_cuda"):  # a tensor
        return ("cuda", device.get_device()) if device.is_cuda else ("cpu", None)
    if mod.startswith("numpy"):
        return "cpu", None
    if mod.startswith("torch") and hasattr(device, "type"):  # torch.device
        if device.type in ("cpu", "cuda"):
            return device.type, device.index if device.type == "cuda" else None
    if isinstance(device, str):
        m = re.match(r"^(cpu|cuda)(?::(\d+))?$", device)
        if m and not (m.group(1) == "cpu" and m.group(2)):
            return m.group(1), int(m.group(2)) if m.group(2) else None
        raise ValueError("device must be 'cpu', 'cuda' or 'cuda:N', got %r" % (device,))
    raise TypeError("device must be 'cpu', 'cuda', 'cuda:N', a torch device or an array, got %s"
                    % type(device).__name__)


def chip_id(device="cpu"):
    """A stable name of the chip a call runs on, the table's first key: on CUDA
    the device's name and SM count ("NVIDIA H200/132"); on the host the target
    the compiler generates code for (triple/CPU), or the platform where the
    compiler is absent."""
    kind, index = _device_of(device)
    if kind == "cpu":
        chip = _chips.get("cpu")
        if chip is None:
            try:
                chip = _capi.host_target() if _capi.available() else None
            except (FlashError, OSError):
                chip = None
            if not chip:
                chip = "%s-%s" % (platform.machine() or "unknown",
                                  platform.system().lower() or "unknown")
            _chips["cpu"] = chip
        return chip
    chip = _chips.get(("cuda", index))
    if chip is None:
        import torch
        ordinal = torch.cuda.current_device() if index is None else index
        props = torch.cuda.get_device_properties(ordinal)
        chip = "%s/%d" % (props.name, props.multi_processor_count)
        if index is not None:  # the current device may change
            _chips[("cuda", index)] = chip
    return chip


def _pow2(n):
    return 1 << (n - 1).bit_length() if n > 1 else n


def _elt(dtype):
    from ._attention import _TYPE_NAMES
    elt = _TYPE_NAMES.get(str(dtype).replace("torch.", ""))
    if elt is None:
        raise TypeError("dtype must be bf16, f16 or f32 (or a torch / NumPy dtype of them), "
                        "got %r" % (dtype,))
    return elt


def _mask_text(causal, window, align):
    from ._attention import _check_window
    if not isinstance(causal, bool):
        raise TypeError("causal must be a bool, got %r" % (causal,))
    window = _check_window(window)
    if align is None:
        align = "top_left"
    if align not in ("top_left", "bottom_right"):
        raise ValueError("align must be 'top_left' or 'bottom_right', got %r" % (align,))
    if window is not None:
        return "window%d/%s" % (window, align)
    return "causal/%s" % align if causal else "none"


def _shapes(q_shape, k_shape, v_shape):
    from ._attention import _check_dim
    shapes = []
    for name, s in (("q_shape", q_shape), ("k_shape", k_shape), ("v_shape", v_shape)):
        try:
            dims = tuple(_check_dim(name, d) for d in s)
        except TypeError as e:
            if "integer sizes" in str(e):
                raise
            raise TypeError("%s must be a sequence of sizes, got %r" % (name, s)) from None
        if len(dims) < 2:
            raise ValueError("%s must be [batch..., L, D], got %s" % (name, dims))
        shapes.append(dims)
    return shapes


def problem_keys(q_shape, k_shape, v_shape, dtype, *, causal=False, window=None, align=None,
                 return_lse=False):
    """(exact key, class key) of a plain forward call: the element type, D, Dv,
    the query group G = Hq / Hkv, the mask and its alignment, whether the lse
    is returned, and the shapes — exact, or Lq, Lk and batch·heads rounded up
    to powers of two (the class, which a shape never tuned takes)."""
    q, k, v = _shapes(q_shape, k_shape, v_shape)
    elt = _elt(dtype)
    mask = _mask_text(causal, window, align)
    if not isinstance(return_lse, bool):
        raise TypeError("return_lse must be a bool, got %r" % (return_lse,))
    group = q[-3] // k[-3] if len(q) >= 3 and len(k) >= 3 and k[-3] else 1
    bh = math.prod(q[:-2])
    head = "%s D%d Dv%d G%d %s lse%d" % (elt, q[-1], v[-1], group, mask, return_lse)
    exact = "%s q%s k%s" % (head, "x".join(map(str, q)), "x".join(map(str, k)))
    klass = "%s BH<=%d Lq<=%d Lk<=%d" % (head, _pow2(bh), _pow2(q[-2]), _pow2(k[-2]))
    return exact, klass


# -- candidates -------------------------------------------------------------------------

def candidates(device, q_shape, k_shape, v_shape, dtype="bf16", *, causal=False, window=None,
               align=None, return_lse=False):
    """The option dicts worth timing for a call of these shapes, the heuristic's
    ({}) first. On CUDA: variants of the sm_90a wgmma prefill kernel the
    heuristic may not pick (the persistent grid either way, its second Q
    buffer, deferred PV either way, 128-row blocks with ping-pong, 64-key
    tiles), at most
    8; a decode shape: the wgmma decode form's split merge either way (where
    the compiler takes another kernel the option changes nothing, and tune()
    does not time a candidate whose kernel is the heuristic's); float32 or
    head dims the wgmma kernel does not take: [{}]. On the host: block_q /
    block_kv among 32, 64 (the default) and 128, at most 6."""
    kind, _ = _device_of(device)
    q, k, v = _shapes(q_shape, k_shape, v_shape)
    elt = _elt(dtype)
    _mask_text(causal, window, align)
    if not isinstance(return_lse, bool):
        raise TypeError("return_lse must be a bool, got %r" % (return_lse,))
    d, dv, lq, lk = q[-1], v[-1], q[-2], k[-2]
    if kind == "cpu":
        out = [{}, {"block_q": 32}, {"block_kv": 32}]
        # A tile past the length is the one tile 64 already is.
        if lq > 64:
            out.append({"block_q": 128})
        if lk > 64:
            out.append({"block_kv": 128})
        if lq > 64 and lk > 64:
            out.append({"block_q": 128, "block_kv": 128})
        return out
    group = q[-3] // k[-3] if len(q) >= 3 and len(k) >= 3 and k[-3] else 1
    if elt == "f32" or d % 8 or dv % 8 or max(d, dv) > 256:
        return [{}]  # not the wgmma kernel: its knobs do not apply
    masked = causal or window is not None
    if lq <= 16 or (group > 1 and group * lq <= 128):
        # Decode. Which kernel takes it is the compiler's rule, not restated
        # here: the wgmma kernel's decode form (heads that pack), whose merge
        # of the splits is a compile-time rule (the last CTA per row block, or
        # a second kernel) measured at 4 rows and a few split counts, or the
        # split-KV kernel, on which fused_combine builds the heuristic's kernel.
        return [{}, {"fused_combine": 1}, {"fused_combine": 0}]
    # q_buffers=0: the persistent grid's second Q buffer where it fits (where
    # the grid is not persistent or it does not fit, the heuristic's kernel).
    out = [{}, {"persistent": 1}, {"persistent": 0}, {"q_buffers": 0}]
    if d <= 64 and dv <= 64:
        # The heuristic takes 64-row blocks under a mask, 192 without.
        out += [{"block_m": 128}, {"block_m": 128, "pingpong": True}, {"block_n": 64}]
        out.append({"defer_pv": 1} if masked else {"pingpong": True})
    elif max(d, dv) <= 128:
        # Serial with two Q buffers beside the deferred PV with one.
        out += [{"defer_pv": 0, "q_buffers": 0}, {"defer_pv": 1}, {"pingpong": True},
                {"block_n": 64}]
    else:
        # D past 128: the heuristic shrinks the key tile until two stages fit.
        out += [{"block_n": 64}, {"defer_pv": 0}, {"pingpong": True}]
    return out


def _check_options(name, opts):
    if not isinstance(opts, dict):
        raise TypeError("%s must be a dict of kernel options, got %s" % (name, type(opts).__name__))
    for key, value in opts.items():
        if not isinstance(key, str) or not _OPTION_NAME.match(key):
            raise ValueError("%s has an invalid option name %r" % (name, key))
        if key in _CALL_KEYWORDS:
            raise ValueError("%s: %r is an argument of attention(), not a kernel option"
                             % (name, key))
        if isinstance(value, str):
            if not _OPTION_TEXT.match(value):
                raise ValueError("%s: option %s has an invalid value %r" % (name, key, value))
        elif not isinstance(value, (bool, int)):
            raise TypeError("%s: option %s must be an int, a bool or a string, got %r"
                            % (name, key, value))
    return dict(opts)


def _canonical(opts):
    return tuple(sorted(opts.items()))


# -- the tables -------------------------------------------------------------------------

def table_path():
    """<cache_dir>/tuning.json, the table tune() records into."""
    return os.path.join(cache.cache_dir(), TABLE_NAME)


def reload():
    """Reads the tables again on next use, and lets the calls this process has
    already made choose their kernels again (they are remembered per call key)."""
    with _lock:
        _tables.clear()
        _warned.clear()
        _chips.clear()
    from . import _attention
    _attention._forget_choices()


def _warn(path, problem):
    with _lock:
        if (path, problem) in _warned:
            return
        _warned.add((path, problem))
    warnings.warn("flash_mlir: the tuning table %s %s; using the heuristic's kernel "
                  "configuration there" % (path, problem), RuntimeWarning, stacklevel=4)


def _parse(path, text):
    """The table's chips, with every malformed part left out (and warned about)."""
    try:
        data = json.loads(text)
    except ValueError as e:
        _warn(path, "is not valid JSON (%s)" % e)
        return {}
    if not isinstance(data, dict) or not isinstance(data.get("chips", {}), dict):
        _warn(path, "is not a tuning table (an object with \"chips\")")
        return {}
    if data.get("format", FORMAT) != FORMAT:
        _warn(path, "has format %r, not %d" % (data.get("format"), FORMAT))
        return {}
    chips = {}
    for chip, entry in data.get("chips", {}).items():
        if not isinstance(entry, dict):
            _warn(path, "has a malformed entry for chip %r" % chip)
            continue
        good = {"device": entry.get("device"), "exact": {}, "class": {}}
        for level in ("exact", "class"):
            level_entries = entry.get(level, {})
            if not isinstance(level_entries, dict):
                _warn(path, "has a malformed %r level for chip %r" % (level, chip))
                continue
            for key, e in level_entries.items():
                try:
                    good[level][key] = dict(e, options=_check_options(
                        "the entry %r" % key, e["options"] if isinstance(e, dict) else None))
                except (TypeError, ValueError, KeyError) as err:
                    _warn(path, "has a malformed entry for %r (%s)" % (key, err))
        chips[chip] = good
    return chips


def _read(path):
    with _lock:
        chips = _tables.get(path)
        if chips is None:
            try:
                with open(path) as f:
                    text = f.read()
            except FileNotFoundError:
                text = None
            except OSError as e:
                _warn(path, "cannot be read (%s)" % e)
                text = None
            chips = {} if text is None else _parse(path, text)
            _tables[path] = chips
        return chips


def _lookup(chip, exact, klass):
    """(options, where) of the tuned entry for this chip and problem, or None:
    exact entries before class entries, the cache's table before the shipped."""
    if _suspended:
        return None
    tables = [_read(table_path()), _read(SHIPPED_TABLE)]
    for level, key in (("exact", exact), ("class", klass)):
        for chips in tables:
            entry = chips.get(chip, {}).get(level, {}).get(key)
            if entry is not None:
                return dict(entry["options"]), level
    return None


def _record(chip, device, exact, klass, entry):
    """Merges the winner into <cache_dir>/tuning.json under both keys, atomically
    (a temporary file and os.replace; a lock where fcntl exists keeps two
    recording processes from dropping each other's entries)."""
    path = table_path()
    lock_file = None
    try:
        try:
            import fcntl
            lock_file = open(path + ".lock", "a")
            fcntl.flock(lock_file, fcntl.LOCK_EX)
        except (ImportError, OSError):
            lock_file = None
        data = {"format": FORMAT, "chips": {}}
        try:
            with open(path) as f:
                old = json.load(f)
            if isinstance(old, dict) and isinstance(old.get("chips"), dict) and \
                    old.get("format", FORMAT) == FORMAT:
                data = old
            else:
                warnings.warn("flash_mlir: replacing %s, which is not a tuning table" % path,
                              RuntimeWarning, stacklevel=3)
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as e:
            warnings.warn("flash_mlir: replacing %s, which cannot be read (%s)" % (path, e),
                          RuntimeWarning, stacklevel=3)
        data["format"] = FORMAT
        node = data["chips"].get(chip)
        if not isinstance(node, dict):
            node = data["chips"][chip] = {}
        node["device"] = device
        for level, key in (("exact", exact), ("class", klass)):
            if not isinstance(node.get(level), dict):
                node[level] = {}
            node[level][key] = dict(entry, **({"from": exact} if level == "class" else {}))
        fd, tmp = tempfile.mkstemp(prefix=".tmp-tuning", suffix=".json",
                                   dir=os.path.dirname(path))
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=1, sort_keys=True)
                f.write("\n")
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    finally:
        if lock_file is not None:
            lock_file.close()
    return path


# -- what attention() and prebuild() ask ------------------------------------------------

def _kernel_available(ir, device, opts_text):
    """Whether attention() can have this kernel here: in the cache, or a
    compiler to build it."""
    from . import _attention
    return _capi.available() or _attention._library_cached(ir, device, None, opts_text) \
        is not None


def _choice(device, chip, shapes, elt, causal, window, align, return_lse, ir):
    """The tuned options attention() runs for a plain forward call, or None
    (the heuristic): no entry, or its kernel neither cached nor buildable."""
    if _suspended:
        return None
    try:
        exact, klass = problem_keys(*shapes, elt, causal=bool(causal), window=window,
                                    align=align, return_lse=bool(return_lse))
    except (TypeError, ValueError):
        return None
    found = _lookup(chip, exact, klass)
    if not found or not found[0]:
        return None
    opts = found[0]
    if not _kernel_available(ir, device, format_options(opts)):
        return None
    return opts


def _tuned_kernel(ir, device, q, shapes, elt, causal, window, align, return_lse, use_cache):
    """attention()'s kernel for a plain forward call from the tables, or None."""
    try:
        chip = chip_id(q if device == "cuda" else "cpu")
    except Exception:  # no torch.cuda here, or no device: nothing to look up
        return None
    opts = _choice(device, chip, shapes, elt, causal, window, align, return_lse, ir)
    if opts is None:
        return None
    from . import _attention
    try:
        return _attention._cached_kernel(ir, device, None, format_options(opts), return_lse,
                                         use_cache)
    except FlashError as e:
        _warn(table_path(), "names options %s that do not build here (%s)"
              % (opts, str(e).strip().splitlines()[0] if str(e).strip() else e))
        return None


def options_for(q, k, v, *, causal=False, window=None, align=None, return_lse=False):
    """The kernel options attention(q, k, v, ...) with no options of its own
    runs with on these arrays' chip: the tuned entry's, or {} for the
    heuristic (no entry, or its kernel neither cached nor buildable here)."""
    from . import _attention
    kind, elt = _classify3(q, k, v)
    device = "cuda" if kind == "torch-cuda" else "cpu"
    shapes = tuple(tuple(x.shape) for x in (q, k, v))
    ir = _attention.attention_ir(*shapes, elt, causal=causal, window=window,
                                 align=align or "top_left", lse=return_lse)
    chip = chip_id(q if device == "cuda" else "cpu")
    return _choice(device, chip, shapes, elt, causal, window, align, return_lse, ir) or {}


def build_candidates(q_shape, k_shape, v_shape, dtype, *, device="cuda", scale=None,
                     causal=False, window=None, align=None, return_lse=False,
                     candidates=None):
    """Compiles the kernel of every candidate (default: candidates(...)) into
    the cache, so that tune() can time them where there is no compiler.
    Returns [(options, path or None, error or None)]; a candidate that does not
    compile is reported, not raised."""
    from . import _attention
    if device not in ("cpu", "cuda"):
        raise ValueError("device must be 'cpu' or 'cuda', got %r" % (device,))
    elt = _elt(dtype)
    if candidates is None:
        cands = globals()["candidates"](device, q_shape, k_shape, v_shape, elt, causal=causal,
                                        window=window, align=align, return_lse=return_lse)
    else:
        cands = _candidate_list(candidates)
    ir = _attention.attention_ir(q_shape, k_shape, v_shape, elt, scale=scale, causal=causal,
                                 window=window, align=align or "top_left", lse=return_lse)
    return [_build_one(ir, device, opts) for opts in cands]


def _build_one(ir, device, opts):
    from . import _attention
    try:
        return opts, _attention._library_for(ir, device, None, format_options(opts)), None
    except FlashError as e:
        return opts, None, _first_line(e)


def _prebuild(ir, device, shapes, elt, causal, window, align, return_lse, tune):
    """prebuild()'s extra kernels of a plain forward call: with tune, every
    candidate's; always, the tuned choice of each chip in the visible tables
    that has an entry for it (a host kernel: this host's only)."""
    wanted = []
    if tune:
        wanted += candidates(device, *shapes, elt, causal=causal, window=window, align=align,
                             return_lse=return_lse)
    exact, klass = problem_keys(*shapes, elt, causal=causal, window=window, align=align,
                                return_lse=return_lse)
    chips = {}
    for path in (table_path(), SHIPPED_TABLE):
        for chip, node in _read(path).items():
            chips.setdefault(chip, node.get("device"))
    for chip, dev in chips.items():
        if dev != device or (device == "cpu" and chip != chip_id("cpu")):
            continue
        found = _lookup(chip, exact, klass)
        if found:
            wanted.append(found[0])
    seen, report = {()}, []
    for opts in wanted:
        c = _canonical(opts)
        if c in seen:
            continue
        seen.add(c)
        report.append(_build_one(ir, device, opts))
    for opts, path, error in report:
        if error is not None:
            warnings.warn("flash_mlir.prebuild: the kernel options %s do not compile for "
                          "these shapes (%s)" % (opts, error), RuntimeWarning, stacklevel=3)
    return report


# -- tune -------------------------------------------------------------------------------

class Trial:
    """One candidate of a tune(): its options, its status ("ok", "wrong" — its
    output differs from the heuristic's —, "failed" — it did not build or run
    —, "unavailable" — not in the cache and no compiler here, "same" — its
    kernel is byte for byte an earlier candidate's, named in .error, so it is
    neither timed again nor chosen), its time per call in µs (status "ok")
    and what went wrong."""

    __slots__ = ("options", "status", "us", "error")

    def __init__(self, options, status="ok", us=None, error=None):
        self.options, self.status, self.us, self.error = options, status, us, error

    def __repr__(self):
        return "Trial(%r, %r, us=%s%s)" % (self.options, self.status,
                                            None if self.us is None else "%.1f" % self.us,
                                            "" if self.error is None else ", error=%r" % self.error)


class TuneResult:
    """What tune() found: .options (the chosen kernel options, {} for the
    heuristic), .trials (a Trial per candidate, in order), .chip, .exact_key,
    .class_key, .recorded (the table written, or None)."""

    def __init__(self, options, trials, chip, exact_key, class_key, recorded=None):
        self.options, self.trials = options, trials
        self.chip, self.exact_key, self.class_key = chip, exact_key, class_key
        self.recorded = recorded

    @property
    def heuristic_us(self):
        return self.trials[0].us if self.trials else None

    @property
    def chosen(self):
        for t in self.trials:
            if t.status == "ok" and _canonical(t.options) == _canonical(self.options):
                return t
        return None

    def markdown(self, label=None):
        """The trials as markdown table rows: | problem | options | µs | vs heuristic | status |."""
        label = label or self.exact_key
        chosen = self.chosen
        base = self.heuristic_us
        rows = []
        for t in self.trials:
            opts = _options_text(t.options) or "(heuristic)"
            if t is chosen:
                opts = "**%s** ←" % opts
            us = "%.1f" % t.us if t.us is not None else ""
            ratio = "%.3f" % (base / t.us) if t.us and base else ""
            status = t.status if t.error is None else "%s: %s" % (t.status, t.error[:80])
            rows.append("| %s | %s | %s | %s | %s |" % (label, opts, us, ratio, status))
        return "\n".join(rows)

    def __repr__(self):
        return "TuneResult(options=%r, chip=%r, exact_key=%r, trials=%r)" % (
            self.options, self.chip, self.exact_key, self.trials)


def _options_text(opts):
    """key=value, ... in key order; "" for the heuristic's {}."""
    return ", ".join("%s=%s" % kv for kv in sorted(opts.items()))


def _first_line(e):
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _classify3(q, k, v):
    from ._attention import _classify
    kinds = []
    for name, x in (("q", q), ("k", k), ("v", v)):
        try:
            kinds.append(_classify(x))
        except TypeError as e:
            raise TypeError("%s: %s" % (name, e)) from None
    if len(set(kinds)) != 1:
        raise TypeError("q, k and v must be the same kind of array with the same dtype, got %s"
                        % kinds)
    return kinds[0]


def _check_count(name, value, low):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("%s must be an int, got %r" % (name, value))
    if value < low:
        raise ValueError("%s must be >= %d, got %r" % (name, low, value))
    return value


def _candidate_list(cands):
    if isinstance(cands, (dict, str, bytes)):
        raise TypeError("candidates must be a list of option dicts, got %s" % type(cands).__name__)
    try:
        cands = list(cands)
    except TypeError:
        raise TypeError("candidates must be a list of option dicts, got %s"
                        % type(cands).__name__) from None
    out, seen = [{}], {()}
    for n, opts in enumerate(cands):
        opts = _check_options("candidates[%d]" % n, opts)
        c = _canonical(opts)
        if c not in seen:
            seen.add(c)
            out.append(opts)
    return out


def _run(q, k, v, call, options):
    """One call of the candidate: what tune() times and checks (a seam for tests)."""
    from . import _attention
    return _attention.attention(q, k, v, **call, **options)


def _sync(device):
    if device == "cuda":
        import torch
        torch.cuda.synchronize()


def _time_once(fn, device, iters):
    """Time per call of `iters` back-to-back calls (CUDA events on the current
    stream on the GPU), in µs."""
    if device == "cuda":
        import torch
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e3 / iters
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) * 1e6 / iters


def _measure(fns, device, warmup, iters, repeats):
    """The median over `repeats` rounds of each function's time per call, in
    µs. A round times every function once, in turn: what drifts over the
    run (clocks settling, the card warming up) reaches each alike, where
    timing one function's repetitions before the next one's favoured
    whichever came later (bench/NOTES run 74: a candidate identical to the
    heuristic measured 5 % faster after it).
    A function that raises RuntimeError or ValueError is dropped from the
    rounds: its entry is the exception instead of a time."""
    out = [None] * len(fns)

    def run(i, step):
        if isinstance(out[i], Exception):
            return None
        try:
            return step()
        except (RuntimeError, ValueError) as e:
            out[i] = e
            return None

    for i, fn in enumerate(fns):
        run(i, lambda fn=fn: [fn() for _ in range(warmup)])
    _sync(device)
    times = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            t = run(i, lambda fn=fn: _time_once(fn, device, iters))
            if t is not None:
                times[i].append(t)
    return [o if isinstance(o, Exception) else statistics.median(ts)
            for o, ts in zip(out, times)]


def _kernel_identity(ir, device, opts):
    """A digest of the compiled library of these options (equal digests: the
    same kernel), or None where it is not in the cache."""
    from . import _attention
    path = _attention._library_cached(ir, device, None, format_options(opts))
    if path is None:
        return None
    with open(path, "rb") as f:
        return hashlib.sha1(f.read()).hexdigest()


def _host(x):
    import numpy as np
    if hasattr(x, "detach"):
        return x.detach().float().cpu().numpy().astype(np.float64)
    return np.asarray(x, dtype=np.float64)


def _mismatch(got, want, elt, return_lse):
    """Why a candidate's result is not the heuristic's, or None."""
    import numpy as np
    pairs = [("out", got[0], want[0])] if return_lse else [("out", got, want)]
    if return_lse:
        pairs.append(("lse", got[1], want[1]))
    for name, a, b in pairs:
        a, b = _host(a), _host(b)
        if a.shape != b.shape:
            return "%s has shape %s, the heuristic's %s" % (name, a.shape, b.shape)
        nan = np.isnan(b)
        if not np.array_equal(np.isnan(a), nan):
            return "%s has NaN where the heuristic's has none, or the other way" % name
        inf = np.isinf(b)
        if not np.array_equal(a[inf], b[inf]) or np.isinf(a[~inf]).any():
            return "%s has infinities where the heuristic's has none, or the other way" % name
        fin = ~(nan | inf)
        if not fin.any():
            continue
        err = float(np.max(np.abs(a[fin] - b[fin])))
        if name == "out":
            bound = _TOLERANCE[elt] * max(float(np.max(np.abs(b[fin]))), 1e-30)
        else:
            bound = _LSE_TOLERANCE * max(1.0, float(np.max(np.abs(b[fin]))))
        if not err <= bound:
            return "%s differs from the heuristic's by %.3g (tolerance %.3g)" % (name, err, bound)
    return None


def _try(trial, q, k, v, call, ir, device, elt, return_lse, reference):
    """Runs a candidate once, checked against the reference (None: it is the
    reference); its result, with trial.status set."""
    if not _kernel_available(ir, device, format_options(trial.options)):
        trial.status = "unavailable"
        trial.error = "not in %s and no compiler here" % cache.cache_dir()
        return None
    try:
        res = _run(q, k, v, call, trial.options)
        _sync(device)
    except (RuntimeError, ValueError) as e:
        trial.status, trial.error = "failed", _first_line(e)
        return None
    if reference is not None:
        why = _mismatch(res, reference, elt, return_lse)
        if why is not None:
            trial.status, trial.error = "wrong", why
    return res


def tune(q, k, v, *, scale=None, causal=False, window=None, align=None, return_lse=False,
         candidates=None, warmup=3, iters=20, repeats=5, record=True):
    """Times each candidate's kernel (default: candidates(...) for these arrays)
    on these arrays through attention(q, k, v, ..., **options) and returns a
    TuneResult. The heuristic's ({}) always runs first and is the reference: a
    candidate whose output (and lse) differs from its by more than the dtype's
    tolerance is rejected ("wrong"), one that does not build or run is
    "failed", one whose kernel is neither in the cache nor buildable here
    (no compiler: prebuild(..., tune=True) where there is one) is
    "unavailable"; none of these is fatal. Time: the median over `repeats`
    of `iters` back-to-back calls after `warmup` calls (CUDA events on the
    GPU, time.perf_counter on the host). The fastest wins if it beats the
    heuristic by more than MIN_GAIN, else the heuristic. record=True merges
    the winner into <cache_dir>/tuning.json under this chip's exact and class
    keys; attention() runs it from then on (reload() is called)."""
    from . import _attention
    kind, elt = _classify3(q, k, v)
    device = "cuda" if kind == "torch-cuda" else "cpu"
    scale = _attention._check_scale(scale)
    shapes = tuple(tuple(x.shape) for x in (q, k, v))
    exact, klass = problem_keys(*shapes, elt, causal=causal, window=window, align=align,
                                return_lse=return_lse)
    warmup = _check_count("warmup", warmup, 0)
    iters = _check_count("iters", iters, 1)
    repeats = _check_count("repeats", repeats, 1)
    if not isinstance(record, bool):
        raise TypeError("record must be a bool, got %r" % (record,))
    if candidates is None:
        cands = globals()["candidates"](device, *shapes, elt, causal=causal, window=window,
                                        align=align, return_lse=return_lse)
    else:
        cands = _candidate_list(candidates)
    if hasattr(q, "detach"):
        q, k, v = q.detach(), k.detach(), v.detach()
    align = align or "top_left"
    chip = chip_id(q if device == "cuda" else "cpu")
    call = dict(scale=scale, causal=causal, window=window, align=align, return_lse=return_lse)
    ir = _attention.attention_ir(*shapes, elt, scale=scale, causal=causal, window=window,
                                 align=align, lse=return_lse)
    global _suspended
    trials, reference = [], None
    with _lock:
        _suspended += 1
    # The calls this process made before may hold a tuned kernel under the
    # heuristic's call key: forgotten, so {} runs the heuristic's.
    _attention._forget_choices()
    device_scope = contextlib.nullcontext()
    if device == "cuda":
        import torch
        # The events must time the stream of q's device, where attention() launches.
        device_scope = torch.cuda.device(q.device)
    try:
        with device_scope:
            for opts in cands:
                trial = Trial(opts)
                trials.append(trial)
                res = _try(trial, q, k, v, call, ir, device, elt, return_lse, reference)
                if reference is None:
                    if trial.status != "ok":
                        raise FlashError(
                            "flash_mlir.tuning.tune: the heuristic's kernel for these shapes "
                            "could not run (%s: %s), so no candidate can be checked; build "
                            "it with flash_mlir.prebuild(..., tune=True) where the compiler is"
                            % (trial.status, trial.error))
                    reference = res
            # One kernel under several option sets (an option the heuristic
            # already chose, or one that changes nothing here) is timed once:
            # its copies could only win by noise.
            seen, timed, copies = {}, [], []
            for trial in trials:
                if trial.status != "ok":
                    continue
                ident = _kernel_identity(ir, device, trial.options)
                first = seen.get(ident) if ident is not None else None
                if first is not None:
                    trial.status = "same"
                    trial.error = "the kernel of %s" % (
                        _options_text(first.options) or "the heuristic")
                    copies.append((trial, first))
                    continue
                if ident is not None:
                    seen[ident] = trial
                timed.append(trial)
            times = _measure([lambda opts=t.options: _run(q, k, v, call, opts)
                              for t in timed], device, warmup, iters, repeats)
            for t, us in zip(timed, times):
                if isinstance(us, Exception):
                    t.status, t.error = "failed", _first_line(us)
                    if not t.options:  # the heuristic's: nothing to compare with
                        raise us
                else:
                    t.us = us
            for trial, first in copies:
                if first.status == "failed":
                    trial.status, trial.error = first.status, first.error
                trial.us = first.us
    finally:
        with _lock:
            _suspended -= 1
    base = trials[0]
    ok = [t for t in trials if t.status == "ok"]
    best = min(ok, key=lambda t: t.us)
    if best is not base and not best.us < base.us * (1.0 - MIN_GAIN):
        best = base
    result = TuneResult(dict(best.options), trials, chip, exact, klass)
    if record:
        entry = {"options": dict(best.options), "us": round(best.us, 3),
                 "heuristic_us": round(base.us, 3),
                 "tuned": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        result.recorded = _record(chip, device, exact, klass, entry)
    reload()
    return result
