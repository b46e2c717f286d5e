// spin: keeps the device busy for a calibrated number of loop iterations and
// touches one word per 4 KiB page of `buf`, so the buffer is really in use while
// the kernel runs. gpulab calibrates `iters` per device (src/backend/opencl/spin.rs).
//
// The loop is a linear congruential generator: each step depends on the last, so
// the compiler can neither vectorise nor fold it, and its time is linear in `iters`.
__kernel void spin(__global uint *buf, ulong iters, ulong words)
{
    const ulong gid = get_global_id(0);
    const ulong n = get_global_size(0);
    const ulong page_words = 1024; /* 4 KiB of uint */

    for (ulong w = gid * page_words; w < words; w += n * page_words) {
        buf[w] += 1u;
    }

    uint x = (uint)gid + 1u;
    for (ulong i = 0; i < iters; ++i) {
        x = x * 1664525u + 1013904223u;
    }
    /* Never true in practice; keeps the loop's result alive. */
    if (x == 0x9e3779b9u && words > 0) {
        buf[0] = x;
    }
}
