//! What is installed on this machine, read from files and the environment: the
//! OpenCL ICD loaders a program would load, the ICDs they would see, and the
//! libcupti `watch` gives CUDA programs. Calls no
//! GPU API, so the parent (the dashboard, `watch`) may ask it; `doctor` reports it.

pub mod cupti;
pub mod icd;
pub mod icd_check;
pub mod loader;
pub mod platforms;

pub use icd::{IcdState, icd_state, prepare_icd_environment};
pub use loader::{Loader, LoaderPlan, Loaders};
