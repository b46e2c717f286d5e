/* thread_churn: THREADS threads each make and release ITERATIONS small buffers
 * on one context, then make LEAKS more each and never release them. The driver
 * hands a released buffer's handle to the next buffer any thread makes, while
 * the releasing thread is still inside clReleaseMemObject: a tracer that books
 * a release by handle after the call books it on the wrong buffer.
 *
 *   thread_churn THREADS ITERATIONS LEAKS
 *
 * Prints `leaked N` (buffers it never released) and exits 0.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static cl_context ctx;
static int iterations, leaks;

static void *churn(void *arg) {
    (void)arg;
    cl_int e;
    for (int i = 0; i < iterations; ++i) {
        cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &e);
        if (e != CL_SUCCESS) { fprintf(stderr, "clCreateBuffer: %d\n", e); exit(2); }
        if (clReleaseMemObject(b) != CL_SUCCESS) { fprintf(stderr, "release failed\n"); exit(2); }
    }
    for (int i = 0; i < leaks; ++i) {
        clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &e);
        if (e != CL_SUCCESS) { fprintf(stderr, "clCreateBuffer: %d\n", e); exit(2); }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: %s THREADS ITERATIONS LEAKS\n", argv[0]); return 2; }
    int threads = atoi(argv[1]);
    iterations = atoi(argv[2]);
    leaks = atoi(argv[3]);
    cl_platform_id p;
    cl_device_id d;
    cl_int e;
    if (clGetPlatformIDs(1, &p, NULL) != CL_SUCCESS) return 2;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, NULL) != CL_SUCCESS) return 2;
    ctx = clCreateContext(NULL, 1, &d, NULL, NULL, &e);
    if (e != CL_SUCCESS) return 2;
    pthread_t *t = calloc((size_t)threads, sizeof *t);
    for (int i = 0; i < threads; ++i) pthread_create(&t[i], NULL, churn, NULL);
    for (int i = 0; i < threads; ++i) pthread_join(t[i], NULL);
    printf("leaked %d\n", threads * leaks);
    clReleaseContext(ctx);
    return 0;
}
