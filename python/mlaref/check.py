"""mlaref.check: a kernel's output against the model of its recipe and the certified truth, under
rules: `mlaref check` as a function call (the C library's mlr_check_run), with the same verdict,
text and JSON."""

import ctypes
import json
import re
from ctypes import byref, c_int, c_void_p
from typing import List, NamedTuple, Optional

from . import _arrays, _lib
from ._lib import lib
from .errors import InputError
from .inputs import Inputs


class RuleVerdict(NamedTuple):
    """One rule on one tensor: what it measured, its limit, pass / FAIL / n/a."""

    tensor: str  # "o" or "lse"
    name: str  # the rule as spelt: "fa3", "budget", "ulp:2", ...
    verdict: str  # "pass", "FAIL" or "n/a"
    measured: Optional[float]
    limit: Optional[float]
    detail: str

    @property
    def passed(self) -> bool:
        """Whether the rule did not fail (n/a counts as not failed, as the command counts)."""
        return self.verdict != "FAIL"


class Element(NamedTuple):
    """One of the worst elements: where it is, the kernel's value (got) and the model's
    (expected)."""

    tensor: str
    batch: Optional[int]
    token: Optional[int]
    head: Optional[int]
    column: Optional[int]  # None for lse
    got: float
    expected: float
    ulp: Optional[int]  # None where not defined (NaN, class mismatch)
    index: int  # flat index in [T,H,512] ([T,H] for lse)


_WHERE = re.compile(r"(batch|token|head|column) (-?\d+)")


def _hexfloat(s) -> float:
    if s is None:
        return float("nan")
    if isinstance(s, (int, float)):
        return float(s)
    try:
        return float.fromhex(s)
    except ValueError:
        return float(s)  # "nan", "inf", "-inf"


def _element(tensor: str, w: dict) -> Element:
    where = dict((k, int(v)) for k, v in _WHERE.findall(w.get("where", "")))
    ulp = w.get("ulp")
    return Element(tensor, where.get("batch"), where.get("token"), where.get("head"),
                   where.get("column"), _hexfloat(w.get("a")), _hexfloat(w.get("b")),
                   None if ulp is None or ulp < 0 else int(ulp), int(w.get("index", -1)))


class Result:
    """The verdict of mlaref.check. str(result) is the command's text; to_json() its JSON."""

    def __init__(self, exit_code: int, text: str, json_text: str):
        self.exit_code = exit_code
        self.text = text
        self._json = json_text.strip()
        self.data = json.loads(self._json) if self._json else {}
        self.rules: List[RuleVerdict] = []
        self.worst_elements: List[Element] = []
        sections = [(name, self.data.get(name)) for name in ("o", "lse")]
        for name, sec in sections:
            if not isinstance(sec, dict):
                continue
            for r in sec.get("rules", []):
                self.rules.append(RuleVerdict(name, r.get("rule", ""), r.get("verdict", ""),
                                              r.get("measured"), r.get("limit"),
                                              r.get("detail", "")))
        # the failing tensor's elements first
        failed = [n for n, _ in sections if any(r.tensor == n and not r.passed
                                                 for r in self.rules)]
        order = failed + [n for n, _ in sections if n not in failed]
        for name in order:
            sec = self.data.get(name)
            if isinstance(sec, dict):
                self.worst_elements += [_element(name, w) for w in sec.get("worst", [])]

    @property
    def passed(self) -> bool:
        """Every rule passed (the command's exit status 0)."""
        return self.exit_code == 0

    @property
    def worst(self) -> Optional[Element]:
        """The worst element (of the tensor that failed, if one did), or None."""
        return self.worst_elements[0] if self.worst_elements else None

    def to_json(self) -> str:
        """What `mlaref check --json` prints (one line)."""
        return self._json

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        verdicts = ", ".join(f"{r.tensor} {r.name} {r.verdict}" for r in self.rules)
        return f"<mlaref.Result {'pass' if self.passed else 'FAIL'}: {verdicts}>"


def _rules_text(rules) -> str:
    if rules is None:
        return ""
    if isinstance(rules, str):
        rules = [rules]
    return "\n".join(str(r) for r in rules)


def _output_file(o, lse, label: str):
    """o and lse borrowed into a tensor file: (file, the buffers to keep alive)."""
    tf = lib.mlr_api_tf_new()
    if not tf:
        raise MemoryError("mlaref: out of memory for a tensor file")
    keep = []
    for name, x in (("o", o), ("lse", lse)):
        if x is None:
            continue
        h = _arrays.host(x, name, label)
        keep.append(h.array)
        shape = (ctypes.c_int64 * max(h.array.ndim, 1))(*h.array.shape)
        if lib.mlr_tf_borrow(tf, name.encode(), h.dtype, h.array.ndim, shape,
                             h.array.ctypes.data, None) != _lib.OK:
            lib.mlr_api_tf_delete(tf)
            raise InputError(f"{label}: tensor '{name}' of shape {list(h.array.shape)} cannot be "
                             "held")
    return tf, keep


def check(o, inputs: Inputs, recipe, lse=None, rules=None, set=None, truth: str = "dequantized",
          threads: int = 0, label: str = "output") -> Result:
    """A kernel's output o ([T,H,512] or [B,s_q,H,512]; bf16, fp16 or fp32: torch tensors, or
    numpy float16 / float32 / uint16 bf16 bits) and optionally its lse ([T,H] or [B,H,s_q]; fp32
    or fp64) against the model of recipe (name, file or text, with the overrides in set) and the
    certified truth, under rules (the command's spellings, e.g. ["fa3", "budget"]; default fa3
    and structure).
    truth: "dequantized" or "bf16"; threads as mlaref.run's; label names the output in the text.
    Returns the Result; raises InputError where the command exits with status 2."""
    if not isinstance(inputs, Inputs):
        raise TypeError(f"inputs: expected mlaref.Inputs, got {type(inputs).__name__}")
    if truth not in _lib.TRUTH_FROM:
        raise InputError(f"--truth '{truth}' is not one of dequantized|bf16")
    r = _lib.Recipe(recipe, set)
    tf, keep = _output_file(o, lse, label)
    try:
        code = c_int(2)
        text_p, json_p = c_void_p(), c_void_p()
        e = _lib.err()
        st = lib.mlr_api_check(inputs._h, tf, label.encode(), r.ptr, r.label.encode(),
                               _rules_text(rules).encode(), _lib.TRUTH_FROM[truth],
                               _lib.threads(threads), byref(code), byref(text_p),
                               byref(json_p), e)
        text = _lib.take_string(text_p.value)
        json_text = _lib.take_string(json_p.value)
        _lib.raise_for(st, e)
    finally:
        lib.mlr_api_tf_delete(tf)
        del keep
    return Result(code.value, text, json_text)


def has_check() -> bool:
    """Whether the library holds mlr_check_run (every full build does)."""
    return bool(lib.mlr_api_has_check())
