"""The package and the command agree: gen, run and the truth give the command's bits; the
library's version is the package's; files written here are the command's."""

import gc
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import mlaref
from helpers import cli, contract, same_bits


def test_version_is_the_librarys():
    assert mlaref.__version__ == mlaref._lib.lib.mlr_api_version().decode()
    assert mlaref.__version__ in cli("version").stdout
    assert mlaref.has_check()


def _import_in(pkg_parent: str, env_extra=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=pkg_parent, PYTHONDONTWRITEBYTECODE="1")
    env.pop("MLAREF_LIBRARY", None)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-c", "import mlaref"], env=env, capture_output=True,
                          text=True, check=False)


def test_a_library_of_another_version_is_refused(tmp_path):
    pkg = os.path.dirname(mlaref.__file__)
    copy = tmp_path / "mlaref"
    shutil.copytree(pkg, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "_version.py").write_text('__version__ = "0.0.0-other"\n')
    r = _import_in(str(tmp_path))
    assert r.returncode != 0
    assert "LibraryError" in r.stderr and "the package is 0.0.0-other" in r.stderr
    r = _import_in(os.path.dirname(pkg), {"MLAREF_LIBRARY": str(tmp_path / "none.so")})
    assert "LibraryError" in r.stderr and "cannot load" in r.stderr


def test_gen_is_the_commands(files):
    """mlaref.gen(spec) holds the tensors and metadata `mlaref gen --shape spec` writes."""
    for name in ("paged", "flat", "fnuz"):
        c = contract(files[name])
        spec = c["__metadata__"]["mlaref.shape"]
        g = mlaref.gen(spec).tensors()
        assert g["__metadata__"] == c["__metadata__"]
        assert sorted(g) == sorted(c)
        for k in c:
            if k != "__metadata__":
                assert same_bits(g[k], c[k]), (name, k)


def test_gen_with_kv_bf16_and_truth_from_bf16(files):
    x = mlaref.gen("bs=2,kv=33,q=1,seed=2,bf16kv=1")
    assert x.address("kv_bf16") != 0
    o, lse = mlaref.truth(x, from_="bf16")
    od, _ = mlaref.truth(x)
    assert o.dtype == np.float64 and not np.array_equal(o, od)


@pytest.mark.parametrize("recipe", ["aiter-a8w8-ps", "triton-fp8-split", "fp32-seq",
                                    "fast-a16w8"])
def test_run_is_the_commands(files, tmp_path, recipe):
    path = files["paged"]
    out = str(tmp_path / "model.safetensors")
    r = cli("run", "--recipe", recipe, "--inputs", path, "--out", out)
    assert r.returncode == 0, r.stderr
    m = mlaref.read_tensors(out)
    o, lse = mlaref.run(recipe, mlaref.load(path))
    assert same_bits(o, m["o"]) and same_bits(lse, m["lse"])


def test_run_with_set_is_the_commands(files, tmp_path):
    path = files["paged"]
    out = str(tmp_path / "model.safetensors")
    r = cli("run", "--recipe", "triton-fp8-split", "--set", "split.count=4", "--set",
            "update.fma=no", "--inputs", path, "--out", out)
    assert r.returncode == 0, r.stderr
    m = mlaref.read_tensors(out)
    x = mlaref.load(path)
    o, lse = mlaref.run("triton-fp8-split", x, set={"split.count": 4, "update.fma": False})
    assert same_bits(o, m["o"]) and same_bits(lse, m["lse"])
    o2, _ = mlaref.run("triton-fp8-split", x, set="split.count=4;update.fma=no")
    assert same_bits(o, o2)


def test_threads_do_not_change_bits(files):
    x = mlaref.load(files["paged"])
    a = mlaref.run("aiter-a8w8-ps", x, threads=1)
    b = mlaref.run("aiter-a8w8-ps", x, threads=2)
    assert same_bits(a[0], b[0]) and same_bits(a[1], b[1])


def test_threads_refused_below_zero(files):
    x = mlaref.load(files["paged"])
    a = mlaref.run("aiter-a8w8-ps", x, threads=np.int64(1))
    b = mlaref.run("aiter-a8w8-ps", x)
    assert same_bits(a[0], b[0])
    for bad in (-1, 1.5, "2", True):
        with pytest.raises(mlaref.InputError, match=r"threads = .*: an integer >= 0"):
            mlaref.run("aiter-a8w8-ps", x, threads=bad)


def test_truth_is_the_commands(files, tmp_path):
    path = files["paged"]
    out = str(tmp_path / "truth.safetensors")
    r = cli("oracle", "--inputs", path, "--out", out)
    assert r.returncode == 0, r.stderr
    m = mlaref.read_tensors(out)
    o, lse = mlaref.truth(mlaref.load(path))
    assert same_bits(o, m["o"]) and same_bits(lse, m["lse"])


def test_tensors_round_trip(tmp_path):
    import torch

    path = str(tmp_path / "t.safetensors")
    bf = torch.randn(3, 4).to(torch.bfloat16)
    arrays = {"bf": bf, "f32": np.arange(6, dtype=np.float32).reshape(2, 3),
              "i64": torch.arange(5), "u8": np.arange(7, dtype=np.uint8)}
    mlaref.save_tensors(path, arrays, {"k": "v"})
    back = mlaref.read_tensors(path, framework="torch")
    assert back["__metadata__"] == {"k": "v"}
    assert back["bf"].dtype == torch.bfloat16 and torch.equal(back["bf"], bf)
    assert torch.equal(back["i64"], arrays["i64"])
    npb = mlaref.read_tensors(path)
    assert npb["bf"].dtype == np.uint16 and npb["f32"].tolist() == arrays["f32"].tolist()
    assert npb["u8"].tolist() == list(range(7))


def test_inputs_tensors_outlive_the_inputs(files):
    """Arrays over the library's memory keep it alive after the Inputs are gone."""
    x = mlaref.load(files["paged"])
    t = x.tensors()
    ref = np.array(t["kv"])
    del x
    gc.collect()
    junk = [np.ones(1 << 20) for _ in range(8)]
    assert np.array_equal(t["kv"], ref)
    del junk


def test_inputs_properties(files):
    x = mlaref.load(files["paged"])
    assert (x.T, x.H, x.B, x.N, x.page_size) == (6, 16, 3, 224, 16)
    assert (x.kv_format, x.q_format, x.label) == ("e4m3", "bf16", files["paged"])
    assert "T=6" in repr(x)
    f = mlaref.load(files["fnuz"])
    assert f.kv_format == "e4m3fnuz"


def test_recipes_and_text():
    names = mlaref.recipes()
    assert "aiter-a8w8-ps" in names and "fast-a16w8" in names
    text = mlaref.recipe_text("fp32-seq", set={"out.format": "fp32"})
    assert "out.format = fp32" in text
    # the hash `recipe show` prints (the test `recipe` pins fp32-seq's with sha256sum)
    assert mlaref.recipe_hash("fp32-seq") == (
        "2b31e79bbfb8873f95f167478733bbcb929e299a43742d88737c1d7a9619f606")
    shown = cli("recipe", "show", "fp32-seq", "--set", "out.format=fp32").stdout
    assert f"# sha256 {mlaref.recipe_hash('fp32-seq', set={'out.format': 'fp32'})}\n" in shown


def test_bf16_helpers():
    x = np.array([1.0, -2.5, 3.140625, 1e-3, np.inf], dtype=np.float32)
    bits = mlaref.float32_to_bf16(x)
    assert bits.dtype == np.uint16
    back = mlaref.bf16_to_float32(bits)
    assert back[:3].tolist() == [1.0, -2.5, 3.140625] and np.isinf(back[4])
    assert mlaref.float32_to_bf16(np.float32(1 + 2**-8)) == 0x3F80  # a tie, to even
    assert mlaref.float32_to_bf16(np.float32(1 + 3 * 2**-8)) == 0x3F82
