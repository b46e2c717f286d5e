// gpulab's spin2 kernel for CUDA: spin over two buffers. Keeps the device busy for
// `cycles` SM clock cycles (the same per-run clock calibration as spin: the time
// is the clock's, not a loop's) and reads and writes both buffers all the while,
// so both are really in use for as long as the kernel runs.
extern "C" __global__ void spin2(unsigned int *a, unsigned int *b, unsigned long long words_a,
                                 unsigned long long words_b, long long cycles)
{
    unsigned long long tid = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    long long start = clock64();
    unsigned long long i = 0;
    unsigned int acc = 0;
    do {
        if (words_a > 0) {
            unsigned long long j = (tid + i) % words_a;
            acc += a[j];
            a[j] = acc + 1u;
        }
        if (words_b > 0) {
            unsigned long long j = (tid + i) % words_b;
            acc += b[j];
            b[j] = acc + 1u;
        }
        i += stride;
    } while (clock64() - start < cycles);
}
