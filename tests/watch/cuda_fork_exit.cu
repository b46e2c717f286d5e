// A CUDA program that forks children which leave through exit() without
// touching CUDA (their atexit handlers and library destructors run), as Open
// MPI's orted does once hwloc has enumerated the devices. Bare, every child
// exits 0; watched, every child must too: the agent inherited by a child
// forked without exec may not call into a CUDA that is not the child's.
//
// usage: cuda_fork_exit [CHILDREN]   (prints how many children exited 0)
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int children = argc > 1 ? atoi(argv[1]) : 8;
    void *p = NULL;
    if (cudaMalloc(&p, 1 << 20) != cudaSuccess) {
        fprintf(stderr, "cuda_fork_exit: no CUDA device\n");
        return 2;
    }
    fflush(stdout);
    fflush(stderr);
    int ok = 0;
    for (int i = 0; i < children; i++) {
        pid_t child = fork();
        if (child < 0) {
            perror("fork");
            return 3;
        }
        if (child == 0) {
            exit(0);
        }
        int status = 0;
        waitpid(child, &status, 0);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            ok++;
        } else if (WIFSIGNALED(status)) {
            printf("child %d: killed by signal %d\n", i, WTERMSIG(status));
        } else {
            printf("child %d: exited %d\n", i, WEXITSTATUS(status));
        }
    }
    printf("children exited 0: %d of %d\n", ok, children);
    cudaFree(p);
    return ok == children ? 0 : 1;
}
