"""Fixtures of the mlaref package tests (run by CTest, label python: tests/CMakeLists.txt)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import helpers  # noqa: E402


@pytest.fixture(scope="session")
def files(tmp_path_factory):
    """Contract files made by `mlaref gen`, by name: paged (page 16, q_len 2, ragged lengths),
    flat (no page table, q_len 2), small (short KV for the semantics tests)."""
    d = tmp_path_factory.mktemp("contract")
    specs = {
        "paged": "bs=3,lens=37:100:64,q=2,page=16,seed=7",
        "flat": "bs=3,lens=9:50:33,q=2,seed=11",
        "single": "bs=2,lens=40:70,q=1,page=8,seed=5",
        "small": "bs=2,lens=6:9,q=3,seed=3",
        "fnuz": "bs=2,lens=20:31,q=1,page=4,seed=9,fmt=e4m3fnuz",
    }
    return {k: helpers.gen_file(d, v, k + ".safetensors") for k, v in specs.items()}
