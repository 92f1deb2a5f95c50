"""Do files written by mlaref load in PyTorch and numpy, and are they what the task makes?

For every .safetensors in FOLDER (made by `mlaref gen ... bf16kv=1`): safetensors.torch.load_file
loads it with the expected dtypes and shapes; the task's quantize_fp8 (reference.py of
amd-mixed-mla), run by PyTorch on CUDA on kv_bf16, gives mlaref's kv codes and kv_scale bit for
bit. Every .npy in FOLDER loads with numpy.load. Then, for every positive finite bf16 value a,
PyTorch's CUDA result of a / 448.0 and a / 240.0 (bf16 tensor by a Python float, as the task
computes its scale) is compared with bf16(f32(a) * f32(1/fmax)), the rule mlaref implements.
Usage: torch_fixtures_check.py FOLDER   (exit 1 on any difference)"""
import glob
import os
import sys

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load_file


def quantize_fp8(tensor, dtype):  # the task's reference.py, as docs/numerics.md describes it
    finfo = torch.finfo(dtype)
    amax = tensor.abs().amax().clamp(min=1e-12)
    scale = amax / finfo.max
    fp8 = (tensor / scale).clamp(min=finfo.min, max=finfo.max).to(dtype)
    return fp8, scale.to(torch.float32).reshape(1)


def main():
    folder = sys.argv[1]
    bad = 0
    if not glob.glob(os.path.join(folder, "*.safetensors")):
        print("torch fixtures: no mlaref .safetensors files in %s: nothing was checked" % folder)
        return 1
    for path in sorted(glob.glob(os.path.join(folder, "*.safetensors"))):
        t = load_file(path)
        with safe_open(path, "pt") as f:
            meta = f.metadata()
        fmt = meta.get("mlaref.format.kv", "e4m3")
        want_kv = {"e4m3": torch.float8_e4m3fn, "e4m3fnuz": torch.uint8,
                   "bf16": torch.bfloat16}[fmt]
        ok = (t["q"].dtype == torch.bfloat16 and t["q"].shape[-1] == 576
              and t["kv"].dtype == want_kv)
        ok = ok and t["kv_scale"].dtype == torch.float32 and t["qo_indptr"].dtype == torch.int32
        line = "%s: loads (q %s %s, kv %s %s)" % (os.path.basename(path), tuple(t["q"].shape),
                                                  t["q"].dtype, tuple(t["kv"].shape), t["kv"].dtype)
        if "kv_bf16" in t and meta.get("mlaref.page_size", "1") == "1" and fmt != "bf16":
            dt = torch.float8_e4m3fn if fmt == "e4m3" else torch.float8_e4m3fnuz
            fp8, scale = quantize_fp8(t["kv_bf16"].cuda(), dt)
            same_codes = torch.equal(fp8.view(torch.uint8).cpu(), t["kv"].view(torch.uint8))
            same_scale = torch.equal(scale.cpu().view(torch.int32), t["kv_scale"].view(torch.int32))
            ok = ok and same_codes and same_scale
            line += "; task quantize_fp8 on CUDA: codes %s, kv_scale %s (%r)" % (
                "identical" if same_codes else "DIFFER", "identical" if same_scale else "DIFFERS",
                float(scale))
        print(line if ok else line + "  MISMATCH")
        bad += not ok
    for path in sorted(glob.glob(os.path.join(folder, "*.npy"))):
        a = np.load(path)
        print("%s: numpy.load %s %s" % (os.path.basename(path), a.dtype, a.shape))
    # the scale rule, over every positive finite bf16 value
    a = torch.arange(1, 0x7F80, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    for fmax in (448.0, 240.0):
        gpu = (a.cuda() / fmax).cpu().view(torch.int16)

        inv = torch.tensor(1.0, dtype=torch.float32) / torch.tensor(fmax, dtype=torch.float32)
        recip = (a.float() * inv).to(torch.bfloat16).view(torch.int16)
        div = (a.float() / torch.tensor(fmax, dtype=torch.float32)).to(torch.bfloat16)
        div = div.view(torch.int16)
        n_recip = int((gpu != recip).sum())
        n_div = int((gpu != div).sum())
        print("scale a/%g on CUDA, %d bf16 values: differs from the reciprocal rule in %d, "
              "from true division in %d" % (fmax, a.numel(), n_recip, n_div))
        bad += n_recip != 0
    print("torch fixtures: %s" % ("all agree" if bad == 0 else "%d DIFFERENCES" % bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
