# Keeps a tensor a step (# grows), imports `torch._inductor` after two steps
# as PyTorch's optimizers do, makes three through a library (# library), then
# asks for more than the device holds (# refused). It prints whether
# `torch._inductor` was imported at each step: gpulab's hook must import
# nothing. `history.py never` never imports it; `history.py many` also makes
# a tensor at each of 230 lines of generated code before the refusal (more
# lines than the hook sends: tests/fixtures/corpus-pocl/standin_history.jsonl).
# Run by tests/watch_python.rs under `gpulab watch --torch-history` and
# without it.
import sys
import time

import pyopencl as cl

sys.path.insert(0, sys.path[0] + "/site-packages")

ctx = cl.create_some_context(interactive=False)
buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 1 << 20)

import torch

# The hook attaches itself as PyTorch's import ends; CUDA starts after.
time.sleep(0.5)
torch.cuda.init()
import layers

kept = []
for step in range(6):
    print("step", step, "inductor", "torch._inductor" in sys.modules)
    kept.append(torch.empty(4 << 20))  # grows
    time.sleep(0.25)
    if step == 1 and sys.argv[1:] != ["never"]:
        import torch._inductor
acts = layers.activations(3, 1 << 20)  # library
if sys.argv[1:] == ["many"]:
    many = []
    exec(compile("many.append(torch.empty(4096))\n" * 230, "generated.py", "exec"))
time.sleep(0.4)
try:
    torch.empty(1 << 30)  # refused
except RuntimeError as e:
    print("refused:", e)
print("kept", len(kept), len(acts))
