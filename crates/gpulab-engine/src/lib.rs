//! The engine: interprets a lab's script over a `Backend`, keeps the ledger, and
//! speaks the worker protocol. Never prints and never touches the terminal; claims
//! are judged later, by the parent, from the events this emits.

pub mod interpreter;
pub mod ledger;
pub mod protocol;
pub mod request;
pub mod worker;

#[cfg(test)]
mod fake;
#[cfg(test)]
mod tests;

pub use interpreter::Engine;
pub use ledger::Ledger;
pub use protocol::{Command, Control, Emit};
pub use request::WorkerRequest;

pub type Result<T, E = EngineError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Lab(#[from] gpulab_lab::LabError),
    #[error(transparent)]
    Backend(#[from] gpulab_backend::BackendError),
    /// The parent's request could not be read: a bug or a version mismatch.
    #[error("worker request: {0}")]
    Request(String),
    #[error("the lab uses the {0} backend, which this gpulab cannot drive yet")]
    UnsupportedBackend(&'static str),
}
