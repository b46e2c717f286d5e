/* Programs that an agent inside them could harm, one per mode. Not written for
 * gpulab: each prints what it did (and checks its own files) so a test can
 * compare that with what `gpulab watch` saw, and that the program was unharmed.
 *
 *   cc -o harms harms.c -lOpenCL
 *   ./harms fds DIR        closes inherited descriptors, opens its own files,
 *                          calls OpenCL, exits 9 if a file holds anything else
 *   ./harms pairs N        N clRetainMemObject+clReleaseMemObject pairs, then
 *                          releases everything
 *   ./harms segv           releases everything, then dies of SIGSEGV
 *   ./harms segv-leak      leaks a context and a 16 MiB buffer, then SIGSEGV
 *   ./harms forks N        N children forked without exec, each makes and
 *                          releases a context and a buffer, then _exit(0)
 *   ./harms spin MS FILE   calls OpenCL for MS milliseconds, then writes FILE
 *   ./harms term           releases everything, then raises SIGTERM
 *   ./harms threads N I    N threads, each makes and releases I contexts and
 *                          buffers
 *   ./harms rate R S       R calls a second (retain+release pairs on a buffer)
 *                          for S seconds, paced
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static cl_device_id device(void) {
  cl_platform_id p;
  cl_device_id d;
  if (clGetPlatformIDs(1, &p, NULL) != CL_SUCCESS ||
      clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, NULL) != CL_SUCCESS) {
    fprintf(stderr, "harms: no OpenCL device\n");
    exit(3);
  }
  return d;
}

/* A context and a buffer, made and released: 4 object records. Returns 1 when
 * both were made (a driver may refuse in a forked child: NVIDIA's does). */
static int work(cl_device_id d) {
  cl_int e;
  cl_context c = clCreateContext(NULL, 1, &d, NULL, NULL, &e);
  if (e != CL_SUCCESS) return 0;
  cl_mem b = clCreateBuffer(c, CL_MEM_READ_WRITE, 1 << 20, NULL, &e);
  if (e != CL_SUCCESS) {
    clReleaseContext(c);
    return 0;
  }
  clReleaseMemObject(b);
  clReleaseContext(c);
  return 1;
}

static int fds(const char *dir) {
  /* As Python's subprocess does for its children: only 0, 1 and 2 stay. */
  for (int fd = 3; fd < 1024; fd++) close(fd);
  enum { FILES = 12 };
  int mine[FILES];
  char path[4096];
  for (int i = 0; i < FILES; i++) {
    snprintf(path, sizeof path, "%s/data-%d.txt", dir, i);
    mine[i] = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
    if (mine[i] < 0) return 4;
  }
  cl_device_id d = device();
  for (int i = 0; i < 20; i++) work(d);
  for (int i = 0; i < FILES; i++) {
    if (write(mine[i], "mine\n", 5) != 5) return 4;
  }
  int bad = 0;
  for (int i = 0; i < FILES; i++) {
    char buf[64] = {0};
    ssize_t n = pread(mine[i], buf, sizeof buf - 1, 0);
    if (n != 5 || strcmp(buf, "mine\n") != 0) {
      fprintf(stderr, "harms: data-%d.txt (fd %d) holds %zd bytes not written by it\n", i,
              mine[i], n - 5);
      bad = 1;
    }
  }
  fprintf(stderr, "harms: fds contexts=20 buffers=20 files=%s\n", bad ? "touched" : "clean");
  return bad ? 9 : 0;
}

static int pairs(long n) {
  cl_device_id d = device();
  cl_int e;
  cl_context c = clCreateContext(NULL, 1, &d, NULL, NULL, &e);
  cl_mem b = clCreateBuffer(c, CL_MEM_READ_WRITE, 1 << 20, NULL, &e);
  for (long i = 0; i < n; i++) {
    clRetainMemObject(b);
    clReleaseMemObject(b);
  }
  clReleaseMemObject(b);
  clReleaseContext(c);
  fprintf(stderr, "harms: pairs=%ld contexts=1 buffers=1\n", n);
  return 0;
}

static int crash(int leak) {
  cl_device_id d = device();
  cl_int e;
  cl_context c = clCreateContext(NULL, 1, &d, NULL, NULL, &e);
  cl_command_queue q = clCreateCommandQueue(c, d, 0, &e);
  cl_mem b = clCreateBuffer(c, CL_MEM_READ_WRITE, 16 << 20, NULL, &e);
  if (!leak) {
    clReleaseMemObject(b);
    clReleaseCommandQueue(q);
    clReleaseContext(c);
  }
  fprintf(stderr, "harms: crashing leak=%d\n", leak);
  *(volatile int *)0 = 0;
  return 0;
}

static int forks(int n) {
  cl_device_id d = device();
  int made = 0;
  for (int i = 0; i < n; i++) {
    pid_t child = fork();
    if (child == 0) _exit(work(d) ? 0 : 10);
    if (child < 0) return 5;
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status)) return 6;
    made += WEXITSTATUS(status) == 0;
  }
  fprintf(stderr, "harms: forks=%d contexts=%d buffers=%d\n", n, made, made);
  return 0;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int spin(double ms, const char *file) {
  cl_device_id d = device();
  double until = now_ms() + ms;
  long rounds = 0;
  while (now_ms() < until) {
    work(d);
    rounds++;
    usleep(1000);
  }
  FILE *f = fopen(file, "w");
  if (!f) return 4;
  fprintf(f, "done %ld\n", rounds);
  return fclose(f) == 0 ? 0 : 4;
}

static int rate(double per_s, double seconds) {
  cl_device_id d = device();
  cl_int e;
  cl_context c = clCreateContext(NULL, 1, &d, NULL, NULL, &e);
  cl_mem b = clCreateBuffer(c, CL_MEM_READ_WRITE, 1 << 20, NULL, &e);
  double start = now_ms();
  long calls = 0;
  while (now_ms() - start < seconds * 1e3) {
    /* Ahead of the pace: wait for it. */
    while (calls > (now_ms() - start) * per_s / 1e3) usleep(200);
    for (int i = 0; i < 50; i++) {
      clRetainMemObject(b);
      clReleaseMemObject(b);
    }
    calls += 100;
  }
  clReleaseMemObject(b);
  clReleaseContext(c);
  fprintf(stderr, "harms: rate calls=%ld seconds=%.1f\n", calls + 4, (now_ms() - start) / 1e3);
  return 0;
}

static int term(void) {
  work(device());
  fprintf(stderr, "harms: raising SIGTERM\n");
  raise(SIGTERM);
  return 0;
}

static cl_device_id shared_device;
static long per_thread;

static void *thread_work(void *unused) {
  (void)unused;
  for (long i = 0; i < per_thread; i++) work(shared_device);
  return NULL;
}

static int threads(int n, long iterations) {
  shared_device = device();
  per_thread = iterations;
  pthread_t t[64];
  if (n < 1 || n > 64) return 2;
  for (int i = 0; i < n; i++) pthread_create(&t[i], NULL, thread_work, NULL);
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  fprintf(stderr, "harms: threads=%d contexts=%ld buffers=%ld\n", n, n * iterations,
          n * iterations);
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (!strcmp(mode, "fds") && argc > 2) return fds(argv[2]);
  if (!strcmp(mode, "pairs") && argc > 2) return pairs(atol(argv[2]));
  if (!strcmp(mode, "segv")) return crash(0);
  if (!strcmp(mode, "segv-leak")) return crash(1);
  if (!strcmp(mode, "forks") && argc > 2) return forks(atoi(argv[2]));
  if (!strcmp(mode, "spin") && argc > 3) return spin(atof(argv[2]), argv[3]);
  if (!strcmp(mode, "term")) return term();
  if (!strcmp(mode, "rate") && argc > 3) return rate(atof(argv[2]), atof(argv[3]));
  if (!strcmp(mode, "threads") && argc > 3) return threads(atoi(argv[2]), atol(argv[3]));
  fprintf(stderr, "usage: harms fds DIR | pairs N | segv | segv-leak | forks N | spin MS FILE | term | threads N I | rate R S\n");
  return 2;
}
