//! The catalog of calls a script may make: C name, driver-side name, arguments,
//! what the call creates, retains or releases. Validation and the engine both read
//! this one table, so a call's meaning is written down once.

use serde::{Deserialize, Serialize};

use gpulab_events::BackendKind;

pub use gpulab_events::ObjKind;

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
}

/// What kind of value an argument position takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    Obj(ObjKind),
    /// One or more handles of this kind (`clWaitForEvents(e1, e2)`).
    Objs(ObjKind),
    Size,
    Duration,
    Kernel,
    /// The arguments of the kernel the call names just before (`KernelSpec::args`):
    /// its buffers, then its duration when it takes one.
    KernelArgs,
    Bool,
    /// Optional, last: how `clCreateBuffer` allocates (`CL_MEM_USE_HOST_PTR`, …).
    MemFlag,
    /// Optional, last: `CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE` on `clCreateCommandQueue`.
    QueueFlag,
    /// Optional, last: the events an enqueue waits for, `wait [e1, e2]`.
    WaitList,
    /// The index of one of a kernel's buffer arguments (`0`, `1`).
    Index,
    /// The status `clSetUserEventStatus` sets: `CL_COMPLETE`.
    EventStatus,
    /// `cudaStreamNonBlocking` or `cudaStreamDefault` on `cudaStreamCreateWithFlags`.
    StreamFlag,
}

/// A flag word a script may pass where the call takes `ArgKind::MemFlag` or
/// `ArgKind::QueueFlag`; each is the C constant of the same name.
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
}

impl ClFlag {
    pub const ALL: [ClFlag; 7] = [
        ClFlag::CopyHostPtr,
        ClFlag::UseHostPtr,
        ClFlag::AllocHostPtr,
        ClFlag::OutOfOrder,
        ClFlag::Complete,
        ClFlag::StreamDefault,
        ClFlag::StreamNonBlocking,
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
        }
    }

    /// The argument kind that takes this flag.
    pub fn kind(self) -> ArgKind {
        match self {
            ClFlag::OutOfOrder => ArgKind::QueueFlag,
            ClFlag::Complete => ArgKind::EventStatus,
            ClFlag::StreamDefault | ClFlag::StreamNonBlocking => ArgKind::StreamFlag,
            _ => ArgKind::MemFlag,
        }
    }

    pub fn parse(word: &str) -> Option<ClFlag> {
        ClFlag::ALL.into_iter().find(|f| f.c_name() == word)
    }

    /// The flags an argument of `kind` takes, by C name.
    pub fn names_for(kind: ArgKind) -> impl Iterator<Item = &'static str> {
        ClFlag::ALL
            .into_iter()
            .filter(move |f| f.kind() == kind)
            .map(ClFlag::c_name)
    }
}

impl ArgKind {
    /// Optional arguments come last and may be left out.
    pub fn is_optional(self) -> bool {
        matches!(
            self,
            ArgKind::MemFlag | ArgKind::QueueFlag | ArgKind::WaitList
        )
    }

    pub fn describe(self) -> String {
        match self {
            ArgKind::Obj(k) => format!("a {} handle", k.as_str()),
            ArgKind::Objs(k) => format!("one or more {} handles", k.as_str()),
            ArgKind::Size => "a size such as `64 MiB` or `{size_mib} MiB`".into(),
            ArgKind::Duration => "a duration such as `50 ms` or `{kernel_ms} ms`".into(),
            ArgKind::Kernel => {
                let names: Vec<String> = KERNELS.iter().map(|k| format!("`{}`", k.name)).collect();
                format!("a kernel name ({})", names.join(", "))
            }
            ArgKind::KernelArgs => "the kernel's buffers (and duration)".into(),
            ArgKind::Bool => "`CL_TRUE` or `CL_FALSE`".into(),
            ArgKind::Index => "a buffer argument's index such as `0`".into(),
            ArgKind::MemFlag | ArgKind::QueueFlag | ArgKind::EventStatus | ArgKind::StreamFlag => {
                let names: Vec<String> =
                    ClFlag::names_for(self).map(|n| format!("`{n}`")).collect();
                format!("a flag: {}", names.join(", "))
            }
            ArgKind::WaitList => "a wait list such as `wait [ev]` or `wait [e1, e2]`".into(),
        }
    }
}

/// What a call does to the lifetime of the objects it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Returns a new object (bound to the name on the left of `=`).
    Create(ObjKind),
    /// Adds one reference to its first argument.
    Retain,
    /// Drops one reference from its first argument.
    Release,
    /// Uses its arguments, creates nothing; may return an event when bound.
    Use,
}

#[derive(Debug, Clone, Copy)]
pub struct ApiSpec {
    pub api: Api,
    pub name: &'static str,
    pub backend: BackendKind,
    /// The driver entry points the line really calls, shown beside the C name.
    pub driver: &'static str,
    pub args: &'static [ArgKind],
    pub effect: Effect,
    /// A `Use` call that may be bound to a name returns an event (`ev = clEnqueueReadBuffer(…)`).
    pub may_return_event: bool,
}

use ArgKind::{
    Bool, Duration, EventStatus, Index, Kernel, KernelArgs, MemFlag, Obj, Objs, QueueFlag, Size,
    StreamFlag, WaitList,
};
use ObjKind::{
    Buffer, Context, Event, Graph, GraphExec, HostBuffer, MemHandle, Pool, Queue, Stream, VaRange,
};

const fn spec(
    api: Api,
    name: &'static str,
    driver: &'static str,
    args: &'static [ArgKind],
    effect: Effect,
) -> ApiSpec {
    ApiSpec {
        api,
        name,
        backend: BackendKind::OpenCl,
        driver,
        args,
        effect,
        may_return_event: false,
    }
}

const fn cuda(
    api: Api,
    name: &'static str,
    driver: &'static str,
    args: &'static [ArgKind],
    effect: Effect,
) -> ApiSpec {
    let mut s = spec(api, name, driver, args, effect);
    s.backend = BackendKind::Cuda;
    s
}

const fn with_event(mut s: ApiSpec) -> ApiSpec {
    s.may_return_event = true;
    s
}

pub static CATALOG: &[ApiSpec] = &[
    spec(
        Api::ClCreateContext,
        "clCreateContext",
        "clCreateContext + clSetContextDestructorCallback",
        &[],
        Effect::Create(Context),
    ),
    spec(
        Api::ClCreateCommandQueue,
        "clCreateCommandQueue",
        "clCreateCommandQueueWithProperties(PROFILING_ENABLE [| OUT_OF_ORDER_EXEC_MODE_ENABLE])",
        &[Obj(Context), QueueFlag],
        Effect::Create(Queue),
    ),
    spec(
        Api::ClCreateBuffer,
        "clCreateBuffer",
        "clCreateBuffer(COPY_HOST_PTR by default) + clSetMemObjectDestructorCallback",
        &[Obj(Context), Size, MemFlag],
        Effect::Create(Buffer),
    ),
    spec(
        Api::ClCreateProgramWithSource,
        "clCreateProgramWithSource",
        "clCreateProgramWithSource",
        &[Obj(Context), Kernel],
        Effect::Create(ObjKind::Program),
    ),
    spec(
        Api::ClBuildProgram,
        "clBuildProgram",
        "clBuildProgram",
        &[Obj(ObjKind::Program)],
        Effect::Use,
    ),
    spec(
        Api::ClCreateKernel,
        "clCreateKernel",
        "clCreateKernel",
        &[Obj(ObjKind::Program), Kernel],
        Effect::Create(ObjKind::Kernel),
    ),
    spec(
        Api::ClEnqueueNDRangeKernel,
        "clEnqueueNDRangeKernel",
        "clSetKernelArg + clEnqueueNDRangeKernel",
        &[Obj(Queue), Obj(ObjKind::Kernel), KernelArgs, WaitList],
        Effect::Create(Event),
    ),
    with_event(spec(
        Api::ClEnqueueReadBuffer,
        "clEnqueueReadBuffer",
        "clEnqueueReadBuffer",
        &[Obj(Queue), Obj(Buffer), Bool, WaitList],
        Effect::Use,
    )),
    with_event(spec(
        Api::ClEnqueueWriteBuffer,
        "clEnqueueWriteBuffer",
        "clEnqueueWriteBuffer",
        &[Obj(Queue), Obj(Buffer), Bool, WaitList],
        Effect::Use,
    )),
    spec(
        Api::ClFinish,
        "clFinish",
        "clFinish",
        &[Obj(Queue)],
        Effect::Use,
    ),
    spec(
        Api::ClFlush,
        "clFlush",
        "clFlush",
        &[Obj(Queue)],
        Effect::Use,
    ),
    spec(
        Api::ClWaitForEvents,
        "clWaitForEvents",
        "clWaitForEvents",
        &[Objs(Event)],
        Effect::Use,
    ),
    spec(
        Api::ClRetainContext,
        "clRetainContext",
        "clRetainContext",
        &[Obj(Context)],
        Effect::Retain,
    ),
    spec(
        Api::ClRetainCommandQueue,
        "clRetainCommandQueue",
        "clRetainCommandQueue",
        &[Obj(Queue)],
        Effect::Retain,
    ),
    spec(
        Api::ClRetainMemObject,
        "clRetainMemObject",
        "clRetainMemObject",
        &[Obj(Buffer)],
        Effect::Retain,
    ),
    spec(
        Api::ClRetainProgram,
        "clRetainProgram",
        "clRetainProgram",
        &[Obj(ObjKind::Program)],
        Effect::Retain,
    ),
    spec(
        Api::ClRetainKernel,
        "clRetainKernel",
        "clRetainKernel",
        &[Obj(ObjKind::Kernel)],
        Effect::Retain,
    ),
    spec(
        Api::ClRetainEvent,
        "clRetainEvent",
        "clRetainEvent",
        &[Obj(Event)],
        Effect::Retain,
    ),
    spec(
        Api::ClReleaseContext,
        "clReleaseContext",
        "clReleaseContext",
        &[Obj(Context)],
        Effect::Release,
    ),
    spec(
        Api::ClReleaseCommandQueue,
        "clReleaseCommandQueue",
        "clReleaseCommandQueue",
        &[Obj(Queue)],
        Effect::Release,
    ),
    spec(
        Api::ClReleaseMemObject,
        "clReleaseMemObject",
        "clReleaseMemObject",
        &[Obj(Buffer)],
        Effect::Release,
    ),
    spec(
        Api::ClReleaseProgram,
        "clReleaseProgram",
        "clReleaseProgram",
        &[Obj(ObjKind::Program)],
        Effect::Release,
    ),
    spec(
        Api::ClReleaseKernel,
        "clReleaseKernel",
        "clReleaseKernel",
        &[Obj(ObjKind::Kernel)],
        Effect::Release,
    ),
    spec(
        Api::ClReleaseEvent,
        "clReleaseEvent",
        "clReleaseEvent",
        &[Obj(Event)],
        Effect::Release,
    ),
    // A region of its parent (origin, size): it shares the parent's memory and
    // keeps the parent alive until the sub-buffer itself is destroyed.
    spec(
        Api::ClCreateSubBuffer,
        "clCreateSubBuffer",
        "clCreateSubBuffer(CL_BUFFER_CREATE_TYPE_REGION) + clSetMemObjectDestructorCallback",
        &[Obj(Buffer), Size, Size],
        Effect::Create(Buffer),
    ),
    with_event(spec(
        Api::ClEnqueueCopyBuffer,
        "clEnqueueCopyBuffer",
        "clEnqueueCopyBuffer",
        &[Obj(Queue), Obj(Buffer), Obj(Buffer), WaitList],
        Effect::Use,
    )),
    with_event(spec(
        Api::ClEnqueueFillBuffer,
        "clEnqueueFillBuffer",
        "clEnqueueFillBuffer",
        &[Obj(Queue), Obj(Buffer), WaitList],
        Effect::Use,
    )),
    // The mapped pointer stays gpulab's: the script names the mapping by its
    // buffer, and validation counts the buffer's open mappings.
    with_event(spec(
        Api::ClEnqueueMapBuffer,
        "clEnqueueMapBuffer",
        "clEnqueueMapBuffer(CL_MAP_READ | CL_MAP_WRITE)",
        &[Obj(Queue), Obj(Buffer), Bool, WaitList],
        Effect::Use,
    )),
    with_event(spec(
        Api::ClEnqueueUnmapMemObject,
        "clEnqueueUnmapMemObject",
        "clEnqueueUnmapMemObject",
        &[Obj(Queue), Obj(Buffer), WaitList],
        Effect::Use,
    )),
    with_event(spec(
        Api::ClEnqueueBarrierWithWaitList,
        "clEnqueueBarrierWithWaitList",
        "clEnqueueBarrierWithWaitList",
        &[Obj(Queue), WaitList],
        Effect::Use,
    )),
    with_event(spec(
        Api::ClEnqueueMarkerWithWaitList,
        "clEnqueueMarkerWithWaitList",
        "clEnqueueMarkerWithWaitList",
        &[Obj(Queue), WaitList],
        Effect::Use,
    )),
    // One buffer argument of a kernel, set apart from any launch. OpenCL lets a
    // kernel argument hold no reference on its buffer: the lab may release it.
    spec(
        Api::ClSetKernelArg,
        "clSetKernelArg",
        "clSetKernelArg",
        &[Obj(ObjKind::Kernel), Index, Obj(Buffer)],
        Effect::Use,
    ),
    // An event the host completes: a wait list naming it holds its commands back
    // until `clSetUserEventStatus(ev, CL_COMPLETE)`.
    spec(
        Api::ClCreateUserEvent,
        "clCreateUserEvent",
        "clCreateUserEvent",
        &[Obj(Context)],
        Effect::Create(Event),
    ),
    spec(
        Api::ClSetUserEventStatus,
        "clSetUserEventStatus",
        "clSetUserEventStatus",
        &[Obj(Event), EventStatus],
        Effect::Use,
    ),
    // CUDA runtime names, each mapped onto the one driver call it stands for. The
    // primary context is retained when the backend opens (as the runtime does on its
    // first call) and the spin kernel's module is loaded then, so a line never hides
    // a context creation or a module load.
    cuda(
        Api::CudaMalloc,
        "cudaMalloc",
        "cuMemAlloc_v2",
        &[Size],
        Effect::Create(Buffer),
    ),
    cuda(
        Api::CudaFree,
        "cudaFree",
        "cuMemFree_v2",
        &[Obj(Buffer)],
        Effect::Release,
    ),
    cuda(
        Api::CudaMallocAsync,
        "cudaMallocAsync",
        "cuMemAllocAsync",
        &[Size, Obj(Stream)],
        Effect::Create(Buffer),
    ),
    cuda(
        Api::CudaFreeAsync,
        "cudaFreeAsync",
        "cuMemFreeAsync",
        &[Obj(Buffer), Obj(Stream)],
        Effect::Release,
    ),
    cuda(
        Api::CudaStreamCreate,
        "cudaStreamCreate",
        "cuStreamCreate(CU_STREAM_DEFAULT)",
        &[],
        Effect::Create(Stream),
    ),
    cuda(
        Api::CudaStreamDestroy,
        "cudaStreamDestroy",
        "cuStreamDestroy_v2",
        &[Obj(Stream)],
        Effect::Release,
    ),
    cuda(
        Api::CudaEventCreate,
        "cudaEventCreate",
        "cuEventCreate(CU_EVENT_DEFAULT)",
        &[],
        Effect::Create(Event),
    ),
    cuda(
        Api::CudaEventRecord,
        "cudaEventRecord",
        "cuEventRecord",
        &[Obj(Event), Obj(Stream)],
        Effect::Use,
    ),
    cuda(
        Api::CudaEventSynchronize,
        "cudaEventSynchronize",
        "cuEventSynchronize",
        &[Obj(Event)],
        Effect::Use,
    ),
    cuda(
        Api::CudaEventQuery,
        "cudaEventQuery",
        "cuEventQuery",
        &[Obj(Event)],
        Effect::Use,
    ),
    cuda(
        Api::CudaEventDestroy,
        "cudaEventDestroy",
        "cuEventDestroy_v2",
        &[Obj(Event)],
        Effect::Release,
    ),
    cuda(
        Api::CudaStreamWaitEvent,
        "cudaStreamWaitEvent",
        "cuStreamWaitEvent",
        &[Obj(Stream), Obj(Event)],
        Effect::Use,
    ),
    cuda(
        Api::CudaStreamSynchronize,
        "cudaStreamSynchronize",
        "cuStreamSynchronize",
        &[Obj(Stream)],
        Effect::Use,
    ),
    cuda(
        Api::CudaDeviceSynchronize,
        "cudaDeviceSynchronize",
        "cuCtxSynchronize",
        &[],
        Effect::Use,
    ),
    cuda(
        Api::CudaLaunchKernel,
        "cudaLaunchKernel",
        "cuLaunchKernel (+ cuEventRecord of gpulab's span events)",
        &[Obj(Stream), Kernel, KernelArgs],
        Effect::Use,
    ),
    cuda(
        Api::CudaMemcpyAsync,
        "cudaMemcpyAsync",
        "cuMemcpyDtoHAsync_v2 (device to pinned host)",
        &[Obj(HostBuffer), Obj(Buffer), Obj(Stream)],
        Effect::Use,
    ),
    // An overload: the same C name with the destination first, as in C; validation
    // picks the entry whose handle kinds match the arguments.
    cuda(
        Api::CudaMemcpyAsyncToDevice,
        "cudaMemcpyAsync",
        "cuMemcpyHtoDAsync_v2 (pinned host to device)",
        &[Obj(Buffer), Obj(HostBuffer), Obj(Stream)],
        Effect::Use,
    ),
    cuda(
        Api::CudaMemsetAsync,
        "cudaMemsetAsync",
        "cuMemsetD8Async",
        &[Obj(Buffer), Obj(Stream)],
        Effect::Use,
    ),
    cuda(
        Api::CudaMallocHost,
        "cudaMallocHost",
        "cuMemAllocHost_v2",
        &[Size],
        Effect::Create(HostBuffer),
    ),
    cuda(
        Api::CudaFreeHost,
        "cudaFreeHost",
        "cuMemFreeHost",
        &[Obj(HostBuffer)],
        Effect::Release,
    ),
    cuda(
        Api::CudaMemPoolSetAttribute,
        "cudaMemPoolSetAttribute",
        "cuMemPoolSetAttribute(default pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)",
        &[Size],
        Effect::Use,
    ),
    cuda(
        Api::CudaMemPoolTrimTo,
        "cudaMemPoolTrimTo",
        "cuMemPoolTrimTo(default pool)",
        &[Size],
        Effect::Use,
    ),
    cuda(
        Api::CudaMemGetInfo,
        "cudaMemGetInfo",
        "cuMemGetInfo_v2",
        &[],
        Effect::Use,
    ),
    // The synchronous copy runs on the legacy default stream: it starts after the
    // work of every blocking stream (`cudaStreamCreate`) and returns when done, but
    // does not wait for a `cudaStreamNonBlocking` stream.
    cuda(
        Api::CudaMemcpy,
        "cudaMemcpy",
        "cuMemcpyDtoH_v2 (device to pinned host, legacy default stream)",
        &[Obj(HostBuffer), Obj(Buffer)],
        Effect::Use,
    ),
    cuda(
        Api::CudaMemcpyToDevice,
        "cudaMemcpy",
        "cuMemcpyHtoD_v2 (pinned host to device, legacy default stream)",
        &[Obj(Buffer), Obj(HostBuffer)],
        Effect::Use,
    ),
    cuda(
        Api::CudaStreamCreateWithFlags,
        "cudaStreamCreateWithFlags",
        "cuStreamCreate(CU_STREAM_DEFAULT | CU_STREAM_NON_BLOCKING)",
        &[StreamFlag],
        Effect::Create(Stream),
    ),
    // A pool of the lab's own, on the device, with its own release threshold (0
    // when created). A buffer allocated from it keeps it alive: destroying a pool
    // with allocations outstanding returns at once and the driver frees the pool
    // after the last of them.
    cuda(
        Api::CudaMemPoolCreate,
        "cudaMemPoolCreate",
        "cuMemPoolCreate(pinned, this device, no export handle)",
        &[],
        Effect::Create(Pool),
    ),
    cuda(
        Api::CudaMemPoolSetAttributeOf,
        "cudaMemPoolSetAttribute",
        "cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)",
        &[Obj(Pool), Size],
        Effect::Use,
    ),
    cuda(
        Api::CudaMemPoolTrimToOf,
        "cudaMemPoolTrimTo",
        "cuMemPoolTrimTo(pool)",
        &[Obj(Pool), Size],
        Effect::Use,
    ),
    cuda(
        Api::CudaMallocFromPoolAsync,
        "cudaMallocFromPoolAsync",
        "cuMemAllocFromPoolAsync",
        &[Size, Obj(Pool), Obj(Stream)],
        Effect::Create(Buffer),
    ),
    cuda(
        Api::CudaMemPoolDestroy,
        "cudaMemPoolDestroy",
        "cuMemPoolDestroy",
        &[Obj(Pool)],
        Effect::Release,
    ),
    // Page-locks host memory gpulab allocates for the line (the C program's own
    // malloc), so copies to and from it run as from cudaMallocHost memory.
    cuda(
        Api::CudaHostRegister,
        "cudaHostRegister",
        "cuMemHostRegister_v2(flags 0) on host memory gpulab allocates",
        &[Size],
        Effect::Create(HostBuffer),
    ),
    cuda(
        Api::CudaHostUnregister,
        "cudaHostUnregister",
        "cuMemHostUnregister (then gpulab frees the host memory)",
        &[Obj(HostBuffer)],
        Effect::Release,
    ),
    // Managed memory beyond the device's free memory can hang a shared GPU under
    // oversubscription: gpulab reads the free memory first and refuses such a size.
    cuda(
        Api::CudaMallocManaged,
        "cudaMallocManaged",
        "cuMemAllocManaged(CU_MEM_ATTACH_GLOBAL) (after gpulab's cuMemGetInfo_v2 guard)",
        &[Size],
        Effect::Create(Buffer),
    ),
    cuda(
        Api::CudaMemPrefetchAsync,
        "cudaMemPrefetchAsync",
        "cuMemPrefetchAsync_v2(to this device) (+ cuEventRecord of gpulab's span events)",
        &[Obj(Buffer), Obj(Stream)],
        Effect::Use,
    ),
    // The virtual memory API: physical memory (`cuMemCreate`) and an address range
    // (`cuMemAddressReserve`) live apart; `cuMemMap` puts one into the other, and
    // the mapping keeps the physical memory: a `cuMemRelease` while mapped only
    // drops the handle, and the memory returns at `cuMemUnmap`.
    cuda(
        Api::CuMemCreate,
        "cuMemCreate",
        "cuMemCreate(pinned, this device)",
        &[Size],
        Effect::Create(MemHandle),
    ),
    cuda(
        Api::CuMemAddressReserve,
        "cuMemAddressReserve",
        "cuMemAddressReserve(alignment 0, any address)",
        &[Size],
        Effect::Create(VaRange),
    ),
    cuda(
        Api::CuMemMap,
        "cuMemMap",
        "cuMemMap(range, the allocation's size, offset 0)",
        &[Obj(VaRange), Obj(MemHandle)],
        Effect::Use,
    ),
    cuda(
        Api::CuMemSetAccess,
        "cuMemSetAccess",
        "cuMemSetAccess(mapped size, this device, READWRITE)",
        &[Obj(VaRange)],
        Effect::Use,
    ),
    cuda(
        Api::CudaMemsetAsyncRange,
        "cudaMemsetAsync",
        "cuMemsetD8Async (over the mapped range)",
        &[Obj(VaRange), Obj(Stream)],
        Effect::Use,
    ),
    cuda(
        Api::CuMemUnmap,
        "cuMemUnmap",
        "cuMemUnmap(mapped size)",
        &[Obj(VaRange)],
        Effect::Use,
    ),
    cuda(
        Api::CuMemRelease,
        "cuMemRelease",
        "cuMemRelease",
        &[Obj(MemHandle)],
        Effect::Release,
    ),
    cuda(
        Api::CuMemAddressFree,
        "cuMemAddressFree",
        "cuMemAddressFree",
        &[Obj(VaRange)],
        Effect::Release,
    ),
    // CUDA graphs, built node by node. Each node depends on the node added to the
    // same graph just before it (a chain), so a graph runs its nodes in script
    // order. An alloc node names its allocation's device pointer at once (the
    // address is fixed for the graph's life) but maps memory only when the graph
    // runs; a free node in the same graph ends it inside the graph.
    cuda(
        Api::CudaGraphCreate,
        "cudaGraphCreate",
        "cuGraphCreate(flags 0)",
        &[],
        Effect::Create(Graph),
    ),
    cuda(
        Api::CudaGraphAddMemAllocNode,
        "cudaGraphAddMemAllocNode",
        "cuGraphAddMemAllocNode(after the graph's last node; pinned, this device)",
        &[Obj(Graph), Size],
        Effect::Create(Buffer),
    ),
    cuda(
        Api::CudaGraphAddMemsetNode,
        "cudaGraphAddMemsetNode",
        "cuGraphAddMemsetNode(after the graph's last node; the whole buffer, byte 0)",
        &[Obj(Graph), Obj(Buffer)],
        Effect::Use,
    ),
    cuda(
        Api::CudaGraphAddMemFreeNode,
        "cudaGraphAddMemFreeNode",
        "cuGraphAddMemFreeNode(after the graph's last node)",
        &[Obj(Graph), Obj(Buffer)],
        Effect::Use,
    ),
    // The exec is a snapshot: nodes added to the graph later are not in it, and
    // the graph may be destroyed while the exec lives on.
    cuda(
        Api::CudaGraphInstantiate,
        "cudaGraphInstantiate",
        "cuGraphInstantiateWithFlags(flags 0)",
        &[Obj(Graph)],
        Effect::Create(GraphExec),
    ),
    cuda(
        Api::CudaGraphLaunch,
        "cudaGraphLaunch",
        "cuGraphLaunch (+ cuEventRecord of gpulab's span events)",
        &[Obj(GraphExec), Obj(Stream)],
        Effect::Use,
    ),
    cuda(
        Api::CudaGraphExecDestroy,
        "cudaGraphExecDestroy",
        "cuGraphExecDestroy",
        &[Obj(GraphExec)],
        Effect::Release,
    ),
    cuda(
        Api::CudaGraphDestroy,
        "cudaGraphDestroy",
        "cuGraphDestroy",
        &[Obj(Graph)],
        Effect::Release,
    ),
    cuda(
        Api::CudaDeviceGraphMemTrim,
        "cudaDeviceGraphMemTrim",
        "cuDeviceGraphMemTrim(this device)",
        &[],
        Effect::Use,
    ),
];

/// A kernel scripts may name; its sources ship as `labs/kernels/NAME.cl` and
/// `NAME.cu`, whose C signatures take the buffers first, in this order, so
/// `clSetKernelArg(k, i, buf)` sets buffer `i`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KernelSpec {
    pub name: &'static str,
    /// What a launch passes after the queue (or stream) and the kernel.
    pub args: &'static [ArgKind],
    /// The arguments in words, for a message about a wrong count.
    pub takes: &'static str,
}

/// Every kernel a launch names holds all of its buffers in use until its work
/// ends; one with a duration is calibrated per device when a run starts.
pub static KERNELS: &[KernelSpec] = &[
    KernelSpec {
        name: "spin",
        args: &[Obj(Buffer), Duration],
        takes: "one buffer and a duration",
    },
    KernelSpec {
        name: "spin2",
        args: &[Obj(Buffer), Obj(Buffer), Duration],
        takes: "two buffers and a duration",
    },
    KernelSpec {
        name: "copy",
        args: &[Obj(Buffer), Obj(Buffer)],
        takes: "two buffers, the source and the destination",
    },
    KernelSpec {
        name: "pattern",
        args: &[Obj(Buffer)],
        takes: "one buffer",
    },
];

impl KernelSpec {
    pub fn lookup(name: &str) -> Option<&'static KernelSpec> {
        KERNELS.iter().find(|k| k.name == name)
    }

    /// How many buffers a launch names.
    pub fn buffers(&self) -> usize {
        self.args.iter().filter(|a| **a == Obj(Buffer)).count()
    }

    /// Whether the kernel runs for a requested time (and so is calibrated).
    pub fn timed(&self) -> bool {
        self.args.contains(&Duration)
    }

    /// A call's signature with `KernelArgs` replaced by this kernel's arguments.
    pub fn expand(&self, args: &[ArgKind]) -> Vec<ArgKind> {
        args.iter()
            .flat_map(|a| match a {
                KernelArgs => self.args.to_vec(),
                a => vec![*a],
            })
            .collect()
    }
}

impl Api {
    pub fn spec(self) -> &'static ApiSpec {
        // The catalog lists every variant; the test below keeps it that way.
        CATALOG
            .iter()
            .find(|s| s.api == self)
            .unwrap_or(&CATALOG[0])
    }

    pub fn name(self) -> &'static str {
        self.spec().name
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
                | Api::CudaGraphLaunch
        )
    }

    /// The call that drops one reference of an object of `kind` on `backend`
    /// (`clReleaseMemObject` or `cudaFree` for a buffer).
    pub fn release_of(kind: ObjKind, backend: BackendKind) -> Option<Api> {
        CATALOG
            .iter()
            .find(|s| s.backend == backend && s.effect == Effect::Release && s.args == [Obj(kind)])
            .map(|s| s.api)
    }

    /// Every catalog entry with this C name: one, or several for an overloaded call
    /// (`cudaMemcpyAsync` in both directions).
    pub fn overloads(name: &str) -> impl Iterator<Item = &'static ApiSpec> + '_ {
        CATALOG.iter().filter(move |s| s.name == name)
    }

    pub fn lookup(name: &str) -> Option<&'static ApiSpec> {
        CATALOG.iter().find(|s| s.name == name)
    }

    /// Object kinds the calls of one backend can create, in `ObjKind::ALL` order:
    /// what a live-objects view lists for a run of that backend.
    pub fn kinds_of(backend: BackendKind) -> Vec<ObjKind> {
        ObjKind::ALL
            .into_iter()
            .filter(|k| {
                CATALOG.iter().any(|s| {
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
        )
    }

    /// The catalog name closest to a misspelt one, for "did you mean".
    pub fn suggest(name: &str) -> Option<&'static str> {
        crate::lab::suggest::nearest(name, CATALOG.iter().map(|s| s.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_api_has_exactly_one_catalog_entry() {
        for s in CATALOG {
            assert_eq!(CATALOG.iter().filter(|o| o.api == s.api).count(), 1);
            assert_eq!(s.api.spec().name, s.name);
        }
    }

    #[test]
    fn optional_arguments_come_last() {
        for s in CATALOG {
            let first_optional = s.args.iter().position(|a| a.is_optional());
            if let Some(i) = first_optional {
                assert!(s.args[i..].iter().all(|a| a.is_optional()), "{}", s.name);
                assert!(!s.args.iter().any(|a| matches!(a, Objs(_))), "{}", s.name);
            }
        }
        for f in ClFlag::ALL {
            assert_eq!(ClFlag::parse(f.c_name()), Some(f));
        }
    }

    #[test]
    fn misspelt_calls_get_a_suggestion() {
        assert_eq!(
            Api::suggest("clRelaseMemObject"),
            Some("clReleaseMemObject")
        );
        assert_eq!(Api::suggest("clfinish"), Some("clFinish"));
    }

    #[test]
    fn cuda_calls_name_their_driver_entry_point() {
        let free = Api::lookup("cudaFree").map(|s| (s.backend, s.driver));
        assert_eq!(free, Some((BackendKind::Cuda, "cuMemFree_v2")));
        let free_async = Api::lookup("cudaFreeAsync").map(|s| s.driver);
        assert_eq!(free_async, Some("cuMemFreeAsync"));
        for s in CATALOG.iter().filter(|s| s.name.starts_with("cuda")) {
            assert_eq!(s.backend, BackendKind::Cuda, "{}", s.name);
            assert!(s.driver.starts_with("cu"), "{}: {}", s.name, s.driver);
        }
        for s in CATALOG.iter().filter(|s| s.name.starts_with("cl")) {
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
    fn misspelt_cuda_calls_get_a_suggestion() {
        assert_eq!(Api::suggest("cudaFreAsync"), Some("cudaFreeAsync"));
    }

    #[test]
    fn plural_kinds_parse() {
        assert_eq!(ObjKind::from_plural("events"), Some(ObjKind::Event));
        assert_eq!(ObjKind::from_plural("buffer"), Some(ObjKind::Buffer));
        assert_eq!(ObjKind::from_plural("widgets"), None);
    }
}
