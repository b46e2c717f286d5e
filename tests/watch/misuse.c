/* A program gpulab did not write, with the mistakes compute-sanitizer's API
 * checks and CLIntercept's error checks find: it names objects after its
 * last reference to them is gone. Each one is made survivable by work the
 * driver still holds them for (commands held back by a user event), so the
 * driver answers CL_SUCCESS and nothing but a check of the program's own
 * references can see the mistake.
 *
 *   1. a buffer released while a kernel uses it, then read (line READ);
 *   2. a buffer released, then set as a kernel argument (line SETARG), and
 *      a kernel whose argument was set to a buffer released since, enqueued;
 *   3. an event released, then named in a wait list.
 *
 * usage: misuse [clean]   (clean: the same calls, each in its right order)
 */
#define CL_TARGET_OPENCL_VERSION 120
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *SOURCE =
    "__kernel void touch(__global uint *b) { b[get_global_id(0)] += 1u; }\n";

static void check(cl_int status, const char *what) {
    if (status != CL_SUCCESS) {
        fprintf(stderr, "misuse: %s failed: %d\n", what, status);
        exit(1);
    }
}

int main(int argc, char **argv) {
    int clean = argc > 1 && strcmp(argv[1], "clean") == 0;
    cl_platform_id platform;
    cl_device_id device;
    cl_int err;
    check(clGetPlatformIDs(1, &platform, NULL), "clGetPlatformIDs");
    check(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL), "clGetDeviceIDs");
    cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    check(err, "clCreateContext");
    cl_command_queue q = clCreateCommandQueue(ctx, device, 0, &err);
    check(err, "clCreateCommandQueue");
    cl_program prog = clCreateProgramWithSource(ctx, 1, &SOURCE, NULL, &err);
    check(err, "clCreateProgramWithSource");
    check(clBuildProgram(prog, 1, &device, "", NULL, NULL), "clBuildProgram");
    cl_kernel k = clCreateKernel(prog, "touch", &err);
    check(err, "clCreateKernel");
    cl_kernel k2 = clCreateKernel(prog, "touch", &err);
    check(err, "clCreateKernel");
    size_t n = 1024, bytes = n * sizeof(cl_uint);
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
    check(err, "clCreateBuffer");
    cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
    check(err, "clCreateBuffer");
    cl_event gate = clCreateUserEvent(ctx, &err);
    check(err, "clCreateUserEvent");

    /* Held back by the gate: the driver keeps a, b and the marker's event. */
    check(clSetKernelArg(k, 0, sizeof a, &a), "clSetKernelArg");
    check(clEnqueueNDRangeKernel(q, k, 1, NULL, &n, NULL, 1, &gate, NULL), "kernel a");
    check(clSetKernelArg(k2, 0, sizeof b, &b), "clSetKernelArg");
    check(clEnqueueNDRangeKernel(q, k2, 1, NULL, &n, NULL, 1, &gate, NULL), "kernel b");
    cl_event marker;
    check(clEnqueueMarkerWithWaitList(q, 1, &gate, &marker), "marker");

    cl_uint *host = calloc(n, sizeof(cl_uint));
    if (!clean) {
        check(clReleaseMemObject(a), "clReleaseMemObject(a)");
        check(clEnqueueReadBuffer(q, a, CL_FALSE, 0, bytes, host, 0, NULL, NULL), "read a"); /* READ */
        /* The driver may refuse it or take it: the program goes on either way. */
        (void)clSetKernelArg(k, 0, sizeof a, &a); /* SETARG */
        check(clReleaseMemObject(b), "clReleaseMemObject(b)");
        check(clEnqueueNDRangeKernel(q, k2, 1, NULL, &n, NULL, 0, NULL, NULL), "kernel b again");
        check(clReleaseEvent(marker), "clReleaseEvent(marker)");
        check(clEnqueueBarrierWithWaitList(q, 1, &marker, NULL), "barrier on the marker");
    } else {
        check(clEnqueueReadBuffer(q, a, CL_FALSE, 0, bytes, host, 0, NULL, NULL), "read a");
        (void)clSetKernelArg(k, 0, sizeof a, &a);
        check(clEnqueueNDRangeKernel(q, k2, 1, NULL, &n, NULL, 0, NULL, NULL), "kernel b again");
        check(clEnqueueBarrierWithWaitList(q, 1, &marker, NULL), "barrier on the marker");
        check(clReleaseMemObject(a), "clReleaseMemObject(a)");
        check(clReleaseMemObject(b), "clReleaseMemObject(b)");
        check(clReleaseEvent(marker), "clReleaseEvent(marker)");
    }
    check(clSetUserEventStatus(gate, CL_COMPLETE), "clSetUserEventStatus");
    check(clFinish(q), "clFinish");
    clReleaseEvent(gate);
    clReleaseKernel(k);
    clReleaseKernel(k2);
    clReleaseProgram(prog);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    free(host);
    printf("misuse: done (%s)\n", clean ? "clean" : "mistakes");
    return 0;
}
