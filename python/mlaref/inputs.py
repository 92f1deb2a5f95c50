"""mlaref.Inputs: MLA decode inputs in the layouts kernels take, checked by the C library.

The tensors are handed to the C library under the names of the input layouts (docs/inputs.md,
docs/python.md) and mlr_inputs_from turns them into the contract's layout and checks them: every
problem it finds comes back as an InputError with its one line. Only what C cannot see is
checked here (a type C has no name for, the format of fp8 codes held as uint8, a page size that
disagrees with the cache's shape).
"""

import ctypes
import os
from ctypes import byref, c_char_p
from typing import List, Optional, Tuple

import numpy as np

from . import _arrays, _lib
from ._lib import lib
from .errors import InputError

_ALIASES = {"e4m3fn": "e4m3", "bfloat16": "bf16"}  # no "fp8": OCP on NVIDIA, FNUZ on MI300
_FORMATS = ("e4m3", "e4m3fnuz", "bf16")
# an fp8 torch type (by its mlr dtype and metadata variant) -> the format it holds
_TYPE_FORMAT = {(_lib.F8_E4M3, None): "e4m3", (_lib.U8, "e4m3fnuz"): "e4m3fnuz",
                (_lib.F8_E5M2, None): "e5m2", (_lib.U8, "e5m2fnuz"): "e5m2fnuz",
                (_lib.BF16, None): "bf16"}


def _spelling(fmt: str) -> str:
    """A format name in mlaref's spelling: any case, torch's e4m3fn and bfloat16 as aliases."""
    f = fmt.strip().lower()
    return _ALIASES.get(f, f)


def _format_name(fmt: Optional[str], arg: str, label: str) -> Optional[str]:
    """A format argument in mlaref's spelling (e4m3, e4m3fnuz, bf16, ...)."""
    if fmt is None:
        return None
    if not isinstance(fmt, str):
        raise InputError(f"{label}: {arg} = {fmt!r} is not a format name (e4m3, e4m3fnuz, bf16)")
    f = _spelling(fmt)
    if f not in _FORMATS:
        raise InputError(f"{label}: {arg} = {fmt!r} is not one of e4m3 (or e4m3fn), e4m3fnuz, "
                         "bf16 (or bfloat16), in any case")
    return f


class _Builder:
    """The tensors and metadata handed to mlr_inputs_from, in the caller's order."""

    def __init__(self, label: str):
        self.label = label
        self.tensors = []  # (name, Host)
        self.meta = {}
        self.q4 = None  # (B, s_q) of a 4-D q
        self.framework = "numpy"

    def file(self):
        """A new C tensor file borrowing the tensors (no copy), with the metadata; the caller
        deletes it (mlr_api_tf_delete) and keeps the arrays alive meanwhile."""
        tf = lib.mlr_api_tf_new()
        if not tf:
            raise MemoryError("mlaref: out of memory for a tensor file")
        try:
            for name, h in self.tensors:
                shape = (ctypes.c_int64 * max(h.array.ndim, 1))(*h.array.shape)
                st = lib.mlr_tf_borrow(tf, name.encode(), h.dtype, h.array.ndim, shape,
                                       h.array.ctypes.data, None)
                if st != _lib.OK:
                    raise InputError(f"{self.label}: tensor '{name}': shape "
                                     f"{list(h.array.shape)} cannot be held (more than 8 "
                                     "dimensions, or too large)")
            for k, v in self.meta.items():
                if lib.mlr_tf_set_meta(tf, k.encode(), v.encode()) != _lib.OK:
                    raise MemoryError("mlaref: out of memory for metadata")
        except BaseException:
            lib.mlr_api_tf_delete(tf)
            raise
        return tf

    def add(self, name: str, x, arg: Optional[str] = None) -> Optional[_arrays.Host]:
        """x under the tensor name `name` (arg: the caller's argument, for messages)."""
        if x is None:
            return None
        h = _arrays.host(x, arg or name, self.label)
        self.tensors.append((name, h))
        return h

    def scalar(self, name: str, x, np_dtype) -> None:
        """A scale or flag as a [1] tensor of np_dtype (numbers and one-element arrays)."""
        if x is None:
            return
        if _arrays.is_torch(x):
            x = x.detach().cpu()
            x = (x.double() if x.is_floating_point() else x).numpy()
        a = np.asarray(x)
        if a.dtype == np.bool_ or a.dtype.kind in "iuf":
            a = a.astype(np_dtype).reshape(-1)
        self.add(name, a)

    def fp8(self, name: str, h: Optional[_arrays.Host], fmt: Optional[str], arg: str,
            fmt_arg: str, valid: str) -> None:
        """The format of fp8 codes (uint8 with fmt) and the check of fmt against the type."""
        if h is None:
            return
        if h.dtype == _lib.U8 and h.variant is None:  # uint8 codes: the format must be named
            if fmt is None:
                raise InputError(f"{self.label}: {arg} is uint8: {fmt_arg} ({valid}) is required")
            if fmt == "bf16":
                raise InputError(
                    f"{self.label}: {arg} is uint8 but {fmt_arg} is bf16: a bf16 {arg} is "
                    "torch.bfloat16 or numpy uint16 (the bits)")
            if fmt in ("e4m3", "e5m2"):  # OCP fp8 has safetensors dtypes of its own
                idx = [n for n, _ in self.tensors].index(name)
                self.tensors[idx] = (name, h._replace(
                    dtype=_lib.F8_E4M3 if fmt == "e4m3" else _lib.F8_E5M2))
            else:
                self.meta[f"mlaref.format.{name}"] = fmt
            return
        have = _TYPE_FORMAT.get((h.dtype, h.variant))
        if h.variant is not None:
            self.meta[f"mlaref.format.{name}"] = h.variant
        if fmt is not None and have is not None and fmt != have:
            raise InputError(f"{self.label}: {fmt_arg} is {fmt} but {arg} is {h.type_name} "
                             f"({have})")


def _build(label, q=None, q_nope=None, q_pe=None, kv_cache=None, kv_format=None, kv_scale=1.0,
           k_scale=None, v_scale=None, kpe_scale=None, q_scale=None, sm_scale=None, causal=None,
           seq_lens=None, block_table=None, page_size=None, kv_indptr=None, kv_indices=None,
           req_to_token=None, qo_indptr=None, q_format=None, kv_last_page_len=None,
           kv_bf16=None) -> _Builder:
    """The tensors and metadata Inputs hands to the library, under the layouts' names."""
    b = _Builder(label)
    b.framework = _arrays.framework_of(
        (q, q_nope, q_pe, kv_cache, kv_scale, k_scale, v_scale, kpe_scale, q_scale, sm_scale,
         seq_lens, block_table, kv_indptr, kv_indices, req_to_token, qo_indptr,
         kv_last_page_len, kv_bf16))
    kv_format = _format_name(kv_format, "kv_format", label)
    q_format = _format_name(q_format, "q_format", label)
    hq = b.add("q", q)
    hn = b.add("q_nope", q_nope)
    hp = b.add("q_pe", q_pe)
    for name, h in (("q", hq), ("q_nope", hn), ("q_pe", hp)):
        b.fp8(name, h, q_format, name, "q_format", "e4m3 or e4m3fnuz")
    hk = b.add("kv", kv_cache, "kv_cache")
    b.fp8("kv", hk, kv_format, "kv_cache", "kv_format", "e4m3 or e4m3fnuz")
    b.add("kv_bf16", kv_bf16)
    for name, x in (("kv_scale", kv_scale), ("k_scale", k_scale), ("v_scale", v_scale),
                    ("kpe_scale", kpe_scale), ("q_scale", q_scale)):
        b.scalar(name, x, np.float32)
    b.scalar("sm_scale", sm_scale, np.float64)
    if causal is not None:
        if not isinstance(causal, (bool, int, np.integer)) or int(causal) not in (0, 1):
            raise InputError(f"{label}: causal = {causal!r} must be True or False (1 or 0)")
        b.scalar("causal", int(causal), np.int32)
    for name, x in (("seq_lens", seq_lens), ("block_table", block_table),
                    ("kv_indptr", kv_indptr), ("kv_indices", kv_indices),
                    ("req_to_token", req_to_token), ("qo_indptr", qo_indptr),
                    ("kv_last_page_len", kv_last_page_len)):
        b.add(name, x)
    page = _page_size(hk, page_size, label)
    if page is not None:
        b.meta["mlaref.page_size"] = str(page)
    qlead = hq or hn
    if qlead is not None and qlead.array.ndim == 4:
        b.q4 = (int(qlead.array.shape[0]), int(qlead.array.shape[1]))
    return b


def write_inputs(path, **kwargs) -> None:
    """Write the tensors Inputs(**kwargs) would hand to the library, as given (any layout) and
    unchecked, to a .safetensors file: the command reads the same inputs from it
    (`mlaref check --inputs PATH`, `mlaref inputs check PATH`) and checks them then."""
    b = _build(os.fspath(path), **kwargs)
    tf = b.file()
    try:
        e = _lib.err()
        _lib.raise_for(lib.mlr_safetensors_write(os.fsencode(path), tf, e), e)
    finally:
        lib.mlr_api_tf_delete(tf)


class Inputs:
    """MLA decode inputs, checked by the C library on construction (docs/python.md).

    q [T,H,576] or [B,s_q,H,576] (or q_nope [..,512] and q_pe [..,64]): bf16, or fp8 codes
    with q_scale. kv_cache [N,576], [N,1,576], [P,page,576] or [P,page,1,576]: fp8 codes or bf16.
    Pages through block_table + seq_lens, req_to_token + seq_lens, kv_indptr + kv_indices, or
    none (each batch's tokens in turn). Every problem raises InputError with the library's line.
    """

    def __init__(self, q=None, q_nope=None, q_pe=None, kv_cache=None, kv_format=None,
                 kv_scale=1.0, k_scale=None, v_scale=None, kpe_scale=None, q_scale=None,
                 sm_scale=None, causal=None, seq_lens=None, block_table=None, page_size=None,
                 kv_indptr=None, kv_indices=None, req_to_token=None, qo_indptr=None, *,
                 q_format=None, kv_last_page_len=None, kv_bf16=None, allow_nonfinite=False,
                 label="inputs"):
        self._h = None
        b = _build(label, q=q, q_nope=q_nope, q_pe=q_pe, kv_cache=kv_cache, kv_format=kv_format,
                   kv_scale=kv_scale, k_scale=k_scale, v_scale=v_scale, kpe_scale=kpe_scale,
                   q_scale=q_scale, sm_scale=sm_scale, causal=causal, seq_lens=seq_lens,
                   block_table=block_table, page_size=page_size, kv_indptr=kv_indptr,
                   kv_indices=kv_indices, req_to_token=req_to_token, qo_indptr=qo_indptr,
                   q_format=q_format, kv_last_page_len=kv_last_page_len, kv_bf16=kv_bf16)
        self._q4 = b.q4
        self._keep = [h.array for _, h in b.tensors]
        tf = b.file()
        try:
            h = _lib.INPUTS()
            e = _lib.err()
            st = lib.mlr_api_inputs_from(tf, label.encode(), int(bool(allow_nonfinite)),
                                         byref(h), e)
            _lib.raise_for(st, e)
            self._h = h
        finally:
            lib.mlr_api_tf_delete(tf)
        self.framework = b.framework
        self.device = None

    @classmethod
    def _wrap(cls, h, framework: str) -> "Inputs":
        """Inputs over a handle the library made (load, gen)."""
        self = cls.__new__(cls)
        self._h = h
        self._q4 = None
        self._keep = []
        self.framework = framework
        self.device = None
        return self

    def __del__(self):
        h = getattr(self, "_h", None)
        if h:
            lib.mlr_api_inputs_free(h)
            self._h = None

    # ---- what the library made of them ----

    def _info(self, what: str) -> int:
        return int(lib.mlr_api_inputs_info(self._h, what.encode()))

    @property
    def T(self) -> int:
        """Query tokens."""
        return self._info("T")

    @property
    def H(self) -> int:
        """Query heads."""
        return self._info("H")

    @property
    def B(self) -> int:
        """Batches."""
        return self._info("B")

    @property
    def N(self) -> int:
        """KV rows of the contract's cache."""
        return self._info("N")

    @property
    def page_size(self) -> int:
        """Tokens a page (1 without a page table)."""
        return self._info("page")

    @property
    def kv_format(self) -> str:
        """The KV cache's format: e4m3, e4m3fnuz or bf16."""
        return _lib.FORMAT_NAMES[self._info("kv_format")]

    @property
    def q_format(self) -> str:
        """Q's format: bf16, or e4m3 / e4m3fnuz for fp8 Q."""
        return _lib.FORMAT_NAMES[self._info("q_format")]

    @property
    def label(self) -> str:
        """What names the inputs in messages (a file name, a shape spec, or the label given)."""
        return lib.mlr_api_inputs_label(self._h).decode()

    def address(self, name: str) -> int:
        """Where the library reads tensor `name` from ("q", "kv", "qo_indptr", "kv_indptr",
        "kv_indices", "kv_last_page_len", "kv_bf16"): 0 when absent. Equal to the caller's
        buffer when it was not copied."""
        return lib.mlr_api_inputs_ptr(self._h, name.encode()) or 0

    def tensors(self, framework: Optional[str] = None, device=None) -> dict:
        """The tensors in the contract's layout (views, no copies) as numpy arrays or torch
        tensors (default: the framework the inputs came in), with their metadata under
        "__metadata__". device (default: the attribute ``device``, which mlaref.harness sets to
        its Kernel's) copies torch tensors to that torch device; None or "cpu" leaves them."""
        out = _file_dict(lib.mlr_api_inputs_contract(self._h), framework or self.framework, self)
        device = device if device is not None else getattr(self, "device", None)
        if device is None or str(device) == "cpu" or (framework or self.framework) != "torch":
            return out
        return {k: (v if k == "__metadata__" else v.to(device)) for k, v in out.items()}

    def save(self, path) -> None:
        """Write the inputs in the contract's layout (.safetensors, atomically): what
        `mlaref check --inputs` and every other command read."""
        e = _lib.err()
        _lib.raise_for(lib.mlr_api_inputs_save(self._h, os.fsencode(path), e), e)

    # ---- outputs in the caller's layout ----

    def _layout(self, o: np.ndarray, lse: np.ndarray):
        """o [T,H,512] and lse [T,H] in the layout of q: [B,s_q,H,512] and [B,H,s_q] for a 4-D q
        (FlashMLA's), else as they are."""
        if self._q4 is None:
            return o, lse
        b, s = self._q4
        h = self.H
        o = o.reshape(b, s, h, o.shape[-1])
        lse = np.ascontiguousarray(lse.reshape(b, s, h).transpose(0, 2, 1))
        return o, lse

    def __repr__(self) -> str:
        if not self._h:
            return "Inputs(<closed>)"
        return (f"Inputs(T={self.T}, H={self.H}, B={self.B}, kv rows={self.N}, "
                f"page={self.page_size}, kv={self.kv_format}, q={self.q_format}, "
                f"label={self.label!r})")


def _page_size(hk: Optional[_arrays.Host], page_size, label: str) -> Optional[int]:
    """The page size to record: as given, checked against a paged cache's second dimension, or
    that dimension ([P,page,576], [P,page,1,576])."""
    paged = hk is not None and (hk.array.ndim == 4 or
                                (hk.array.ndim == 3 and hk.array.shape[1] != 1))
    dim = int(hk.array.shape[1]) if paged else None
    if page_size is None:
        return dim
    try:
        page = int(page_size)
    except (TypeError, ValueError):
        raise InputError(f"{label}: page_size = {page_size!r} is not an integer") from None
    if dim is not None and page != dim:
        shape = ",".join(str(d) for d in hk.array.shape)
        raise InputError(f"{label}: page_size is {page} but kv_cache [{shape}] has pages of "
                         f"{dim} tokens (its second dimension)")
    return page


def _file_dict(tf, framework: str, owner) -> dict:
    """The tensors of a C tensor file as arrays over its memory, and its metadata."""
    out = {}
    meta = {}
    for i in range(lib.mlr_api_tf_meta_count(tf)):
        meta[lib.mlr_api_tf_meta_key(tf, i).decode()] = lib.mlr_api_tf_meta_value(tf, i).decode()
    for i in range(lib.mlr_api_tf_count(tf)):
        t = lib.mlr_api_tf_tensor(tf, i)
        name = lib.mlr_api_tensor_name(t).decode()
        dtype = lib.mlr_api_tensor_dtype(t)
        shape = tuple(lib.mlr_api_tensor_dim(t, k) for k in range(lib.mlr_api_tensor_ndim(t)))
        a = _arrays.numpy_over(lib.mlr_api_tensor_data(t) or 0, lib.mlr_api_tensor_nbytes(t),
                               _arrays.NUMPY_OF[dtype], shape, owner)
        out[name] = _arrays.convert(a, dtype, framework, meta.get(f"mlaref.format.{name}"))
    out["__metadata__"] = meta
    return out


def load(path, framework: str = "numpy", allow_nonfinite: bool = False) -> Inputs:
    """The inputs of a .safetensors file, in any layout the library takes (docs/python.md);
    framework says what run, truth and tensors() return: "numpy" or "torch"."""
    h = _lib.INPUTS()
    e = _lib.err()
    st = lib.mlr_api_inputs_load(os.fsencode(path), int(bool(allow_nonfinite)), byref(h), e)
    _lib.raise_for(st, e)
    return Inputs._wrap(h, _check_framework(framework))


def gen(spec: str, framework: str = "numpy", threads: int = 0) -> Inputs:
    """The inputs `mlaref gen --shape SPEC` writes, bit for bit, e.g. "bs=2,kv=100,q=2,seed=1"
    (fixtures/gen: bs, kv or lens, q, heads, page, seed, dist, fmt, bf16kv; the probes' needle,
    kscale, vscale, qscale, sm, spare)."""
    h = _lib.INPUTS()
    e = _lib.err()
    st = lib.mlr_api_inputs_gen(str(spec).encode(), _lib.threads(threads), byref(h), e)
    _lib.raise_for(st, e)
    return Inputs._wrap(h, _check_framework(framework))


def suite(name: str) -> List[Tuple[str, str]]:
    """The cells of a suite as (name, spec) pairs, e.g. suite("probe"): the specs go to gen().
    An unknown suite raises InputError naming the valid ones."""
    cells = []
    spec = c_char_p()
    while True:
        cell = lib.mlr_api_suite_cell(str(name).encode(), len(cells), byref(spec))
        if cell is None:
            break
        cells.append((cell.decode(), spec.value.decode()))
    if not cells:
        valid = lib.mlr_api_suite_names().decode()
        raise InputError(f"suite '{name}' is not a suite (valid: {valid})")
    return cells


def _check_framework(framework: str) -> str:
    if framework not in ("numpy", "torch"):
        raise ValueError(f"framework = {framework!r}: 'numpy' or 'torch'")
    return framework
