// What one watched CUDA call costs: N calls of one driver entry the agent
// records (cuEventRecord), then N/10 small cudaMalloc/cudaFree pairs and N/10
// cudaEventCreate/cudaEventDestroy pairs (calls that also make and end objects:
// the event pair is cheap enough to show what `--backtrace` adds per creation),
// timed by the program itself. Run it with and
// without `gpulab watch`; the difference per call is the agent's cost.
//
// With a rate, every call is paced to that many per second (0: as fast as they
// go; a pair counts two), to check that nothing is lost at a given call rate.
//
//   nvcc -o cuda_calls cuda_calls.cu && ./cuda_calls [n=100000] [rate=0]

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cuda_runtime.h>

static double now_s() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

// Waits until `calls` calls since `t0` are due at `rate` per second.
static void pace(double t0, long calls, double rate) {
  if (rate > 0)
    while (now_s() < t0 + calls / rate) {
    }
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 100000;
  double rate = argc > 2 ? atof(argv[2]) : 0;
  cudaEvent_t ev;
  cudaStream_t s;
  if (cudaStreamCreate(&s) != cudaSuccess || cudaEventCreate(&ev) != cudaSuccess) {
    fprintf(stderr, "cuda_calls: no CUDA device\n");
    return 1;
  }
  double t0 = now_s();
  for (long i = 0; i < n; i++) {
    cudaEventRecord(ev, s);
    pace(t0, i + 1, rate);
  }
  double t1 = now_s();
  cudaStreamSynchronize(s);
  long pairs = n / 10;
  double t2 = now_s();
  for (long i = 0; i < pairs; i++) {
    void *p;
    cudaMalloc(&p, 4096);
    cudaFree(p);
    pace(t2, 2 * (i + 1), rate);
  }
  double t3 = now_s();
  for (long i = 0; i < pairs; i++) {
    cudaEvent_t e;
    cudaEventCreate(&e);
    cudaEventDestroy(e);
    pace(t3, 2 * (i + 1), rate);
  }
  double t4 = now_s();
  cudaEventDestroy(ev);
  cudaStreamDestroy(s);
  fprintf(stderr,
          "cuda_calls: records=%ld record_ns=%.0f record_calls_per_s=%.0f "
          "alloc_free_pairs=%ld pair_ns=%.0f event_pair_ns=%.0f\n",
          n, (t1 - t0) / n * 1e9, n / (t1 - t0), pairs, (t3 - t2) / pairs * 1e9,
          (t4 - t3) / pairs * 1e9);
  return 0;
}
