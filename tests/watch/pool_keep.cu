// The stream-ordered pool keeps what cudaFreeAsync gave it: N blocks of M MiB
// allocated and freed on a stream, synchronised, held a while with no release
// threshold (the default keeps nothing above 0 past a sync, so the program
// raises it), then trimmed. Not written for gpulab; it prints the pool's own
// figures at each step (to stderr, in MiB).
//
//     nvcc -o pool_keep pool_keep.cu && ./pool_keep [blocks=8] [mib=256] [pause_ms=300]
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cuda_runtime.h>
#include <unistd.h>

static void say(const char *step, cudaMemPool_t pool) {
    uint64_t reserved = 0, used = 0;
    cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved);
    cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used);
    fprintf(stderr, "pool_keep: step=%s reserved_mib=%llu used_mib=%llu\n", step,
            (unsigned long long)(reserved >> 20), (unsigned long long)(used >> 20));
}

int main(int argc, char **argv) {
    int blocks = argc > 1 ? atoi(argv[1]) : 8;
    size_t mib = argc > 2 ? strtoull(argv[2], nullptr, 10) : 256;
    int pause_ms = argc > 3 ? atoi(argv[3]) : 300;
    cudaStream_t s;
    if (cudaStreamCreate(&s) != cudaSuccess) return 1;
    cudaMemPool_t pool;
    cudaDeviceGetDefaultMemPool(&pool, 0);
    uint64_t keep_all = UINT64_MAX;
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all);
    void *p[64];
    if (blocks > 64) blocks = 64;
    for (int i = 0; i < blocks; i++)
        if (cudaMallocAsync(&p[i], mib << 20, s) != cudaSuccess) return 1;
    cudaStreamSynchronize(s);
    say("allocated", pool);
    usleep(pause_ms * 1000);
    for (int i = 0; i < blocks; i++) cudaFreeAsync(p[i], s);
    cudaStreamSynchronize(s);
    say("freed", pool);
    usleep(pause_ms * 1000);
    cudaMemPoolTrimTo(pool, 0);
    cudaStreamSynchronize(s);
    say("trimmed", pool);
    usleep(pause_ms * 1000);
    cudaStreamDestroy(s);
    return 0;
}
