// A CUDA program that gives memory, streams and events back and then goes on
// using them, as compute-sanitizer's API checks and valgrind's invalid frees
// catch. It was written before gpulab checked any of it: each step prints the
// status the runtime returned, so a test can compare what `gpulab watch` says
// with what the program did.
//
//   nvcc -o cuda_misuse cuda_misuse.cu
//   ./cuda_misuse [step|all|clean]
//
// Steps (each one line's mistake, at the line that makes it):
//   double-free     cudaFree of memory already freed
//   sync-free       cudaFree of memory cudaMallocAsync made
//   after-async     a copy out of memory cudaFreeAsync gave back to the pool
//   after-free      a memset of memory already freed
//   stream-twice    cudaStreamDestroy of a destroyed stream
//   stream-after    cudaStreamSynchronize of a destroyed stream
//   event-twice     cudaEventDestroy of a destroyed event
//   event-after     cudaEventSynchronize of a destroyed event
//   unordered-free  cudaFreeAsync on one stream of memory a kernel on another
//                   stream uses, with no event between them
// `all` runs each in turn; `clean` makes the same calls in the right order.

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

static const size_t N = 1u << 20;

static void said(const char *step, cudaError_t e) {
  printf("%s %d %s\n", step, (int)e, cudaGetErrorName(e));
  fflush(stdout);
  (void)cudaGetLastError();  // the next step starts from no error
}

static void double_free(bool clean) {
  void *a = nullptr;
  cudaMalloc(&a, N);
  cudaFree(a);
  if (!clean) said("double-free", cudaFree(a));  // misuse: double free
}

static void sync_free(cudaStream_t s, bool clean) {
  void *b = nullptr;
  cudaMallocAsync(&b, N, s);
  cudaStreamSynchronize(s);
  if (clean) {
    cudaFreeAsync(b, s);
    cudaStreamSynchronize(s);
  } else {
    said("sync-free", cudaFree(b));  // misuse: sync free of ordered memory
  }
}

static void after_async(cudaStream_t s, bool clean) {
  static unsigned char host[1u << 20];
  void *c = nullptr;
  cudaMallocAsync(&c, N, s);
  cudaMemsetAsync(c, 7, N, s);
  if (clean) {
    cudaMemcpyAsync(host, c, N, cudaMemcpyDeviceToHost, s);
    cudaFreeAsync(c, s);
  } else {
    cudaFreeAsync(c, s);
    said("after-async", cudaMemcpyAsync(host, c, N, cudaMemcpyDeviceToHost, s));  // misuse: use after free
  }
  cudaStreamSynchronize(s);
}

static void after_free(bool clean) {
  void *d = nullptr;
  cudaMalloc(&d, N);
  if (clean) {
    cudaMemset(d, 0, N);
    cudaFree(d);
  } else {
    cudaFree(d);
    said("after-free", cudaMemset(d, 0, N));  // misuse: use after free
  }
}

static void stream_twice(bool clean) {
  cudaStream_t t;
  cudaStreamCreate(&t);
  cudaStreamDestroy(t);
  if (!clean) said("stream-twice", cudaStreamDestroy(t));  // misuse: destroyed twice
}

static void stream_after(bool clean) {
  cudaStream_t t;
  cudaStreamCreate(&t);
  if (clean) {
    cudaStreamSynchronize(t);
    cudaStreamDestroy(t);
  } else {
    cudaStreamDestroy(t);
    said("stream-after", cudaStreamSynchronize(t));  // misuse: use after destroy
  }
}

static void event_twice(bool clean) {
  cudaEvent_t e;
  cudaEventCreate(&e);
  cudaEventDestroy(e);
  if (!clean) said("event-twice", cudaEventDestroy(e));  // misuse: destroyed twice
}

static void event_after(cudaStream_t s, bool clean) {
  cudaEvent_t e;
  cudaEventCreate(&e);
  cudaEventRecord(e, s);
  if (clean) {
    cudaEventSynchronize(e);
    cudaEventDestroy(e);
  } else {
    cudaEventDestroy(e);
    said("event-after", cudaEventSynchronize(e));  // misuse: use after destroy
  }
}

__global__ void fill(int *p, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = 1;
}

static void unordered_free(cudaStream_t s, bool clean) {
  cudaStream_t other;
  cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking);
  int *f = nullptr;
  cudaMallocAsync((void **)&f, N, s);
  fill<<<64, 256, 0, s>>>(f, N / sizeof(int));
  if (clean) {
    cudaEvent_t used;
    cudaEventCreateWithFlags(&used, cudaEventDisableTiming);
    cudaEventRecord(used, s);
    cudaStreamWaitEvent(other, used, 0);
    cudaFreeAsync(f, other);
    cudaEventDestroy(used);
  } else {
    said("unordered-free", cudaFreeAsync(f, other));  // misuse: unordered free
  }
  cudaStreamSynchronize(other);
  cudaStreamSynchronize(s);
  cudaStreamDestroy(other);
}

int main(int argc, char **argv) {
  const char *step = argc > 1 ? argv[1] : "all";
  bool clean = strcmp(step, "clean") == 0;
  bool all = clean || strcmp(step, "all") == 0;
  auto on = [&](const char *name) { return all || strcmp(step, name) == 0; };
  cudaStream_t s;
  if (cudaStreamCreate(&s) != cudaSuccess) {
    fprintf(stderr, "no CUDA device\n");
    return 2;
  }
  if (on("double-free")) double_free(clean);
  if (on("sync-free")) sync_free(s, clean);
  if (on("after-async")) after_async(s, clean);
  if (on("after-free")) after_free(clean);
  if (on("stream-twice")) stream_twice(clean);
  if (on("stream-after")) stream_after(clean);
  if (on("event-twice")) event_twice(clean);
  if (on("event-after")) event_after(s, clean);
  if (on("unordered-free")) unordered_free(s, clean);
  cudaStreamDestroy(s);
  printf("done\n");
  return 0;
}
