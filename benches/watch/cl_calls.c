/* What one watched OpenCL call costs: N clRetainMemObject/clReleaseMemObject
 * pairs on one buffer, timed by the program itself. Run it with and without
 * `gpulab watch`; the difference per call is the agent's cost.
 *
 * With a rate, the calls are paced to that many per second (0: as fast as
 * they go), to check that nothing is lost at a given call rate.
 *
 *   cc -O2 -o cl_calls cl_calls.c -lOpenCL && ./cl_calls [n=100000] [gpu|any] [rate=0]
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 100000;
  double rate = argc > 3 ? atof(argv[3]) : 0;
  cl_device_type want = argc > 2 && strcmp(argv[2], "gpu") == 0 ? CL_DEVICE_TYPE_GPU : CL_DEVICE_TYPE_ALL;
  cl_platform_id platforms[8];
  cl_uint np = 0;
  cl_device_id dev = NULL;
  clGetPlatformIDs(8, platforms, &np);
  for (cl_uint i = 0; i < np && !dev; i++)
    if (clGetDeviceIDs(platforms[i], want, 1, &dev, NULL) != CL_SUCCESS) dev = NULL;
  if (!dev) {
    fprintf(stderr, "cl_calls: no OpenCL device\n");
    return 1;
  }
  cl_int err;
  cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  cl_mem buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
  double t0 = now_s(), inside = 0;
  for (long i = 0; i < n; i++) {
    double a = now_s();
    clRetainMemObject(buf);
    clReleaseMemObject(buf);
    inside += now_s() - a;
    if (rate > 0)
      while (now_s() < t0 + 2.0 * (i + 1) / rate) {
      }
  }
  double t1 = now_s();
  clReleaseMemObject(buf);
  clReleaseContext(ctx);
  /* call_ns: time inside the calls only, so pacing does not count. */
  fprintf(stderr, "cl_calls: calls=%ld call_ns=%.0f calls_per_s=%.0f\n", 2 * n,
          inside / (2 * n) * 1e9, 2 * n / (t1 - t0));
  return 0;
}
