"""A job of ranks as torchrun starts one (python3 -m torch.distributed.run
--nproc-per-node N nccl_ranks.py [oom]): each rank takes its GPU (LOCAL_RANK;
ranks share GPU 0 when there are fewer GPUs than ranks, then over gloo, since
NCCL refuses two ranks on one GPU), joins the process group, all-reduces a
tensor of 256 MiB, holds one of (rank + 1) * 256 MiB of its own and prints PyTorch's own figures (to stderr, in
bytes). With `oom`, the last rank then asks for more memory than its GPU has
and exits on PyTorch's OutOfMemoryError while the others wait for it in a
barrier, as a real job's ranks wait in a collective; torchrun then stops them.
Not written for gpulab. NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
"""

import os
import sys
import time

# CUDA numbers GPUs in NVML's order (PCI bus order) here, so the GPU each rank
# prints is the one NVML names.
os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"

import torch
import torch.distributed as dist

os.environ["NCCL_NVLS_ENABLE"] = "0"
oom = len(sys.argv) > 1 and sys.argv[1] == "oom"
rank = int(os.environ["RANK"])
local = int(os.environ["LOCAL_RANK"])
world = int(os.environ["WORLD_SIZE"])
gpus = torch.cuda.device_count()
device = torch.device("cuda", local % gpus)
torch.cuda.set_device(device)
backend = "nccl" if gpus >= world else "gloo"


def say(step):
    torch.cuda.synchronize()
    print(
        f"nccl_ranks: rank={rank} step={step} gpu={device.index} pid={os.getpid()} "
        f"allocated={torch.cuda.memory_allocated()} reserved={torch.cuda.memory_reserved()}",
        file=sys.stderr,
        flush=True,
    )


if backend == "nccl":
    dist.init_process_group("nccl", device_id=device)
else:
    dist.init_process_group("gloo")
x = torch.ones(256 << 18, device=device)
own = torch.zeros(((rank + 1) * 256) << 18, device=device)
dist.all_reduce(x)
say("reduced")
time.sleep(0.5)
if oom and rank == world - 1:
    try:
        free, total = torch.cuda.mem_get_info()
        torch.empty(total + (1 << 30), dtype=torch.uint8, device=device)
    except torch.OutOfMemoryError:
        say("out-of-memory")
        sys.exit(1)
dist.barrier()
say("barrier")
dist.destroy_process_group()
