// An independent probe of what cuda-managed-both-ways measures, against the
// CUDA runtime as a program would write it, sharing no code with gpulab: the
// device's free memory (cudaMemGetInfo) around a managed buffer prefetched to
// the device and then sent back to the host by a prefetch to cudaCpuDeviceId
// or by the host's memset, and around a kernel writing a buffer advised to
// prefer the host.
//
//   nvcc -O2 -o managed_back benches/probes/managed_back.cu && ./managed_back
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); exit(1); } } while (0)

__global__ void pattern(unsigned *p, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (unsigned)i * 2654435761u;
}

static double taken_mib(size_t free0) {
    size_t free, total;
    CHECK(cudaMemGetInfo(&free, &total));
    return ((double)free0 - (double)free) / (1 << 20);
}

int main() {
    size_t n = 256u << 20, free0, total;
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    cudaMemLocation device = {cudaMemLocationTypeDevice, 0};
    cudaMemLocation host = {cudaMemLocationTypeHost, 0};
    for (int how = 0; how < 3; how++) {
        const char *name[] = {"prefetch-to-host", "host-touch", "stays"};
        CHECK(cudaMemGetInfo(&free0, &total));
        unsigned *p;
        CHECK(cudaMallocManaged((void **)&p, n));
        double alloc = taken_mib(free0);
        CHECK(cudaMemPrefetchAsync(p, n, device, 0, s));
        CHECK(cudaStreamSynchronize(s));
        double on_device = taken_mib(free0);
        if (how == 0) {
            CHECK(cudaMemPrefetchAsync(p, n, host, 0, s));
            CHECK(cudaStreamSynchronize(s));
        } else if (how == 1) {
            memset(p, 0, n);
        }
        double on_host = taken_mib(free0);
        printf("%-17s taken: %.1f MiB at the allocation, %.1f on the device, %.1f after going back\n",
               name[how], alloc, on_device, on_host);
        CHECK(cudaFree(p));
    }
    CHECK(cudaMemGetInfo(&free0, &total));
    unsigned *p;
    CHECK(cudaMallocManaged((void **)&p, n));
    CHECK(cudaMemAdvise(p, n, cudaMemAdviseSetPreferredLocation, host));
    memset(p, 0, n);
    pattern<<<sms * 8, 256, 0, s>>>(p, n / 4);
    CHECK(cudaStreamSynchronize(s));
    printf("prefer-host       taken: %.1f MiB after a kernel wrote it\n", taken_mib(free0));
    CHECK(cudaFree(p));
    return 0;
}
