/* A job of N ranks started the way torchrun and mpirun start one: a launcher
 * that forks and execs the program once per rank, each with RANK, LOCAL_RANK
 * and WORLD_SIZE set. Each rank makes an OpenCL context and a buffer of
 * (rank + 1) MiB, releases them, and leaves one buffer of 2 * (rank + 1) MiB
 * unreleased. Not written for gpulab; each rank prints what it did so a test
 * can compare it with what `gpulab watch` says of each rank.
 *
 *   cc -o ranks ranks.c -lOpenCL && ./ranks [N=2]
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static int rank_main(int rank) {
  cl_platform_id p;
  cl_device_id d;
  cl_int e;
  if (clGetPlatformIDs(1, &p, NULL) != CL_SUCCESS ||
      clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, NULL) != CL_SUCCESS) {
    fprintf(stderr, "ranks: no OpenCL device\n");
    return 3;
  }
  size_t mib = (size_t)1 << 20;
  cl_context c = clCreateContext(NULL, 1, &d, NULL, NULL, &e);
  if (e != CL_SUCCESS) return 4;
  cl_mem b = clCreateBuffer(c, CL_MEM_READ_WRITE, (rank + 1) * mib, NULL, &e);
  cl_mem kept = clCreateBuffer(c, CL_MEM_READ_WRITE, 2 * (rank + 1) * mib, NULL, &e);
  if (e != CL_SUCCESS) return 5;
  clReleaseMemObject(b);
  fprintf(stderr, "ranks: rank=%d pid=%d made=%zu kept=%zu\n", rank, (int)getpid(),
          (size_t)3 * (rank + 1) * mib, 2 * (rank + 1) * mib);
  (void)kept; /* never released: the job's leak, per rank */
  return 0;
}

int main(int argc, char **argv) {
  const char *rank = getenv("RANK");
  if (rank) return rank_main(atoi(rank));
  int n = argc > 1 ? atoi(argv[1]) : 2;
  char size[16];
  snprintf(size, sizeof size, "%d", n);
  int failed = 0;
  for (int r = 0; r < n; r++) {
    pid_t child = fork();
    if (child == 0) {
      char num[16];
      snprintf(num, sizeof num, "%d", r);
      setenv("RANK", num, 1);
      setenv("LOCAL_RANK", num, 1);
      setenv("WORLD_SIZE", size, 1);
      execv("/proc/self/exe", argv);
      _exit(127);
    }
  }
  int status;
  while (wait(&status) > 0) failed |= !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return failed;
}
