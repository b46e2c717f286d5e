//! The labs a user can pick from: the ones shipped inside the binary, then
//! `$XDG_CONFIG_HOME/gpulab/labs`, then every `--labs DIR` (later ones win by id).

use std::path::{Path, PathBuf};

use super::error::{LabError, Result};
use super::model::{Lab, Origin, Params};

/// Shipped labs, compiled in so `gpulab` works from any directory.
pub const SHIPPED: &[(&str, &str)] = &[];

pub struct LabSet {
    labs: Vec<Lab>,
    /// Files in user folders that failed to load; `list` and `check` show them.
    pub problems: Vec<LabError>,
}

impl LabSet {
    pub fn load(_extra_dirs: &[PathBuf]) -> LabSet {
        todo!("helper: shipped + XDG + dirs")
    }

    pub fn labs(&self) -> &[Lab] {
        &self.labs
    }

    pub fn get(&self, _id: &str) -> Result<&Lab> {
        todo!("helper: UnknownLab with suggestion")
    }
}

/// Parse and validate one lab from text; `file` names it in messages.
pub fn parse(_file: &str, _text: &str, _origin: Origin) -> Result<Lab> {
    todo!("helper")
}

pub fn load_file(path: &Path) -> Result<Lab> {
    let text = std::fs::read_to_string(path).map_err(|source| LabError::Io {
        path: path.to_owned(),
        source,
    })?;
    parse(&path.display().to_string(), &text, Origin::File(path.to_owned()))
}

/// Defaults overridden by `key=value` texts from `--param`, each range-checked.
pub fn resolve_params(_lab: &Lab, _overrides: &[String]) -> Result<Params> {
    todo!("helper")
}
