"""The PyTorch profiler inside a program: a program that profiles itself while
gpulab watches it, as PyTorch users do. Not written for gpulab; it prints how
many CUDA kernels the profiler itself recorded, so a run under `gpulab watch`
shows whether the profiler still works beside it.

    python3 torch_profiled.py [steps=10]
"""

import sys

import torch
from torch.profiler import ProfilerActivity, profile

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 10
torch.cuda.init()
x = torch.ones(1 << 20, device="cuda")
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for _ in range(steps):
        x = x * 2
    torch.cuda.synchronize()
kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
kept = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
print(f"torch_profiled: steps={steps} profiled_kernels={len(kernels)}", file=sys.stderr, flush=True)
