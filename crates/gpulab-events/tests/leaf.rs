//! The events crate stays a leaf: an agent library loaded into someone else's
//! program links it, so it may depend on serialisation alone. Read from the
//! manifest (what cargo builds), not from a list kept beside it.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

const ALLOWED: [&str; 3] = ["serde", "serde_json", "thiserror"];

#[test]
fn the_events_crate_depends_on_serialisation_alone() {
    let manifest: toml_lite::Manifest = toml_lite::read(include_str!("../Cargo.toml"));
    for dep in &manifest.dependencies {
        assert!(
            ALLOWED.contains(&dep.as_str()),
            "gpulab-events gained the dependency `{dep}`: events know no labs, GPU APIs or UI"
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
