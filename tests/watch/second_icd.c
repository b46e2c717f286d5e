/* A second OpenCL ICD, with one platform and no device, for
 * tests/watch_loaders.rs: with PoCL it makes two platforms whose order a loader
 * decides, so a test sees whether a watched program gets the order its own
 * loader gives. The cl_khr_icd protocol: `clGetExtensionFunctionAddress`
 * gives `clIcdGetPlatformIDsKHR`; an object starts with its dispatch table. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <string.h>

static void *table[160];
static struct { void **dispatch; } platform = {table};

static cl_int platform_info(cl_platform_id p, cl_platform_info what, size_t size, void *value,
                            size_t *ret) {
    const char *s;
    switch (what) {
    case CL_PLATFORM_PROFILE: s = "FULL_PROFILE"; break;
    case CL_PLATFORM_VERSION: s = "OpenCL 1.2 second"; break;
    case CL_PLATFORM_NAME: s = "gpulab second platform"; break;
    case CL_PLATFORM_VENDOR: s = "gpulab tests"; break;
    case CL_PLATFORM_EXTENSIONS: s = "cl_khr_icd"; break;
    case 0x0920 /* CL_PLATFORM_ICD_SUFFIX_KHR */: s = "GLS"; break;
    default: return CL_INVALID_VALUE;
    }
    (void)p;
    size_t len = strlen(s) + 1;
    if (ret) *ret = len;
    if (value) {
        if (size < len) return CL_INVALID_VALUE;
        memcpy(value, s, len);
    }
    return CL_SUCCESS;
}

static cl_int device_ids(cl_platform_id p, cl_device_type type, cl_uint n, cl_device_id *out,
                         cl_uint *count) {
    (void)p, (void)type, (void)n, (void)out;
    if (count) *count = 0;
    return CL_DEVICE_NOT_FOUND;
}

static cl_int platform_ids(cl_uint n, cl_platform_id *out, cl_uint *count) {
    table[1] = (void *)platform_info;
    table[2] = (void *)device_ids;
    if (count) *count = 1;
    if (out && n > 0) out[0] = (cl_platform_id)&platform;
    return CL_SUCCESS;
}

/* Loaders ask for the platform query this way too (ocl-icd, to check that
 * the platform has cl_khr_icd). */
void *clGetExtensionFunctionAddress(const char *name) {
    if (strcmp(name, "clIcdGetPlatformIDsKHR") == 0) return (void *)platform_ids;
    if (strcmp(name, "clGetPlatformInfo") == 0) return (void *)platform_info;
    return NULL;
}
