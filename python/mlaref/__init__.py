"""mlaref: the bit-accurate reference model of fp8 MLA decode attention kernels, from Python.

A thin layer over the C library (libmlaref.so, beside this package): the same input contract,
model, truth and check as the `mlaref` command, on numpy arrays and torch tensors without
copying them. docs/python.md is the reference.

    import mlaref
    inputs = mlaref.Inputs(q=q, kv_cache=kv, kv_format="e4m3", kv_scale=s,
                           seq_lens=lens, block_table=table)
    o, lse = my_kernel(...)
    mlaref.testing.assert_mla_close(o, inputs, recipe="aiter-a8w8-ps", lse=lse)
"""

import sys

try:
    import numpy  # noqa: F401  (every array passes through numpy)
except ImportError as _e:
    raise ImportError(f"mlaref needs numpy, which {sys.executable} lacks: use Debian's "
                      "/usr/bin/python3 with python3-numpy (bash scripts/setup.sh)") from _e

from . import harness, testing
from ._arrays import bf16_to_float32, float32_to_bf16
from ._lib import library_path
from ._version import __version__
from .check import Element, Result, RuleVerdict, check, has_check
from .errors import ComputeError, Error, InputError, LibraryError, RecipeError
from .files import decode, encode, read_tensors, save_tensors
from .harness import Unsupported
from .inputs import Inputs, gen, load, suite, write_inputs
from .model import recipe_hash, recipe_text, recipes, run, truth

__all__ = [
    "__version__", "Inputs", "load", "gen", "suite", "write_inputs", "run", "truth", "check",
    "Result", "RuleVerdict", "Element", "recipes", "recipe_text", "recipe_hash", "save_tensors",
    "read_tensors", "decode", "encode", "bf16_to_float32", "float32_to_bf16", "has_check",
    "library_path", "testing", "Error", "InputError", "RecipeError", "LibraryError",
    "ComputeError", "harness", "Unsupported",
]
