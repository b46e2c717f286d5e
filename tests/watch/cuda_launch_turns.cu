// Kernel launches that repeat, then a new function, then repeats again (#47):
// `gpulab watch` stops watching launches once they repeat, and watches again
// where code is loaded (here a module loaded from PTX with the driver API,
// before its one function's first launch), so the new function's first
// launch is watched with no clock involved.
//
//   nvcc -o cuda_launch_turns cuda_launch_turns.cu -lcuda && ./cuda_launch_turns [repeats=2000]
// Prints `cuda_launch_turns: launches=N`, every launch it made.
#include <cstdio>
#include <cstdlib>
#include <cuda.h>
#include <cuda_runtime.h>

__global__ void again(int *p) { if (p) p[threadIdx.x] += 1; }

static const char *FRESH =
    ".version 7.0\n"
    ".target sm_75\n"
    ".address_size 64\n"
    ".visible .entry fresh()\n"
    "{\n"
    "  ret;\n"
    "}\n";

int main(int argc, char **argv) {
  long repeats = argc > 1 ? atol(argv[1]) : 2000;
  int *p = nullptr;
  if (cudaMalloc(&p, 4096) != cudaSuccess) {
    fprintf(stderr, "cuda_launch_turns: no CUDA device\n");
    return 1;
  }
  long launches = 0;
  for (long i = 0; i < repeats; i++, launches++) again<<<1, 32>>>(p);
  CUmodule module;
  CUfunction fresh;
  if (cuModuleLoadData(&module, FRESH) != CUDA_SUCCESS ||
      cuModuleGetFunction(&fresh, module, "fresh") != CUDA_SUCCESS ||
      cuLaunchKernel(fresh, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr) != CUDA_SUCCESS) {
    fprintf(stderr, "cuda_launch_turns: the PTX module did not load or launch\n");
    return 1;
  }
  launches++;
  for (long i = 0; i < repeats; i++, launches++) again<<<1, 32>>>(p);
  if (cudaDeviceSynchronize() != cudaSuccess) return 1;
  cuModuleUnload(module);
  cudaFree(p);
  fprintf(stderr, "cuda_launch_turns: launches=%ld\n", launches);
  return 0;
}
