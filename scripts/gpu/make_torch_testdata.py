"""Write tests/data/torch_written.safetensors with PyTorch's own writer (safetensors.torch.save_file):
one tensor of each dtype mlaref reads, with known values, and metadata {"writer": "torch"}.
Usage: make_torch_testdata.py OUT_FILE"""
import sys

import torch
from safetensors.torch import save_file

v = torch.arange(12, dtype=torch.float64) / 4 - 1
codes = torch.arange(256, dtype=torch.int64).to(torch.uint8)
tensors = {
    "bf16": v.to(torch.bfloat16).reshape(3, 4),
    "f16": v.to(torch.float16),
    "f32": v.to(torch.float32),
    "f64": v,
    "i32": (torch.arange(12) * 1000 - 7).to(torch.int32),
    "i64": (torch.arange(12) * 1000 - 7).to(torch.int64),
    "u8": codes.clone(),
    "e4m3": codes.clone().view(torch.float8_e4m3fn),
    "e5m2": codes.clone().view(torch.float8_e5m2),
}
save_file(tensors, sys.argv[1], metadata={"writer": "torch"})
print("wrote %s with torch %s" % (sys.argv[1], torch.__version__))
