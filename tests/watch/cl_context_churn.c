/* cl_context_churn: the OpenCL calls of the lab cl-forgotten-events [released],
 * made by a plain C program, without gpulab: each iteration creates a context, a
 * profiling queue, a buffer, a program and its kernel, runs the kernel, waits
 * (clFinish), and releases everything, the context last. It answers whether a hang
 * in that loop needs anything gpulab adds around the calls.
 *
 *   cl_context_churn PLATFORM_SUBSTRING ITERATIONS MODE [SPIN]
 *
 * MODE says which of gpulab's helper calls are made beside the lab's own:
 *   bare   none: the lab's calls alone
 *   ctx    clSetContextDestructorCallback on each context
 *   mem    clSetMemObjectDestructorCallback on each buffer
 *   dtor   both of those
 *   evcb   clSetEventCallback(CL_COMPLETE) on the kernel's event, reading its four
 *          profiling counters inside the callback (as gpulab's worker does)
 *   all    both
 * SPIN is each work item's loop count (default 200000: a few ms on an H200; a
 * CPU platform wants 1). Each call is printed before it is made, so a hang
 * names the call it is in.
 * Build: cc -O2 -o cl_context_churn cl_context_churn.c -lOpenCL -lpthread
 */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *SRC =
    "__kernel void spin(__global uint *buf, ulong iters, ulong words) {\n"
    "  const ulong gid = get_global_id(0), n = get_global_size(0);\n"
    "  for (ulong w = gid * 1024; w < words; w += n * 1024) buf[w] += 1u;\n"
    "  uint x = (uint)gid + 1u;\n"
    "  for (ulong i = 0; i < iters; ++i) x = x * 1664525u + 1013904223u;\n"
    "  if (x == 0x9e3779b9u && words > 0) buf[0] = x;\n"
    "}\n";

static atomic_int destroyed_ctx, destroyed_mem, completed;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void CL_CALLBACK on_ctx(cl_context c, void *u) { (void)c; (void)u; atomic_fetch_add(&destroyed_ctx, 1); }
static void CL_CALLBACK on_mem(cl_mem m, void *u) { (void)m; (void)u; atomic_fetch_add(&destroyed_mem, 1); }
static void CL_CALLBACK on_done(cl_event ev, cl_int status, void *u) {
    (void)u;
    cl_ulong v[4] = {0};
    const cl_profiling_info what[4] = {CL_PROFILING_COMMAND_QUEUED, CL_PROFILING_COMMAND_SUBMIT,
                                       CL_PROFILING_COMMAND_START, CL_PROFILING_COMMAND_END};
    if (status >= 0)
        for (int i = 0; i < 4; ++i) clGetEventProfilingInfo(ev, what[i], sizeof v[i], &v[i], NULL);
    atomic_fetch_add(&completed, 1);
}

#define CHECK(call)                                                                  \
    do {                                                                             \
        cl_int e_ = (call);                                                          \
        if (e_ != CL_SUCCESS) { fprintf(stderr, "%s: error %d\n", #call, e_); exit(2); } \
    } while (0)

static int step_line;
static void step(int iter, const char *what) {
    printf("%.3f it=%d %s\n", now_ms(), iter, what);
    fflush(stdout);
    step_line++;
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: %s PLATFORM ITERATIONS bare|ctx|mem|dtor|evcb|all [SPIN]\n", argv[0]);
        return 2;
    }
    const char *want = argv[1];
    int iters = atoi(argv[2]);
    int all = !strcmp(argv[3], "all"), dtor = !strcmp(argv[3], "dtor") || all;
    int ctx_dtor = dtor || !strcmp(argv[3], "ctx"), mem_dtor = dtor || !strcmp(argv[3], "mem");
    int evcb = !strcmp(argv[3], "evcb") || all;

    cl_platform_id plats[16];
    cl_uint np = 0;
    CHECK(clGetPlatformIDs(16, plats, &np));
    cl_platform_id plat = NULL;
    for (cl_uint i = 0; i < np; ++i) {
        char name[256] = {0};
        clGetPlatformInfo(plats[i], CL_PLATFORM_NAME, sizeof name - 1, name, NULL);
        if (strstr(name, want)) { plat = plats[i]; break; }
    }
    if (!plat) { fprintf(stderr, "no platform matching %s\n", want); return 2; }
    cl_device_id dev;
    CHECK(clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL));

    const size_t bytes = 64u << 20;
    const size_t global = 65536, local = 256;
    const cl_ulong spin_iters = argc == 5 ? strtoull(argv[4], NULL, 10) : 200000, words = bytes / 4;
    for (int it = 0; it < iters; ++it) {
        cl_int e;
        step(it, "clCreateContext");
        cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e); CHECK(e);
        if (ctx_dtor) CHECK(clSetContextDestructorCallback(ctx, on_ctx, NULL));
        step(it, "clCreateCommandQueueWithProperties");
        cl_queue_properties props[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_PROFILING_ENABLE, 0};
        cl_command_queue q = clCreateCommandQueueWithProperties(ctx, dev, props, &e); CHECK(e);
        step(it, "clCreateBuffer");
        cl_mem buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &e); CHECK(e);
        if (mem_dtor) CHECK(clSetMemObjectDestructorCallback(buf, on_mem, NULL));
        step(it, "clCreateProgramWithSource");
        cl_program prog = clCreateProgramWithSource(ctx, 1, &SRC, NULL, &e); CHECK(e);
        step(it, "clBuildProgram");
        CHECK(clBuildProgram(prog, 1, &dev, NULL, NULL, NULL));
        step(it, "clCreateKernel");
        cl_kernel k = clCreateKernel(prog, "spin", &e); CHECK(e);
        CHECK(clSetKernelArg(k, 0, sizeof buf, &buf));
        CHECK(clSetKernelArg(k, 1, sizeof spin_iters, &spin_iters));
        CHECK(clSetKernelArg(k, 2, sizeof words, &words));
        step(it, "clEnqueueNDRangeKernel");
        cl_event ev;
        CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, &local, 0, NULL, &ev));
        if (evcb) CHECK(clSetEventCallback(ev, CL_COMPLETE, on_done, NULL));
        step(it, "clFinish");
        CHECK(clFinish(q));
        step(it, "clReleaseEvent");
        CHECK(clReleaseEvent(ev));
        step(it, "clReleaseKernel");
        CHECK(clReleaseKernel(k));
        step(it, "clReleaseProgram");
        CHECK(clReleaseProgram(prog));
        step(it, "clReleaseMemObject");
        CHECK(clReleaseMemObject(buf));
        step(it, "clReleaseCommandQueue");
        CHECK(clReleaseCommandQueue(q));
        step(it, "clReleaseContext");
        CHECK(clReleaseContext(ctx));
    }
    step(iters, "done");
    /* The driver may run a callback a little after the release returns (a
     * loaded machine): wait for those registered, up to 5 s, then say what
     * came. */
    for (int i = 0; i < 500 && (atomic_load(&destroyed_ctx) < (ctx_dtor ? iters : 0) ||
                                atomic_load(&destroyed_mem) < (mem_dtor ? iters : 0) ||
                                atomic_load(&completed) < (evcb ? iters : 0));
         i++)
        usleep(10000);
    printf("destroyed contexts %d, buffers %d, completions %d\n", atomic_load(&destroyed_ctx),
           atomic_load(&destroyed_mem), atomic_load(&completed));
    return 0;
}
