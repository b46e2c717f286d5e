// An independent probe of what cuda-device-heap measures, against the CUDA
// runtime as a program would write it, sharing no code with gpulab: the
// device's free memory (cudaMemGetInfo) around the first launch of a kernel
// that calls malloc, with the default heap or one set first; how many blocks'
// mallocs the heap served; whether the heap size can be set after that launch;
// and the device memory a larger stack limit takes.
//
//   nvcc -O2 -o device_heap benches/probes/device_heap.cu
//   ./device_heap default | ./device_heap larger | ./device_heap late | ./device_heap stack
//
// Each case is its own process: the heap is fixed once a module that calls
// malloc is loaded, so one process can only show one of them.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); exit(1); } } while (0)

// Each block mallocs its share of `out` and reports whether it was served.
__global__ void take(unsigned *served, size_t bytes_per_block) {
    __shared__ char *scratch;
    if (threadIdx.x == 0) scratch = (char *)malloc(bytes_per_block);
    __syncthreads();
    if (scratch != NULL) {
        for (size_t i = threadIdx.x; i < bytes_per_block; i += blockDim.x) scratch[i] = (char)i;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        served[blockIdx.x] = scratch != NULL;
        if (scratch != NULL) free(scratch);
    }
}

static size_t free_bytes() {
    size_t free, total;
    CHECK(cudaMemGetInfo(&free, &total));
    return free;
}

static double mib(double bytes) { return bytes / (1 << 20); }

int main(int argc, char **argv) {
    const char *how = argc > 1 ? argv[1] : "default";
    size_t buffer = 64u << 20, heap = 256u << 20, stack = 16u << 10, limit = 0;
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CHECK(cudaFree(0)); // the context, before any reading
    if (strcmp(how, "stack") == 0) {
        CHECK(cudaDeviceGetLimit(&limit, cudaLimitStackSize));
        size_t before = free_bytes();
        CHECK(cudaDeviceSetLimit(cudaLimitStackSize, stack));
        size_t after = free_bytes();
        size_t now = 0;
        CHECK(cudaDeviceGetLimit(&now, cudaLimitStackSize));
        printf("stack: %zu B per thread before, %zu B asked, %zu B held; the set took %.1f MiB\n",
               limit, stack, now, mib((double)before - (double)after));
        return 0;
    }
    if (strcmp(how, "larger") == 0) CHECK(cudaDeviceSetLimit(cudaLimitMallocHeapSize, heap));
    CHECK(cudaDeviceGetLimit(&limit, cudaLimitMallocHeapSize));
    unsigned blocks = (unsigned)sms * 8, *served;
    CHECK(cudaMalloc((void **)&served, blocks * sizeof(unsigned)));
    CHECK(cudaMemset(served, 0, blocks * sizeof(unsigned)));
    size_t before = free_bytes();
    take<<<blocks, 128>>>(served, buffer / blocks);
    CHECK(cudaGetLastError());
    size_t after_launch = free_bytes();
    CHECK(cudaDeviceSynchronize());
    unsigned *host = (unsigned *)calloc(blocks, sizeof(unsigned)), got = 0;
    CHECK(cudaMemcpy(host, served, blocks * sizeof(unsigned), cudaMemcpyDeviceToHost));
    for (unsigned b = 0; b < blocks; b++) got += host[b];
    printf("%s: heap %.1f MiB; the first launch took %.1f MiB; %u of %u blocks served (%.3f)\n",
           how, mib((double)limit), mib((double)before - (double)after_launch), got, blocks,
           (double)got / blocks);
    if (strcmp(how, "late") == 0) {
        cudaError_t e = cudaDeviceSetLimit(cudaLimitMallocHeapSize, heap);
        size_t now = 0;
        CHECK(cudaDeviceGetLimit(&now, cudaLimitMallocHeapSize));
        printf("late: set after the launch: %s; the heap is %.1f MiB\n", cudaGetErrorName(e),
               mib((double)now));
    }
    CHECK(cudaFree(served));
    free(host);
    return 0;
}
