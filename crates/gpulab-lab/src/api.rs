//! A call's signature in the lab language: what each argument position of a
//! call and of a kernel launch takes. What a call is (its names, backend, and what
//! it does to an object's lifetime) is the events crate's `gpulab_events::api`;
//! validation, lowering and the interpreter read both.

use std::ops::Deref;

pub use gpulab_events::api::{APIS, Api, ApiInfo, ClFlag, Effect, KERNELS, KernelSpec, Returns};
pub use gpulab_events::{BackendKind, ObjKind};

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
    /// A CUDA device's ordinal (`cudaSetDevice(1)`).
    Device,
    /// Optional, last: `cudaHostAlloc`'s flags, one or several joined by `|`
    /// (`cudaHostAllocMapped | cudaHostAllocWriteCombined`).
    HostAllocFlags,
    /// The one word the call takes here: the callback it installs, by its
    /// function's name (`sleep`), or what it asks (`CL_EVENT_COMMAND_EXECUTION_STATUS`).
    Fixed(ClFlag),
    /// Optional, last: `cudaEventCreateWithFlags`'s flags, one or several joined by `|`.
    EventFlags,
    /// `cudaMemAdvise`'s advice (`cudaMemAdviseSetPreferredLocation`, …).
    Advice,
    /// A memory location: `cudaCpuDeviceId` (the host) or a device's number.
    Location,
    /// A device limit: `cudaLimitMallocHeapSize`, `cudaLimitStackSize`, `cudaLimitPrintfFifoSize`.
    Limit,
}

/// The argument kind that takes a flag.
pub fn flag_kind(flag: ClFlag) -> ArgKind {
    match flag {
        ClFlag::OutOfOrder => ArgKind::QueueFlag,
        ClFlag::Complete => ArgKind::EventStatus,
        ClFlag::StreamDefault | ClFlag::StreamNonBlocking => ArgKind::StreamFlag,
        ClFlag::CopyHostPtr | ClFlag::UseHostPtr | ClFlag::AllocHostPtr => ArgKind::MemFlag,
        ClFlag::HostAllocDefault
        | ClFlag::HostAllocPortable
        | ClFlag::HostAllocMapped
        | ClFlag::HostAllocWriteCombined => ArgKind::HostAllocFlags,
        ClFlag::CallbackSleep
        | ClFlag::CallbackRelease
        | ClFlag::ExecutionStatus
        | ClFlag::MigrateHost => ArgKind::Fixed(flag),
        ClFlag::EventDefault | ClFlag::EventBlockingSync | ClFlag::EventDisableTiming => {
            ArgKind::EventFlags
        }
        ClFlag::CpuDeviceId => ArgKind::Location,
        ClFlag::AdviseReadMostly | ClFlag::AdvisePreferredLocation | ClFlag::AdviseAccessedBy => {
            ArgKind::Advice
        }
        ClFlag::LimitMallocHeapSize | ClFlag::LimitStackSize | ClFlag::LimitPrintfFifoSize => {
            ArgKind::Limit
        }
    }
}

/// The flags an argument of `kind` takes, by C name.
pub fn flag_names_for(kind: ArgKind) -> impl Iterator<Item = &'static str> {
    ClFlag::ALL
        .into_iter()
        .filter(move |f| flag_kind(*f) == kind)
        .map(ClFlag::c_name)
}

impl ArgKind {
    /// Optional arguments come last and may be left out.
    pub fn is_optional(self) -> bool {
        matches!(
            self,
            ArgKind::MemFlag
                | ArgKind::QueueFlag
                | ArgKind::WaitList
                | ArgKind::HostAllocFlags
                | ArgKind::EventFlags
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
            ArgKind::Device => "a device's number such as `1`".into(),
            ArgKind::MemFlag | ArgKind::QueueFlag | ArgKind::EventStatus | ArgKind::StreamFlag => {
                let names: Vec<String> = flag_names_for(self).map(|n| format!("`{n}`")).collect();
                format!("a flag: {}", names.join(", "))
            }
            ArgKind::WaitList => "a wait list such as `wait [ev]` or `wait [e1, e2]`".into(),
            ArgKind::Fixed(f) => format!("`{}`", f.c_name()),
            ArgKind::Location => {
                "`cudaCpuDeviceId` (the host) or a device's number such as `0`".into()
            }
            ArgKind::Advice => {
                let names: Vec<String> = flag_names_for(self).map(|n| format!("`{n}`")).collect();
                format!("an advice: {}", names.join(", "))
            }
            ArgKind::Limit => {
                let names: Vec<String> = flag_names_for(self).map(|n| format!("`{n}`")).collect();
                format!("a device limit: {}", names.join(", "))
            }
            ArgKind::HostAllocFlags | ArgKind::EventFlags => {
                let names: Vec<String> = flag_names_for(self).map(|n| format!("`{n}`")).collect();
                format!("one or more flags joined by `|`: {}", names.join(", "))
            }
        }
    }
}

/// A call with its signature: what it is (`ApiInfo`, through `Deref`) and what
/// each of its argument positions takes.
#[derive(Debug, Clone, Copy)]
pub struct ApiSpec {
    pub api: Api,
    pub args: &'static [ArgKind],
}

impl Deref for ApiSpec {
    type Target = ApiInfo;

    fn deref(&self) -> &ApiInfo {
        self.api.info()
    }
}

use ArgKind::{
    Advice, Bool, Device, Duration, EventFlags, EventStatus, Fixed, HostAllocFlags, Index, Kernel,
    KernelArgs, Limit, MemFlag, Obj, Objs, QueueFlag, Size, StreamFlag, WaitList,
};
use ObjKind::{
    Buffer, Context, Event, Graph, GraphExec, HostBuffer, MemHandle, Pool, Queue, Stream, VaRange,
};

const fn sig(api: Api, args: &'static [ArgKind]) -> ApiSpec {
    ApiSpec { api, args }
}

/// Every call's signature, in the order `Api` declares them (a test keeps it so).
pub static SIGNATURES: &[ApiSpec] = &[
    sig(Api::ClCreateContext, &[]),
    sig(Api::ClCreateCommandQueue, &[Obj(Context), QueueFlag]),
    sig(Api::ClCreateBuffer, &[Obj(Context), Size, MemFlag]),
    sig(Api::ClCreateProgramWithSource, &[Obj(Context), Kernel]),
    sig(Api::ClBuildProgram, &[Obj(ObjKind::Program)]),
    sig(Api::ClCreateKernel, &[Obj(ObjKind::Program), Kernel]),
    sig(
        Api::ClEnqueueNDRangeKernel,
        &[Obj(Queue), Obj(ObjKind::Kernel), KernelArgs, WaitList],
    ),
    sig(
        Api::ClEnqueueReadBuffer,
        &[Obj(Queue), Obj(Buffer), Bool, WaitList],
    ),
    sig(
        Api::ClEnqueueWriteBuffer,
        &[Obj(Queue), Obj(Buffer), Bool, WaitList],
    ),
    sig(Api::ClFinish, &[Obj(Queue)]),
    sig(Api::ClFlush, &[Obj(Queue)]),
    sig(Api::ClWaitForEvents, &[Objs(Event)]),
    sig(Api::ClRetainContext, &[Obj(Context)]),
    sig(Api::ClRetainCommandQueue, &[Obj(Queue)]),
    sig(Api::ClRetainMemObject, &[Obj(Buffer)]),
    sig(Api::ClRetainProgram, &[Obj(ObjKind::Program)]),
    sig(Api::ClRetainKernel, &[Obj(ObjKind::Kernel)]),
    sig(Api::ClRetainEvent, &[Obj(Event)]),
    sig(Api::ClReleaseContext, &[Obj(Context)]),
    sig(Api::ClReleaseCommandQueue, &[Obj(Queue)]),
    sig(Api::ClReleaseMemObject, &[Obj(Buffer)]),
    sig(Api::ClReleaseProgram, &[Obj(ObjKind::Program)]),
    sig(Api::ClReleaseKernel, &[Obj(ObjKind::Kernel)]),
    sig(Api::ClReleaseEvent, &[Obj(Event)]),
    sig(Api::ClCreateSubBuffer, &[Obj(Buffer), Size, Size]),
    sig(
        Api::ClEnqueueCopyBuffer,
        &[Obj(Queue), Obj(Buffer), Obj(Buffer), WaitList],
    ),
    sig(
        Api::ClEnqueueFillBuffer,
        &[Obj(Queue), Obj(Buffer), WaitList],
    ),
    sig(
        Api::ClEnqueueMapBuffer,
        &[Obj(Queue), Obj(Buffer), Bool, WaitList],
    ),
    sig(
        Api::ClEnqueueUnmapMemObject,
        &[Obj(Queue), Obj(Buffer), WaitList],
    ),
    sig(Api::ClEnqueueBarrierWithWaitList, &[Obj(Queue), WaitList]),
    sig(Api::ClEnqueueMarkerWithWaitList, &[Obj(Queue), WaitList]),
    sig(
        Api::ClSetKernelArg,
        &[Obj(ObjKind::Kernel), Index, Obj(Buffer)],
    ),
    sig(Api::ClCreateUserEvent, &[Obj(Context)]),
    sig(Api::ClSetUserEventStatus, &[Obj(Event), EventStatus]),
    sig(Api::CudaMalloc, &[Size]),
    sig(Api::CudaFree, &[Obj(Buffer)]),
    sig(Api::CudaMallocAsync, &[Size, Obj(Stream)]),
    sig(Api::CudaFreeAsync, &[Obj(Buffer), Obj(Stream)]),
    sig(Api::CudaStreamCreate, &[]),
    sig(Api::CudaStreamDestroy, &[Obj(Stream)]),
    sig(Api::CudaEventCreate, &[]),
    sig(Api::CudaEventRecord, &[Obj(Event), Obj(Stream)]),
    sig(Api::CudaEventSynchronize, &[Obj(Event)]),
    sig(Api::CudaEventQuery, &[Obj(Event)]),
    sig(Api::CudaEventDestroy, &[Obj(Event)]),
    sig(Api::CudaStreamWaitEvent, &[Obj(Stream), Obj(Event)]),
    sig(Api::CudaStreamSynchronize, &[Obj(Stream)]),
    sig(Api::CudaDeviceSynchronize, &[]),
    sig(Api::CudaLaunchKernel, &[Obj(Stream), Kernel, KernelArgs]),
    sig(
        Api::CudaMemcpyAsync,
        &[Obj(HostBuffer), Obj(Buffer), Obj(Stream)],
    ),
    sig(
        Api::CudaMemcpyAsyncToDevice,
        &[Obj(Buffer), Obj(HostBuffer), Obj(Stream)],
    ),
    sig(Api::CudaMemsetAsync, &[Obj(Buffer), Obj(Stream)]),
    sig(Api::CudaMallocHost, &[Size]),
    sig(Api::CudaFreeHost, &[Obj(HostBuffer)]),
    sig(Api::CudaMemPoolSetAttribute, &[Size]),
    sig(Api::CudaMemPoolTrimTo, &[Size]),
    sig(Api::CudaMemGetInfo, &[]),
    sig(Api::CudaMemcpy, &[Obj(HostBuffer), Obj(Buffer)]),
    sig(Api::CudaMemcpyToDevice, &[Obj(Buffer), Obj(HostBuffer)]),
    sig(Api::CudaStreamCreateWithFlags, &[StreamFlag]),
    sig(Api::CudaMemPoolCreate, &[]),
    sig(Api::CudaMemPoolSetAttributeOf, &[Obj(Pool), Size]),
    sig(Api::CudaMemPoolTrimToOf, &[Obj(Pool), Size]),
    sig(
        Api::CudaMallocFromPoolAsync,
        &[Size, Obj(Pool), Obj(Stream)],
    ),
    sig(Api::CudaMemPoolDestroy, &[Obj(Pool)]),
    sig(Api::CudaHostRegister, &[Size]),
    sig(Api::CudaHostUnregister, &[Obj(HostBuffer)]),
    sig(Api::CudaMallocManaged, &[Size]),
    sig(Api::CudaMemPrefetchAsync, &[Obj(Buffer), Obj(Stream)]),
    sig(Api::CuMemCreate, &[Size]),
    sig(Api::CuMemAddressReserve, &[Size]),
    sig(Api::CuMemMap, &[Obj(VaRange), Obj(MemHandle)]),
    sig(Api::CuMemSetAccess, &[Obj(VaRange)]),
    sig(Api::CudaMemsetAsyncRange, &[Obj(VaRange), Obj(Stream)]),
    sig(Api::CuMemUnmap, &[Obj(VaRange)]),
    sig(Api::CuMemRelease, &[Obj(MemHandle)]),
    sig(Api::CuMemAddressFree, &[Obj(VaRange)]),
    sig(Api::CudaGraphCreate, &[]),
    sig(Api::CudaGraphAddMemAllocNode, &[Obj(Graph), Size]),
    sig(Api::CudaGraphAddMemsetNode, &[Obj(Graph), Obj(Buffer)]),
    sig(Api::CudaGraphAddMemFreeNode, &[Obj(Graph), Obj(Buffer)]),
    sig(Api::CudaGraphInstantiate, &[Obj(Graph)]),
    sig(Api::CudaGraphLaunch, &[Obj(GraphExec), Obj(Stream)]),
    sig(Api::CudaGraphExecDestroy, &[Obj(GraphExec)]),
    sig(Api::CudaGraphDestroy, &[Obj(Graph)]),
    sig(Api::CudaDeviceGraphMemTrim, &[]),
    sig(Api::CudaSetDevice, &[Device]),
    sig(Api::CudaDeviceEnablePeerAccess, &[Device]),
    sig(Api::CudaDeviceDisablePeerAccess, &[Device]),
    sig(Api::CudaMemcpyPeer, &[Obj(Buffer), Obj(Buffer)]),
    sig(Api::Malloc, &[Size]),
    sig(Api::Free, &[Obj(HostBuffer)]),
    sig(Api::CudaHostAlloc, &[Size, HostAllocFlags]),
    sig(Api::CudaHostGetDevicePointer, &[Obj(HostBuffer)]),
    sig(
        Api::ClSetEventCallback,
        &[
            Obj(Event),
            EventStatus,
            Fixed(ClFlag::CallbackRelease),
            Obj(Buffer),
        ],
    ),
    sig(
        Api::CudaLaunchHostFunc,
        &[Obj(Stream), Fixed(ClFlag::CallbackSleep), Duration],
    ),
    sig(
        Api::CudaStreamAddCallback,
        &[Obj(Stream), Fixed(ClFlag::CallbackSleep), Duration],
    ),
    sig(
        Api::ClGetEventInfo,
        &[Obj(Event), Fixed(ClFlag::ExecutionStatus)],
    ),
    sig(Api::CudaEventElapsedTime, &[Obj(Event), Obj(Event)]),
    sig(Api::CudaEventCreateWithFlags, &[EventFlags]),
    sig(
        Api::CudaMemPrefetchAsyncToHost,
        &[Obj(Buffer), Fixed(ClFlag::CpuDeviceId), Obj(Stream)],
    ),
    sig(
        Api::CudaMemAdvise,
        &[Obj(Buffer), Advice, ArgKind::Location],
    ),
    sig(Api::HostMemset, &[Obj(Buffer)]),
    sig(Api::CudaDeviceSetLimit, &[Limit, Size]),
    sig(Api::CudaDeviceGetLimit, &[Limit]),
    sig(Api::ClSVMAlloc, &[Obj(Context), Size]),
    sig(Api::ClSVMFree, &[Obj(Context), Obj(Buffer)]),
    sig(Api::ClEnqueueSVMFree, &[Obj(Queue), Obj(Buffer), WaitList]),
    sig(
        Api::ClSetKernelArgSVMPointer,
        &[Obj(ObjKind::Kernel), Index, Obj(Buffer)],
    ),
    sig(
        Api::ClEnqueueMigrateMemObjects,
        &[Obj(Queue), Obj(Buffer), WaitList],
    ),
    sig(
        Api::ClEnqueueMigrateMemObjectsToHost,
        &[
            Obj(Queue),
            Obj(Buffer),
            Fixed(ClFlag::MigrateHost),
            WaitList,
        ],
    ),
];

/// What answers what `metric` reads (`pattern`: `clEnqueueReadBuffer`,
/// `cudaMemcpy`, and the directive `verify`), by C name; empty for a metric
/// that reads no answer.
pub fn answered_by(metric: &str) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = APIS
        .iter()
        .filter(|s| s.api.returns().is_some_and(|r| r.metric() == metric))
        .map(|s| s.name)
        .collect();
    if metric == Returns::Pattern.metric() {
        names.push("verify");
    }
    names
}

/// The signature of a call.
pub fn spec(api: Api) -> &'static ApiSpec {
    &SIGNATURES[api as usize]
}

/// Every signature with this C name: one, or several for an overloaded call
/// (`cudaMemcpyAsync` in both directions).
pub fn overloads(name: &str) -> impl Iterator<Item = &'static ApiSpec> + '_ {
    SIGNATURES.iter().filter(move |s| s.name == name)
}

/// The first signature with this C name.
pub fn lookup(name: &str) -> Option<&'static ApiSpec> {
    overloads(name).next()
}

/// The catalog name closest to a misspelt one, for "did you mean".
pub fn suggest(name: &str) -> Option<&'static str> {
    crate::suggest::nearest(name, APIS.iter().map(|s| s.name))
}

/// What a launch of a kernel passes after the queue (or stream) and the kernel:
/// its buffers, then its duration when it is timed.
pub trait KernelSignature {
    fn args(&self) -> Vec<ArgKind>;
    /// The arguments in words, for a message about a wrong count.
    fn takes(&self) -> &'static str;
    /// A call's signature with `KernelArgs` replaced by this kernel's arguments.
    fn expand(&self, args: &[ArgKind]) -> Vec<ArgKind>;
}

impl KernelSignature for KernelSpec {
    fn args(&self) -> Vec<ArgKind> {
        let mut args = vec![Obj(Buffer); self.buffers];
        if self.timed {
            args.push(Duration);
        }
        args
    }

    fn takes(&self) -> &'static str {
        match (self.name, self.buffers, self.timed) {
            ("copy", ..) => "two buffers, the source and the destination",
            (_, 1, true) => "one buffer and a duration",
            (_, 2, true) => "two buffers and a duration",
            (_, 1, false) => "one buffer",
            _ => "its buffers",
        }
    }

    fn expand(&self, args: &[ArgKind]) -> Vec<ArgKind> {
        args.iter()
            .flat_map(|a| match a {
                KernelArgs => self.args(),
                a => vec![*a],
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_has_its_signature_at_its_index() {
        assert_eq!(SIGNATURES.len(), APIS.len());
        for (i, s) in SIGNATURES.iter().enumerate() {
            assert_eq!(s.api as usize, i, "{}", s.name);
        }
    }

    #[test]
    fn optional_arguments_come_last() {
        for s in SIGNATURES {
            let first_optional = s.args.iter().position(|a| a.is_optional());
            if let Some(i) = first_optional {
                assert!(s.args[i..].iter().all(|a| a.is_optional()), "{}", s.name);
                assert!(!s.args.iter().any(|a| matches!(a, Objs(_))), "{}", s.name);
            }
        }
    }

    #[test]
    fn a_retain_or_release_names_its_object_first() {
        for s in SIGNATURES {
            if let Effect::Retain(kind) | Effect::Release(kind) = s.effect {
                assert!(
                    matches!(s.args.first(), Some(Obj(k) | Objs(k)) if *k == kind),
                    "{}",
                    s.name
                );
            }
        }
        // The release a view names for a kind is the call that takes that object alone.
        for backend in [BackendKind::OpenCl, BackendKind::Cuda] {
            for kind in ObjKind::ALL {
                let alone = SIGNATURES
                    .iter()
                    .find(|s| {
                        s.backend == backend
                            && matches!(s.effect, Effect::Release(_))
                            && s.args == [Obj(kind)]
                    })
                    .map(|s| s.api);
                assert_eq!(
                    Api::release_of(kind, backend),
                    alone,
                    "{kind:?} {backend:?}"
                );
            }
        }
    }

    #[test]
    fn kernels_take_what_their_words_say() {
        for k in KERNELS {
            let buffers = k.args().iter().filter(|a| **a == Obj(Buffer)).count();
            assert_eq!(buffers, k.buffers, "{}", k.name);
            assert_eq!(k.takes().contains("duration"), k.timed, "{}", k.name);
        }
    }

    #[test]
    fn misspelt_calls_get_a_suggestion() {
        assert_eq!(suggest("clRelaseMemObject"), Some("clReleaseMemObject"));
        assert_eq!(suggest("clfinish"), Some("clFinish"));
        assert_eq!(suggest("cudaFreAsync"), Some("cudaFreeAsync"));
    }

    #[test]
    fn plural_kinds_parse() {
        assert_eq!(ObjKind::from_plural("events"), Some(ObjKind::Event));
        assert_eq!(ObjKind::from_plural("buffer"), Some(ObjKind::Buffer));
        assert_eq!(ObjKind::from_plural("widgets"), None);
        assert_eq!(
            ObjKind::from_plural("managed"),
            None,
            "a lab has no such kind"
        );
    }
}
