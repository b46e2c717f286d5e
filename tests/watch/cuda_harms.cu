/* A CUDA program that ends badly, one way per mode, to check that what it did
 * in its last moments reaches `gpulab watch` through CUPTI. Not written for
 * gpulab; it prints what it allocated so a test can compare.
 *
 *   nvcc -o cuda_harms cuda_harms.cu
 *   ./cuda_harms segv       allocates 64 MiB, frees it, then dies of SIGSEGV
 *   ./cuda_harms segv-leak  allocates 64 MiB and 32 MiB, then dies of SIGSEGV
 *   ./cuda_harms exit       allocates 16 MiB, frees it, then leaves by _exit(3)
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void *alloc(size_t bytes) {
  void *p = NULL;
  if (cudaMalloc(&p, bytes) != cudaSuccess) {
    fprintf(stderr, "cuda_harms: cudaMalloc failed\n");
    _exit(4);
  }
  return p;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (!strcmp(mode, "segv")) {
    cudaFree(alloc(64 << 20));
    cudaDeviceSynchronize();
    fprintf(stderr, "cuda_harms: allocs=1 frees=1 leaked_bytes=0\n");
    *(volatile int *)0 = 0;
  } else if (!strcmp(mode, "segv-leak")) {
    alloc(64 << 20);
    alloc(32 << 20);
    cudaDeviceSynchronize();
    fprintf(stderr, "cuda_harms: allocs=2 frees=0 leaked_bytes=%d\n", 96 << 20);
    *(volatile int *)0 = 0;
  } else if (!strcmp(mode, "exit")) {
    cudaFree(alloc(16 << 20));
    cudaDeviceSynchronize();
    fprintf(stderr, "cuda_harms: allocs=1 frees=1 leaked_bytes=0\n");
    _exit(3);
  }
  fprintf(stderr, "usage: cuda_harms segv | segv-leak | exit\n");
  return 2;
}
