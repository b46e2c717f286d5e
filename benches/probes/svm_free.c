// An independent probe of what cl-svm-free and cl-migrate measure, against
// OpenCL as a program would write it, sharing no code with gpulab: a kernel
// that touches every page of 64 MiB of shared virtual memory and then spins
// ~400 ms; 100 ms in, the memory is freed with clSVMFree or clEnqueueSVMFree,
// or, as a control, after the kernel. Printed: how long the free took, and the
// memory before and after it and once the kernel is done: NVML's device memory
// on NVIDIA, the process's resident memory on a CPU device. Then a 256 MiB
// buffer migrated to the host and back (clEnqueueMigrateMemObjects).
//
//   gcc -O2 -o svm_free benches/probes/svm_free.c -lOpenCL -ldl
//   ./svm_free              # the first platform
//   ./svm_free NVIDIA       # the platform whose name holds NVIDIA
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *SRC =
    "__kernel void spin(__global uint *buf, ulong words, ulong iters) {\n"
    "  for (ulong w = get_global_id(0) * 1024; w < words; w += get_global_size(0) * 1024) buf[w] += 1u;\n"
    "  uint x = (uint)get_global_id(0) + 1u;\n"
    "  for (ulong i = 0; i < iters; ++i) x = x * 1664525u + 1013904223u;\n"
    "  if (x == 0x9e3779b9u && words > 0) buf[0] = x;\n"
    "}\n";

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

// NVML through dlopen, so the probe runs where there is none.
typedef int (*nvml_fn)(void);
typedef int (*nvml_handle_fn)(unsigned, void **);
typedef struct { unsigned long long total, free, used; } nvml_mem;
typedef int (*nvml_mem_fn)(void *, nvml_mem *);
static void *nvml_dev;
static nvml_mem_fn nvml_memory;

static double used_mib(int gpu) {
    if (gpu && nvml_memory) {
        nvml_mem m;
        if (nvml_memory(nvml_dev, &m) == 0) return m.used / 1048576.0;
    }
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
        fclose(f);
    }
    return resident * (double)sysconf(_SC_PAGESIZE) / 1048576.0;
}

#define CHECK(x) do { cl_int e_ = (x); if (e_ != CL_SUCCESS) { fprintf(stderr, "%s:%d %s = %d\n", __FILE__, __LINE__, #x, e_); exit(1); } } while (0)

int main(int argc, char **argv) {
    const char *want = argc > 1 ? argv[1] : "";
    cl_platform_id ps[8];
    cl_uint np = 0;
    CHECK(clGetPlatformIDs(8, ps, &np));
    cl_platform_id p = NULL;
    char pname[256] = {0};
    for (cl_uint i = 0; i < np && !p; i++) {
        clGetPlatformInfo(ps[i], CL_PLATFORM_NAME, sizeof pname, pname, NULL);
        if (strstr(pname, want)) p = ps[i];
    }
    if (!p) { fprintf(stderr, "no platform matching %s\n", want); return 1; }
    int gpu = strstr(pname, "NVIDIA") != NULL;
    if (gpu) {
        void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
        if (lib && ((nvml_fn)dlsym(lib, "nvmlInit_v2"))() == 0 &&
            ((nvml_handle_fn)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"))(0, &nvml_dev) == 0)
            nvml_memory = (nvml_mem_fn)dlsym(lib, "nvmlDeviceGetMemoryInfo");
    }
    cl_device_id d;
    CHECK(clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, NULL));
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &d, NULL, NULL, &err);
    CHECK(err);
    cl_command_queue q = clCreateCommandQueueWithProperties(ctx, d, NULL, &err);
    CHECK(err);
    cl_program prog = clCreateProgramWithSource(ctx, 1, &SRC, NULL, &err);
    CHECK(err);
    CHECK(clBuildProgram(prog, 1, &d, NULL, NULL, NULL));
    cl_kernel k = clCreateKernel(prog, "spin", &err);
    CHECK(err);
    size_t bytes = 64u << 20, global = gpu ? 256 : 1;
    cl_ulong words = bytes / 4;
    // Iterations for about 400 ms: time a short launch first.
    void *cal = clSVMAlloc(ctx, CL_MEM_READ_WRITE, 4096, 0);
    cl_ulong none = 0, iters = 1000;
    CHECK(clSetKernelArgSVMPointer(k, 0, cal));
    CHECK(clSetKernelArg(k, 1, sizeof none, &none));
    double per = 0;
    // A warm-up launch, then longer ones until one takes 50 ms.
    for (int round = 0; round < 12; round++) {
        CHECK(clSetKernelArg(k, 2, sizeof iters, &iters));
        double t0 = now_ms();
        CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL));
        CHECK(clFinish(q));
        double ms = now_ms() - t0;
        per = ms / iters;
        if (round > 0 && ms > 50) break;
        iters *= 4;
    }
    iters = (cl_ulong)(400.0 / per);
    clSVMFree(ctx, cal);
    printf("platform %s; 64 MiB of SVM, a kernel of ~400 ms, the free 100 ms in\n", pname);
    const char *how[] = {"clSVMFree", "clEnqueueSVMFree", "clSVMFree after the kernel"};
    for (int v = 0; v < 3; v++) {
        void *svm = clSVMAlloc(ctx, CL_MEM_READ_WRITE, bytes, 0);
        if (!svm) { fprintf(stderr, "clSVMAlloc failed\n"); return 1; }
        double before_alloc = used_mib(gpu);
        CHECK(clSetKernelArgSVMPointer(k, 0, svm));
        CHECK(clSetKernelArg(k, 1, sizeof words, &words));
        CHECK(clSetKernelArg(k, 2, sizeof iters, &iters));
        cl_event ev;
        double start = now_ms();
        CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, &ev));
        CHECK(clFlush(q));
        usleep(100000);
        if (v == 2) CHECK(clWaitForEvents(1, &ev));
        double before = used_mib(gpu), f0 = now_ms();
        if (v == 1) {
            CHECK(clEnqueueSVMFree(q, 1, &svm, NULL, NULL, 0, NULL, NULL));
        } else {
            clSVMFree(ctx, svm);
        }
        double took = now_ms() - f0, after = used_mib(gpu);
        cl_int status = 0;
        clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
        CHECK(clFinish(q));
        double done = now_ms() - start;
        printf("%-27s took %8.3f ms; kernel %s at the free; memory %.1f MiB at the launch, %.1f before the free, "
               "%.1f right after, %.1f once the queue is done (%.0f ms after the launch)\n",
               how[v], took, status == CL_COMPLETE ? "done" : "running", before_alloc, before, after,
               used_mib(gpu), done);
        clReleaseEvent(ev);
    }
    size_t big = 256u << 20;
    char *zeros = calloc(1, big);
    cl_mem buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, big, zeros, &err);
    CHECK(err);
    free(zeros);
    double made = used_mib(gpu);
    CHECK(clEnqueueMigrateMemObjects(q, 1, &buf, CL_MIGRATE_MEM_OBJECT_HOST, 0, NULL, NULL));
    CHECK(clFinish(q));
    double on_host = used_mib(gpu);
    CHECK(clEnqueueMigrateMemObjects(q, 1, &buf, 0, 0, NULL, NULL));
    CHECK(clFinish(q));
    printf("migrate 256 MiB: %.1f MiB made, %.1f on the host, %.1f back on the device\n", made, on_host,
           used_mib(gpu));
    clReleaseMemObject(buf);
    clReleaseKernel(k);
    clReleaseProgram(prog);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    return 0;
}
