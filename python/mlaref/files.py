"""Tensors to and from .safetensors files through the C library's reader and writer (no
safetensors package needed): a kernel's output for `mlaref check --output`, or any tensors."""

import ctypes
import os
from ctypes import byref
from typing import Optional

import numpy as np

from . import _arrays, _lib
from ._lib import lib
from .errors import InputError
from .inputs import _file_dict, _spelling


def save_tensors(path, tensors: dict, metadata: Optional[dict] = None) -> None:
    """Write tensors (name -> numpy array or torch tensor) and string metadata as .safetensors,
    atomically. Types as everywhere in mlaref: torch.bfloat16 and numpy uint16 are written as
    BF16, float8_e4m3fn as F8_E4M3, FNUZ fp8 types as U8 with their format in metadata
    mlaref.format.<name>."""
    meta = dict(metadata or {})
    tf = lib.mlr_api_tf_new()
    if not tf:
        raise MemoryError("mlaref: out of memory for a tensor file")
    keep = []
    try:
        for name, x in tensors.items():
            h = _arrays.host(x, name, os.fspath(path))
            keep.append(h.array)
            if h.variant:
                meta.setdefault(f"mlaref.format.{name}", h.variant)
            shape = (ctypes.c_int64 * max(h.array.ndim, 1))(*h.array.shape)
            if lib.mlr_tf_borrow(tf, name.encode(), h.dtype, h.array.ndim, shape,
                                 h.array.ctypes.data, None) != _lib.OK:
                raise ValueError(f"{os.fspath(path)}: tensor '{name}' cannot be held (a duplicate "
                                 "name, a name of 128 bytes or more, or more than 8 dimensions)")
        for k, v in meta.items():
            if lib.mlr_tf_set_meta(tf, str(k).encode(), str(v).encode()) != _lib.OK:
                raise MemoryError("mlaref: out of memory for metadata")
        e = _lib.err()
        _lib.raise_for(lib.mlr_safetensors_write(os.fsencode(path), tf, e), e)
    finally:
        lib.mlr_api_tf_delete(tf)


class _File:
    """Owns a tensor file read by the library; arrays over its memory keep it alive."""

    def __init__(self, tf):
        self.tf = tf

    def __del__(self):
        if self.tf:
            lib.mlr_api_tf_delete(self.tf)
            self.tf = None


def read_tensors(path, framework: str = "numpy") -> dict:
    """The tensors of a .safetensors file (name -> numpy array or torch tensor, over the file's
    memory as read) and its metadata under "__metadata__"."""
    tf = _lib.TF()
    e = _lib.err()
    _lib.raise_for(lib.mlr_api_tf_read(os.fsencode(path), byref(tf), e), e)
    owner = _File(tf)
    return _file_dict(tf, framework, owner)


def _format_name(fmt: str, what: str) -> str:
    """fmt in mlaref's spelling, as Inputs takes it (inputs._spelling)."""
    f = _spelling(fmt) if isinstance(fmt, str) else None
    if f not in _lib.FORMAT_NAMES:
        raise InputError(f"{what}: fmt = {fmt!r} is not one of {', '.join(_lib.FORMAT_NAMES)} "
                         "(or e4m3fn, bfloat16), in any case")
    return f


def decode(codes, fmt: str):
    """The values of fp8, bf16 or fp16 codes as float32, by mlaref's decoder (what the model and
    the truth read): codes a uint8 array or tensor (fp8), uint16 (bf16 or fp16 bits) or a torch
    float8 / bfloat16 tensor; fmt one of e4m3, e4m3fnuz, e5m2, e5m2fnuz, bf16, fp16. Returns the
    caller's type (numpy float32, or a CPU torch float32 tensor) of the codes' shape."""
    fmt = _format_name(fmt, "decode")
    f = _lib.FORMAT_NAMES.index(fmt)
    h = _arrays.host(codes, "codes", "decode")
    want = 1 if fmt.startswith("e") else 2
    if h.array.dtype.itemsize != want:
        raise InputError(f"decode: {fmt} codes are {want}-byte: got {h.type_name}")
    out = np.empty(h.array.shape, dtype=np.float32)
    st = lib.mlr_decode_array(out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                              h.array.ctypes.data, h.array.size, f)
    if st != _lib.OK:
        raise InputError(f"decode: the library refused format {fmt}")
    if _arrays.framework_of((codes,)) == "torch":
        return _arrays.torch_module().from_numpy(out)
    return out


# the value types encode reads: float32 and float64 as they are, 16-bit floats widened (exact)
_WIDE = {_lib.F32: np.float32, _lib.F64: np.float64}


def encode(values, fmt: str, rounding: str = "rne", overflow: str = "sat"):
    """The codes of values in fmt (e4m3, e4m3fnuz, e5m2, e5m2fnuz, bf16, fp16) by mlaref's encoder,
    the one its quantizers use: rounding rne (to nearest, ties to even) or rtz (toward zero),
    overflow sat (to +-max; also Inf), nonsat (to Inf, or NaN where the format has none) or legacy
    (as nonsat, |x| > max tested before rounding). values: float32 or float64, or bfloat16 /
    float16 (widened exactly first; a numpy uint16 array is bf16 bits, as everywhere in mlaref),
    numpy or torch, any shape. Returns the codes in the caller's
    type: fp8 as uint8 (numpy or torch: what Inputs takes with kv_format, and PyTorch 1.x has no
    float8 types), bf16 and fp16 as numpy uint16 bits, or torch.bfloat16 / torch.float16."""
    fmt = _format_name(fmt, "encode")
    f = _lib.FORMAT_NAMES.index(fmt)
    for name, v, valid in (("rounding", rounding, _lib.ROUNDING_NAMES),
                           ("overflow", overflow, _lib.OVERFLOW_NAMES)):
        if v not in valid:
            raise InputError(f"encode: {name} = {v!r} is not one of {', '.join(valid)}")
    h = _arrays.host(values, "values", "encode")
    a = h.array
    if h.dtype in (_lib.BF16, _lib.F16):
        a = decode(a, "bf16") if h.dtype == _lib.BF16 else a.astype(np.float32)
    elif h.dtype not in _WIDE:
        raise InputError(f"encode: values are {h.type_name}: encode reads float32, float64, "
                         "bfloat16 or float16")
    shape = h.array.shape  # a 0-d value stays 0-d
    a = np.ascontiguousarray(a, dtype=_WIDE.get(h.dtype, np.float32)).reshape(-1)
    codes = np.empty(shape, dtype=np.uint8 if fmt.startswith("e") else np.uint16)
    opts = _lib.CvtOpts(f, _lib.ROUNDING_NAMES.index(rounding), _lib.OVERFLOW_NAMES.index(overflow))
    fn = lib.mlr_encode_f64_array if a.dtype == np.float64 else lib.mlr_encode_f32_array
    ctype = ctypes.c_double if a.dtype == np.float64 else ctypes.c_float
    st = fn(codes.ctypes.data, a.ctypes.data_as(ctypes.POINTER(ctype)), a.size, byref(opts), None)
    if st != _lib.OK:
        raise InputError(f"encode: the library refused {fmt}, {rounding}, {overflow}")
    if _arrays.framework_of((values,)) != "torch":
        return codes
    torch = _arrays.torch_module()
    if fmt == "bf16":
        return torch.from_numpy(codes.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(codes.view(np.float16) if fmt == "fp16" else codes)
