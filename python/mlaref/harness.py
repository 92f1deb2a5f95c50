"""Your kernel in the report, from Python: the cells of a suite run through Python functions and
checked as `mlaref report --kernel` checks a command (docs/python.md, docs/report.md).

    def mine(inputs):                       # an mlaref.Inputs of the cell (torch)
        t = inputs.tensors()                # the contract's tensors, on Kernel.device
        return my_mla_decode(t["q"], ...)   # o, or (o, lse)

    s = mlaref.harness.report([mlaref.harness.Kernel("mine", mine, recipe="aiter-a8w8-ps")],
                              suite="edge", out="report", quick=True)
    assert s.passed, s.failed_cells

Each cell's inputs file is loaded with mlaref.load(path, framework="torch"); what the function
returns is written with mlaref.save_tensors where the C library asks, then checked against the
model of the recipe the kernel claims and the certified truth. A function that raises
mlaref.Unsupported, or a `supports` predicate that declines, skips the cell; any other exception
makes the cell an error with the exception's one line. The report is the command's: the same
summary.json, summary.md and index.html.
"""

import ctypes
import json
import os
import tempfile
from ctypes import byref, c_int, c_void_p
from typing import Callable, List, NamedTuple, Optional

import numpy as np

from . import _arrays, _lib
from ._lib import lib
from .errors import ComputeError, InputError
from .files import save_tensors
from .inputs import Inputs, load

SKIP = 77  # what a kernel returns to decline a cell (CTest's skip code, MLR_KERNEL_SKIP_CODE)


class Unsupported(Exception):
    """Raised by a kernel's function for a cell it cannot run: the cell is skipped (neither passed
    nor failed) with the exception's message as its reason."""


class Cell(NamedTuple):
    """What a `supports` predicate sees of a cell: its name and shape spec (the suite's), and
    the figures of its inputs."""

    name: str  # the suite's cell name, e.g. "bs3_kv1000"
    spec: str  # the shape spec, e.g. "bs=3,kv=1000,q=1,page=1,seed=4,dist=normal,fmt=e4m3"
    B: int  # batches
    T: int  # query tokens (B x q_len)
    H: int  # query heads
    q_len: int  # query tokens a batch (1 for plain decode, more for MTP)
    page_size: int  # tokens a page (1 without a page table)
    kv_format: str  # e4m3, e4m3fnuz or bf16
    q_format: str  # bf16, or e4m3 / e4m3fnuz for fp8 Q


class Kernel:
    """A kernel for harness.report.

    name: 1 to 63 of A-Z a-z 0-9 . _ - (its column is "kernel NAME"). fn(inputs) -> o or
    (o, lse): inputs an mlaref.Inputs of the cell (torch; inputs.tensors() on `device`); o
    [T,H,512] or [B,s_q,H,512], lse [T,H] or [B,H,s_q], torch tensors or numpy arrays of any
    float dtype on any device (float64 o is written as float32, the widest o the check reads).
    recipe: the numerics it claims (a built-in, fast-* or a recipe file); policy: its Q scale
    policy (fp8-Q recipes; None: the recipe's own); rules: rules besides fa3 and structure (a
    string or a list, e.g. "exact"); supports(cell) -> True, False or a reason string: False or a string
    skips the cell without calling fn. layout: "contract" (fn gets the Inputs) or "paged" (fn
    gets a Paged: q [B,s_q,H,576], kv_cache [P,page,1,576], block_table [B,max_pages] and
    seq_lens [B] int32, the scales and sm_scale, torch tensors on `device`: vLLM's and FlashMLA's
    layout; a cell whose batches have different q_len is skipped, that layout has no place for
    it)."""

    def __init__(self, name: str, fn: Callable, recipe: str, policy: Optional[str] = None,
                 device="cpu", supports: Optional[Callable] = None, rules=None,
                 layout: str = "contract"):
        if layout not in ("contract", "paged"):
            raise ValueError(f"Kernel {name!r}: layout = {layout!r} is not one of contract, paged")
        self.layout = layout
        if not callable(fn):
            raise TypeError(f"Kernel {name!r}: fn is not callable")
        if supports is not None and not callable(supports):
            raise TypeError(f"Kernel {name!r}: supports is not callable")
        self.name = str(name)
        self.fn = fn
        self.recipe = os.fspath(recipe) if isinstance(recipe, os.PathLike) else recipe
        self.policy = policy
        self.device = device
        self.supports = supports
        self.rules = [rules] if isinstance(rules, str) else list(rules or [])
        self.interrupt = None  # a KeyboardInterrupt or SystemExit caught in a call, re-raised

    def __repr__(self) -> str:
        return f"Kernel({self.name!r}, recipe={self.recipe!r}, device={self.device!r})"

    # ---- one cell, called from the C library ----

    def _cell(self, name: str, inputs: Inputs) -> Cell:
        spec = inputs.tensors("numpy")["__metadata__"].get("mlaref.shape", "")
        return Cell(name, spec, inputs.B, inputs.T, inputs.H, inputs.T // max(inputs.B, 1),
                    inputs.page_size, inputs.kv_format, inputs.q_format)

    def _run(self, name: str, inputs_path: str, out_path: str):
        """The cell: None when the output is written, else (code, reason)."""
        inputs = load(inputs_path, framework="torch")
        inputs.device = self.device
        if self.supports is not None:
            ok = self.supports(self._cell(name, inputs))
            if isinstance(ok, str) or not ok:
                return SKIP, ok if isinstance(ok, str) else "not supported (supports() said no)"
        result = self.fn(inputs if self.layout == "contract" else paged(inputs))
        if isinstance(result, (tuple, list)) and len(result) != 2:
            raise ValueError(f"fn returned {len(result)} values: o, or (o, lse)")
        o, lse = result if isinstance(result, (tuple, list)) else (result, None)
        tensors = {"o": _output(o, "o", wide=False)}
        if lse is not None:
            tensors["lse"] = _output(lse, "lse", wide=True)
        save_tensors(out_path, tensors)
        return None

    def _call(self, ctx, cell, inputs_path, out_path, reason, n) -> int:
        """The mlr_kernel_call: 0, SKIP or 1, the reason in the C buffer. Nothing may escape a
        ctypes callback, so every exception becomes the cell's verdict."""
        del ctx
        try:
            got = self._run(cell.decode(), os.fsdecode(inputs_path), os.fsdecode(out_path))
            if got is None:
                return 0
            code, why = got
        except Unsupported as e:
            code, why = SKIP, str(e) or "Unsupported"
        except Exception as e:  # the cell's error, with the exception's one line
            code, why = 1, f"{type(e).__name__}: {e}"
        except BaseException as e:  # Ctrl-C: this cell errs, the report re-raises it at the end
            self.interrupt = self.interrupt or e
            code, why = 1, f"{type(e).__name__}: interrupted"
        raw = " ".join(str(why).split()).encode("utf-8", "replace")[:max(int(n) - 1, 0)]
        ctypes.memmove(reason, raw + b"\0", len(raw) + 1)
        return code


class Paged(NamedTuple):
    """A cell's inputs in the paged layout (Kernel(layout="paged")): torch tensors on the
    kernel's device; the KV pages as the contract holds them, the block table padded with 0."""

    q: object  # [B, s_q, H, 576]: bf16, or fp8 codes with q_scale
    kv_cache: object  # [P, page, 1, 576]: fp8 codes (uint8 or a float8 type) or bf16
    block_table: object  # [B, max_pages] int32
    seq_lens: object  # [B] int32
    kv_format: str
    kv_scale: float
    k_scale: Optional[float]
    v_scale: Optional[float]
    kpe_scale: Optional[float]
    q_scale: Optional[float]
    sm_scale: float
    causal: bool


def paged(inputs: Inputs) -> Paged:
    """inputs (mlaref.Inputs) in the paged layout; Unsupported for ragged q_len."""
    import torch

    t = inputs.tensors("torch", device="cpu")
    qo, ip = t["qo_indptr"].tolist(), t["kv_indptr"].tolist()
    B, page = len(qo) - 1, inputs.page_size
    sq = {qo[b + 1] - qo[b] for b in range(B)}
    if len(sq) != 1:
        raise Unsupported("batches with different q_len: the paged layout has one s_q")
    s = sq.pop()
    if "kv_indices" in t:  # pages of the page table, their lengths from kv_last_page_len
        idx, last = t["kv_indices"].tolist(), t["kv_last_page_len"].tolist()
        rows = [idx[ip[b]:ip[b + 1]] for b in range(B)]
        lens = [(len(r) - 1) * page + last[b] if r else 0 for b, r in enumerate(rows)]
    else:  # token ranges: page size 1, a row a token
        rows = [list(range(ip[b], ip[b + 1])) for b in range(B)]
        lens = [len(r) for r in rows]
    table = torch.zeros((B, max([len(r) for r in rows] + [1])), dtype=torch.int32)
    for b, r in enumerate(rows):
        table[b, :len(r)] = torch.tensor(r, dtype=torch.int32)
    kv = t["kv"]
    one = lambda name: float(t[name].reshape(-1)[0]) if name in t else None  # noqa: E731
    dev = inputs.device
    return Paged(q=t["q"].reshape(B, s, inputs.H, 576).to(dev),
                 kv_cache=kv.reshape(kv.shape[0] // page, page, 1, 576).to(dev),
                 block_table=table.to(dev), seq_lens=torch.tensor(lens, dtype=torch.int32).to(dev),
                 kv_format=inputs.kv_format, kv_scale=one("kv_scale"), k_scale=one("k_scale"),
                 v_scale=one("v_scale"), kpe_scale=one("kpe_scale"), q_scale=one("q_scale"),
                 sm_scale=one("sm_scale") or 1.0 / 24.0,
                 causal=bool(int(t["causal"].reshape(-1)[0])) if "causal" in t else True)


def _output(x, name: str, wide: bool):
    """A returned o or lse as a host array the check reads: floats only; float64 o as float32
    (o is BF16, F16 or F32 in the check), float64 lse as it is."""
    if _arrays.is_torch(x):
        x = x.detach().cpu()
        if not x.is_floating_point():
            raise TypeError(f"{name} is {x.dtype}, not a float tensor")
        if x.dtype not in _torch_keep(wide):
            x = x.float()
        return x.contiguous()
    a = np.asarray(x)
    if a.dtype.kind != "f":
        raise TypeError(f"{name} is {a.dtype}, not a float array")
    if a.dtype not in ((np.float16, np.float32, np.float64) if wide else (np.float16, np.float32)):
        a = a.astype(np.float32)
    return np.ascontiguousarray(a)


def _torch_keep(wide: bool) -> tuple:
    """The torch dtypes written as they are (o: bf16, fp16, fp32; lse: fp32, fp64)."""
    torch = _arrays.torch_module()
    if wide:
        return (torch.float32, torch.float64)
    return (torch.bfloat16, torch.float16, torch.float32)


class CellResult(NamedTuple):
    """One cell of the report: kernel (None for a recipe's column), shape (the cell's name),
    verdict ("pass", "fail", "error", "skipped" or "n/a"), reason (why, for anything but a pass),
    rules (a kernel's: dicts of tensor, rule, verdict, measured, limit) and recipe."""

    kernel: Optional[str]
    shape: str
    verdict: str
    reason: str
    rules: list
    recipe: str


def _cell_result(c: dict) -> CellResult:
    k = c.get("kernel")
    if not c["applicable"]:
        return CellResult(k and k["name"], c["shape"], "n/a", c.get("reason", ""), [],
                          c["recipe"])
    if k:
        return CellResult(k["name"], c["shape"], k["verdict"], k["reason"], k["rules"],
                          c["recipe"])
    return CellResult(None, c["shape"], "pass" if c["pass"] else "fail", "", [], c["recipe"])


class Summary:
    """The report harness.report wrote: exit_code (the command's: 0 clean, 1 a failing cell or a
    regression), passed (exit_code == 0), cells (CellResult each, in summary.json's order),
    failed_cells (those failed or in error), skipped_cells, regressions (lines), path (its
    summary.json) and data (summary.json as read)."""

    def __init__(self, exit_code: int, path: str):
        self.exit_code = exit_code
        self.path = path
        with open(path, encoding="utf-8") as f:
            self.data = json.load(f)
        self.cells: List[CellResult] = [_cell_result(c) for c in self.data["cells"]]
        self.failed_cells = [c for c in self.cells if c.verdict in ("fail", "error")]
        self.skipped_cells = [c for c in self.cells if c.verdict == "skipped"]
        self.regressions: List[str] = list(self.data["regressions"])

    @property
    def passed(self) -> bool:
        """No failing cell and no regression: the command would exit 0."""
        return self.exit_code == 0

    def __repr__(self) -> str:
        return (f"<mlaref.harness.Summary {'pass' if self.passed else 'FAIL'}: "
                f"{len(self.cells)} cells, {len(self.failed_cells)} failed, "
                f"{len(self.skipped_cells)} skipped, {len(self.regressions)} regressions; "
                f"{self.path}>")


def _kernel_handle(k: Kernel, keep: list):
    """The C kernel of k (freed by the caller), its callback kept alive in keep."""
    if not isinstance(k, Kernel):
        raise TypeError(f"kernels: expected mlaref.harness.Kernel, got {type(k).__name__}")
    call = _lib.KERNEL_CALL(k._call)
    keep.append(call)
    h = _lib.KERNEL()
    e = _lib.err()
    st = lib.mlr_api_kernel_new(k.name.encode(), os.fsencode(k.recipe),
                                k.policy.encode() if k.policy else None,
                                "\n".join(k.rules).encode(), call, None, byref(h), e)
    _lib.raise_for(st, e)
    return h


def report(kernels, suite: str = "edge", out=None, recipes=None, baseline=None,
           quick: bool = False, threads: int = 0) -> Summary:
    """`mlaref report --suite SUITE --out OUT` with these kernels (a Kernel or a list, at most
    16) as its kernel columns, written as the command writes it; the Summary back.

    out: the folder (made when missing; None: a new one under $TMPDIR). recipes: None for every
    built-in recipe's column (the command's default), a list of names, or "none" / [] for the
    kernels alone. baseline: an older summary.json (regressions against it fail the run). quick:
    the suite's first six small cells, as --quick. threads: OpenMP threads, 0 for all. Bad input
    (an unknown suite or recipe, a bad baseline, no gnuplot) raises InputError and writes nothing.
    """
    kernels = [kernels] if isinstance(kernels, Kernel) else list(kernels)
    if recipes is None:
        recipe_text = None
    elif isinstance(recipes, str):
        recipe_text = recipes
    else:
        recipe_text = "\n".join(recipes) if recipes else "none"
    made = out is None or not os.path.exists(out)
    if out is None:
        out = tempfile.mkdtemp(prefix="mlaref-report-")
    out = os.fspath(out)
    os.makedirs(out, exist_ok=True)
    try:
        return _report(kernels, suite, out, recipe_text, baseline, quick, threads)
    except InputError:
        if made:  # bad input writes nothing: the folder made for it goes (it is empty)
            try:
                os.rmdir(out)
            except OSError:
                pass
        raise


def _report(kernels, suite, out, recipe_text, baseline, quick, threads) -> Summary:
    """report's call of the library, once out exists."""
    keep, handles = [], []
    try:
        for k in kernels:
            k.interrupt = None
            handles.append(_kernel_handle(k, keep))
        arr = (_lib.KERNEL * max(len(handles), 1))(*handles)
        code, path = c_int(2), c_void_p()
        e = _lib.err()
        st = lib.mlr_api_report(str(suite).encode(), os.fsencode(out),
                                recipe_text.encode() if recipe_text is not None else None, arr,
                                len(handles), os.fsencode(baseline) if baseline else None,
                                int(bool(quick)), _lib.threads(threads), byref(code), byref(path),
                                e)
        summary_path = _lib.take_string(path.value)
    finally:
        for h in handles:
            lib.mlr_api_kernel_free(h)
    for k in kernels:
        if k.interrupt is not None:
            raise k.interrupt
    if st != _lib.OK:
        raise (InputError if code.value == 2 else ComputeError)(e.text())
    return Summary(code.value, summary_path)
