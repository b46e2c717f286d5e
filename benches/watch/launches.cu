// What watching costs the calls a training loop makes most: empty kernel
// launches (the launch itself, nothing on the device to wait for) and small
// stream-ordered allocation/free pairs, each timed by the program itself
// after a warm-up. Run it bare and under `gpulab watch`; the difference per
// call is the observer's cost (benches/watch/overhead.sh alternates them).
//
//   nvcc -O2 -o launches launches.cu && ./launches [launches=200000] [pairs=100000]
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cuda_runtime.h>

__global__ void empty() {}

static double now_s() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 200000;
  long m = argc > 2 ? atol(argv[2]) : 100000;
  cudaStream_t s;
  if (cudaStreamCreate(&s) != cudaSuccess) {
    fprintf(stderr, "launches: no CUDA device\n");
    return 1;
  }
  for (int i = 0; i < 1000; i++) empty<<<1, 1, 0, s>>>();
  cudaStreamSynchronize(s);
  double t0 = now_s();
  for (long i = 0; i < n; i++) empty<<<1, 1, 0, s>>>();
  double t1 = now_s();
  cudaStreamSynchronize(s);
  for (int i = 0; i < 1000; i++) {
    void *p;
    cudaMallocAsync(&p, 256, s);
    cudaFreeAsync(p, s);
  }
  cudaStreamSynchronize(s);
  double t2 = now_s();
  for (long i = 0; i < m; i++) {
    void *p;
    cudaMallocAsync(&p, 256, s);
    cudaFreeAsync(p, s);
  }
  double t3 = now_s();
  cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  fprintf(stderr, "launches: launches=%ld launch_ns=%.1f pairs=%ld pair_ns=%.1f\n", n,
          (t1 - t0) / n * 1e9, m, (t3 - t2) / m * 1e9);
  return 0;
}
