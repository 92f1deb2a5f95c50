"""Assertions for kernel tests (pytest or unittest)."""

from .check import Result, check


def assert_mla_close(o, inputs, recipe, lse=None, rules=None, set=None,
                     truth: str = "dequantized", threads: int = 0) -> Result:
    """Check a kernel's output as mlaref.check does; raise AssertionError with the command's
    text (the metrics, each rule's verdict and the worst elements as reproducer lines) when a
    rule fails. Returns the Result when every rule passes."""
    res = check(o, inputs, recipe, lse=lse, rules=rules, set=set, truth=truth, threads=threads)
    if not res.passed:
        raise AssertionError("mlaref check failed:\n" + str(res).rstrip("\n"))
    return res
