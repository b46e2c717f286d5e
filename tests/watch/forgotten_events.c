/* A program gpulab did not write: seed 001's setup and teardown (context, queue,
 * buffer, program, kernel, one kernel launch), repeated, forgetting the kernel's
 * event each time unless told to release it. It counts what it creates and
 * releases and prints the counts on stderr, so a test can hold gpulab watch's
 * ledger against the program's own.
 *
 * usage: forgotten_events ITERATIONS SIZE_MIB [release]
 */
#define CL_TARGET_OPENCL_VERSION 120
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *SOURCE =
    "__kernel void touch(__global uint *b) { b[get_global_id(0)] += 1u; }\n";

static int check(cl_int status, const char *what) {
    if (status != CL_SUCCESS) {
        fprintf(stderr, "forgotten_events: %s failed: %d\n", what, status);
        exit(1);
    }
    return 0;
}

int main(int argc, char **argv) {
    int iterations = argc > 1 ? atoi(argv[1]) : 3;
    size_t size = (size_t)(argc > 2 ? atoi(argv[2]) : 1) << 20;
    int release_events = argc > 3 && strcmp(argv[3], "release") == 0;
    int created = 0, released = 0, events_created = 0, events_released = 0;

    /* A GPU if any platform has one (NVIDIA beside PoCL), else the first device. */
    cl_platform_id platforms[16];
    cl_uint nplatforms = 0;
    cl_device_id device;
    check(clGetPlatformIDs(16, platforms, &nplatforms), "clGetPlatformIDs");
    int found = 0;
    for (cl_uint p = 0; p < nplatforms && p < 16 && !found; p++)
        found = clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_GPU, 1, &device, NULL) == CL_SUCCESS;
    if (!found)
        check(clGetDeviceIDs(platforms[0], CL_DEVICE_TYPE_ALL, 1, &device, NULL), "clGetDeviceIDs");
    char name[256] = "";
    clGetDeviceInfo(device, CL_DEVICE_NAME, sizeof name - 1, name, NULL);
    fprintf(stderr, "device: %s\n", name);

    for (int i = 0; i < iterations; i++) {
        cl_int err;
        cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
        check(err, "clCreateContext");
        cl_command_queue q = clCreateCommandQueue(ctx, device, 0, &err);
        check(err, "clCreateCommandQueue");
        cl_mem buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, size, NULL, &err);
        check(err, "clCreateBuffer");
        cl_program prog = clCreateProgramWithSource(ctx, 1, &SOURCE, NULL, &err);
        check(err, "clCreateProgramWithSource");
        check(clBuildProgram(prog, 1, &device, "", NULL, NULL), "clBuildProgram");
        cl_kernel k = clCreateKernel(prog, "touch", &err);
        check(err, "clCreateKernel");
        created += 5;
        check(clSetKernelArg(k, 0, sizeof(cl_mem), &buf), "clSetKernelArg");
        size_t global = 1024;
        cl_event ev;
        check(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, &ev),
              "clEnqueueNDRangeKernel");
        events_created++;
        check(clFinish(q), "clFinish");
        if (release_events) {
            check(clReleaseEvent(ev), "clReleaseEvent");
            events_released++;
        }
        check(clReleaseKernel(k), "clReleaseKernel");
        check(clReleaseProgram(prog), "clReleaseProgram");
        check(clReleaseMemObject(buf), "clReleaseMemObject");
        check(clReleaseCommandQueue(q), "clReleaseCommandQueue");
        check(clReleaseContext(ctx), "clReleaseContext");
        released += 5;
    }
    fprintf(stderr,
            "forgotten_events: iterations=%d objects_created=%d objects_released=%d "
            "events_created=%d events_released=%d\n",
            iterations, created, released, events_created, events_released);
    return 0;
}
