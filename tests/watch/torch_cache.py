"""PyTorch's caching allocator, as its users meet it: `del x` leaves the memory
with the process, `torch.cuda.empty_cache()` gives it back. Not written for
gpulab; it prints what PyTorch itself says at each step, so a run under
`gpulab watch` can be compared with PyTorch's own figures.

    python3 torch_cache.py [pause_s=0.5]
"""

import sys
import time

import torch

pause = float(sys.argv[1]) if len(sys.argv) > 1 else 0.5
mib = 1 << 20


def say(step):
    torch.cuda.synchronize()
    print(
        f"torch_cache: step={step} allocated_mib={torch.cuda.memory_allocated() // mib} "
        f"reserved_mib={torch.cuda.memory_reserved() // mib}",
        file=sys.stderr,
        flush=True,
    )
    time.sleep(pause)


torch.cuda.init()
say("start")
x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
x.fill_(1)
say("allocated")
del x
say("deleted")
torch.cuda.empty_cache()
say("emptied")
