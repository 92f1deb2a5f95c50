"""numpy arrays and torch tensors as the C library sees them, and back.

A tensor goes to C as a C-contiguous host buffer with a safetensors dtype (fixtures/io): a
contiguous CPU array is passed by its own pointer, never copied; a non-contiguous one is made
contiguous once, a GPU tensor is copied to the host once. numpy has no bf16 or fp8 types: a numpy
uint16 array is bf16 bits, a uint8 array fp8 codes (whose format the caller names). The float8
and bfloat16 types of ml_dtypes are recognised by name where they are installed.
"""

import ctypes
import sys
from typing import NamedTuple, Optional

import numpy as np

from . import _lib
from .errors import InputError

# numpy dtype name -> (mlr dtype, fp8 variant recorded in metadata, numpy view for the buffer)
_NUMPY = {
    "uint16": (_lib.BF16, None, None),
    "bfloat16": (_lib.BF16, None, np.uint16),
    "float16": (_lib.F16, None, None),
    "float32": (_lib.F32, None, None),
    "float64": (_lib.F64, None, None),
    "int32": (_lib.I32, None, None),
    "int64": (_lib.I64, None, None),
    "uint8": (_lib.U8, None, None),
    "float8_e4m3fn": (_lib.F8_E4M3, None, np.uint8),
    "float8_e5m2": (_lib.F8_E5M2, None, np.uint8),
    "float8_e4m3fnuz": (_lib.U8, "e4m3fnuz", np.uint8),
    "float8_e5m2fnuz": (_lib.U8, "e5m2fnuz", np.uint8),
}

# torch dtype name -> (mlr dtype, fp8 variant, torch dtype name to view the buffer as)
_TORCH = {
    "bfloat16": (_lib.BF16, None, "int16"),
    "float16": (_lib.F16, None, None),
    "float32": (_lib.F32, None, None),
    "float64": (_lib.F64, None, None),
    "int32": (_lib.I32, None, None),
    "int64": (_lib.I64, None, None),
    "uint8": (_lib.U8, None, None),
    "float8_e4m3fn": (_lib.F8_E4M3, None, "uint8"),
    "float8_e5m2": (_lib.F8_E5M2, None, "uint8"),
    "float8_e4m3fnuz": (_lib.U8, "e4m3fnuz", "uint8"),
    "float8_e5m2fnuz": (_lib.U8, "e5m2fnuz", "uint8"),
}

_SUPPORTED = ("bfloat16, float16, float32, float64, int32, int64, uint8, float8_e4m3fn, "
              "float8_e4m3fnuz, float8_e5m2 (numpy: uint16 for bf16 bits)")


class Host(NamedTuple):
    """A tensor as C reads it."""

    array: np.ndarray  # C-contiguous, native byte order: the memory C reads
    dtype: int  # an mlr dtype
    variant: Optional[str]  # the fp8 FNUZ variant of a U8 tensor, from the type (else None)
    type_name: str  # the caller's type, for messages: "torch.float8_e4m3fn", "numpy uint8"


def torch_module():
    """torch when it has been imported (a torch tensor exists only then), else None."""
    return sys.modules.get("torch")


def is_torch(x) -> bool:
    """Whether x is a torch tensor (without importing torch)."""
    torch = torch_module()
    return torch is not None and isinstance(x, torch.Tensor)


def host(x, name: str, label: str) -> Host:
    """x (numpy array, torch tensor, list or number) as a C-contiguous host array."""
    if is_torch(x):
        return _host_torch(x, name, label)
    a = np.asarray(x)
    key = a.dtype.name
    if key not in _NUMPY:
        raise InputError(f"{label}: {name} is numpy {key}: mlaref reads {_SUPPORTED}")
    dtype, variant, view = _NUMPY[key]
    if view is not None:
        a = a.view(view)
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    return Host(a, dtype, variant, f"numpy {key}")


def _host_torch(t, name: str, label: str) -> Host:
    torch = torch_module()
    key = str(t.dtype).replace("torch.", "")
    if key not in _TORCH:
        raise InputError(f"{label}: {name} is torch.{key}: mlaref reads {_SUPPORTED}")
    dtype, variant, view = _TORCH[key]
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if not t.is_contiguous():
        t = t.contiguous()
    if view is not None:
        t = t.view(getattr(torch, view))
    a = t.numpy()
    if dtype == _lib.BF16:
        a = a.view(np.uint16)
    return Host(a, dtype, variant, f"torch.{key}")


def numpy_over(ptr: int, nbytes: int, dtype, shape, owner) -> np.ndarray:
    """A numpy array over C memory, keeping owner (whatever keeps that memory) alive."""
    if nbytes == 0 or not ptr:
        return np.zeros(shape, dtype=dtype)
    buf = (ctypes.c_uint8 * nbytes).from_address(ptr)
    buf._mlaref_owner = owner  # ctypes arrays take attributes: the memory's owner rides along
    return np.frombuffer(buf, dtype=dtype).reshape(shape)


# mlr dtype -> numpy dtype of its buffer
NUMPY_OF = {
    _lib.BF16: np.uint16,
    _lib.F16: np.float16,
    _lib.F32: np.float32,
    _lib.F64: np.float64,
    _lib.I32: np.int32,
    _lib.I64: np.int64,
    _lib.U8: np.uint8,
    _lib.F8_E4M3: np.uint8,
    _lib.F8_E5M2: np.uint8,
}


def to_torch(a: np.ndarray, dtype: int, variant: Optional[str] = None):
    """A numpy buffer of mlr dtype as a torch tensor over the same memory: bf16 as
    torch.bfloat16, fp8 as torch's float8 type where torch has it (else uint8 codes)."""
    torch = torch_module()
    if torch is None:
        import torch  # noqa: F811 (only reached when the caller asked for torch)
    if dtype == _lib.BF16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    t = torch.from_numpy(a)
    fp8 = {_lib.F8_E4M3: "float8_e4m3fn", _lib.F8_E5M2: "float8_e5m2"}.get(dtype)
    if dtype == _lib.U8 and variant:
        fp8 = "float8_" + variant
    if fp8 and hasattr(torch, fp8):
        t = t.view(getattr(torch, fp8))
    return t


def framework_of(values) -> str:
    """"torch" when any of values is a torch tensor, else "numpy"."""
    return "torch" if any(is_torch(v) for v in values) else "numpy"


def convert(a: np.ndarray, dtype: int, framework: str, variant: Optional[str] = None):
    """a (a buffer of mlr dtype) in the caller's framework."""
    return to_torch(a, dtype, variant) if framework == "torch" else a


def bf16_to_float32(bits) -> np.ndarray:
    """bf16 bits (uint16) as float32 values, exactly."""
    b = np.asarray(bits, dtype=np.uint16)
    return (np.atleast_1d(b).astype(np.uint32) << 16).view(np.float32).reshape(b.shape)


def float32_to_bf16(x) -> np.ndarray:
    """float32 values rounded to bf16 (nearest even; NaN stays NaN) as uint16 bits."""
    x = np.asarray(x, dtype=np.float32)
    f = np.ascontiguousarray(np.atleast_1d(x))
    u = f.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    return np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), r).reshape(x.shape)
