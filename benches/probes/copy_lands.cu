// An independent probe of what cuda-copy-lands and cuda-event-timing claim,
// against the CUDA runtime as a program would write it, sharing no code with
// gpulab: a copy queued behind a kernel on stream s, its source freed with
// cudaFreeAsync on s (ordered) or on s2 (unordered) and a new allocation on s2
// memset to zero; then the share of the copied words that hold the pattern.
// And event timing: cudaEventElapsedTime around a kernel, the status of a
// query before and after the wait, with and without cudaEventDisableTiming.
//
//   nvcc -O2 -o copy_lands benches/probes/copy_lands.cu && ./copy_lands
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); exit(1); } } while (0)

__global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
}

__global__ void pattern(unsigned *p, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (unsigned)i * 2654435761u;
}

int main() {
    int rate_khz = 0, sms = 0;
    CHECK(cudaDeviceGetAttribute(&rate_khz, cudaDevAttrClockRate, 0));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    long long cycles = (long long)rate_khz * 100;  // about 100 ms at the base clock
    size_t n = 64u << 20, words = n / 4;
    for (int ordered = 1; ordered >= 0; ordered--) {
        cudaStream_t s, s2;
        CHECK(cudaStreamCreate(&s));
        CHECK(cudaStreamCreate(&s2));
        unsigned *d, *d2, *h;
        CHECK(cudaMallocAsync((void **)&d, n, s));
        pattern<<<sms * 8, 256, 0, s>>>(d, words);
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaMallocHost((void **)&h, n));
        spin<<<1, 1, 0, s>>>(cycles);
        CHECK(cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, s));
        CHECK(cudaFreeAsync(d, ordered ? s : s2));
        CHECK(cudaMallocAsync((void **)&d2, n, s2));
        CHECK(cudaMemsetAsync(d2, 0, n, s2));
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaStreamSynchronize(s2));
        size_t holding = 0;
        for (size_t i = 0; i < words; i++) holding += h[i] == (unsigned)i * 2654435761u;
        printf("%-9s %s: %.6f of the words hold the pattern\n", ordered ? "ordered" : "unordered",
               d2 == d ? "the new allocation reused the freed memory" : "the new allocation is elsewhere",
               (double)holding / words);
        CHECK(cudaFreeAsync(d2, s2));
        CHECK(cudaStreamSynchronize(s2));
        CHECK(cudaFreeHost(h));
        CHECK(cudaStreamDestroy(s));
        CHECK(cudaStreamDestroy(s2));
    }

    for (unsigned flags : {cudaEventDefault, cudaEventBlockingSync, cudaEventDisableTiming}) {
        cudaStream_t s;
        CHECK(cudaStreamCreate(&s));
        cudaEvent_t a, b;
        CHECK(cudaEventCreateWithFlags(&a, flags));
        CHECK(cudaEventCreateWithFlags(&b, flags));
        CHECK(cudaEventRecord(a, s));
        spin<<<1, 1, 0, s>>>(cycles);
        CHECK(cudaEventRecord(b, s));
        cudaError_t early = cudaEventQuery(b);
        CHECK(cudaEventSynchronize(b));
        cudaError_t late = cudaEventQuery(b);
        float ms = -1;
        cudaError_t el = cudaEventElapsedTime(&ms, a, b);
        printf("events flags %u: early query %s, late query %s, elapsed %s %.3f ms\n", flags,
               cudaGetErrorName(early), cudaGetErrorName(late), cudaGetErrorName(el), ms);
        CHECK(cudaEventDestroy(a));
        CHECK(cudaEventDestroy(b));
        CHECK(cudaStreamDestroy(s));
    }
    return 0;
}
