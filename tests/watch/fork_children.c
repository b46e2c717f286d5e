/* A program that forks without exec after its first OpenCL calls, as a
 * pre-fork server or Python's multiprocessing does: parent and child each make
 * and release a context and a buffer. Not written for gpulab; it prints what it
 * did so a test can compare it with what `gpulab watch` saw in each process.
 *
 *   cc -o fork_children fork_children.c -lOpenCL && ./fork_children
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static int contexts, buffers;

static void work(void) {
  cl_platform_id p;
  cl_device_id d;
  cl_int e;
  if (clGetPlatformIDs(1, &p, NULL) != CL_SUCCESS ||
      clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, NULL) != CL_SUCCESS) {
    fprintf(stderr, "fork_children: no OpenCL device\n");
    exit(3);
  }
  cl_context c = clCreateContext(NULL, 1, &d, NULL, NULL, &e);
  cl_mem b = clCreateBuffer(c, CL_MEM_READ_WRITE, 1 << 20, NULL, &e);
  contexts++;
  buffers++;
  clReleaseMemObject(b);
  clReleaseContext(c);
}

int main(void) {
  work();
  fflush(stderr);
  pid_t child = fork();
  if (child == 0) {
    contexts = buffers = 0;
    work();
    fprintf(stderr, "fork_children: in=child pid=%d contexts=%d buffers=%d\n",
            (int)getpid(), contexts, buffers);
    exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  work();
  fprintf(stderr, "fork_children: in=parent pid=%d child=%d contexts=%d buffers=%d\n",
          (int)getpid(), (int)child, contexts, buffers);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
