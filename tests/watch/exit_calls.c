/* A program that gives its OpenCL objects back from a destructor run at exit,
 * as C++ programs with global wrapper objects (cl::Context, cl::Buffer) do:
 * glibc's exit() runs the main thread's thread-local destructors first, then
 * the program's destructors, so these calls come after the watching agent's
 * own thread-locals are gone. It prints what the driver answered; watched,
 * it must end as it does bare, with its status, and every release be counted.
 *
 * usage: exit_calls
 */
#define CL_TARGET_OPENCL_VERSION 120
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>

static cl_context ctx;
static cl_command_queue q;
static cl_mem a, b;

static void check(cl_int status, const char *what) {
    if (status != CL_SUCCESS) {
        fprintf(stderr, "exit_calls: %s failed: %d\n", what, status);
        exit(1);
    }
}

__attribute__((destructor)) static void give_back(void) {
    cl_int done = clFinish(q);
    cl_int first = clReleaseMemObject(a);
    clRetainMemObject(b);
    cl_int second = clReleaseMemObject(b);
    cl_int last = clReleaseMemObject(b); /* its last reference */
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    printf("exit_calls: given back at exit (%d %d %d %d)\n", done, first, second, last);
    fflush(stdout);
}

int main(void) {
    cl_platform_id platform;
    cl_device_id device;
    cl_int err;
    check(clGetPlatformIDs(1, &platform, NULL), "clGetPlatformIDs");
    check(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL), "clGetDeviceIDs");
    ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    check(err, "clCreateContext");
    q = clCreateCommandQueue(ctx, device, 0, &err);
    check(err, "clCreateCommandQueue");
    a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 1 << 20, NULL, &err);
    check(err, "clCreateBuffer");
    b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 1 << 20, NULL, &err);
    check(err, "clCreateBuffer");
    printf("exit_calls: made\n");
    return 0;
}
