/* An OpenCL ICD loader without layers, as CUDA's toolkit installs one: it loads
 * the ICDs named in OCL_ICD_FILENAMES (in that order), then the .icd files of
 * OCL_ICD_VENDORS or /etc/OpenCL/vendors (by name), and dispatches each call
 * through its object's table (cl_khr_icd). Built as libOpenCL.so.1 for
 * tests/watch_loaders.rs, so that `gpulab watch` must preload a loader that
 * can load its agent, and the program must still see this loader's platforms
 * in this loader's order. Only the calls tests/watch/platforms.c makes. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef cl_int (*icd_ids_fn)(cl_uint, cl_platform_id *, cl_uint *);
typedef void *(*address_fn)(const char *);

static cl_platform_id found[64];
static cl_uint nfound;
static int loaded;

static void load(const char *library) {
    void *lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    address_fn address = (address_fn)dlsym(lib, "clGetExtensionFunctionAddress");
    icd_ids_fn ids = address ? (icd_ids_fn)address("clIcdGetPlatformIDsKHR") : NULL;
    cl_uint n = 0;
    if (!ids || ids(0, NULL, &n) != CL_SUCCESS || n == 0 || nfound + n > 64) return;
    ids(n, found + nfound, NULL);
    nfound += n;
}

static int by_name(const struct dirent **a, const struct dirent **b) {
    return strcmp((*a)->d_name, (*b)->d_name);
}

static void load_all(void) {
    if (loaded) return;
    loaded = 1;
    const char *files = getenv("OCL_ICD_FILENAMES");
    if (files) {
        char *copy = strdup(files), *save = NULL;
        for (char *f = strtok_r(copy, ":", &save); f; f = strtok_r(NULL, ":", &save)) load(f);
        free(copy);
    }
    const char *dir = getenv("OCL_ICD_VENDORS");
    if (!dir || !*dir) dir = "/etc/OpenCL/vendors";
    struct dirent **names;
    int n = scandir(dir, &names, NULL, by_name);
    for (int i = 0; i < n; i++) {
        size_t len = strlen(names[i]->d_name);
        if (len > 4 && strcmp(names[i]->d_name + len - 4, ".icd") == 0) {
            char path[4096], line[4096];
            snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
            FILE *f = fopen(path, "r");
            if (f && fgets(line, sizeof line, f)) {
                line[strcspn(line, "\r\n")] = 0;
                load(line);
            }
            if (f) fclose(f);
        }
        free(names[i]);
    }
    if (n > 0) free(names);
}

/* Entry `i` of an object's dispatch table. */
#define ENTRY(obj, i) ((*(void ***)(obj))[i])

cl_int clGetPlatformIDs(cl_uint n, cl_platform_id *out, cl_uint *count) {
    if ((n == 0 && out) || (!out && !count)) return CL_INVALID_VALUE;
    load_all();
    if (count) *count = nfound;
    for (cl_uint i = 0; out && i < n && i < nfound; i++) out[i] = found[i];
    return nfound ? CL_SUCCESS : -1001;
}

cl_int clGetPlatformInfo(cl_platform_id p, cl_platform_info what, size_t size, void *value,
                         size_t *ret) {
    if (!p) return CL_INVALID_PLATFORM;
    return ((cl_int(*)(cl_platform_id, cl_platform_info, size_t, void *, size_t *))ENTRY(p, 1))(
        p, what, size, value, ret);
}

cl_int clGetDeviceIDs(cl_platform_id p, cl_device_type type, cl_uint n, cl_device_id *out,
                      cl_uint *count) {
    if (!p) return CL_INVALID_PLATFORM;
    return ((cl_int(*)(cl_platform_id, cl_device_type, cl_uint, cl_device_id *, cl_uint *))ENTRY(
        p, 2))(p, type, n, out, count);
}

cl_int clGetDeviceInfo(cl_device_id d, cl_device_info what, size_t size, void *value,
                       size_t *ret) {
    return ((cl_int(*)(cl_device_id, cl_device_info, size_t, void *, size_t *))ENTRY(d, 3))(
        d, what, size, value, ret);
}

cl_context clCreateContext(const cl_context_properties *props, cl_uint n,
                           const cl_device_id *devices, void (*notify)(const char *, const void *,
                                                                       size_t, void *),
                           void *data, cl_int *err) {
    return ((cl_context(*)(const cl_context_properties *, cl_uint, const cl_device_id *,
                           void (*)(const char *, const void *, size_t, void *), void *,
                           cl_int *))ENTRY(devices[0], 4))(props, n, devices, notify, data, err);
}

cl_int clReleaseContext(cl_context c) {
    return ((cl_int(*)(cl_context))ENTRY(c, 7))(c);
}

cl_mem clCreateBuffer(cl_context c, cl_mem_flags flags, size_t size, void *host, cl_int *err) {
    return ((cl_mem(*)(cl_context, cl_mem_flags, size_t, void *, cl_int *))ENTRY(c, 14))(
        c, flags, size, host, err);
}

cl_int clReleaseMemObject(cl_mem m) {
    return ((cl_int(*)(cl_mem))ENTRY(m, 18))(m);
}
