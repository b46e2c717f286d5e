// gpulab's pattern kernel for CUDA: writes each word's index times a
// golden-ratio constant into every u32 of `buf`, grid-strided. Takes no duration.
extern "C" __global__ void pattern(unsigned int *buf, unsigned long long words)
{
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < words;
         i += stride) {
        buf[i] = (unsigned int)i * 2654435761u;
    }
}
