//! The calls gpulab's labs make, as plain data: each call's C name, the driver
//! entry points it really reaches, its backend, and what it does to the lifetime
//! of an object. The lab language adds argument signatures on top; the engine, the
//! backends and every view read these, so a call's meaning is written down once.

use serde::{Deserialize, Serialize};

use crate::vocab::{BackendKind, ObjKind};

/// A call a lab may make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Api {
    ClCreateContext,
    ClCreateCommandQueue,
    ClCreateBuffer,
    ClCreateProgramWithSource,
    ClBuildProgram,
    ClCreateKernel,
    ClEnqueueNDRangeKernel,
    ClEnqueueReadBuffer,
    ClEnqueueWriteBuffer,
    ClFinish,
    ClFlush,
    ClWaitForEvents,
    ClRetainContext,
    ClRetainCommandQueue,
    ClRetainMemObject,
    ClRetainProgram,
    ClRetainKernel,
    ClRetainEvent,
    ClReleaseContext,
    ClReleaseCommandQueue,
    ClReleaseMemObject,
    ClReleaseProgram,
    ClReleaseKernel,
    ClReleaseEvent,
    ClCreateSubBuffer,
    ClEnqueueCopyBuffer,
    ClEnqueueFillBuffer,
    ClEnqueueMapBuffer,
    ClEnqueueUnmapMemObject,
    ClEnqueueBarrierWithWaitList,
    ClEnqueueMarkerWithWaitList,
    ClSetKernelArg,
    ClCreateUserEvent,
    ClSetUserEventStatus,
    CudaMalloc,
    CudaFree,
    CudaMallocAsync,
    CudaFreeAsync,
    CudaStreamCreate,
    CudaStreamDestroy,
    CudaEventCreate,
    CudaEventRecord,
    CudaEventSynchronize,
    CudaEventQuery,
    CudaEventDestroy,
    CudaStreamWaitEvent,
    CudaStreamSynchronize,
    CudaDeviceSynchronize,
    CudaLaunchKernel,
    CudaMemcpyAsync,
    /// The host-to-device form of `cudaMemcpyAsync` (destination first, as in C).
    CudaMemcpyAsyncToDevice,
    CudaMemsetAsync,
    CudaMallocHost,
    CudaFreeHost,
    CudaMemPoolSetAttribute,
    CudaMemPoolTrimTo,
    CudaMemGetInfo,
    /// Synchronous device-to-host copy on the legacy default stream.
    CudaMemcpy,
    /// The host-to-device form of `cudaMemcpy` (destination first, as in C).
    CudaMemcpyToDevice,
    CudaStreamCreateWithFlags,
    CudaMemPoolCreate,
    /// `cudaMemPoolSetAttribute` on a pool the lab created.
    CudaMemPoolSetAttributeOf,
    /// `cudaMemPoolTrimTo` on a pool the lab created.
    CudaMemPoolTrimToOf,
    CudaMallocFromPoolAsync,
    CudaMemPoolDestroy,
    CudaHostRegister,
    CudaHostUnregister,
    CudaMallocManaged,
    CudaMemPrefetchAsync,
    CuMemCreate,
    CuMemAddressReserve,
    CuMemMap,
    CuMemSetAccess,
    /// `cudaMemsetAsync` over a mapped virtual address range.
    CudaMemsetAsyncRange,
    CuMemUnmap,
    CuMemRelease,
    CuMemAddressFree,
    CudaGraphCreate,
    CudaGraphAddMemAllocNode,
    CudaGraphAddMemsetNode,
    CudaGraphAddMemFreeNode,
    CudaGraphInstantiate,
    CudaGraphLaunch,
    CudaGraphExecDestroy,
    CudaGraphDestroy,
    CudaDeviceGraphMemTrim,
    /// Makes device N current (its primary context, retained at first use):
    /// what the lab makes from then on is N's.
    CudaSetDevice,
    /// The current device may read and write device N's memory directly.
    CudaDeviceEnablePeerAccess,
    CudaDeviceDisablePeerAccess,
    /// A copy from one device's buffer to another's.
    CudaMemcpyPeer,
    /// Pageable host memory from the C library: the driver does not know it,
    /// so a copy from or to it is staged through the driver's own pinned buffers.
    Malloc,
    /// Gives `malloc`'d memory back to the C library.
    Free,
    /// Pinned host memory with flags (`cudaHostAllocMapped`, `…WriteCombined`, `…Portable`).
    CudaHostAlloc,
    /// The device's address of mapped pinned memory: a buffer a kernel may take,
    /// whose bytes stay in host memory and go when the host memory is freed.
    CudaHostGetDevicePointer,
    /// A callback when an event reaches a status: the callback releases a
    /// buffer, as a program hands its last reference to it.
    ClSetEventCallback,
    /// A host function queued on a stream: gpulab's sleeps the asked time,
    /// and the stream's later work waits for it.
    CudaLaunchHostFunc,
    /// The older form of `cudaLaunchHostFunc`, with a status argument.
    CudaStreamAddCallback,
    /// An event's execution status: whether its command has completed.
    ClGetEventInfo,
    /// The time between two recorded events, ms.
    CudaEventElapsedTime,
    /// An event with flags (`cudaEventDisableTiming`, `cudaEventBlockingSync`).
    CudaEventCreateWithFlags,
    /// `cudaMemPrefetchAsync` to the host (`cudaCpuDeviceId`).
    CudaMemPrefetchAsyncToHost,
    /// Advice on where managed memory should live and who reads it.
    CudaMemAdvise,
    /// The C library's `memset` on the host: writes every byte of managed
    /// memory from the CPU, which faults its pages to the host.
    HostMemset,
    /// Sets one of the device's limits (`cudaLimitMallocHeapSize`,
    /// `cudaLimitStackSize`, `cudaLimitPrintfFifoSize`), in bytes.
    CudaDeviceSetLimit,
    /// Reads one of the device's limits back, as the driver holds it.
    CudaDeviceGetLimit,
    /// Shared virtual memory: a pointer both the host and the kernels use,
    /// with no reference count (a `Buffer` in the lab's ledger).
    ClSVMAlloc,
    /// Frees SVM at once, whatever still uses it.
    ClSVMFree,
    /// Queues the free of SVM behind the queue's earlier commands.
    ClEnqueueSVMFree,
    /// Sets a kernel's argument to an SVM pointer.
    ClSetKernelArgSVMPointer,
    /// Moves a buffer to the queue's device ahead of its use.
    ClEnqueueMigrateMemObjects,
    /// Moves a buffer to the host (`CL_MIGRATE_MEM_OBJECT_HOST`).
    ClEnqueueMigrateMemObjectsToHost,
}

/// The name of a call in the stream: one of the vocabulary's (`Api`), or a
/// name it does not hold (a driver entry point an agent hooked, such as
/// `cuMemAlloc_v2`, or a script directive such as `forget`). Made from a
/// name, it is typed once, so no reader looks the string up again; on the
/// wire it is the name alone. Two names are equal when they read the same
/// (an overloaded call's entries share their name).
#[derive(Clone, Debug)]
pub enum CallName {
    Api(Api),
    Other(Box<str>),
}

impl CallName {
    /// The vocabulary's call of this name, when it has one.
    pub fn api(&self) -> Option<Api> {
        match self {
            CallName::Api(api) => Some(*api),
            CallName::Other(_) => None,
        }
    }

    /// The name as written, not looked up: for a writer that only sends it
    /// (the agent, inside someone else's program); whoever reads it back
    /// types it then.
    pub fn verbatim(name: &str) -> CallName {
        CallName::Other(name.into())
    }

    pub fn as_str(&self) -> &str {
        match self {
            CallName::Api(api) => api.name(),
            CallName::Other(name) => name,
        }
    }
}

/// No name (a `Call` made field by field, in tests).
impl Default for CallName {
    fn default() -> CallName {
        CallName::Other(Box::default())
    }
}

impl From<Api> for CallName {
    fn from(api: Api) -> CallName {
        CallName::Api(api)
    }
}

impl From<&str> for CallName {
    fn from(name: &str) -> CallName {
        match Api::named(name) {
            Some(api) => CallName::Api(api),
            None => CallName::Other(name.into()),
        }
    }
}

impl From<String> for CallName {
    fn from(name: String) -> CallName {
        match Api::named(&name) {
            Some(api) => CallName::Api(api),
            None => CallName::Other(name.into_boxed_str()),
        }
    }
}

impl std::ops::Deref for CallName {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Display for CallName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq for CallName {
    fn eq(&self, other: &CallName) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for CallName {}

impl std::hash::Hash for CallName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialOrd for CallName {
    fn partial_cmp(&self, other: &CallName) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for CallName {
    fn cmp(&self, other: &CallName) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl PartialEq<str> for CallName {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for CallName {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for CallName {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl Serialize for CallName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for CallName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<CallName, D::Error> {
        String::deserialize(d).map(CallName::from)
    }
}

/// What a call does to the lifetime of the objects it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Returns a new object of this kind.
    Create(ObjKind),
    /// Adds one reference to its first argument, an object of this kind.
    Retain(ObjKind),
    /// Drops one reference from its first argument, an object of this kind.
    Release(ObjKind),
    /// Uses its arguments, creates nothing; may return an event when bound.
    Use,
}

/// One call, as data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiInfo {
    pub api: Api,
    /// The C name a lab writes.
    pub name: &'static str,
    pub backend: BackendKind,
    /// The driver entry points the call really reaches, shown beside the C name.
    pub driver: &'static str,
    pub effect: Effect,
    /// A `Use` call that may be bound to a name returns an event (`ev = clEnqueueReadBuffer(…)`).
    pub may_return_event: bool,
}

const fn cl(api: Api, name: &'static str, driver: &'static str, effect: Effect) -> ApiInfo {
    ApiInfo {
        api,
        name,
        backend: BackendKind::OpenCl,
        driver,
        effect,
        may_return_event: false,
    }
}

const fn cuda(api: Api, name: &'static str, driver: &'static str, effect: Effect) -> ApiInfo {
    let mut info = cl(api, name, driver, effect);
    info.backend = BackendKind::Cuda;
    info
}

const fn with_event(mut info: ApiInfo) -> ApiInfo {
    info.may_return_event = true;
    info
}

use ObjKind::{
    Buffer, Context, Event, Graph, GraphExec, HostBuffer, Kernel, MemHandle, Pool, Program, Queue,
    Stream, VaRange,
};

/// Every call, in the order `Api` declares them (a test keeps it so), so a call's
/// entry is found by its index.
pub static APIS: &[ApiInfo] = &[
    cl(
        Api::ClCreateContext,
        "clCreateContext",
        "clCreateContext + clSetContextDestructorCallback",
        Effect::Create(Context),
    ),
    cl(
        Api::ClCreateCommandQueue,
        "clCreateCommandQueue",
        "clCreateCommandQueueWithProperties(PROFILING_ENABLE [| OUT_OF_ORDER_EXEC_MODE_ENABLE])",
        Effect::Create(Queue),
    ),
    cl(
        Api::ClCreateBuffer,
        "clCreateBuffer",
        "clCreateBuffer(COPY_HOST_PTR by default) + clSetMemObjectDestructorCallback",
        Effect::Create(Buffer),
    ),
    cl(
        Api::ClCreateProgramWithSource,
        "clCreateProgramWithSource",
        "clCreateProgramWithSource",
        Effect::Create(Program),
    ),
    cl(
        Api::ClBuildProgram,
        "clBuildProgram",
        "clBuildProgram",
        Effect::Use,
    ),
    cl(
        Api::ClCreateKernel,
        "clCreateKernel",
        "clCreateKernel",
        Effect::Create(Kernel),
    ),
    cl(
        Api::ClEnqueueNDRangeKernel,
        "clEnqueueNDRangeKernel",
        "clSetKernelArg + clEnqueueNDRangeKernel",
        Effect::Create(Event),
    ),
    with_event(cl(
        Api::ClEnqueueReadBuffer,
        "clEnqueueReadBuffer",
        "clEnqueueReadBuffer",
        Effect::Use,
    )),
    with_event(cl(
        Api::ClEnqueueWriteBuffer,
        "clEnqueueWriteBuffer",
        "clEnqueueWriteBuffer",
        Effect::Use,
    )),
    cl(Api::ClFinish, "clFinish", "clFinish", Effect::Use),
    cl(Api::ClFlush, "clFlush", "clFlush", Effect::Use),
    cl(
        Api::ClWaitForEvents,
        "clWaitForEvents",
        "clWaitForEvents",
        Effect::Use,
    ),
    cl(
        Api::ClRetainContext,
        "clRetainContext",
        "clRetainContext",
        Effect::Retain(Context),
    ),
    cl(
        Api::ClRetainCommandQueue,
        "clRetainCommandQueue",
        "clRetainCommandQueue",
        Effect::Retain(Queue),
    ),
    cl(
        Api::ClRetainMemObject,
        "clRetainMemObject",
        "clRetainMemObject",
        Effect::Retain(Buffer),
    ),
    cl(
        Api::ClRetainProgram,
        "clRetainProgram",
        "clRetainProgram",
        Effect::Retain(Program),
    ),
    cl(
        Api::ClRetainKernel,
        "clRetainKernel",
        "clRetainKernel",
        Effect::Retain(Kernel),
    ),
    cl(
        Api::ClRetainEvent,
        "clRetainEvent",
        "clRetainEvent",
        Effect::Retain(Event),
    ),
    cl(
        Api::ClReleaseContext,
        "clReleaseContext",
        "clReleaseContext",
        Effect::Release(Context),
    ),
    cl(
        Api::ClReleaseCommandQueue,
        "clReleaseCommandQueue",
        "clReleaseCommandQueue",
        Effect::Release(Queue),
    ),
    cl(
        Api::ClReleaseMemObject,
        "clReleaseMemObject",
        "clReleaseMemObject",
        Effect::Release(Buffer),
    ),
    cl(
        Api::ClReleaseProgram,
        "clReleaseProgram",
        "clReleaseProgram",
        Effect::Release(Program),
    ),
    cl(
        Api::ClReleaseKernel,
        "clReleaseKernel",
        "clReleaseKernel",
        Effect::Release(Kernel),
    ),
    cl(
        Api::ClReleaseEvent,
        "clReleaseEvent",
        "clReleaseEvent",
        Effect::Release(Event),
    ),
    cl(
        Api::ClCreateSubBuffer,
        "clCreateSubBuffer",
        "clCreateSubBuffer(CL_BUFFER_CREATE_TYPE_REGION) + clSetMemObjectDestructorCallback",
        Effect::Create(Buffer),
    ),
    with_event(cl(
        Api::ClEnqueueCopyBuffer,
        "clEnqueueCopyBuffer",
        "clEnqueueCopyBuffer",
        Effect::Use,
    )),
    with_event(cl(
        Api::ClEnqueueFillBuffer,
        "clEnqueueFillBuffer",
        "clEnqueueFillBuffer",
        Effect::Use,
    )),
    with_event(cl(
        Api::ClEnqueueMapBuffer,
        "clEnqueueMapBuffer",
        "clEnqueueMapBuffer(CL_MAP_READ | CL_MAP_WRITE)",
        Effect::Use,
    )),
    with_event(cl(
        Api::ClEnqueueUnmapMemObject,
        "clEnqueueUnmapMemObject",
        "clEnqueueUnmapMemObject",
        Effect::Use,
    )),
    with_event(cl(
        Api::ClEnqueueBarrierWithWaitList,
        "clEnqueueBarrierWithWaitList",
        "clEnqueueBarrierWithWaitList",
        Effect::Use,
    )),
    with_event(cl(
        Api::ClEnqueueMarkerWithWaitList,
        "clEnqueueMarkerWithWaitList",
        "clEnqueueMarkerWithWaitList",
        Effect::Use,
    )),
    cl(
        Api::ClSetKernelArg,
        "clSetKernelArg",
        "clSetKernelArg",
        Effect::Use,
    ),
    cl(
        Api::ClCreateUserEvent,
        "clCreateUserEvent",
        "clCreateUserEvent",
        Effect::Create(Event),
    ),
    cl(
        Api::ClSetUserEventStatus,
        "clSetUserEventStatus",
        "clSetUserEventStatus",
        Effect::Use,
    ),
    cuda(
        Api::CudaMalloc,
        "cudaMalloc",
        "cuMemAlloc_v2",
        Effect::Create(Buffer),
    ),
    cuda(
        Api::CudaFree,
        "cudaFree",
        "cuMemFree_v2",
        Effect::Release(Buffer),
    ),
    cuda(
        Api::CudaMallocAsync,
        "cudaMallocAsync",
        "cuMemAllocAsync",
        Effect::Create(Buffer),
    ),
    cuda(
        Api::CudaFreeAsync,
        "cudaFreeAsync",
        "cuMemFreeAsync",
        Effect::Release(Buffer),
    ),
    cuda(
        Api::CudaStreamCreate,
        "cudaStreamCreate",
        "cuStreamCreate(CU_STREAM_DEFAULT)",
        Effect::Create(Stream),
    ),
    cuda(
        Api::CudaStreamDestroy,
        "cudaStreamDestroy",
        "cuStreamDestroy_v2",
        Effect::Release(Stream),
    ),
    cuda(
        Api::CudaEventCreate,
        "cudaEventCreate",
        "cuEventCreate(CU_EVENT_DEFAULT)",
        Effect::Create(Event),
    ),
    cuda(
        Api::CudaEventRecord,
        "cudaEventRecord",
        "cuEventRecord",
        Effect::Use,
    ),
    cuda(
        Api::CudaEventSynchronize,
        "cudaEventSynchronize",
        "cuEventSynchronize",
        Effect::Use,
    ),
    cuda(
        Api::CudaEventQuery,
        "cudaEventQuery",
        "cuEventQuery",
        Effect::Use,
    ),
    cuda(
        Api::CudaEventDestroy,
        "cudaEventDestroy",
        "cuEventDestroy_v2",
        Effect::Release(Event),
    ),
    cuda(
        Api::CudaStreamWaitEvent,
        "cudaStreamWaitEvent",
        "cuStreamWaitEvent",
        Effect::Use,
    ),
    cuda(
        Api::CudaStreamSynchronize,
        "cudaStreamSynchronize",
        "cuStreamSynchronize",
        Effect::Use,
    ),
    cuda(
        Api::CudaDeviceSynchronize,
        "cudaDeviceSynchronize",
        "cuCtxSynchronize",
        Effect::Use,
    ),
    cuda(
        Api::CudaLaunchKernel,
        "cudaLaunchKernel",
        "cuLaunchKernel (+ cuEventRecord of gpulab's span events)",
        Effect::Use,
    ),
    cuda(
        Api::CudaMemcpyAsync,
        "cudaMemcpyAsync",
        "cuMemcpyDtoHAsync_v2 (device to host)",
        Effect::Use,
    ),
    cuda(
        Api::CudaMemcpyAsyncToDevice,
        "cudaMemcpyAsync",
        "cuMemcpyHtoDAsync_v2 (host to device)",
        Effect::Use,
    ),
    cuda(
        Api::CudaMemsetAsync,
        "cudaMemsetAsync",
        "cuMemsetD8Async",
        Effect::Use,
    ),
    cuda(
        Api::CudaMallocHost,
        "cudaMallocHost",
        "cuMemAllocHost_v2",
        Effect::Create(HostBuffer),
    ),
    cuda(
        Api::CudaFreeHost,
        "cudaFreeHost",
        "cuMemFreeHost",
        Effect::Release(HostBuffer),
    ),
    cuda(
        Api::CudaMemPoolSetAttribute,
        "cudaMemPoolSetAttribute",
        "cuMemPoolSetAttribute(default pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)",
        Effect::Use,
    ),
    cuda(
        Api::CudaMemPoolTrimTo,
        "cudaMemPoolTrimTo",
        "cuMemPoolTrimTo(default pool)",
        Effect::Use,
    ),
    cuda(
        Api::CudaMemGetInfo,
        "cudaMemGetInfo",
        "cuMemGetInfo_v2",
        Effect::Use,
    ),
    cuda(
        Api::CudaMemcpy,
        "cudaMemcpy",
        "cuMemcpyDtoH_v2 (device to host, legacy default stream)",
        Effect::Use,
    ),
    cuda(
        Api::CudaMemcpyToDevice,
        "cudaMemcpy",
        "cuMemcpyHtoD_v2 (host to device, legacy default stream)",
        Effect::Use,
    ),
    cuda(
        Api::CudaStreamCreateWithFlags,
        "cudaStreamCreateWithFlags",
        "cuStreamCreate(CU_STREAM_DEFAULT | CU_STREAM_NON_BLOCKING)",
        Effect::Create(Stream),
    ),
    cuda(
        Api::CudaMemPoolCreate,
        "cudaMemPoolCreate",
        "cuMemPoolCreate(pinned, this device, no export handle)",
        Effect::Create(Pool),
    ),
    cuda(
        Api::CudaMemPoolSetAttributeOf,
        "cudaMemPoolSetAttribute",
        "cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)",
        Effect::Use,
    ),
    cuda(
        Api::CudaMemPoolTrimToOf,
        "cudaMemPoolTrimTo",
        "cuMemPoolTrimTo(pool)",
        Effect::Use,
    ),
    cuda(
        Api::CudaMallocFromPoolAsync,
        "cudaMallocFromPoolAsync",
        "cuMemAllocFromPoolAsync",
        Effect::Create(Buffer),
    ),
    cuda(
        Api::CudaMemPoolDestroy,
        "cudaMemPoolDestroy",
        "cuMemPoolDestroy",
        Effect::Release(Pool),
    ),
    cuda(
        Api::CudaHostRegister,
        "cudaHostRegister",
        "cuMemHostRegister_v2(flags 0) on host memory gpulab allocates",
        Effect::Create(HostBuffer),
    ),
    cuda(
        Api::CudaHostUnregister,
        "cudaHostUnregister",
        "cuMemHostUnregister (then gpulab frees the host memory)",
        Effect::Release(HostBuffer),
    ),
    cuda(
        Api::CudaMallocManaged,
        "cudaMallocManaged",
        "cuMemAllocManaged(CU_MEM_ATTACH_GLOBAL) (after gpulab's cuMemGetInfo_v2 guard)",
        Effect::Create(Buffer),
    ),
    cuda(
        Api::CudaMemPrefetchAsync,
        "cudaMemPrefetchAsync",
        "cuMemPrefetchAsync_v2(to this device) (+ cuEventRecord of gpulab's span events)",
        Effect::Use,
    ),
    cuda(
        Api::CuMemCreate,
        "cuMemCreate",
        "cuMemCreate(pinned, this device)",
        Effect::Create(MemHandle),
    ),
    cuda(
        Api::CuMemAddressReserve,
        "cuMemAddressReserve",
        "cuMemAddressReserve(alignment 0, any address)",
        Effect::Create(VaRange),
    ),
    cuda(
        Api::CuMemMap,
        "cuMemMap",
        "cuMemMap(range, the allocation's size, offset 0)",
        Effect::Use,
    ),
    cuda(
        Api::CuMemSetAccess,
        "cuMemSetAccess",
        "cuMemSetAccess(mapped size, this device, READWRITE)",
        Effect::Use,
    ),
    cuda(
        Api::CudaMemsetAsyncRange,
        "cudaMemsetAsync",
        "cuMemsetD8Async (over the mapped range)",
        Effect::Use,
    ),
    cuda(
        Api::CuMemUnmap,
        "cuMemUnmap",
        "cuMemUnmap(mapped size)",
        Effect::Use,
    ),
    cuda(
        Api::CuMemRelease,
        "cuMemRelease",
        "cuMemRelease",
        Effect::Release(MemHandle),
    ),
    cuda(
        Api::CuMemAddressFree,
        "cuMemAddressFree",
        "cuMemAddressFree",
        Effect::Release(VaRange),
    ),
    cuda(
        Api::CudaGraphCreate,
        "cudaGraphCreate",
        "cuGraphCreate(flags 0)",
        Effect::Create(Graph),
    ),
    cuda(
        Api::CudaGraphAddMemAllocNode,
        "cudaGraphAddMemAllocNode",
        "cuGraphAddMemAllocNode(after the graph's last node; pinned, this device)",
        Effect::Create(Buffer),
    ),
    cuda(
        Api::CudaGraphAddMemsetNode,
        "cudaGraphAddMemsetNode",
        "cuGraphAddMemsetNode(after the graph's last node; the whole buffer, byte 0)",
        Effect::Use,
    ),
    cuda(
        Api::CudaGraphAddMemFreeNode,
        "cudaGraphAddMemFreeNode",
        "cuGraphAddMemFreeNode(after the graph's last node)",
        Effect::Use,
    ),
    cuda(
        Api::CudaGraphInstantiate,
        "cudaGraphInstantiate",
        "cuGraphInstantiateWithFlags(flags 0)",
        Effect::Create(GraphExec),
    ),
    cuda(
        Api::CudaGraphLaunch,
        "cudaGraphLaunch",
        "cuGraphLaunch (+ cuEventRecord of gpulab's span events)",
        Effect::Use,
    ),
    cuda(
        Api::CudaGraphExecDestroy,
        "cudaGraphExecDestroy",
        "cuGraphExecDestroy",
        Effect::Release(GraphExec),
    ),
    cuda(
        Api::CudaGraphDestroy,
        "cudaGraphDestroy",
        "cuGraphDestroy",
        Effect::Release(Graph),
    ),
    cuda(
        Api::CudaDeviceGraphMemTrim,
        "cudaDeviceGraphMemTrim",
        "cuDeviceGraphMemTrim(this device)",
        Effect::Use,
    ),
    cuda(
        Api::CudaSetDevice,
        "cudaSetDevice",
        "cuDevicePrimaryCtxRetain (first use) + cuCtxSetCurrent",
        Effect::Use,
    ),
    cuda(
        Api::CudaDeviceEnablePeerAccess,
        "cudaDeviceEnablePeerAccess",
        "cuCtxEnablePeerAccess(the peer's primary context)",
        Effect::Use,
    ),
    cuda(
        Api::CudaDeviceDisablePeerAccess,
        "cudaDeviceDisablePeerAccess",
        "cuCtxDisablePeerAccess(the peer's primary context)",
        Effect::Use,
    ),
    cuda(
        Api::CudaMemcpyPeer,
        "cudaMemcpyPeer",
        "cuMemcpyPeer (each buffer's own device's context)",
        Effect::Use,
    ),
    cuda(
        Api::Malloc,
        "malloc",
        "malloc (pageable host memory the driver is not told of; gpulab writes every page once)",
        Effect::Create(HostBuffer),
    ),
    cuda(Api::Free, "free", "free", Effect::Release(HostBuffer)),
    cuda(
        Api::CudaHostAlloc,
        "cudaHostAlloc",
        "cuMemHostAlloc(flags)",
        Effect::Create(HostBuffer),
    ),
    cuda(
        Api::CudaHostGetDevicePointer,
        "cudaHostGetDevicePointer",
        "cuMemHostGetDevicePointer_v2(flags 0)",
        Effect::Create(Buffer),
    ),
    cl(
        Api::ClSetEventCallback,
        "clSetEventCallback",
        "clSetEventCallback(CL_COMPLETE; the callback calls clReleaseMemObject)",
        Effect::Use,
    ),
    cuda(
        Api::CudaLaunchHostFunc,
        "cudaLaunchHostFunc",
        "cuLaunchHostFunc (gpulab's function sleeps the asked time) (+ cuEventRecord of gpulab's span events)",
        Effect::Use,
    ),
    cuda(
        Api::CudaStreamAddCallback,
        "cudaStreamAddCallback",
        "cuStreamAddCallback(flags 0; gpulab's callback sleeps the asked time) (+ cuEventRecord of gpulab's span events)",
        Effect::Use,
    ),
    cl(
        Api::ClGetEventInfo,
        "clGetEventInfo",
        "clGetEventInfo(CL_EVENT_COMMAND_EXECUTION_STATUS)",
        Effect::Use,
    ),
    cuda(
        Api::CudaEventElapsedTime,
        "cudaEventElapsedTime",
        "cuEventElapsedTime_v2",
        Effect::Use,
    ),
    cuda(
        Api::CudaEventCreateWithFlags,
        "cudaEventCreateWithFlags",
        "cuEventCreate(flags)",
        Effect::Create(Event),
    ),
    cuda(
        Api::CudaMemPrefetchAsyncToHost,
        "cudaMemPrefetchAsync",
        "cuMemPrefetchAsync_v2(to the host) (+ cuEventRecord of gpulab's span events)",
        Effect::Use,
    ),
    cuda(
        Api::CudaMemAdvise,
        "cudaMemAdvise",
        "cuMemAdvise_v2(the whole buffer)",
        Effect::Use,
    ),
    cuda(
        Api::HostMemset,
        "memset",
        "memset (the host writes every byte; no driver call)",
        Effect::Use,
    ),
    cuda(
        Api::CudaDeviceSetLimit,
        "cudaDeviceSetLimit",
        "cuCtxSetLimit",
        Effect::Use,
    ),
    cuda(
        Api::CudaDeviceGetLimit,
        "cudaDeviceGetLimit",
        "cuCtxGetLimit",
        Effect::Use,
    ),
    cl(
        Api::ClSVMAlloc,
        "clSVMAlloc",
        "clSVMAlloc(CL_MEM_READ_WRITE, alignment 0)",
        Effect::Create(Buffer),
    ),
    cl(Api::ClSVMFree, "clSVMFree", "clSVMFree", Effect::Use),
    cl(
        Api::ClEnqueueSVMFree,
        "clEnqueueSVMFree",
        "clEnqueueSVMFree(one pointer, no callback: the implementation frees it)",
        Effect::Use,
    ),
    cl(
        Api::ClSetKernelArgSVMPointer,
        "clSetKernelArgSVMPointer",
        "clSetKernelArgSVMPointer",
        Effect::Use,
    ),
    with_event(cl(
        Api::ClEnqueueMigrateMemObjects,
        "clEnqueueMigrateMemObjects",
        "clEnqueueMigrateMemObjects(one buffer, to the queue's device)",
        Effect::Use,
    )),
    with_event(cl(
        Api::ClEnqueueMigrateMemObjectsToHost,
        "clEnqueueMigrateMemObjects",
        "clEnqueueMigrateMemObjects(one buffer, CL_MIGRATE_MEM_OBJECT_HOST)",
        Effect::Use,
    )),
];

impl Api {
    /// This call's entry.
    pub fn info(self) -> &'static ApiInfo {
        &APIS[self as usize]
    }

    /// The C name a lab writes (`clReleaseMemObject`, `cudaFreeAsync`).
    pub fn name(self) -> &'static str {
        self.info().name
    }

    pub fn driver(self) -> &'static str {
        self.info().driver
    }

    pub fn backend(self) -> BackendKind {
        self.info().backend
    }

    pub fn effect(self) -> Effect {
        self.info().effect
    }

    /// The first call of this C name (an overloaded call has several entries:
    /// `cudaMemcpyAsync` in both directions).
    pub fn named(name: &str) -> Option<Api> {
        APIS.iter().find(|s| s.name == name).map(|s| s.api)
    }

    /// The call queues device work that the backends time as a device span
    /// (a kernel, a copy, a fill): until the span arrives, the work is in flight.
    /// Markers and barriers are not work: NVIDIA's OpenCL does not time them (its
    /// counters read 0), so no span would ever close them.
    pub fn queues_device_work(self) -> bool {
        matches!(
            self,
            Api::ClEnqueueNDRangeKernel
                | Api::ClEnqueueReadBuffer
                | Api::ClEnqueueWriteBuffer
                | Api::ClEnqueueCopyBuffer
                | Api::ClEnqueueFillBuffer
                | Api::ClEnqueueMapBuffer
                | Api::ClEnqueueUnmapMemObject
                | Api::CudaLaunchKernel
                | Api::CudaMemcpyAsync
                | Api::CudaMemcpyAsyncToDevice
                | Api::CudaMemsetAsync
                | Api::CudaMemsetAsyncRange
                | Api::CudaMemPrefetchAsync
                | Api::CudaMemPrefetchAsyncToHost
                | Api::CudaGraphLaunch
                | Api::CudaLaunchHostFunc
                | Api::CudaStreamAddCallback
        )
    }

    /// What the call answers with beside its status, that a claim reads.
    pub fn returns(self) -> Option<Returns> {
        Some(match self {
            Api::ClGetEventInfo | Api::CudaEventQuery => Returns::Complete,
            Api::CudaMemGetInfo => Returns::FreeMib,
            Api::CudaEventElapsedTime => Returns::ElapsedMs,
            Api::CudaDeviceGetLimit => Returns::LimitMib,
            Api::ClEnqueueReadBuffer | Api::CudaMemcpy => Returns::Pattern,
            _ => return None,
        })
    }

    /// The argument whose reference a `Use` call hands over to someone else
    /// (a graph's free node, a callback that releases it): from this call on,
    /// the lab no longer holds it.
    pub fn hands_over(self) -> Option<usize> {
        match self {
            Api::CudaGraphAddMemFreeNode | Api::ClSVMFree | Api::ClEnqueueSVMFree => Some(1),
            Api::ClSetEventCallback => Some(3),
            _ => None,
        }
    }

    /// The call that drops one reference of an object of `kind` on `backend`
    /// (`clReleaseMemObject` or `cudaFree` for a buffer): the first such call.
    pub fn release_of(kind: ObjKind, backend: BackendKind) -> Option<Api> {
        APIS.iter()
            .find(|s| s.backend == backend && s.effect == Effect::Release(kind))
            .map(|s| s.api)
    }

    /// The call that gives back what this call made, where the kind alone does
    /// not say it: host memory goes back the way it came (`free` for `malloc`,
    /// `cudaHostUnregister` for `cudaHostRegister`, `cudaFreeHost` for the
    /// driver's pinned memory), and shared virtual memory by `clSVMFree`
    /// (it has no reference count). `None` for a device pointer of host memory,
    /// which goes with its memory and is never freed itself, and for every
    /// other call (`release_of` its kind says it).
    pub fn freed_by(self) -> Option<Api> {
        match self {
            Api::Malloc => Some(Api::Free),
            Api::CudaHostRegister => Some(Api::CudaHostUnregister),
            Api::CudaMallocHost | Api::CudaHostAlloc => Some(Api::CudaFreeHost),
            Api::ClSVMAlloc => Some(Api::ClSVMFree),
            _ => None,
        }
    }

    /// Whether what this call makes can carry a destructor callback: an SVM
    /// pointer is no `cl_mem`, so no driver can say when it is destroyed,
    /// and "never destroyed" would be a false finding.
    pub fn destruction_observable(self) -> bool {
        self != Api::ClSVMAlloc
    }

    /// Object kinds the calls of one backend can create, in `ObjKind::ALL` order:
    /// what a live-objects view lists for a run of that backend. CUDA's
    /// include managed memory, which only a watched program's agent tells
    /// apart from a buffer.
    pub fn kinds_of(backend: BackendKind) -> Vec<ObjKind> {
        ObjKind::ALL
            .into_iter()
            .filter(|k| {
                (*k == ObjKind::Managed && backend == BackendKind::Cuda)
                    || APIS.iter().any(|s| {
                        s.backend == backend
                            && (s.effect == Effect::Create(*k)
                                || (*k == ObjKind::Event && s.may_return_event))
                    })
            })
            .collect()
    }

    /// Kinds only a few calls make (a pool of the lab's own, the virtual memory
    /// API's handles, graphs): views list them for a run only once it made one, so every
    /// other CUDA run keeps its rows.
    pub fn listed_when_made(kind: ObjKind) -> bool {
        matches!(
            kind,
            ObjKind::Pool
                | ObjKind::MemHandle
                | ObjKind::VaRange
                | ObjKind::Graph
                | ObjKind::GraphExec
                | ObjKind::Managed
        )
    }
}

/// What a call answers with beside its status (`Call::returned`), and the
/// metric that reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Returns {
    /// Whether the event's command had completed: 1 or 0 (`complete(tag)`).
    /// `cudaEventQuery` says it by its status (`cudaErrorNotReady` for 0).
    Complete,
    /// The device's free memory, MiB (`free_mib(tag)`).
    FreeMib,
    /// The time between two events, ms (`elapsed_ms(tag)`).
    ElapsedMs,
    /// A device limit as the driver holds it, MiB (`limit_mib(tag)`).
    LimitMib,
    /// The share of a blocking read-back's words that hold the pattern
    /// kernel's values, 0 to 1 (`pattern(tag)`); `verify h` says the same of
    /// a host buffer.
    Pattern,
}

impl Returns {
    pub const ALL: [Returns; 5] = [
        Returns::Complete,
        Returns::FreeMib,
        Returns::ElapsedMs,
        Returns::LimitMib,
        Returns::Pattern,
    ];

    /// What the claim metric `name` reads, when it reads an answer.
    pub fn read_by(name: &str) -> Option<Returns> {
        Returns::ALL.into_iter().find(|r| r.metric() == name)
    }

    /// The claim metric that reads it.
    pub fn metric(self) -> &'static str {
        match self {
            Returns::Complete => "complete",
            Returns::FreeMib => "free_mib",
            Returns::ElapsedMs => "elapsed_ms",
            Returns::LimitMib => "limit_mib",
            Returns::Pattern => "pattern",
        }
    }
}

/// A word a call may take (how `clCreateBuffer` allocates, an out-of-order
/// queue, a user event's status, a CUDA stream's kind, the callback a call
/// installs); each is the C constant, or the function, of the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClFlag {
    /// gpulab's default: the buffer is filled from zeroed host memory at creation,
    /// so the implementation commits it at that line.
    CopyHostPtr,
    /// The buffer lives in host memory gpulab allocates and keeps until the
    /// driver's destructor callback says the buffer is gone.
    UseHostPtr,
    /// The implementation allocates host-accessible memory of its own.
    AllocHostPtr,
    /// Commands of the queue may run in any order their wait lists allow.
    OutOfOrder,
    /// A user event's status: done, so the commands waiting for it may run.
    Complete,
    /// CUDA: a stream that synchronizes with the legacy default stream.
    StreamDefault,
    /// CUDA: a stream that neither waits for nor is waited on by the legacy
    /// default stream (a synchronous `cudaMemcpy` ignores it).
    StreamNonBlocking,
    /// CUDA `cudaHostAlloc`: plain pinned memory (`cudaMallocHost`'s).
    HostAllocDefault,
    /// CUDA `cudaHostAlloc`: pinned for every context, not only the current one.
    HostAllocPortable,
    /// CUDA `cudaHostAlloc`: mapped into the device's address space, so a kernel
    /// reads and writes it over the bus (`cudaHostGetDevicePointer`).
    HostAllocMapped,
    /// CUDA `cudaHostAlloc`: write-combined, fast for the device to read and
    /// slow for the host to read back.
    HostAllocWriteCombined,
    /// The callback a CUDA host function runs: `sleep` for the duration after it.
    CallbackSleep,
    /// The callback `clSetEventCallback` installs: `clReleaseMemObject` of the
    /// buffer after it.
    CallbackRelease,
    /// What `clGetEventInfo` asks: the command's execution status.
    ExecutionStatus,
    /// CUDA `cudaEventCreateWithFlags`: a plain event (`cudaEventCreate`'s).
    EventDefault,
    /// CUDA: a synchronize on the event blocks the thread instead of spinning.
    EventBlockingSync,
    /// CUDA: the event records no time (cheaper; `cudaEventElapsedTime` refuses it).
    EventDisableTiming,
    /// CUDA: the host, as a memory location (`cudaMemPrefetchAsync`, `cudaMemAdvise`).
    CpuDeviceId,
    /// CUDA `cudaMemAdvise`: the data is mostly read, so each reader may keep a copy.
    AdviseReadMostly,
    /// CUDA `cudaMemAdvise`: where the pages should live.
    AdvisePreferredLocation,
    /// CUDA `cudaMemAdvise`: the location maps the pages, wherever they live.
    AdviseAccessedBy,
    /// CUDA: the heap a kernel's `malloc` takes from, carved out of device memory.
    LimitMallocHeapSize,
    /// CUDA: each thread's stack, reserved for every thread the device can hold.
    LimitStackSize,
    /// CUDA: the buffer a kernel's `printf` writes into.
    LimitPrintfFifoSize,
    /// `clEnqueueMigrateMemObjects`: to the host, not the queue's device.
    MigrateHost,
}

impl ClFlag {
    pub const ALL: [ClFlag; 25] = [
        ClFlag::CopyHostPtr,
        ClFlag::UseHostPtr,
        ClFlag::AllocHostPtr,
        ClFlag::OutOfOrder,
        ClFlag::Complete,
        ClFlag::StreamDefault,
        ClFlag::StreamNonBlocking,
        ClFlag::HostAllocDefault,
        ClFlag::HostAllocPortable,
        ClFlag::HostAllocMapped,
        ClFlag::HostAllocWriteCombined,
        ClFlag::CallbackSleep,
        ClFlag::CallbackRelease,
        ClFlag::ExecutionStatus,
        ClFlag::EventDefault,
        ClFlag::EventBlockingSync,
        ClFlag::EventDisableTiming,
        ClFlag::CpuDeviceId,
        ClFlag::AdviseReadMostly,
        ClFlag::AdvisePreferredLocation,
        ClFlag::AdviseAccessedBy,
        ClFlag::LimitMallocHeapSize,
        ClFlag::LimitStackSize,
        ClFlag::LimitPrintfFifoSize,
        ClFlag::MigrateHost,
    ];

    pub fn c_name(self) -> &'static str {
        match self {
            ClFlag::CopyHostPtr => "CL_MEM_COPY_HOST_PTR",
            ClFlag::UseHostPtr => "CL_MEM_USE_HOST_PTR",
            ClFlag::AllocHostPtr => "CL_MEM_ALLOC_HOST_PTR",
            ClFlag::OutOfOrder => "CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE",
            ClFlag::Complete => "CL_COMPLETE",
            ClFlag::StreamDefault => "cudaStreamDefault",
            ClFlag::StreamNonBlocking => "cudaStreamNonBlocking",
            ClFlag::HostAllocDefault => "cudaHostAllocDefault",
            ClFlag::HostAllocPortable => "cudaHostAllocPortable",
            ClFlag::HostAllocMapped => "cudaHostAllocMapped",
            ClFlag::HostAllocWriteCombined => "cudaHostAllocWriteCombined",
            ClFlag::CallbackSleep => "sleep",
            ClFlag::CallbackRelease => "clReleaseMemObject",
            ClFlag::ExecutionStatus => "CL_EVENT_COMMAND_EXECUTION_STATUS",
            ClFlag::EventDefault => "cudaEventDefault",
            ClFlag::EventBlockingSync => "cudaEventBlockingSync",
            ClFlag::EventDisableTiming => "cudaEventDisableTiming",
            ClFlag::CpuDeviceId => "cudaCpuDeviceId",
            ClFlag::AdviseReadMostly => "cudaMemAdviseSetReadMostly",
            ClFlag::AdvisePreferredLocation => "cudaMemAdviseSetPreferredLocation",
            ClFlag::AdviseAccessedBy => "cudaMemAdviseSetAccessedBy",
            ClFlag::LimitMallocHeapSize => "cudaLimitMallocHeapSize",
            ClFlag::LimitStackSize => "cudaLimitStackSize",
            ClFlag::LimitPrintfFifoSize => "cudaLimitPrintfFifoSize",
            ClFlag::MigrateHost => "CL_MIGRATE_MEM_OBJECT_HOST",
        }
    }

    pub fn parse(word: &str) -> Option<ClFlag> {
        ClFlag::ALL.into_iter().find(|f| f.c_name() == word)
    }
}

/// A kernel a launch may name; its sources ship as `labs/kernels/NAME.cl` and
/// `NAME.cu`, whose C signatures take the buffers first, in this order, so
/// `clSetKernelArg(k, i, buf)` sets buffer `i`. Every kernel holds all of its
/// buffers in use until its work ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelSpec {
    pub name: &'static str,
    /// How many buffers a launch passes, first.
    pub buffers: usize,
    /// Whether the kernel runs for a requested time, passed after its buffers
    /// (such a kernel is calibrated per device when a run starts).
    pub timed: bool,
    /// The kernel calls the device's `malloc`: CUDA only (OpenCL C has no
    /// heap), and in a module of its own, loaded at its first launch, so the
    /// heap the driver carves out for it is taken when a program's would be,
    /// and no other lab's device memory counts it.
    pub device_heap: bool,
}

pub static KERNELS: &[KernelSpec] = &[
    KernelSpec {
        name: "spin",
        buffers: 1,
        timed: true,
        device_heap: false,
    },
    KernelSpec {
        name: "spin2",
        buffers: 2,
        timed: true,
        device_heap: false,
    },
    KernelSpec {
        name: "copy",
        buffers: 2,
        timed: false,
        device_heap: false,
    },
    KernelSpec {
        name: "pattern",
        buffers: 1,
        timed: false,
        device_heap: false,
    },
    KernelSpec {
        name: "heap",
        buffers: 1,
        timed: false,
        device_heap: true,
    },
];

impl KernelSpec {
    pub fn lookup(name: &str) -> Option<&'static KernelSpec> {
        KERNELS.iter().find(|k| k.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_is_at_its_own_index() {
        for (i, s) in APIS.iter().enumerate() {
            assert_eq!(s.api as usize, i, "{}", s.name);
            assert_eq!(s.api.info().name, s.name);
        }
    }

    #[test]
    fn cuda_calls_name_their_driver_entry_point() {
        assert_eq!(Api::CudaFree.driver(), "cuMemFree_v2");
        assert_eq!(Api::CudaFreeAsync.driver(), "cuMemFreeAsync");
        for s in APIS.iter().filter(|s| s.name.starts_with("cuda")) {
            assert_eq!(s.backend, BackendKind::Cuda, "{}", s.name);
            assert!(s.driver.starts_with("cu"), "{}: {}", s.name, s.driver);
        }
        for s in APIS.iter().filter(|s| s.name.starts_with("cl")) {
            assert_eq!(s.backend, BackendKind::OpenCl, "{}", s.name);
        }
    }

    #[test]
    fn release_calls_follow_the_backend() {
        assert_eq!(
            Api::release_of(ObjKind::Buffer, BackendKind::Cuda),
            Some(Api::CudaFree)
        );
        assert_eq!(
            Api::release_of(ObjKind::Buffer, BackendKind::OpenCl),
            Some(Api::ClReleaseMemObject)
        );
        assert_eq!(
            Api::release_of(ObjKind::Stream, BackendKind::Cuda),
            Some(Api::CudaStreamDestroy)
        );
        assert_eq!(Api::release_of(ObjKind::Stream, BackendKind::OpenCl), None);
    }

    #[test]
    fn a_call_name_is_typed_once_and_reads_as_it_was_written() {
        let known = CallName::from("clReleaseMemObject");
        assert_eq!(known.api(), Some(Api::ClReleaseMemObject));
        let hooked = CallName::from("cuMemAlloc_v2".to_string());
        assert_eq!(hooked.api(), None);
        assert_eq!(hooked, "cuMemAlloc_v2");
        // An overloaded call's entries share a name, so they are one name.
        assert_eq!(
            CallName::from(Api::CudaMemcpyAsyncToDevice),
            CallName::from("cudaMemcpyAsync")
        );
        // A writer's name as written reads back typed, and is the same name.
        assert_eq!(CallName::verbatim("clReleaseMemObject"), known);
        let back: CallName =
            serde_json::from_str(&serde_json::to_string(&CallName::verbatim("clFinish")).unwrap())
                .unwrap();
        assert_eq!(back.api(), Some(Api::ClFinish));
        for name in [known, hooked] {
            let wire = serde_json::to_string(&name).unwrap();
            assert_eq!(wire, format!("\"{name}\""));
            let back: CallName = serde_json::from_str(&wire).unwrap();
            assert_eq!(back, name);
            assert_eq!(back.api(), name.api());
        }
    }

    #[test]
    fn flags_parse_from_their_c_names() {
        for f in ClFlag::ALL {
            assert_eq!(ClFlag::parse(f.c_name()), Some(f));
        }
    }
}
