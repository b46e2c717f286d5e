/* Says which OpenCL platforms it sees, in order, and its signal dispositions
 * right then (a driver may install handlers when its devices are first asked
 * for: PoCL does), then each platform's device count, then makes and releases
 * a 1 MiB buffer on the first platform with a device (what a program that
 * takes the first platform does). For tests/watch_agent.rs: bare and watched
 * must print the same. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <signal.h>
#include <stdio.h>

static const char *disposition(int s) {
    struct sigaction a;
    sigaction(s, NULL, &a);
    return a.sa_handler == SIG_DFL ? "default" : a.sa_handler == SIG_IGN ? "ignored" : "handler";
}

int main(void) {
    cl_platform_id platforms[16];
    cl_uint n = 0;
    cl_int status = clGetPlatformIDs(16, platforms, &n);
    printf("clGetPlatformIDs %d, %u platforms\n", status, n);
    printf("then SIGSEGV %s, SIGBUS %s, SIGINT %s, SIGTERM %s, SIGUSR1 %s\n",
           disposition(SIGSEGV), disposition(SIGBUS), disposition(SIGINT),
           disposition(SIGTERM), disposition(SIGUSR1));
    int made = 0;
    for (cl_uint i = 0; i < n && i < 16; i++) {
        char name[256] = "";
        clGetPlatformInfo(platforms[i], CL_PLATFORM_NAME, sizeof name, name, NULL);
        cl_device_id device;
        cl_uint devices = 0;
        clGetDeviceIDs(platforms[i], CL_DEVICE_TYPE_ALL, 1, &device, &devices);
        printf("%u: %s, %u devices\n", i, name, devices);
        if (devices > 0 && !made) {
            cl_int err;
            cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
            cl_mem buf = ctx ? clCreateBuffer(ctx, CL_MEM_READ_WRITE, 1 << 20, NULL, &err) : NULL;
            char dev[256] = "";
            clGetDeviceInfo(device, CL_DEVICE_NAME, sizeof dev, dev, NULL);
            printf("made a buffer on platform %u (%s): %s\n", i, dev, buf ? "yes" : "no");
            if (buf) clReleaseMemObject(buf);
            if (ctx) clReleaseContext(ctx);
            made = 1;
        }
    }
    return 0;
}
