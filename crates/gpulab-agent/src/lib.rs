//! gpulab's agent: a shared library loaded into a program gpulab did not write,
//! which reports every API object the program creates, retains, releases and the
//! driver finally destroys, as gpulab events, while the program runs.
//!
//! `gpulab watch -- CMD` starts CMD with this library named in `OPENCL_LAYERS`, so
//! the OpenCL ICD loader puts it between the program and the driver (a loader
//! layer; ocl-icd >= 2.3.0, Khronos loader >= 2021.04.29), and with the memory
//! it shares with its agents named in `GPULAB_AGENT_RING` ([`region`]).
//! Without that variable, or when what it names is not gpulab's, the layer
//! passes every call straight through and records nothing.
//!
//! The same library is CUDA's injection library: `gpulab watch` also names it in
//! `CUDA_INJECTION64_PATH`, and the driver calls its `InitializeInjection` inside
//! the program's first `cuInit`; it then watches the driver API through CUPTI
//! ([`cuda`]).
//!
//! Rules it keeps, by construction:
//! - The program is never blocked by gpulab being slow or stopped for long:
//!   hooks write each record straight into the process's segment of the shared
//!   memory ([`transport`], layout in `gpulab_events::ring`); a full segment
//!   drops a call (counted) and keeps an object record for the next write. Only
//!   past 65,536 kept records does the thread wait, while gpulab still reads.
//! - It holds no descriptor of the program's: the memory is mapped on a thread
//!   with a descriptor table of its own ([`region`]), so nothing it writes can
//!   reach the program's files, and no descriptor number is ever taken.
//! - It installs no signal handler and hooks no exit: a record is gpulab's once
//!   written, so a crash, an `_exit`, an exec or a kill loses nothing recorded,
//!   and the program's signals stay exactly as it set them.
//! - It never retains an application object: it learns that the driver deleted a
//!   buffer or context from a destructor callback, which holds no reference.
//! - Its own threads (mapping, CUDA's ticker) block every signal ([`quiet`]).
//! - It exports the four layer entry points and nothing else named `cl*`,
//!   `InitializeInjection` for CUDA, and the `gpulab_framework_*` door through
//!   which gpulab's Python startup hook hands over what PyTorch, CuPy and JAX
//!   say of their memory ([`framework`]).

#![allow(
    unsafe_code,
    reason = "the agent is C ABI hooks, dlsym and signal handlers inside another process: every unsafe block says why it holds"
)]

mod clock;
mod cost;
mod cuda;
mod cuda_misuse;
mod cuda_order;
mod dispatch;
mod driver;
mod framework;
mod got;
mod launches;
mod layer;
mod ledger;
mod loaded;
mod opencl;
mod platforms;
mod python;
mod queue;
mod quiet;
mod rank;
mod region;
mod resident;
mod rival;
mod stack;
mod staging;
mod static_runtime;
mod stream_order;
mod ticker;
mod transport;
