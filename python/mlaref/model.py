"""The model of a recipe (mlaref.run) and the certified truth (mlaref.truth) on Inputs."""

import warnings
from ctypes import POINTER, byref, c_double, c_float, c_int64

import numpy as np

from . import _arrays, _lib
from ._lib import lib
from .errors import InputError
from .inputs import Inputs

# the recipe's out.format -> (numpy buffer type, mlr dtype)
_OUT = {
    _lib.OUT_BF16: (np.uint16, _lib.BF16),
    _lib.OUT_FP16: (np.float16, _lib.F16),
    _lib.OUT_FP32: (np.float32, _lib.F32),
}


def _need_inputs(inputs) -> Inputs:
    if not isinstance(inputs, Inputs):
        raise TypeError(f"inputs: expected mlaref.Inputs, got {type(inputs).__name__}")
    return inputs


def run(recipe, inputs: Inputs, set=None, threads: int = 0):
    """The model of recipe (a built-in name, a recipe file or recipe text; set: overrides such as
    {"split.count": 4}) on inputs: (o, lse), the bits `mlaref run` writes.

    o is [T,H,512] ([B,s_q,H,512] for a 4-D q) in the recipe's out.format: torch.bfloat16 /
    float16 / float32 for torch inputs; for numpy inputs float16 / float32, and bf16 as its raw
    bits in uint16 (numpy has no bf16: mlaref.bf16_to_float32 gives the values). lse is float32
    [T,H] ([B,H,s_q] for a 4-D q). threads: OpenMP threads, 0 for all; the bits do not depend
    on it."""
    inputs = _need_inputs(inputs)
    r = _lib.Recipe(recipe, set)
    np_type, dtype = _OUT[r.out_format]
    o = np.empty((inputs.T, inputs.H, 512), dtype=np_type)
    lse = np.empty((inputs.T, inputs.H), dtype=np.float32)
    e = _lib.err()
    st = lib.mlr_api_emulate(r.ptr, inputs._h, _lib.threads(threads), o.ctypes.data, o.nbytes,
                             lse.ctypes.data_as(POINTER(c_float)), e)
    _lib.raise_for(st, e, InputError, f"{r.label} with {inputs.label}: ")
    o, lse = inputs._layout(o, lse)
    fw = inputs.framework
    return _arrays.convert(o, dtype, fw), _arrays.convert(lse, _lib.F32, fw)


def truth(inputs: Inputs, from_: str = "dequantized", threads: int = 0):
    """The certified truth of the inputs (`mlaref oracle`): (o, lse) in float64, each element
    within 1 ulp of the exact attention of the inputs' values, on the CPU, as numpy arrays or
    torch tensors like the inputs (layouts as run's). from_: "dequantized" (the fp8 codes times
    their scales) or "bf16" (kv_bf16, the unquantized KV). threads as run's."""
    inputs = _need_inputs(inputs)
    if from_ not in _lib.TRUTH_FROM:
        raise InputError(f"--truth '{from_}' is not one of dequantized|bf16")
    o = np.empty((inputs.T, inputs.H, 512), dtype=np.float64)
    lse = np.empty((inputs.T, inputs.H), dtype=np.float64)
    unc = c_int64(0)
    e = _lib.err()
    st = lib.mlr_api_oracle(inputs._h, _lib.TRUTH_FROM[from_], _lib.threads(threads),
                            o.ctypes.data_as(POINTER(c_double)),
                            lse.ctypes.data_as(POINTER(c_double)), byref(unc), e)
    _lib.raise_for(st, e, InputError, f"{inputs.label}: ")
    if unc.value:
        warnings.warn(f"mlaref.truth: {unc.value} elements could not be certified within 1 ulp",
                      RuntimeWarning, stacklevel=2)
    o, lse = inputs._layout(o, lse)
    fw = inputs.framework
    return _arrays.convert(o, _lib.F64, fw), _arrays.convert(lse, _lib.F64, fw)


def recipes() -> list:
    """The names `--recipe` takes: the built-ins, then the fast GPU kernel's."""
    names = lib.mlr_recipe_builtin_names().decode().split("|")
    return names + lib.mlr_gpu_fast_recipe_names().decode().split("|")


def recipe_text(recipe, set=None) -> str:
    """A recipe's text form, after the overrides in set: the `key = value` lines `mlaref recipe
    show` prints under its `#` header."""
    return _lib.Recipe(recipe, set).text()


def recipe_hash(recipe, set=None) -> str:
    """A recipe's SHA-256 (hex) after the overrides in set: `mlaref recipe show`'s `# sha256`, the
    hash of its canonical string (docs/recipes.md: Hashes)."""
    return _lib.Recipe(recipe, set).sha256()
