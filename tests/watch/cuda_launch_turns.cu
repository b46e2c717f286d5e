// Kernel launches that repeat, then a new function, then repeats again (#47):
// `gpulab watch` stops watching launches once they repeat, and watches again
// where code is loaded (here `cudaFuncGetAttributes` of the new function,
// which reads its attributes through the driver before its first launch), so
// the new function's first launch is watched with no clock involved.
//
//   nvcc -o cuda_launch_turns cuda_launch_turns.cu && ./cuda_launch_turns [repeats=2000]
// Prints `cuda_launch_turns: launches=N`, every launch it made.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void again(int *p) { if (p) p[threadIdx.x] += 1; }
__global__ void fresh(int *p) { if (p) p[threadIdx.x] += 2; }

int main(int argc, char **argv) {
  long repeats = argc > 1 ? atol(argv[1]) : 2000;
  int *p = nullptr;
  if (cudaMalloc(&p, 4096) != cudaSuccess) {
    fprintf(stderr, "cuda_launch_turns: no CUDA device\n");
    return 1;
  }
  long launches = 0;
  for (long i = 0; i < repeats; i++, launches++) again<<<1, 32>>>(p);
  cudaFuncAttributes attr;
  if (cudaFuncGetAttributes(&attr, fresh) != cudaSuccess) return 1;
  fresh<<<1, 32>>>(p);
  launches++;
  for (long i = 0; i < repeats; i++, launches++) again<<<1, 32>>>(p);
  if (cudaDeviceSynchronize() != cudaSuccess) return 1;
  cudaFree(p);
  fprintf(stderr, "cuda_launch_turns: launches=%ld\n", launches);
  return 0;
}
