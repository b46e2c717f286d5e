// gpulab's heap kernel for CUDA: each block takes its share of `buf` as scratch
// from the device heap (`malloc` in the kernel), writes the pattern kernel's
// values there, copies them into `buf`, and frees the scratch. A block whose
// `malloc` returns NULL (the heap is full) writes nothing, so the share of `buf`
// that holds the pattern afterwards is the share of the blocks the heap served.
// Every block's scratch is live at once, so the heap must hold `buf`'s size
// (and the allocator's own bookkeeping) for all of them to be served.
extern "C" __global__ void heap(unsigned int *buf, unsigned long long words)
{
    __shared__ unsigned int *scratch;
    unsigned long long per = (words + gridDim.x - 1) / gridDim.x;
    unsigned long long lo = blockIdx.x * per;
    unsigned long long hi = lo + per < words ? lo + per : words;
    if (threadIdx.x == 0) {
        scratch = lo < hi ? (unsigned int *)malloc((hi - lo) * sizeof(unsigned int)) : 0;
    }
    __syncthreads();
    if (scratch == 0) {
        return;
    }
    for (unsigned long long i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        scratch[i - lo] = (unsigned int)i * 2654435761u;
    }
    __syncthreads();
    for (unsigned long long i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        buf[i] = scratch[i - lo];
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        free(scratch);
    }
}
