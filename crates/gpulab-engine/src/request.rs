//! The one request a worker gets: the first line of its stdin, JSON. The parent
//! sends the lab exactly as it validated it (the variant's script as a model,
//! parameters resolved to numbers), so the worker parses no lab file and no
//! `NAME=VALUE` string. Command words (`step`, `run`, `stop`) follow on later lines.

use std::io::BufRead;

use serde::{Deserialize, Serialize};

use gpulab_lab::{BackendKind, Lab, Params, Variant};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerRequest {
    pub lab: LabHeader,
    /// The variant to run, its script already validated.
    pub variant: Variant,
    /// Every parameter of the lab, defaults and overrides resolved.
    pub params: Params,
    pub device: Option<String>,
    /// Budget in bytes above the baseline; `None` = half the free memory.
    pub budget_bytes: Option<u64>,
    /// `--until-failure`: no budget at all.
    pub unbounded: bool,
    /// Wait for `step`/`run` on stdin before the first line.
    pub step: bool,
}

/// What a worker needs of the lab beyond the variant: what the `meta` event names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabHeader {
    pub id: String,
    pub title: String,
    pub backend: BackendKind,
}

impl WorkerRequest {
    /// A request for `variant` of `lab` with everything else at its default.
    pub fn new(lab: &Lab, variant: &Variant, params: Params) -> WorkerRequest {
        WorkerRequest {
            lab: LabHeader {
                id: lab.id.clone(),
                title: lab.title.clone(),
                backend: lab.backend,
            },
            variant: variant.clone(),
            params,
            device: None,
            budget_bytes: None,
            unbounded: false,
            step: false,
        }
    }

    /// The request as one line, newline included.
    pub fn to_line(&self) -> String {
        // A request holds strings, numbers and enums only: it always serialises.
        let mut line = serde_json::to_string(self).unwrap_or_default();
        line.push('\n');
        line
    }

    /// Reads the first line of `input` as a request.
    pub fn read(input: &mut impl BufRead) -> Result<WorkerRequest, String> {
        let mut line = String::new();
        match input.read_line(&mut line) {
            Ok(0) => Err("no request on stdin (the worker is started by gpulab)".into()),
            Ok(_) => serde_json::from_str(&line).map_err(|e| format!("unreadable request: {e}")),
            Err(e) => Err(format!("cannot read the request: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpulab_lab::LabSet;

    #[test]
    fn every_shipped_variant_crosses_the_pipe_unchanged() {
        let set = LabSet::load(&[]);
        assert!(!set.labs().is_empty());
        for lab in set.labs() {
            for variant in &lab.variants {
                let mut req = WorkerRequest::new(lab, variant, lab.default_params());
                req.device = Some("1".into());
                req.step = true;
                let line = req.to_line();
                assert_eq!(line.matches('\n').count(), 1, "one line: {line}");
                let back = WorkerRequest::read(&mut line.as_bytes());
                assert_eq!(back.as_ref(), Ok(&req), "{} / {}", lab.id, variant.name);
            }
        }
    }

    #[test]
    fn a_missing_or_damaged_request_is_an_error_not_a_panic() {
        assert!(WorkerRequest::read(&mut &b""[..]).is_err());
        let e = WorkerRequest::read(&mut &b"{\"lab\": 3}\n"[..]).unwrap_err();
        assert!(e.starts_with("unreadable request"), "{e}");
    }
}
