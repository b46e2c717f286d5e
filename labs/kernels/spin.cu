// gpulab's spin kernel for CUDA: keeps the device busy for `cycles` SM clock cycles
// (the backend converts milliseconds with the device clock rate, calibrated once per
// run) and reads and writes its buffer all the while, so the memory is really in use
// for as long as the kernel runs: a buffer freed under it is touched until the end.
extern "C" __global__ void spin(unsigned int *buf, unsigned long long words, long long cycles)
{
    unsigned long long tid = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    long long start = clock64();
    if (words == 0) {
        while (clock64() - start < cycles) {
        }
        return;
    }
    unsigned long long i = tid % words;
    unsigned int acc = 0;
    do {
        acc += buf[i];
        buf[i] = acc + 1u;
        i += stride;
        if (i >= words) {
            i = tid % words;
        }
    } while (clock64() - start < cycles);
}
