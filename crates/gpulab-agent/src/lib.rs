//! gpulab's agent: a shared library loaded into a program gpulab did not write,
//! which reports every API object the program creates, retains, releases and the
//! driver finally destroys, as gpulab events, while the program runs.
//!
//! `gpulab watch -- CMD` starts CMD with this library named in `OPENCL_LAYERS`, so
//! the OpenCL ICD loader puts it between the program and the driver (a loader
//! layer; ocl-icd >= 2.3.0, Khronos loader >= 2021.04.29), and with the write end
//! of its pipe in `GPULAB_AGENT_PIPE` (by device, inode and path: [`pipe`]).
//! Without that variable, or when what it names is not that pipe, the layer
//! passes every call straight through and records nothing.
//!
//! The same library is CUDA's injection library: `gpulab watch` also names it in
//! `CUDA_INJECTION64_PATH`, and the driver calls its `InitializeInjection` inside
//! the program's first `cuInit`; it then watches the driver API through CUPTI
//! ([`cuda`]).
//!
//! Rules it keeps:
//! - The program is never blocked: hooks push into a bounded queue and count what
//!   does not fit ([`transport`]).
//! - It never retains an application object: it learns that the driver deleted a
//!   buffer or context from a destructor callback, which holds no reference.
//! - It writes only to gpulab's pipe, checked by identity before every write,
//!   from a thread of its own that blocks every signal ([`drain`]); a dead pipe
//!   means it goes quiet, never that the program gets `SIGPIPE`.
//! - It never drops an object record (calls may be dropped, counted), and sends
//!   what it holds when the process exits, `_exit`s or dies of a signal ([`crash`]).
//! - It exports the four layer entry points and nothing else named `cl*`,
//!   `InitializeInjection` for CUDA, and the `gpulab_framework_*` door through
//!   which gpulab's Python startup hook hands over what PyTorch, CuPy and JAX
//!   say of their memory ([`framework`]).

#![allow(
    unsafe_code,
    reason = "the agent is C ABI hooks, dlsym and signal handlers inside another process: every unsafe block says why it holds"
)]

mod clock;
mod crash;
mod cuda;
mod dispatch;
mod drain;
mod framework;
mod got;
mod layer;
mod ledger;
mod loaded;
mod opencl;
mod pipe;
mod queue;
mod rank;
mod rival;
mod stack;
mod staging;
mod transport;
mod urgent;
