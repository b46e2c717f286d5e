// Runs a stream program given as words, one CUDA operation each, so a test
// can generate programs nobody wrote and compare what `gpulab watch` says of
// each stream-ordered free with what a happens-before graph of the same
// program says.
//
//   nvcc -o stream_order stream_order.cu
//   ./stream_order a10 k10 r01 w20 f20 ...
//
// Words (S a stream 0-3, M a memory slot 0-2, E an event 0-1):
//   aSM  cudaMallocAsync of slot M on S
//   kSM  a kernel on S writes slot M
//   mSM  cudaMemsetAsync of slot M on S
//   cSM  cudaMemcpyAsync from slot M to the host on S
//   rES  cudaEventRecord of E on S
//   wSE  cudaStreamWaitEvent: S waits for E
//   sS   cudaStreamSynchronize of S
//   eE   cudaEventSynchronize of E
//   pS   cudaStreamQuery of S until it says done
//   d    cudaDeviceSynchronize
//   fSM  cudaFreeAsync of slot M on S
// Streams: 0 the legacy default stream, 1 and 2 blocking streams, 3 a
// non-blocking one. Prints "done" and exits 0 when every call succeeded.

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

static const size_t SLOT = 1u << 16;

__global__ void touch(int *p, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] += 1;
}

static int failed = 0;

static void check(const char *word, cudaError_t e) {
  if (e != cudaSuccess) {
    fprintf(stderr, "%s: %s\n", word, cudaGetErrorName(e));
    failed = 1;
  }
}

int main(int argc, char **argv) {
  static unsigned char host[SLOT];
  cudaStream_t streams[4] = {0};
  if (cudaStreamCreate(&streams[1]) != cudaSuccess) {
    fprintf(stderr, "no CUDA device\n");
    return 2;
  }
  cudaStreamCreate(&streams[2]);
  cudaStreamCreateWithFlags(&streams[3], cudaStreamNonBlocking);
  cudaEvent_t events[2];
  for (auto &e : events) cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  int *slots[3] = {nullptr, nullptr, nullptr};
  for (int i = 1; i < argc; i++) {
    const char *w = argv[i];
    int a = w[1] - '0', b = w[1] ? w[2] - '0' : 0;
    cudaStream_t s = streams[a & 3];
    switch (w[0]) {
      case 'a': check(w, cudaMallocAsync((void **)&slots[b], SLOT, s)); break;
      case 'k': touch<<<4, 128, 0, s>>>(slots[b], SLOT / sizeof(int)); check(w, cudaGetLastError()); break;
      case 'm': check(w, cudaMemsetAsync(slots[b], 0, SLOT, s)); break;
      case 'c': check(w, cudaMemcpyAsync(host, slots[b], SLOT, cudaMemcpyDeviceToHost, s)); break;
      case 'r': check(w, cudaEventRecord(events[a & 1], streams[b & 3])); break;
      case 'w': check(w, cudaStreamWaitEvent(s, events[b & 1], 0)); break;
      case 's': check(w, cudaStreamSynchronize(s)); break;
      case 'e': check(w, cudaEventSynchronize(events[a & 1])); break;
      case 'p': {
        cudaError_t e;
        while ((e = cudaStreamQuery(s)) == cudaErrorNotReady) {
        }
        check(w, e);
        break;
      }
      case 'd': check(w, cudaDeviceSynchronize()); break;
      case 'f': check(w, cudaFreeAsync(slots[b], s)); break;
      default: fprintf(stderr, "%s: not a word\n", w); return 2;
    }
  }
  cudaDeviceSynchronize();
  for (auto &e : events) cudaEventDestroy(e);
  for (int i = 1; i < 4; i++) cudaStreamDestroy(streams[i]);
  printf("done\n");
  return failed;
}
