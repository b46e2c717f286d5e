// A CUDA program that runs out of device memory, as programs do: it asks for
// blocks until the driver refuses one, says what it got and what
// cudaMemGetInfo said, frees everything and exits 0. Not written for gpulab.
// With `hold`, it holds MIB of device memory for SECONDS instead, so another
// program runs out on a card it shares.
//
//   nvcc -o cuda_oom cuda_oom.cu
//   ./cuda_oom [block_mib=8192]
//   ./cuda_oom hold MIB SECONDS

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <unistd.h>
#include <vector>

int main(int argc, char **argv) {
    if (argc > 3 && strcmp(argv[1], "hold") == 0) {
        size_t mib = strtoull(argv[2], nullptr, 10);
        void *p = nullptr;
        cudaError_t err = cudaMalloc(&p, mib << 20);
        fprintf(stderr, "cuda_oom: holding %zu MiB: %s\n", mib, cudaGetErrorName(err));
        fflush(stderr);
        sleep((unsigned)atoi(argv[3]));
        cudaFree(p);
        return err == cudaSuccess ? 0 : 1;
    }
    size_t block = (size_t)(argc > 1 ? atoi(argv[1]) : 8192) << 20;
    std::vector<void *> blocks;
    cudaError_t err = cudaSuccess;
    while (true) {
        void *p = nullptr;
        err = cudaMalloc(&p, block);
        if (err != cudaSuccess)
            break;
        blocks.push_back(p);
    }
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    fprintf(stderr, "cuda_oom: %zu blocks of %zu MiB, then %s; free %zu MiB of %zu MiB\n",
            blocks.size(), block >> 20, cudaGetErrorName(err), free_b >> 20, total_b >> 20);
    for (void *p : blocks)
        cudaFree(p);
    return 0;
}
