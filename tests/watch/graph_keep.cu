// A CUDA graph with memory nodes: a stream capture of cudaMallocAsync, a
// memset and cudaFreeAsync, launched; the device keeps the graph's memory
// after the free node ran, until cudaDeviceGraphMemTrim. Not written for
// gpulab; it prints the device's own graph memory figures at each step (to
// stderr, in MiB).
//
//     nvcc -o graph_keep graph_keep.cu && ./graph_keep [mib=1024] [pause_ms=300]
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cuda_runtime.h>
#include <unistd.h>

static void say(const char *step) {
    uint64_t reserved = 0, used = 0;
    cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrReservedMemCurrent, &reserved);
    cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, &used);
    fprintf(stderr, "graph_keep: step=%s reserved_mib=%llu used_mib=%llu\n", step,
            (unsigned long long)(reserved >> 20), (unsigned long long)(used >> 20));
}

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? strtoull(argv[1], nullptr, 10) : 1024;
    int pause_ms = argc > 2 ? atoi(argv[2]) : 300;
    cudaStream_t s;
    if (cudaStreamCreate(&s) != cudaSuccess) return 1;
    cudaGraph_t graph;
    void *p = nullptr;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    cudaMallocAsync(&p, mib << 20, s);
    cudaMemsetAsync(p, 1, mib << 20, s);
    cudaFreeAsync(p, s);
    if (cudaStreamEndCapture(s, &graph) != cudaSuccess) return 1;
    cudaGraphExec_t exec;
    if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) return 1;
    if (cudaGraphLaunch(exec, s) != cudaSuccess) return 1;
    cudaStreamSynchronize(s);
    say("launched");
    usleep(pause_ms * 1000);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaDeviceGraphMemTrim(0);
    cudaStreamSynchronize(s);
    say("trimmed");
    usleep(pause_ms * 1000);
    cudaStreamDestroy(s);
    return 0;
}
