"""A PyTorch program that runs out of memory: weights made on one line,
activations kept on two others, until its allocator refuses. PyTorch's own
limit for the process (`set_per_process_memory_fraction`) makes the refusal
come at a few GiB whatever the GPU. Not written for gpulab; it prints what it
kept (to stderr) and exits 3 at the refusal.

    python3 torch_oom.py [fraction=0.02]
"""

import sys

import torch

fraction = float(sys.argv[1]) if len(sys.argv) > 1 else 0.02
torch.cuda.set_per_process_memory_fraction(fraction)
weights = [torch.empty(64 << 20, dtype=torch.uint8, device="cuda") for _ in range(4)]  # weights
kept = []


def activations():
    small = torch.empty(32 << 20, dtype=torch.uint8, device="cuda")  # small
    big = torch.ones(96 << 20, dtype=torch.uint8, device="cuda")  # big
    return small, big


try:
    for step in range(10000):
        kept.extend(activations())
except torch.cuda.OutOfMemoryError:
    print(
        f"torch_oom: refused at step={step} kept={len(kept)} "
        f"allocated={torch.cuda.memory_allocated()}",
        file=sys.stderr,
    )
    sys.exit(3)
print("torch_oom: never refused", file=sys.stderr)
