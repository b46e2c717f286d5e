"""A launch-heavy PyTorch training loop (#47): an MLP of 1024 -> 4096 -> 1024,
batch 256, SGD, 3,000 steps after 20 warm-up steps, with a 64 MiB temporary
every 50 steps. It makes tens of thousands of kernel launches a second and a
few allocations; it times its own loop (torch.cuda.synchronize and
perf_counter) and its thread's CPU time, so imports and start-up are not
counted.

    python3 torch_mlp.py [steps=3000] [history=off|state]

With `state`, PyTorch keeps the Python stack of each live allocation
(`torch.cuda.memory._record_memory_history(enabled="state", context="alloc",
stacks="python")`): what recording where tensors were made costs this loop.
"""

import sys
import time

import torch

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
history = sys.argv[2] if len(sys.argv) > 2 else "off"
if history == "state":
    torch.cuda.memory._record_memory_history(enabled="state", context="alloc", stacks="python")
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)
).cuda()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(256, 1024, device="cuda")
target = torch.randn(256, 1024, device="cuda")


def step(i):
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(x), target)
    loss.backward()
    opt.step()
    if i % 50 == 0:
        tmp = torch.empty(16 * 1024 * 1024, device="cuda")  # 64 MiB
        tmp.fill_(1.0)
        del tmp


for i in range(20):
    step(i)
torch.cuda.synchronize()
t0, c0 = time.perf_counter(), time.thread_time()
for i in range(steps):
    step(i)
torch.cuda.synchronize()
t1, c1 = time.perf_counter(), time.thread_time()
# The thread's CPU time: launches are made on the CPU, and it leaves out the
# time the thread waited for a core (less noise on a shared host).
print(f"torch_mlp: steps={steps} loop_s={t1 - t0:.4f} loop_cpu_s={c1 - c0:.4f}", file=sys.stderr)
