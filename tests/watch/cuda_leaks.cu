// A CUDA program with the leaks people ship: each iteration frees its big
// scratch buffer but keeps a small one, forgets every other event, and uses a
// stream-ordered allocation correctly. It was not written for gpulab: it only
// counts its own calls and prints them, so a test can compare what
// `gpulab watch` saw (and `compute-sanitizer --leak-check full` reports) with
// what the program did.
//
//   nvcc -o cuda_leaks cuda_leaks.cu
//   ./cuda_leaks [iterations=4] [pause_ms=0] [noreset]
//
// It calls cudaDeviceReset() at the end unless told `noreset`, as
// compute-sanitizer's leak check asks.

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <unistd.h>

#define CHECK(call)                                                          \
  do {                                                                       \
    cudaError_t e_ = (call);                                                 \
    if (e_ != cudaSuccess) {                                                 \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,          \
              cudaGetErrorString(e_));                                       \
      exit(1);                                                               \
    }                                                                        \
  } while (0)

__global__ void touch(unsigned char *p, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) p[i] = (unsigned char)i;
}

int main(int argc, char **argv) {
  int iterations = argc > 1 ? atoi(argv[1]) : 4;
  int pause_ms = argc > 2 ? atoi(argv[2]) : 0;
  bool reset = !(argc > 3 && strcmp(argv[3], "noreset") == 0);
  const size_t scratch = 64u << 20, kept = 8u << 20, ordered = 32u << 20;

  long buffers_created = 0, buffers_freed = 0, kept_bytes = 0;
  long events_created = 0, events_destroyed = 0;
  long streams_created = 0, streams_destroyed = 0;
  long host_created = 0, host_freed = 0;

  void *pinned = nullptr;
  CHECK(cudaMallocHost(&pinned, 4u << 20));  // never freed
  host_created++;

  for (int it = 0; it < iterations; it++) {
    unsigned char *big = nullptr, *small = nullptr, *async_buf = nullptr;
    CHECK(cudaMalloc(&big, scratch));
    buffers_created++;
    CHECK(cudaMalloc(&small, kept));  // never freed
    buffers_created++;
    kept_bytes += kept;

    touch<<<(unsigned)((scratch + 255) / 256), 256>>>(big, scratch);
    CHECK(cudaGetLastError());
    cudaEvent_t done;
    CHECK(cudaEventCreate(&done));
    events_created++;
    CHECK(cudaEventRecord(done));
    CHECK(cudaEventSynchronize(done));
    if (it % 2 == 0) {  // every other event is forgotten
      CHECK(cudaEventDestroy(done));
      events_destroyed++;
    }
    CHECK(cudaFree(big));
    buffers_freed++;

    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    streams_created++;
    CHECK(cudaMallocAsync((void **)&async_buf, ordered, s));
    buffers_created++;
    touch<<<(unsigned)((ordered + 255) / 256), 256, 0, s>>>(async_buf, ordered);
    CHECK(cudaFreeAsync(async_buf, s));
    buffers_freed++;
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaStreamDestroy(s));
    streams_destroyed++;

    if (pause_ms > 0) usleep(pause_ms * 1000);
  }
  CHECK(cudaDeviceSynchronize());
  if (reset) CHECK(cudaDeviceReset());
  fprintf(stderr,
          "cuda_leaks: iterations=%d buffers_created=%ld buffers_freed=%ld "
          "kept_bytes=%ld events_created=%ld events_destroyed=%ld "
          "streams_created=%ld streams_destroyed=%ld host_created=%ld "
          "host_freed=%ld\n",
          iterations, buffers_created, buffers_freed, kept_bytes,
          events_created, events_destroyed, streams_created,
          streams_destroyed, host_created, host_freed);
  return 0;
}
