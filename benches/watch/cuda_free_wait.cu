// Does the observer change what it observes? The two timings the CUDA labs are
// about, in a program of its own: how long cudaFree waits for a kernel still
// running (it synchronises), and how soon cudaFreeAsync returns (it does not).
//
//   nvcc -o cuda_free_wait cuda_free_wait.cu && ./cuda_free_wait [kernel_ms=200]

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cuda_runtime.h>

__global__ void spin(unsigned long long ns) {
  unsigned long long start, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - start < ns);
}

static double now_ms() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

int main(int argc, char **argv) {
  double kernel_ms = argc > 1 ? atof(argv[1]) : 200;
  unsigned long long ns = (unsigned long long)(kernel_ms * 1e6);
  void *p = nullptr, *q = nullptr;
  if (cudaMalloc(&p, 64u << 20) != cudaSuccess) return 1;
  spin<<<1, 1>>>(ns);
  double a = now_ms();
  cudaFree(p);
  double free_ms = now_ms() - a;

  cudaMallocAsync(&q, 64u << 20, 0);
  spin<<<1, 1>>>(ns);
  a = now_ms();
  cudaFreeAsync(q, 0);
  double free_async_ms = now_ms() - a;
  cudaDeviceSynchronize();
  fprintf(stderr, "cuda_free_wait: kernel_ms=%.0f free_ms=%.3f free_async_ms=%.3f\n",
          kernel_ms, free_ms, free_async_ms);
  return 0;
}
