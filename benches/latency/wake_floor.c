// The sampler's floor without gpulab (docs/benchmarks.md, #12): what a thread
// costs that wakes at 1 kHz and, optionally, reads NVML's device memory once
// per wake. CPU from CLOCK_THREAD_CPUTIME_ID.
//
//   gcc -O2 -o wake_floor wake_floor.c -ldl
//   ./wake_floor MODE WORK TICKS [CPU [SLACK_NS [POLICY]]]
//
// MODE: abs (clock_nanosleep to absolute 1 ms deadlines), tfd (a periodic
// timerfd), half (a wake every 2 ms and two readings), hot (no sleep at all).
// WORK: 0 nothing, 1 nvmlDeviceGetMemoryInfo, 2 its _v2, 3 the handle looked
// up by index and then read. CPU pins the thread (0: not pinned), SLACK_NS
// sets PR_SET_TIMERSLACK, POLICY a scheduling policy (3 SCHED_BATCH, 5 SCHED_IDLE).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

typedef struct { unsigned long long total, free, used; } mem_v1;
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } mem_v2;
static int (*by_index)(unsigned, void **);
static int (*mem_info)(void *, mem_v1 *);
static int (*mem_info_v2)(void *, mem_v2 *);
static void *device;

static double us(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void work(int w) {
    mem_v1 m;
    mem_v2 m2;
    void *d;
    switch (w) {
    case 1: mem_info(device, &m); break;
    case 2:
        m2.version = (unsigned)(sizeof(mem_v2) | (2 << 24));
        mem_info_v2(device, &m2);
        break;
    case 3: by_index(0, &d); mem_info(d, &m); break;
    }
}

static void next_ms(struct timespec *t, long ms) {
    t->tv_nsec += ms * 1000000;
    while (t->tv_nsec >= 1000000000) { t->tv_nsec -= 1000000000; t->tv_sec++; }
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: %s MODE WORK TICKS [CPU [SLACK_NS [POLICY]]]\n", argv[0]); return 2; }
    const char *mode = argv[1];
    int w = atoi(argv[2]), n = atoi(argv[3]);
    int cpu = argc > 4 ? atoi(argv[4]) : 0;
    if (argc > 5) prctl(PR_SET_TIMERSLACK, atol(argv[5]));
    if (argc > 6) { struct sched_param sp = {0}; if (sched_setscheduler(0, atoi(argv[6]), &sp)) perror("sched_setscheduler"); }
    if (w) {
        void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
        int (*init)(void) = lib ? dlsym(lib, "nvmlInit_v2") : NULL;
        if (!init) { fprintf(stderr, "no NVML\n"); return 1; }
        by_index = dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
        mem_info = dlsym(lib, "nvmlDeviceGetMemoryInfo");
        mem_info_v2 = dlsym(lib, "nvmlDeviceGetMemoryInfo_v2");
        if (init() || by_index(0, &device)) { fprintf(stderr, "NVML init failed\n"); return 1; }
    }
    if (cpu) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu, &s); sched_setaffinity(0, sizeof s, &s); }
    double c0 = us(CLOCK_THREAD_CPUTIME_ID), w0 = us(CLOCK_MONOTONIC);
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (!strcmp(mode, "hot")) {
        for (int i = 0; i < n; i++) work(w);
    } else if (!strcmp(mode, "abs")) {
        for (int i = 0; i < n; i++) { next_ms(&t, 1); clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL); work(w); }
    } else if (!strcmp(mode, "half")) {
        for (int i = 0; i < n / 2; i++) { next_ms(&t, 2); clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL); work(w); work(w); }
    } else if (!strcmp(mode, "tfd")) {
        int fd = timerfd_create(CLOCK_MONOTONIC, 0);
        struct itimerspec it = {{0, 1000000}, {0, 1000000}};
        timerfd_settime(fd, 0, &it, NULL);
        uint64_t fired;
        for (int k = 0; k < n;) { if (read(fd, &fired, 8) == 8) k += (int)fired; work(w); }
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    double c1 = us(CLOCK_THREAD_CPUTIME_ID), w1 = us(CLOCK_MONOTONIC);
    printf("%s work=%d cpu=%d ticks=%d: wall %.0f ms, %.2f us CPU a tick, %.2f%% of a core\n",
           mode, w, cpu, n, (w1 - w0) / 1e3, (c1 - c0) / n, 100 * (c1 - c0) / (w1 - w0));
    return 0;
}
