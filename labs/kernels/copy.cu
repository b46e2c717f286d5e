// gpulab's copy kernel for CUDA: copies `src` into `dst`, as many u32s as the
// smaller of the two holds, grid-strided. Takes no duration.
extern "C" __global__ void copy(const unsigned int *src, unsigned int *dst,
                                unsigned long long words_src, unsigned long long words_dst)
{
    unsigned long long words = words_src < words_dst ? words_src : words_dst;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < words;
         i += stride) {
        dst[i] = src[i];
    }
}
