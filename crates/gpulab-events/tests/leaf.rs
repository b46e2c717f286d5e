//! The events crate stays a leaf: an agent library loaded into someone else's
//! program links it, so it may depend on serialisation alone. Read from the
//! manifest (what cargo builds), not from a list kept beside it.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

const ALLOWED: [&str; 4] = ["schemars", "serde", "serde_json", "thiserror"];

/// Allowed only behind a feature the agent never turns on: the JSON Schema of
/// the types gpulab's outputs share with the stream (`gpulab-model` turns it on).
const OPTIONAL: [&str; 1] = ["schemars"];

#[test]
fn the_events_crate_depends_on_serialisation_alone() {
    let manifest: toml_lite::Manifest = toml_lite::read(include_str!("../Cargo.toml"));
    for dep in &manifest.dependencies {
        assert!(
            ALLOWED.contains(&dep.as_str()),
            "gpulab-events gained the dependency `{dep}`: events know no labs, GPU APIs or UI"
        );
    }
    let text = include_str!("../Cargo.toml");
    for dep in OPTIONAL {
        let line = text.lines().find(|l| l.starts_with(&format!("{dep} ")));
        assert!(
            line.is_none_or(|l| l.contains("optional = true")),
            "gpulab-events must keep `{dep}` optional: the agent links this crate"
        );
    }
    assert!(
        manifest.dependencies.iter().any(|d| d == "serde"),
        "the manifest was read: {:?}",
        manifest.dependencies
    );
}

/// Just enough of TOML to list a manifest's dependency tables' keys (the crate
/// must not depend on a TOML parser to test itself).
mod toml_lite {
    pub struct Manifest {
        pub dependencies: Vec<String>,
    }

    pub fn read(text: &str) -> Manifest {
        let mut section = String::new();
        let mut dependencies = Vec::new();
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                section = line.trim_matches(['[', ']']).to_string();
                if let Some(name) = section.strip_prefix("dependencies.") {
                    dependencies.push(name.to_string());
                }
                continue;
            }
            let dep_table = section == "dependencies"
                || section.ends_with(".dependencies") && !section.contains("dev-");
            if dep_table && let Some((key, _)) = line.split_once('=') {
                dependencies.push(key.trim().to_string());
            }
        }
        Manifest { dependencies }
    }
}
