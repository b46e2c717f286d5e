// An independent probe of what cuda-pageable-copy and cuda-mapped-host claim,
// written against the CUDA runtime as a program would, sharing no code with
// gpulab: how long cudaMemcpyAsync holds the host behind a 200 ms kernel on its
// stream (pinned vs malloc'd, each direction, at 1 and 256 MiB), and what
// mapped pinned memory costs in device memory and in a kernel's time.
//
//   nvcc -O2 -o host_memory benches/probes/host_memory.cu && ./host_memory
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); exit(1); } } while (0)

__global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
}

__global__ void fill(unsigned *p, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (unsigned)i * 2654435761u;
}

static double ms_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

int main() {
    int rate_khz = 0;
    CHECK(cudaDeviceGetAttribute(&rate_khz, cudaDevAttrClockRate, 0));
    long long cycles = (long long)rate_khz * 200;  // about 200 ms at the base clock
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    spin<<<1, 1, 0, s>>>(1000);  // load the module
    CHECK(cudaStreamSynchronize(s));

    for (size_t mib : {1, 256}) {
        size_t n = mib << 20;
        void *d;
        CHECK(cudaMalloc(&d, n));
        for (int pinned = 1; pinned >= 0; pinned--) {
            for (int to_host = 1; to_host >= 0; to_host--) {
                void *h;
                if (pinned) CHECK(cudaMallocHost(&h, n));
                else { h = malloc(n); memset(h, 1, n); }
                auto t0 = std::chrono::steady_clock::now();
                spin<<<1, 1, 0, s>>>(cycles);
                double launch = ms_since(t0);
                auto t1 = std::chrono::steady_clock::now();
                if (to_host) CHECK(cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, s));
                else CHECK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s));
                double copy = ms_since(t1);
                auto t2 = std::chrono::steady_clock::now();
                CHECK(cudaStreamSynchronize(s));
                double sync = ms_since(t2);
                printf("copy %4zu MiB %-8s %-9s returned after %8.3f ms, sync %8.3f ms (launch %.3f)\n",
                       mib, pinned ? "pinned" : "malloc", to_host ? "to-host" : "to-device", copy, sync, launch);
                if (pinned) CHECK(cudaFreeHost(h)); else free(h);
            }
        }
        CHECK(cudaFree(d));
    }

    size_t n = 256u << 20;
    size_t free0, free1, total;
    for (int mapped = 0; mapped <= 1; mapped++) {
        CHECK(cudaMemGetInfo(&free0, &total));
        void *h = nullptr, *dp = nullptr;
        if (mapped) {
            CHECK(cudaHostAlloc(&h, n, cudaHostAllocMapped));
            CHECK(cudaHostGetDevicePointer(&dp, h, 0));
        } else {
            CHECK(cudaMalloc(&dp, n));
        }
        CHECK(cudaMemGetInfo(&free1, &total));
        cudaEvent_t a, b;
        CHECK(cudaEventCreate(&a));
        CHECK(cudaEventCreate(&b));
        CHECK(cudaEventRecord(a, s));
        fill<<<sms * 8, 256, 0, s>>>((unsigned *)dp, n / 4);
        CHECK(cudaEventRecord(b, s));
        CHECK(cudaStreamSynchronize(s));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        printf("fill 256 MiB %-13s device memory taken %7.1f MiB, kernel %.3f ms, pointer %s the host's\n",
               mapped ? "mapped-host" : "device-buffer", (double)(free0 - free1) / (1 << 20), ms,
               mapped ? (dp == h ? "is" : "is not") : "-");
        if (mapped) CHECK(cudaFreeHost(h)); else CHECK(cudaFree(dp));
        CHECK(cudaEventDestroy(a));
        CHECK(cudaEventDestroy(b));
    }
    return 0;
}
