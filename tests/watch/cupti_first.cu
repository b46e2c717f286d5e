// A program that is its own CUPTI client, subscribed before its first CUDA
// call, as a tracing library linked into an application would be. Not written
// for gpulab: under `gpulab watch` the agent finds CUPTI taken and must say by
// whom, instead of showing an empty ledger.
//
//   nvcc -o cupti_first cupti_first.cu -lcupti
#include <cstdio>
#include <cuda_runtime.h>
#include <cupti.h>

static void CUPTIAPI on_call(void *, CUpti_CallbackDomain, CUpti_CallbackId, const void *) {}

int main() {
  CUpti_SubscriberHandle handle;
  CUpti_SubscriberParams params = {CUpti_SubscriberParams_STRUCT_SIZE};
  params.subscriberName = "cupti_first";
  CUptiResult r = cuptiSubscribe_v2(&handle, on_call, nullptr, &params);
  void *buf = nullptr;
  cudaError_t e = cudaMalloc(&buf, 1 << 20);
  cudaFree(buf);
  if (r == CUPTI_SUCCESS) cuptiUnsubscribe(handle);
  fprintf(stderr, "cupti_first: subscribed=%d malloc_ok=%d\n", r == CUPTI_SUCCESS, e == cudaSuccess);
  return 0;
}
