// A CUDA program one of whose threads loads and unloads a library over and
// over while the other uses CUDA, as hwloc does in Open MPI's MPI_Init (it
// loads PoCL and its LLVM to list OpenCL devices, then unloads them). Bare, it
// exits 0; watched, it must too: the agent's thread, looking at the loaded
// libraries' imports, may read a library only while the loader keeps it
// loaded.
//
// usage: cuda_dlclose [LOADS]   (prints how many loads and kernels it ran)
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static const char *LIBS[] = {"libz.so.1", "libexpat.so.1", "libsqlite3.so.0", "libOpenCL.so.1"};
static const char *lib = NULL;
static long loads = 0;
static volatile int done = 0;

__global__ void touch(int *p) { p[threadIdx.x] += 1; }

static void *churn(void *arg) {
    long n = *(long *)arg;
    for (long i = 0; i < n; i++) {
        void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        if (h == NULL) {
            fprintf(stderr, "cuda_dlclose: %s: %s\n", lib, dlerror());
            exit(3);
        }
        dlclose(h);
        loads++;
    }
    done = 1;
    return NULL;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 20000;
    for (unsigned i = 0; i < sizeof LIBS / sizeof *LIBS && lib == NULL; i++) {
        void *h = dlopen(LIBS[i], RTLD_NOW | RTLD_LOCAL);
        if (h != NULL) {
            dlclose(h);
            lib = LIBS[i];
        }
    }
    if (lib == NULL) {
        fprintf(stderr, "cuda_dlclose: none of libz, libexpat, libsqlite3, libOpenCL here\n");
        return 2;
    }
    int *p = NULL;
    if (cudaMalloc(&p, 32 * sizeof(int)) != cudaSuccess) {
        fprintf(stderr, "cuda_dlclose: no CUDA device\n");
        return 2;
    }
    pthread_t t;
    pthread_create(&t, NULL, churn, &n);
    long kernels = 0;
    while (!done) {
        touch<<<1, 32>>>(p);
        cudaDeviceSynchronize();
        kernels++;
    }
    pthread_join(t, NULL);
    cudaFree(p);
    printf("loads %ld, kernels ran: %s\n", loads, kernels > 0 ? "yes" : "no");
    return 0;
}
