"""A PyTorch loop as training code runs it: matrix products on fresh tensors,
so the caching allocator and thousands of kernel launches are exercised. It
times its own loop (after import and warm-up); run it with and without
`gpulab watch` to see what watching costs a real program.

    python3 torch_loop.py [iterations=2000]
"""

import sys
import time

import torch

n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
x = torch.randn(2048, 2048, device="cuda")
for _ in range(10):
    y = x @ x
torch.cuda.synchronize()
t0 = time.perf_counter()
for i in range(n):
    a = torch.randn(2048, 2048, device="cuda")
    b = (a @ x).relu_()
    y = b.sum()
    del a, b
torch.cuda.synchronize()
t1 = time.perf_counter()
print(f"torch_loop: iterations={n} loop_s={t1 - t0:.3f} ms_per_iteration={(t1 - t0) / n * 1e3:.3f}",
      file=sys.stderr)
