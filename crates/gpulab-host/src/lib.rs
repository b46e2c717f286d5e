//! What this host has, read without calling a GPU API: the folders gpulab keeps
//! its files in (`dirs`), the clock every gpulab process shares (`clock`), and
//! what is installed (`machine`: OpenCL loaders and ICD files, libcupti).
//!
//! `unsafe` is denied by the workspace's lints; `machine/icd*.rs` allow it
//! (the environment and `dlopen`), and so does `shared` (a shared mapping),
//! each block saying why it holds.

pub mod clock;
pub mod dirs;
pub mod machine;
pub mod multicast;
#[allow(
    unsafe_code,
    reason = "maps the memory shared with the watched program's agents; each block says why it holds"
)]
pub mod shared;

/// This host's name (`uname -n`), as every output's provenance says it.
pub fn hostname() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}
