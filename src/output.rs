//! Every `--json` output (`run`, `report`, `watch`, `list`, `doctor`) in one
//! envelope: `schema_version`, `gpulab_version`, `kind`, then the body's fields
//! beside them. The type that writes an output is the type its JSON Schema is
//! made from (`schema`, built for the tests alone: the binary carries neither
//! schemars nor the derives), so `docs/gpulab.schema.json` cannot drift from what
//! gpulab prints: a test regenerates it and fails when it differs, and the
//! outputs of real runs are validated against it (`tests/report_format.rs`).
//! `docs/report-format.md` says what each field means.

use serde::Serialize;

use crate::backend::discover::DoctorReport;
use crate::card::{Card, Matrix};
use crate::lab::Lab;
use crate::report::out_of_memory::OutOfMemory;
use crate::report::{Provenance, Summary, WatchReport};

/// Raised when a field is removed or changes meaning; a new field keeps it.
/// 2: sizes in bytes and durations in ms in every kind, object kinds singular,
/// provenance (`recorded`) in every kind.
pub const SCHEMA_VERSION: u32 = 2;

/// What an output holds, named by its `kind`.
#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Body<'a> {
    /// `runs`: one report per lab variant run (`run`, or `report` of lab
    /// recordings). One variant is a list of one: the shape never changes.
    Run(Runs<'a>),
    /// A watched program's report (`watch`, or `report` of a watch recording).
    Watch(&'a WatchReport),
    /// The moment a watched program ran out of memory (`watch --oom FILE`).
    OutOfMemory(OutOfMemory<'a>),
    /// `labs`: every lab `list` found.
    Labs(Labs<'a>),
    /// What this machine can run (`doctor`).
    Doctor(Doctor<'a>),
    /// A machine's driver card (`card`): every lab and variant on its devices.
    Card(&'a Card),
    /// Several cards as one table, devices as columns (`card merge`).
    Matrix(&'a Matrix),
    /// A class's predictions beside what its devices showed (`class`).
    Class(&'a crate::class::Class),
}

/// One output: the envelope's fields, then the body's.
#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(title = "gpulab JSON output"))]
pub struct Envelope<'a> {
    /// The schema this output follows (docs/report-format.md says what changed).
    #[cfg_attr(test, schemars(range(min = 2, max = 2)))]
    pub schema_version: u32,
    /// The gpulab that wrote this output (a report of a recording may be
    /// written by a newer gpulab than the one that recorded it:
    /// `recorded.gpulab_version`).
    pub gpulab_version: &'static str,
    #[serde(flatten)]
    pub body: Body<'a>,
}

impl<'a> Envelope<'a> {
    pub fn of(body: Body<'a>) -> Self {
        Envelope {
            schema_version: SCHEMA_VERSION,
            gpulab_version: env!("CARGO_PKG_VERSION"),
            body,
        }
    }
}

/// The body of a `run` output.
#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Runs<'a> {
    pub runs: &'a [Summary],
}

/// The body of `list --json`.
#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Labs<'a> {
    /// Where and when the labs were listed.
    pub recorded: Provenance,
    pub labs: Vec<LabRow<'a>>,
}

/// One lab of `list --json`.
#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct LabRow<'a> {
    pub id: &'a str,
    pub backend: &'a str,
    pub title: &'a str,
    pub claim: &'a str,
    pub variants: Vec<&'a str>,
    pub params: Vec<&'a str>,
}

impl<'a> LabRow<'a> {
    pub fn of(lab: &'a Lab) -> Self {
        LabRow {
            id: &lab.id,
            backend: lab.backend.as_str(),
            title: &lab.title,
            claim: &lab.claim,
            variants: lab.variants.iter().map(|v| v.name.as_str()).collect(),
            params: lab.params.iter().map(|p| p.name.as_str()).collect(),
        }
    }
}

/// The body of `doctor --json`: where and when the machine was checked, then
/// what was found.
#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Doctor<'a> {
    pub recorded: Provenance,
    #[serde(flatten)]
    pub report: &'a DoctorReport,
}

/// `body` in its envelope, pretty-printed with a final newline.
pub fn json(body: Body<'_>) -> serde_json::Result<String> {
    Ok(serde_json::to_string_pretty(&Envelope::of(body))? + "\n")
}

/// [`json`] on one line: a line of JSON Lines (`--jsonl`).
pub fn json_line(body: Body<'_>) -> serde_json::Result<String> {
    Ok(serde_json::to_string(&Envelope::of(body))? + "\n")
}

/// The JSON Schema (2020-12) of every output, pretty-printed with a final
/// newline: what `docs/gpulab.schema.json` holds. Open to new fields (a new
/// field keeps `schema_version`), so an older consumer's schema still takes a
/// newer output.
#[cfg(test)]
pub fn schema() -> String {
    let mut schema = schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<Envelope<'static>>()
        .to_value();
    open_objects(&mut schema);
    // Infallible: a `Value` always serialises.
    serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n"
}

/// Drops `additionalProperties: false` (which serde's `deny_unknown_fields` on
/// the event stream's types puts there): an output may gain fields.
#[cfg(test)]
fn open_objects(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            if map.get("additionalProperties") == Some(&serde_json::Value::Bool(false)) {
                map.remove("additionalProperties");
            }
            map.values_mut().for_each(open_objects);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(open_objects),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/gpulab.schema.json` is what the types say. Regenerate it with
    /// `GPULAB_BLESS=1 cargo test -p gpulab --lib output` after changing an output type.
    #[test]
    fn the_shipped_schema_is_the_types_schema() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/gpulab.schema.json");
        let made = schema();
        if std::env::var_os("GPULAB_BLESS").is_some() {
            std::fs::write(path, &made).unwrap();
        }
        let shipped = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            shipped == made,
            "{path} is not the schema of the output types: regenerate it with \
             `GPULAB_BLESS=1 cargo test -p gpulab --lib output` and say what changed in \
             docs/report-format.md (and raise SCHEMA_VERSION if a field was removed \
             or changed meaning)"
        );
    }

    #[test]
    fn the_envelope_comes_first_and_the_kind_names_the_body() {
        let rows = Labs {
            recorded: Provenance::default(),
            labs: Vec::new(),
        };
        let text = json(Body::Labs(rows)).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["schema_version"], SCHEMA_VERSION);
        assert_eq!(v["kind"], "labs");
        assert_eq!(v["labs"], serde_json::json!([]));
        assert!(text.find("schema_version") < text.find("\"kind\""));
        assert!(text.find("\"kind\"") < text.find("\"labs\""));
        let line = json_line(Body::Labs(Labs {
            recorded: Provenance::default(),
            labs: Vec::new(),
        }))
        .unwrap();
        assert_eq!(line.lines().count(), 1);
        assert_eq!(serde_json::from_str::<serde_json::Value>(&line).unwrap(), v);
    }

    #[test]
    fn every_kind_is_in_the_schema() {
        let schema: serde_json::Value = serde_json::from_str(&schema()).unwrap();
        let text = schema.to_string();
        for kind in [
            "run",
            "watch",
            "out_of_memory",
            "labs",
            "doctor",
            "card",
            "matrix",
            "class",
        ] {
            assert!(text.contains(&format!("\"const\":\"{kind}\"")), "{kind}");
        }
    }
}
