// cuda-free-sync's default variant (free-used) as a plain CUDA program, no gpulab:
// what any program making these calls pays for the driver's start and exit. The
// wall time of `gpulab run cuda-free-sync` is compared with this one's in
// docs/benchmarks.md (#12's run latency). Built on the GPU host:
//   nvcc -O2 -o plain_free_sync benches/latency/plain_free_sync.cu
//   ./plain_free_sync [size_mib=256] [kernel_ms=200]
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

// gpulab's own spin kernel, the very source its CUDA backend compiles.
#include "../../labs/kernels/spin.cu"

static void check(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
        exit(4);
    }
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], 0, 10) : 256;
    double ms = argc > 2 ? atof(argv[2]) : 200.0;
    int khz = 0, sms = 0;
    check(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0), "clock rate");
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SM count");
    cudaStream_t s;
    check(cudaStreamCreate(&s), "cudaStreamCreate");
    unsigned int *buf;
    size_t bytes = mib << 20;
    check(cudaMalloc(&buf, bytes), "cudaMalloc");
    spin<<<sms, 128, 0, s>>>(buf, bytes / 4, (long long)(ms * khz));
    check(cudaGetLastError(), "launch");
    check(cudaFree(buf), "cudaFree");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    check(cudaStreamDestroy(s), "cudaStreamDestroy");
    return 0;
}
