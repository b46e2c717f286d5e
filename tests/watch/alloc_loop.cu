// What the agent costs a program that allocates: N cudaMalloc/cudaFree pairs
// of 4 KiB, timed by the program itself (printed to stderr). Not written for
// gpulab; run bare, under `gpulab watch --backtrace=off|caller|full`, to see
// what taking each creating call's stack costs.
//
//     nvcc -o alloc_loop alloc_loop.cu && ./alloc_loop [pairs=20000]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

int main(int argc, char **argv) {
    int pairs = argc > 1 ? atoi(argv[1]) : 20000;
    void *p = nullptr;
    if (cudaMalloc(&p, 4096) != cudaSuccess) return 1; // the context, before the clock
    cudaFree(p);
    auto began = std::chrono::steady_clock::now();
    for (int i = 0; i < pairs; i++) {
        if (cudaMalloc(&p, 4096) != cudaSuccess) return 1;
        cudaFree(p);
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    fprintf(stderr, "alloc_loop: pairs=%d loop_s=%.4f per_pair_us=%.3f\n", pairs, s, s / pairs * 1e6);
    return 0;
}
