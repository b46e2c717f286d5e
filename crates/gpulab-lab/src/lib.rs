//! Lab files: the TOML model, the script and claim parsers, validation, and the set
//! of labs a user can pick from. Never runs anything and never touches a device.
//!
//! Two phases: `raw` parses TOML and script lines keeping spans; `validate` turns
//! that into a `Lab` the engine can trust. Every `file:line:col` message is made in
//! `diagnostic`.

pub mod api;
pub mod catalog;
pub mod claim_parse;
pub mod diagnostic;
pub mod error;
pub mod expr;
pub mod known;
pub mod lesson;
mod lower;
pub mod mistake;
pub mod model;
pub mod plan;
pub mod raw;
pub mod script;
pub mod simulate;
pub mod suggest;
pub mod validate;

pub use api::{Api, ApiSpec, ArgKind, BackendKind, ClFlag, Effect, ObjKind};
pub use catalog::LabSet;
pub use diagnostic::Diagnostic;
pub use error::{LabError, Result};
pub use expr::{BinOp, Expr};
pub use model::*;
