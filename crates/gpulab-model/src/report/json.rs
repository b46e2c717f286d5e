//! The one envelope of every `--json` output (`run`, `report`, `list`, `doctor`,
//! `watch`): `schema_version`, `kind`, then the body's fields beside them, as
//! `docs/report-format.md` documents each. Each kind keeps one shape: `run` lists
//! its runs whether one variant ran or all of them.

use serde::Serialize;

use super::Summary;

/// Raised when a field is removed or changes meaning; a new field keeps it.
pub const SCHEMA_VERSION: u32 = 1;

/// What the body holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// `runs`: one report per lab variant run (`run`, or `report` of a lab recording).
    Run,
    /// A watched program's report (`watch`, or `report` of a watch recording).
    Watch,
    /// The moment a watched program ran out of memory (`watch --oom FILE`).
    OutOfMemory,
    /// `labs`: every lab `list` found.
    Labs,
    /// What this machine can run (`doctor`).
    Doctor,
}

#[derive(Serialize)]
struct Envelope<'a, T> {
    schema_version: u32,
    kind: Kind,
    /// The gpulab that wrote this output.
    gpulab_version: &'static str,
    #[serde(flatten)]
    body: &'a T,
}

/// The body of a `run` output.
#[derive(Debug, Serialize)]
pub struct Runs<'a> {
    pub runs: &'a [Summary],
}

impl<'a, T> Envelope<'a, T> {
    fn of(kind: Kind, body: &'a T) -> Self {
        Envelope {
            schema_version: SCHEMA_VERSION,
            kind,
            gpulab_version: env!("CARGO_PKG_VERSION"),
            body,
        }
    }
}

/// `body` in its envelope, pretty-printed with a final newline. `body` must
/// serialise as an object (a struct or a map): its fields join the envelope's.
pub fn json<T: Serialize>(kind: Kind, body: &T) -> serde_json::Result<String> {
    Ok(serde_json::to_string_pretty(&Envelope::of(kind, body))? + "\n")
}

/// [`json`] on one line: a line of JSON Lines (`--jsonl`).
pub fn json_line<T: Serialize>(kind: Kind, body: &T) -> serde_json::Result<String> {
    Ok(serde_json::to_string(&Envelope::of(kind, body))? + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_envelope_comes_first_and_the_body_beside_it() {
        #[derive(Serialize)]
        struct Body {
            labs: Vec<u32>,
        }
        let text = json(Kind::Labs, &Body { labs: vec![1, 2] }).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["schema_version"], SCHEMA_VERSION);
        assert_eq!(v["kind"], "labs");
        assert_eq!(v["labs"], serde_json::json!([1, 2]));
        assert!(text.find("schema_version") < text.find("labs\":"));
    }

    #[test]
    fn a_body_that_is_not_an_object_is_an_error_not_a_bad_shape() {
        assert!(json(Kind::Labs, &vec![1, 2]).is_err());
    }
}
