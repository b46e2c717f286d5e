"""A one-rank NCCL process group, as every DDP job starts: NCCL takes device
memory of its own (buffers, channels, streams) that PyTorch's figures do not
count. Not written for gpulab; it prints PyTorch's own figures at each step
(to stderr, in bytes). NVLink multicast stays off (NCCL_NVLS_ENABLE=0).

    python3 nccl_group.py [pause_s=0.5]
"""

import os
import sys
import time

import torch
import torch.distributed as dist

pause = float(sys.argv[1]) if len(sys.argv) > 1 else 0.5
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29531")
os.environ["NCCL_NVLS_ENABLE"] = "0"


def say(step):
    torch.cuda.synchronize()
    print(
        f"nccl_group: step={step} allocated={torch.cuda.memory_allocated()} "
        f"reserved={torch.cuda.memory_reserved()}",
        file=sys.stderr,
        flush=True,
    )
    time.sleep(pause)


torch.cuda.set_device(0)
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
x = torch.ones(16 << 20, device="cuda")
say("grouped")
dist.all_reduce(x)
say("reduced")
dist.destroy_process_group()
say("destroyed")
