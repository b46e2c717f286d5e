// pattern: writes a pattern (each word's index times a golden-ratio constant)
// into every word of `buf`, each work-item a strided share: every page is
// written, so the memory is committed and in use until it ends. It takes no
// duration: it lasts as long as the writes do.
__kernel void pattern(__global uint *buf, ulong words)
{
    const ulong n = get_global_size(0);
    for (ulong w = get_global_id(0); w < words; w += n) {
        buf[w] = (uint)w * 2654435761u;
    }
}
