"""A PyTorch training loop with a classic mistake: it keeps each step's loss
tensor (and so its graph) in a list, so memory grows step by step. Not written
for gpulab; it prints what PyTorch itself says after each step (to stderr, in
bytes), so a run under `gpulab watch` can be compared with PyTorch's figures.

    python3 torch_losses.py [steps=12] [pause_s=0.3]
"""

import sys
import time

import torch

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 12
pause = float(sys.argv[2]) if len(sys.argv) > 2 else 0.3

torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(4096, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 4096)
).cuda()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
losses = []


def say(step):
    torch.cuda.synchronize()
    print(
        f"torch_losses: step={step} allocated={torch.cuda.memory_allocated()} "
        f"reserved={torch.cuda.memory_reserved()}",
        file=sys.stderr,
        flush=True,
    )
    time.sleep(pause)


say("start")
began = time.perf_counter()
for step in range(steps):
    x = torch.randn(2048, 4096, device="cuda")
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward(retain_graph=True)
    opt.step()
    losses.append(loss)  # the mistake: `loss.item()` would keep a float
    say(step)
torch.cuda.synchronize()
print(f"torch_losses: loop_s={time.perf_counter() - began:.4f}", file=sys.stderr, flush=True)
