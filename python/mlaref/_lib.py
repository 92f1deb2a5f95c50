"""ctypes bindings of libmlaref.so: the flat C API of python/lib/include/mlr_api.h and the few
module functions the package calls directly.

The library is the one beside this file (the build puts it there), or the file named by the
environment variable MLAREF_LIBRARY. It must report this package's version.
"""

import ctypes
import operator
import os
from ctypes import POINTER, byref, c_char_p, c_double, c_float, c_int, c_int64, c_size_t, c_void_p
from typing import Optional

from ._version import __version__
from .errors import ComputeError, InputError, LibraryError, RecipeError

# mlr_status (ref/base/include/mlr_base.h)
OK, EINVAL, EFORMAT, EROUNDING, EOVERFLOW_MODE, ENOMEM, ERANGE, EIO, EPARSE, ECONTRACT, EDEVICE = (
    range(11))

# mlr_dtype (fixtures/io/include/mlr_tensor.h)
BF16, F16, F32, F64, I32, I64, U8, F8_E4M3, F8_E5M2 = range(9)
DTYPE_NAMES = ("BF16", "F16", "F32", "F64", "I32", "I64", "U8", "F8_E4M3", "F8_E5M2")

# mlr_format (ref/formats/include/mlr_formats.h)
FORMAT_NAMES = ("e4m3", "e4m3fnuz", "e5m2", "e5m2fnuz", "bf16", "fp16")

# mlr_rounding and mlr_overflow (mlr_formats.h); stochastic rounding (needs random bits) is left out
ROUNDING_NAMES = ("rne", "rtz")
OVERFLOW_NAMES = ("sat", "nonsat", "legacy")


class CvtOpts(ctypes.Structure):
    """mlr_cvt_opts: a conversion's format, rounding and overflow (enums, C ints)."""

    _fields_ = [("format", c_int), ("rounding", c_int), ("overflow", c_int)]


# mlr_outfmt (ref/recipe/include/mlr_recipe.h)
OUT_BF16, OUT_FP16, OUT_FP32 = range(3)

# mlr_truth_from (ref/oracle/include/mlr_oracle.h)
TRUTH_FROM = {"dequantized": 0, "bf16": 1}


class MlrError(ctypes.Structure):
    """mlr_error: one line of at most 511 characters."""

    _fields_ = [("msg", ctypes.c_char * 1024)]  # mlr_base.h's mlr_error

    def text(self) -> str:
        """The message as a str."""
        return self.msg.decode("utf-8", "replace")


class _Opaque(ctypes.Structure):
    """A handle whose fields Python never reads."""


TF = POINTER(_Opaque)  # mlr_tensor_file *
TENSOR = POINTER(_Opaque)  # const mlr_tensor *
INPUTS = POINTER(_Opaque)  # mlr_api_inputs *
RECIPE = POINTER(_Opaque)  # mlr_recipe *
ERR = POINTER(MlrError)
KERNEL = POINTER(_Opaque)  # mlr_kernel *
# mlr_kernel_call: (ctx, cell, inputs_path, out_path, reason, n) -> 0, 77 (skipped) or an error;
# reason is a writable buffer of n bytes, so it is a plain pointer here
KERNEL_CALL = ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p, c_char_p, c_char_p, c_void_p, c_size_t)

_PROTOTYPES = {
    "mlr_api_version": (c_char_p, []),
    "mlr_api_has_check": (c_int, []),
    "mlr_api_suite_cell": (c_char_p, [c_char_p, c_size_t, POINTER(c_char_p)]),
    "mlr_api_suite_names": (c_char_p, []),
    "mlr_api_free": (None, [c_void_p]),
    "mlr_api_tf_new": (TF, []),
    "mlr_api_tf_delete": (None, [TF]),
    "mlr_api_tf_read": (c_int, [c_char_p, POINTER(TF), ERR]),
    "mlr_api_tf_count": (c_size_t, [TF]),
    "mlr_api_tf_tensor": (TENSOR, [TF, c_size_t]),
    "mlr_api_tensor_name": (c_char_p, [TENSOR]),
    "mlr_api_tensor_dtype": (c_int, [TENSOR]),
    "mlr_api_tensor_ndim": (c_int, [TENSOR]),
    "mlr_api_tensor_dim": (c_int64, [TENSOR, c_int]),
    "mlr_api_tensor_data": (c_void_p, [TENSOR]),
    "mlr_api_tensor_nbytes": (c_size_t, [TENSOR]),
    "mlr_api_tf_meta_count": (c_size_t, [TF]),
    "mlr_api_tf_meta_key": (c_char_p, [TF, c_size_t]),
    "mlr_api_tf_meta_value": (c_char_p, [TF, c_size_t]),
    "mlr_tf_borrow": (c_int, [TF, c_char_p, c_int, c_int, POINTER(c_int64), c_void_p, c_void_p]),
    "mlr_tf_set_meta": (c_int, [TF, c_char_p, c_char_p]),
    "mlr_safetensors_write": (c_int, [c_char_p, TF, ERR]),
    "mlr_api_inputs_from": (c_int, [TF, c_char_p, c_int, POINTER(INPUTS), ERR]),
    "mlr_api_inputs_load": (c_int, [c_char_p, c_int, POINTER(INPUTS), ERR]),
    "mlr_api_inputs_gen": (c_int, [c_char_p, c_int, POINTER(INPUTS), ERR]),
    "mlr_api_inputs_free": (None, [INPUTS]),
    "mlr_api_inputs_contract": (TF, [INPUTS]),
    "mlr_api_inputs_label": (c_char_p, [INPUTS]),
    "mlr_api_inputs_info": (c_int64, [INPUTS, c_char_p]),
    "mlr_api_inputs_ptr": (c_void_p, [INPUTS, c_char_p]),
    "mlr_api_inputs_save": (c_int, [INPUTS, c_char_p, ERR]),
    "mlr_api_recipe_new": (c_int, [c_char_p, POINTER(RECIPE), ERR]),
    "mlr_api_recipe_free": (None, [RECIPE]),
    "mlr_api_recipe_name": (c_char_p, [RECIPE]),
    "mlr_api_recipe_out_format": (c_int, [RECIPE]),
    "mlr_recipe_set": (c_int, [RECIPE, c_char_p, ERR]),
    "mlr_recipe_check": (c_int, [RECIPE, ERR]),
    "mlr_recipe_hash": (c_int, [RECIPE, ctypes.c_char * 65]),
    "mlr_recipe_text": (c_size_t, [RECIPE, c_char_p, c_size_t]),
    "mlr_recipe_builtin_names": (c_char_p, []),
    "mlr_gpu_fast_recipe_names": (c_char_p, []),
    "mlr_api_emulate": (c_int, [RECIPE, INPUTS, c_int, c_void_p, c_size_t, POINTER(c_float), ERR]),
    "mlr_api_oracle": (
        c_int,
        [INPUTS, c_int, c_int, POINTER(c_double), POINTER(c_double), POINTER(c_int64), ERR],
    ),
    "mlr_api_check": (
        c_int,
        [INPUTS, TF, c_char_p, RECIPE, c_char_p, c_char_p, c_int, c_int, POINTER(c_int),
         POINTER(c_void_p), POINTER(c_void_p), ERR],
    ),
    "mlr_decode_array": (c_int, [POINTER(c_float), c_void_p, c_size_t, c_int]),
    "mlr_encode_f32_array": (c_int, [c_void_p, POINTER(c_float), c_size_t, POINTER(CvtOpts),
                                     c_void_p]),
    "mlr_encode_f64_array": (c_int, [c_void_p, POINTER(c_double), c_size_t, POINTER(CvtOpts),
                                     c_void_p]),
    "mlr_api_kernel_new": (
        c_int,
        [c_char_p, c_char_p, c_char_p, c_char_p, KERNEL_CALL, c_void_p, POINTER(KERNEL), ERR],
    ),
    "mlr_api_kernel_free": (None, [KERNEL]),
    "mlr_api_report": (
        c_int,
        [c_char_p, c_char_p, c_char_p, POINTER(KERNEL), c_int, c_char_p, c_int, c_int,
         POINTER(c_int), POINTER(c_void_p), ERR],
    ),
}


def library_path() -> str:
    """Where libmlaref.so is looked for: $MLAREF_LIBRARY, else beside this module."""
    env = os.environ.get("MLAREF_LIBRARY")
    if env:
        return env
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "libmlaref.so")


def _load() -> ctypes.CDLL:
    """Load the library, declare the prototypes and check its version."""
    path = library_path()
    try:
        dll = ctypes.CDLL(path)
    except OSError as e:
        raise LibraryError(
            f"mlaref: cannot load {path} ({e}); build it with `cmake --build --preset default` "
            "and put build/default/python on PYTHONPATH (docs/python.md)"
        ) from None
    for name, (restype, argtypes) in _PROTOTYPES.items():
        try:
            fn = getattr(dll, name)
        except AttributeError:
            raise LibraryError(f"mlaref: {path} has no function {name}: rebuild it") from None
        fn.restype = restype
        fn.argtypes = argtypes
    version = dll.mlr_api_version().decode()
    if version != __version__:
        raise LibraryError(
            f"mlaref: {path} is version {version}, the package is {__version__}: use the "
            "library built with this package (build/<preset>/python/mlaref)"
        )
    return dll


lib = _load()


def threads(n: int = 0) -> int:
    """The OpenMP threads for a call: n when positive, else what the command would use in a
    fresh process (OMP_NUM_THREADS, else every processor this process may run on), whatever
    the host process set for itself (PyTorch lowers it on import)."""
    try:
        v = -1 if isinstance(n, bool) else operator.index(n)  # int, numpy integers
    except TypeError:
        v = -1
    if v < 0:
        raise InputError(f"threads = {n!r}: an integer >= 0 (0: what the command uses)")
    if v > 0:
        return v
    try:
        v = int(os.environ.get("OMP_NUM_THREADS", "").split(",")[0])
        if v > 0:
            return v
    except ValueError:
        pass
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def err() -> MlrError:
    """A fresh error buffer."""
    return MlrError()


def raise_for(status: int, e: MlrError, kind: type = InputError, prefix: str = "") -> None:
    """Raise for a non-zero status: ENOMEM and ERANGE as ComputeError, the rest as kind."""
    if status == OK:
        return
    msg = prefix + (e.text() or f"status {status}")
    if status in (ENOMEM, ERANGE):
        raise ComputeError(msg)
    raise kind(msg)


def take_string(p: Optional[int]) -> str:
    """A string the API returned (char *, malloc'd), freed here."""
    if not p:
        return ""
    try:
        return ctypes.string_at(p).decode("utf-8", "replace")
    finally:
        lib.mlr_api_free(p)


class Recipe:
    """A recipe as the command takes it (a built-in name, a file, or text) with --set overrides
    applied and checked. Owns its C struct."""

    def __init__(self, what, settings=None):
        if isinstance(what, os.PathLike):
            what = os.fspath(what)
        if not isinstance(what, str):
            raise RecipeError(f"recipe: {what!r} is not a name, a file name or recipe text")
        self.label = what if "\n" not in what else "recipe text"
        self._p = RECIPE()
        e = err()
        raise_for(lib.mlr_api_recipe_new(what.encode(), byref(self._p), e), e, RecipeError)
        for assignment in settings_list(settings):
            st = lib.mlr_recipe_set(self._p, assignment.encode(), e)
            raise_for(st, e, RecipeError, "--set ")
        raise_for(lib.mlr_recipe_check(self._p, e), e, RecipeError, f"recipe {self.label}: ")

    @property
    def ptr(self):
        """The mlr_recipe pointer."""
        return self._p

    @property
    def name(self) -> str:
        """The recipe's name (its `name` key)."""
        return lib.mlr_api_recipe_name(self._p).decode()

    @property
    def out_format(self) -> int:
        """OUT_BF16, OUT_FP16 or OUT_FP32."""
        return lib.mlr_api_recipe_out_format(self._p)

    def sha256(self) -> str:
        """SHA-256 of the canonical string."""
        buf = (ctypes.c_char * 65)()
        lib.mlr_recipe_hash(self._p, buf)
        return buf.value.decode()

    def text(self) -> str:
        """The text form, one `key = value` a line."""
        n = lib.mlr_recipe_text(self._p, None, 0)
        buf = ctypes.create_string_buffer(n + 1)
        lib.mlr_recipe_text(self._p, buf, n + 1)
        return buf.value.decode()

    def __del__(self):
        p = getattr(self, "_p", None)
        if p:
            lib.mlr_api_recipe_free(p)
            self._p = RECIPE()


def _value_text(v) -> str:
    """A recipe value as --set writes it: yes/no for booleans, repr for floats."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def settings_list(settings) -> list:
    """``set`` as a list of "key=value": a dict, a list of "key=value" strings, or one string of
    them separated by ';'."""
    if settings is None:
        return []
    if isinstance(settings, str):
        return [s.strip() for s in settings.split(";") if s.strip()]
    if isinstance(settings, dict):
        return [f"{k}={_value_text(v)}" for k, v in settings.items()]
    return [str(s) for s in settings]
