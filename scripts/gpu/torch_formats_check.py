"""Do mlaref's conversions agree with PyTorch's, on every binary32 input?

mlaref describes each conversion by its boundary list (`mlaref formats boundaries --format F
--overflow nonsat`: PyTorch's casts are non-saturating). For all 2^32 binary32 bit patterns,
this script casts with PyTorch (on the GPU, and on the CPU for every 16th pattern) and compares
the codes with the ones the boundary list gives; NaNs compare as a class.
Usage: torch_formats_check.py MLAREF_BINARY  (prints a table; exit 1 on any mismatch)
"""
import subprocess
import sys

import torch

FORMATS = [  # mlaref name, torch dtype, storage dtype
    ("e4m3", torch.float8_e4m3fn, torch.uint8),
    ("e4m3fnuz", torch.float8_e4m3fnuz, torch.uint8),
    ("e5m2", torch.float8_e5m2, torch.uint8),
    ("e5m2fnuz", torch.float8_e5m2fnuz, torch.uint8),
    ("bf16", torch.bfloat16, torch.int16),
    ("fp16", torch.float16, torch.int16),
]


def is_nan(name, code):
    """NaN classes, from the OCP 8-bit spec and IEEE 754 (codes as int64 tensors)."""
    if name in ("e4m3fnuz", "e5m2fnuz"):
        return code == 0x80
    if name == "e4m3":
        return (code & 0x7F) == 0x7F
    if name == "e5m2":
        return (code & 0x7F) > 0x7C
    if name == "bf16":
        return (code & 0x7FFF) > 0x7F80
    return (code & 0x7FFF) > 0x7C00


def boundaries(binary, name):
    out = subprocess.run([binary, "formats", "boundaries", "--format", name, "--overflow", "nonsat"],
                         check=True, capture_output=True, text=True).stdout.split()
    return (torch.tensor([int(t, 16) for t in out[0::2]], dtype=torch.int64),
            torch.tensor([int(t, 16) for t in out[1::2]], dtype=torch.int64))


def check(binary, name, dtype, store, device, step):
    pats, codes = boundaries(binary, name)
    pats, codes = pats.to(device), codes.to(device)
    chunk = 1 << 26
    mismatches, first, checked = 0, None, 0
    for start in range(0, 1 << 32, chunk * step):
        p = torch.arange(start, min(start + chunk * step, 1 << 32), step, dtype=torch.int64, device=device)
        x = torch.where(p >= (1 << 31), p - (1 << 32), p).to(torch.int32).view(torch.float32)
        got = x.to(dtype).view(store).to(torch.int64)
        got = got & (0xFF if store == torch.uint8 else 0xFFFF)
        want = codes[torch.searchsorted(pats, p, right=True) - 1]
        bad = (got != want) & ~(is_nan(name, got) & is_nan(name, want))
        n = int(bad.sum())
        if n and first is None:
            i = int(bad.nonzero()[0])
            first = "x=0x%08X torch=0x%X mlaref=0x%X" % (int(p[i]), int(got[i]), int(want[i]))
        mismatches += n
        checked += p.numel()
    return checked, mismatches, first


def main():
    binary = sys.argv[1]
    print("torch %s, cuda %s, device %s" % (torch.__version__, torch.version.cuda, torch.cuda.get_device_name()))
    total_bad = 0
    for name, dtype, store in FORMATS:
        for device, step in (("cuda", 1), ("cpu", 16)):
            checked, bad, first = check(binary, name, dtype, store, device, step)
            total_bad += bad
            print("%-9s torch %-4s %11d inputs  %d mismatches%s" % (name, device, checked, bad,
                                                                  "  first: " + first if first else ""))
            sys.stdout.flush()
    print("torch agreement: %s" % ("all inputs agree" if total_bad == 0 else "%d MISMATCHES" % total_bad))
    return 1 if total_bad else 0


if __name__ == "__main__":
    sys.exit(main())
