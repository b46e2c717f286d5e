// cuda_thread_churn: THREADS host threads each cudaMalloc and cudaFree
// ITERATIONS small buffers on device 0, then cudaMalloc LEAKS more each and
// never free them. The driver hands a freed address to the next allocation of
// any thread, sometimes before the freeing call has returned: a tracer that
// books a free by address after the call books it on the wrong allocation.
//
//   cuda_thread_churn THREADS ITERATIONS LEAKS
//
// Prints `leaked N` and exits 0. Build: nvcc -o cuda_thread_churn cuda_thread_churn.cu
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int iterations, leaks;

static void *churn(void *arg) {
    (void)arg;
    for (int i = 0; i < iterations; ++i) {
        void *p = NULL;
        if (cudaMalloc(&p, 4096) != cudaSuccess) { fprintf(stderr, "cudaMalloc failed\n"); exit(2); }
        if (cudaFree(p) != cudaSuccess) { fprintf(stderr, "cudaFree failed\n"); exit(2); }
    }
    for (int i = 0; i < leaks; ++i) {
        void *p = NULL;
        if (cudaMalloc(&p, 4096) != cudaSuccess) { fprintf(stderr, "cudaMalloc failed\n"); exit(2); }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: %s THREADS ITERATIONS LEAKS\n", argv[0]); return 2; }
    int threads = atoi(argv[1]);
    iterations = atoi(argv[2]);
    leaks = atoi(argv[3]);
    if (cudaFree(0) != cudaSuccess) return 2; // the context, before the threads
    pthread_t *t = (pthread_t *)calloc((size_t)threads, sizeof *t);
    for (int i = 0; i < threads; ++i) pthread_create(&t[i], NULL, churn, NULL);
    for (int i = 0; i < threads; ++i) pthread_join(t[i], NULL);
    printf("leaked %d\n", threads * leaks);
    return 0;
}
