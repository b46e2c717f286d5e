"""JAX as its users meet it: the first array makes XLA take most of the GPU
for its pool (preallocation), whatever the array's size. Not written for
gpulab; it prints JAX's own figures at each step (to stderr, in bytes).

    python3 jax_prealloc.py [pause_s=1.0]
"""

import sys
import time

import jax
import jax.numpy as jnp

pause = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0


def say(step):
    s = jax.devices()[0].memory_stats()
    print(
        f"jax_prealloc: step={step} bytes_in_use={s['bytes_in_use']} "
        f"pool_bytes={s.get('pool_bytes')}",
        file=sys.stderr,
        flush=True,
    )
    time.sleep(pause)


x = jnp.ones((1 << 28,), jnp.float32)  # 1 GiB
x.block_until_ready()
say("held")
del x
say("deleted")
