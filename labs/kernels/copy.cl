// copy: copies buffer `src` into buffer `dst`, as many 32-bit words as the smaller
// of the two holds, each work-item a strided share. Reads all of one buffer and
// writes all of the other: both are in use until it ends. It takes no duration:
// it lasts as long as the copy does.
__kernel void copy(__global const uint *src, __global uint *dst, ulong words_src, ulong words_dst)
{
    const ulong words = min(words_src, words_dst);
    const ulong n = get_global_size(0);
    for (ulong w = get_global_id(0); w < words; w += n) {
        dst[w] = src[w];
    }
}
