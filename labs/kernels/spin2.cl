// spin2: spin over two buffers. Keeps the device busy for a calibrated number of
// loop iterations and touches one word per 4 KiB page of both `a` and `b`, so
// both buffers are really in use while the kernel runs. gpulab calibrates
// `iters` per device for this kernel itself (src/backend/opencl/spin.rs).
//
// The loop is spin's linear congruential generator: each step depends on the
// last, so the compiler can neither vectorise nor fold it.
__kernel void spin2(__global uint *a, __global uint *b, ulong iters, ulong words_a, ulong words_b)
{
    const ulong gid = get_global_id(0);
    const ulong n = get_global_size(0);
    const ulong page_words = 1024; /* 4 KiB of uint */

    for (ulong w = gid * page_words; w < words_a; w += n * page_words) {
        a[w] += 1u;
    }
    for (ulong w = gid * page_words; w < words_b; w += n * page_words) {
        b[w] += 1u;
    }

    uint x = (uint)gid + 1u;
    for (ulong i = 0; i < iters; ++i) {
        x = x * 1664525u + 1013904223u;
    }
    /* Never true in practice; keeps the loop's result alive. */
    if (x == 0x9e3779b9u && words_a > 0) {
        a[0] = x;
    }
    if (x == 0x7f4a7c15u && words_b > 0) {
        b[0] = x;
    }
}
