// What CUPTI itself costs a kernel launch, before any agent's work: the same
// empty launches as launches.cu, timed by the program, with CUPTI
//   none    not subscribed;
//   rare    subscribed, one rare driver callback enabled (cuMemAlloc_v2);
//   launch  subscribed, the launch callbacks alone enabled, an empty callback;
//   all     subscribed, every driver API callback enabled, an empty callback.
// `rare` against `none` is what a subscriber costs calls it does not watch;
// `launch` against `rare` what calling a callback on each launch costs. The
// agent's own work comes on top (benches/watch/overhead.sh measures it whole).
//
//   nvcc -O2 -o cupti_floor cupti_floor.cu -I/usr/local/cuda/extras/CUPTI/include \
//     -L/usr/local/cuda/extras/CUPTI/lib64 -lcupti
//   ./cupti_floor MODE [launches=200000]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <cuda_runtime.h>
#include <cupti.h>

__global__ void empty() {}

static double now_s() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static volatile unsigned long calls;

static void CUPTIAPI on_cupti(void *, CUpti_CallbackDomain, CUpti_CallbackId, const void *) {
  calls = calls + 1;
}

static int subscribe(const char *mode) {
  if (strcmp(mode, "none") == 0) return 0;
  CUpti_SubscriberHandle sub;
  if (cuptiSubscribe(&sub, (CUpti_CallbackFunc)on_cupti, nullptr) != CUPTI_SUCCESS) return 1;
  if (strcmp(mode, "all") == 0)
    return cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API) != CUPTI_SUCCESS;
  if (strcmp(mode, "rare") == 0)
    return cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API,
                               CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2) != CUPTI_SUCCESS;
  if (strcmp(mode, "launch") != 0) return 1;
  int enabled = 0;
  for (CUpti_CallbackId id = 1; id < CUPTI_DRIVER_TRACE_CBID_SIZE; id++) {
    const char *name = nullptr;
    if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, id, &name) != CUPTI_SUCCESS || !name)
      continue;
    if (strncmp(name, "cuLaunchKernel", 14) == 0) {
      if (cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, id) != CUPTI_SUCCESS) return 1;
      enabled++;
    }
  }
  return enabled == 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "none";
  long n = argc > 2 ? atol(argv[2]) : 200000;
  if (subscribe(mode) != 0) {
    fprintf(stderr, "cupti_floor: CUPTI refused mode %s\n", mode);
    return 1;
  }
  cudaStream_t s;
  if (cudaStreamCreate(&s) != cudaSuccess) {
    fprintf(stderr, "cupti_floor: no CUDA device\n");
    return 1;
  }
  for (int i = 0; i < 1000; i++) empty<<<1, 1, 0, s>>>();
  cudaStreamSynchronize(s);
  double t0 = now_s();
  for (long i = 0; i < n; i++) empty<<<1, 1, 0, s>>>();
  double t1 = now_s();
  cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  fprintf(stderr, "cupti_floor: mode=%s launches=%ld launch_ns=%.1f callbacks=%lu\n", mode, n,
          (t1 - t0) / n * 1e9, (unsigned long)calls);
  return 0;
}
