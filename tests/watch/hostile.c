/* A program that does, at random from its seed, the ordinary things that an
 * agent inside it could harm: threads that make and release buffers, children
 * forked without exec, a vfork whose exec fails, a child that execs itself, a
 * child in its own session, descriptors closed and reused, standard input
 * closed, signal handlers (one-shot, a write barrier on SIGSEGV, ignored
 * SIGPIPE), every signal blocked, and several ways to end. Not written for
 * gpulab: it prints its plan, what it saw of itself (descriptors, signal
 * dispositions, its OpenCL device) and what it made and leaked, so a test
 * can run it bare and watched and compare, and check the report against
 * what it says it did.
 *
 *   cc -O2 -o hostile hostile.c -lOpenCL -lpthread && ./hostile SEED DIR
 *
 * Output is the same for a seed whatever runs it; the last line is
 * `expect made=M leaked=L` (buffers, all processes). Exit status: 0, or the
 * ending the seed chose (5 from _exit, SIGTERM's), 9 when one of its files
 * held what it did not write.
 */
#define _GNU_SOURCE
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t state;
static unsigned pick(unsigned n) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return (unsigned)(state % n);
}

/* Loads and unloads the first of a few common libraries until told to stop. */
static volatile int libraries_on;
static void *libraries(void *arg) {
  (void)arg;
  static const char *names[] = {"libz.so.1", "libexpat.so.1", "libsqlite3.so.0", "libm.so.6"};
  const char *name = NULL;
  for (unsigned i = 0; i < sizeof names / sizeof *names && !name; i++) {
    void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h) {
      dlclose(h);
      name = names[i];
    }
  }
  while (name && libraries_on) {
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (h) dlclose(h);
  }
  return NULL;
}

static cl_device_id dev;
static cl_context ctx;
static const char *dir;

static cl_device_id device(void) {
  cl_platform_id p;
  cl_device_id d;
  if (clGetPlatformIDs(1, &p, NULL) != CL_SUCCESS ||
      clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, NULL) != CL_SUCCESS) {
    fprintf(stderr, "hostile: no OpenCL device\n");
    exit(3);
  }
  return d;
}

/* `iters` buffers made and released, `leaks` made and kept. */
static void churn(cl_context c, long iters, int leaks) {
  cl_int e;
  for (long i = 0; i < iters; i++) {
    cl_mem b = clCreateBuffer(c, CL_MEM_READ_WRITE, 4096, NULL, &e);
    if (e == CL_SUCCESS) clReleaseMemObject(b);
  }
  for (int i = 0; i < leaks; i++) clCreateBuffer(c, CL_MEM_READ_WRITE, 4096, NULL, &e);
}

struct job {
  long iters;
  int leaks;
};
static void *worker(void *arg) {
  struct job *j = arg;
  churn(ctx, j->iters, j->leaks);
  return NULL;
}

/* Files the program writes and reads back while another thread closes every
 * descriptor it did not open itself. */
static volatile int chaos_on;
static int keep[1024];
static void *chaos(void *arg) {
  (void)arg;
  while (chaos_on)
    for (int fd = 3; fd < 1024; fd++)
      if (!keep[fd]) close(fd);
  return NULL;
}

static int files(int n) {
  char path[4096];
  for (int i = 0; i < n; i++) {
    snprintf(path, sizeof path, "%s/file-%d", dir, i);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) continue;
    char line[64];
    int len = snprintf(line, sizeof line, "file %d\n", i);
    if (write(fd, line, len) != len) {
    }
    close(fd);
  }
  int bad = 0;
  for (int i = 0; i < n; i++) {
    snprintf(path, sizeof path, "%s/file-%d", dir, i);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    char got[256] = {0}, want[64];
    size_t len = fread(got, 1, sizeof got - 1, f);
    fclose(f);
    snprintf(want, sizeof want, "file %d\n", i);
    if (len != strlen(want) || memcmp(got, want, len)) bad = 1;
  }
  return bad;
}

static int open_fds(void) {
  int n = 0;
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  while (readdir(d)) n++;
  closedir(d);
  return n - 3; /* ".", ".." and the directory's own */
}

static volatile sig_atomic_t usr1_seen;
static void on_usr1(int s) {
  (void)s;
  usr1_seen++;
}

static char *page;
static volatile sig_atomic_t faults;
static void on_segv(int s, siginfo_t *info, void *uc) {
  (void)s;
  (void)uc;
  char *at = info->si_addr;
  if (at >= page && at < page + 4096) {
    faults++;
    mprotect(page, 4096, PROT_READ | PROT_WRITE);
    return;
  }
  signal(SIGSEGV, SIG_DFL);
}

static const char *disposition(int sig) {
  struct sigaction a;
  sigaction(sig, NULL, &a);
  if (a.sa_handler == SIG_DFL) return "default";
  if (a.sa_handler == SIG_IGN) return "ignored";
  return "handler";
}

/* A child of the program: its own context, one buffer made and released and
 * one kept, then the ending it was given; exit status 3 when the driver
 * refused it a context (NVIDIA's does in a child forked without exec). */
static void child_work(int how) {
  cl_int e;
  cl_context c = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
  int status = 3;
  if (e == CL_SUCCESS) {
    churn(c, 1, 1);
    status = 0;
  }
  if (how == 0) _exit(status);
  exit(status);
}

int main(int argc, char **argv) {
  if (argc > 2 && !strcmp(argv[1], "child")) {
    dir = argv[2];
    dev = device();
    child_work(1);
  }
  if (argc < 3) {
    fprintf(stderr, "usage: hostile SEED DIR\n");
    return 2;
  }
  state = strtoull(argv[1], NULL, 10) * 2654435761u + 88172645463325252ull;
  dir = argv[2];
  int threads = 1 + pick(4), leaks = pick(3), close0 = pick(4) == 0;
  long iters = pick(300);
  int chaos_files = pick(2), signals = pick(5), children = pick(4), session = pick(4) == 0;
  int ending = pick(4), libs = pick(3) == 0;
  printf("plan: threads=%d iters=%ld leaks=%d close0=%d chaos=%d signals=%d children=%d "
         "session=%d ending=%d libraries=%d\n",
         threads, iters, leaks, close0, chaos_files, signals, children, session, ending, libs);
  fflush(stdout);
  long made = 0, leaked = 0;

  if (close0) close(0);
  if (signals == 1) {
    struct sigaction a = {0};
    a.sa_handler = on_usr1;
    a.sa_flags = SA_RESETHAND;
    sigaction(SIGUSR1, &a, NULL);
  } else if (signals == 2) {
    struct sigaction a = {0};
    a.sa_sigaction = on_segv;
    a.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &a, NULL);
  } else if (signals == 3) {
    signal(SIGPIPE, SIG_IGN);
  } else if (signals == 4) {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
  }

  int before = open_fds();
  dev = device();
  cl_int e;
  ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
  if (e != CL_SUCCESS) return 4;
  char name[256] = {0};
  clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name - 1, name, NULL);
  printf("device: %s\n", name);
  printf("descriptors opened by OpenCL: %d\n", open_fds() - before);
  if (close0) {
    char path[4096];
    snprintf(path, sizeof path, "%s/first", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    printf("first open got descriptor %d\n", fd);
    if (fd >= 0) close(fd);
  }

  pthread_t chaos_thread;
  if (chaos_files) {
    DIR *d = opendir("/proc/self/fd");
    struct dirent *ent;
    while (d && (ent = readdir(d)))
      if (atoi(ent->d_name) > 0 && atoi(ent->d_name) < 1024) keep[atoi(ent->d_name)] = 1;
    if (d) closedir(d);
    chaos_on = 1;
    pthread_create(&chaos_thread, NULL, chaos, NULL);
  }

  pthread_t libraries_thread;
  if (libs) {
    libraries_on = 1;
    pthread_create(&libraries_thread, NULL, libraries, NULL);
  }

  pthread_t t[4];
  struct job job = {iters, leaks};
  for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, worker, &job);
  int bad = chaos_files ? files(200) : 0;
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  made += threads * (iters + leaks);
  leaked += threads * leaks;
  if (libs) {
    libraries_on = 0;
    pthread_join(libraries_thread, NULL);
  }
  if (chaos_files) {
    chaos_on = 0;
    pthread_join(chaos_thread, NULL);
    printf("files: %s\n", bad ? "one held what the program did not write" : "as written");
  }

  if (signals == 1) {
    raise(SIGUSR1);
    printf("one-shot handler ran %d time(s), SIGUSR1 now %s\n", (int)usr1_seen,
           disposition(SIGUSR1));
  } else if (signals == 2) {
    page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (int i = 0; i < 2000; i++) {
      mprotect(page, 4096, PROT_NONE);
      page[i % 4096] = 1;
    }
    printf("write barrier faults: %d\n", (int)faults);
  }

  if (children == 1) {
    for (int i = 0; i < 2; i++) {
      pid_t p = fork();
      if (p == 0) child_work(0);
      int st = 1;
      if (p > 0) waitpid(p, &st, 0);
      printf("forked child exited %d\n", WEXITSTATUS(st));
      if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        made += 2;
        leaked += 1;
      }
    }
  } else if (children == 2) {
    pid_t p = vfork();
    if (p == 0) {
      char *none[] = {"/nonexistent/gpulab-hostile", NULL};
      execv(none[0], none);
      _exit(127);
    }
    int st = 0;
    if (p > 0) waitpid(p, &st, 0);
    printf("vfork child exited %d\n", WEXITSTATUS(st));
  } else if (children == 3) {
    pid_t p = fork();
    if (p == 0) {
      if (session) setsid();
      char *args[] = {argv[0], "child", (char *)dir, NULL};
      execv("/proc/self/exe", args);
      _exit(127);
    }
    int st = 1;
    if (p > 0) waitpid(p, &st, 0);
    printf("exec'd child exited %d\n", WEXITSTATUS(st));
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
      made += 2;
      leaked += 1;
    }
  }
  /* After the children: the parent's own work must still be seen. */
  churn(ctx, 3, 1);
  made += 4;
  leaked += 1;

  printf("SIGPIPE %s, SIGALRM %s, SIGSEGV %s, SIGBUS %s, SIGTERM %s, SIGINT %s\n",
         disposition(SIGPIPE), disposition(SIGALRM), disposition(SIGSEGV),
         disposition(SIGBUS), disposition(SIGTERM), disposition(SIGINT));
  printf("expect made=%ld leaked=%ld\n", made, leaked);
  fflush(stdout);
  if (bad) return 9;
  switch (ending) {
  case 1:
    _exit(5);
  case 2:
    if (signals != 4) raise(SIGTERM);
    return 0;
  default:
    return 0;
  }
}
