//! The layer rules of docs/architecture.md. Between crates they are dependency
//! lists: each crate's manifest may name only the workspace crates its layer
//! allows, and only the backends and telemetry may depend on a GPU crate (read
//! from the manifests, the crates from the `crates/` folder). Inside a crate,
//! what Cargo cannot say is checked against the code's own `crate::` imports,
//! the module names read from the crate's `lib.rs`; a broken rule fails with
//! the file and line that broke it.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Each crate of the workspace, the workspace crates it may depend on, and why.
const LAYERS: &[(&str, &[&str], &str)] = &[
    (
        "gpulab-events",
        &[],
        "events know no labs, no GPU API and no UI",
    ),
    (
        "gpulab-agent",
        &["gpulab-events"],
        "the agent runs inside someone else's program: events and libc alone",
    ),
    (
        "gpulab-lab",
        &["gpulab-events"],
        "the lab language knows no GPU, no run and no consumer",
    ),
    (
        "gpulab-host",
        &["gpulab-events"],
        "the host crate reads what is installed; it calls no GPU API and knows no lab or run",
    ),
    (
        "gpulab-model",
        &["gpulab-events", "gpulab-lab"],
        "the Run, its verdicts, reports and exports read events; they start nothing and call no GPU API",
    ),
    (
        "gpulab-telemetry",
        &["gpulab-events", "gpulab-host"],
        "telemetry knows no labs, no backend and no consumer",
    ),
    (
        "gpulab-backend",
        &["gpulab-events", "gpulab-host"],
        "the backends know no lab language, no run and no consumer",
    ),
    (
        "gpulab-engine",
        &[
            "gpulab-backend",
            "gpulab-events",
            "gpulab-host",
            "gpulab-lab",
            "gpulab-telemetry",
        ],
        "the worker knows nothing of the parent: no Run, no source, no UI",
    ),
    (
        "gpulab-source",
        &[
            // For its source alone: build.rs builds the agent the binary embeds
            // (`the_binary_never_links_the_agent` holds the code to that).
            "gpulab-agent",
            "gpulab-backend",
            "gpulab-engine",
            "gpulab-events",
            "gpulab-host",
            "gpulab-lab",
            "gpulab-model",
            "gpulab-telemetry",
        ],
        "the run source starts a lab's worker or a watched program and hands on its events; it draws nothing",
    ),
    (
        "gpulab-tui",
        &[
            "gpulab-events",
            "gpulab-host",
            "gpulab-lab",
            "gpulab-model",
            "gpulab-source",
        ],
        "the dashboard draws runs from the source: no GPU API, no worker, no telemetry of its own",
    ),
    (
        "gpulab",
        &[
            "gpulab-backend",
            "gpulab-engine",
            "gpulab-events",
            "gpulab-host",
            "gpulab-lab",
            "gpulab-model",
            "gpulab-source",
            "gpulab-telemetry",
            "gpulab-tui",
        ],
        "the binary's commands start and show runs, over every layer",
    ),
];

/// Crates that call a GPU API (or NVIDIA's management library), and the crates
/// that may depend on them.
const GPU_CRATES: &[&str] = &["cl3", "opencl3", "cudarc", "nvml-wrapper"];
const GPU_USERS: &[(&str, &[&str])] = &[
    ("gpulab-backend", GPU_CRATES),
    ("gpulab-telemetry", &["nvml-wrapper"]),
];

/// A rule inside one crate, over the modules its `lib.rs` declares or re-exports.
struct Rule {
    /// What the rule says, as docs/architecture.md words it.
    says: &'static str,
    /// The crate: its folder under the repository (`.` for the binary's).
    krate: &'static str,
    /// Files it covers: these paths under the crate's `src/`, and what lies below.
    parts: &'static [&'static str],
    /// Modules of the crate the parts may import.
    modules: Modules,
    /// Other crates or std paths the parts may not name.
    names: &'static [&'static str],
}

enum Modules {
    /// Any but these.
    Except(&'static [&'static str]),
    /// These alone.
    Only(&'static [&'static str]),
}

impl Modules {
    fn allows(&self, module: &str, known: &BTreeSet<String>) -> bool {
        match self {
            Modules::Except(no) => !no.contains(&module),
            Modules::Only(yes) => yes.contains(&module) || !known.contains(module),
        }
    }

    fn named(&self) -> &'static [&'static str] {
        match self {
            Modules::Except(m) | Modules::Only(m) => m,
        }
    }
}

const RULES: &[Rule] = &[
    Rule {
        says: "the Run model is pure: events in, data out",
        krate: "crates/gpulab-model",
        parts: &["run"],
        // `testing`: the unit tests' event builders (`#[cfg(test)]` only).
        modules: Modules::Only(&["trace", "units", "testing"]),
        names: &[
            "std::fs",
            "std::process",
            "std::thread",
            "std::net",
            "Instant",
            "SystemTime",
        ],
    },
    Rule {
        says: "reports, exports and verdicts read a Run; they start nothing",
        krate: "crates/gpulab-model",
        parts: &["report", "export", "verdict", "verdict.rs"],
        modules: Modules::Except(&[]),
        names: &["std::process"],
    },
    Rule {
        // Its manifest keeps out the backends, the worker and telemetry.
        says: "the UI never speaks the worker protocol and starts no process",
        krate: "crates/gpulab-tui",
        parts: &[""],
        modules: Modules::Except(&[]),
        names: &["protocol", "std::process"],
    },
    Rule {
        says: "watch runs the user's program; it knows no lab, worker or UI",
        krate: "crates/gpulab-source",
        parts: &["watch"],
        modules: Modules::Except(&["backend", "engine", "lab"]),
        names: &["gpulab_backend", "gpulab_engine", "gpulab_lab"],
    },
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The workspace's crates: the binary's at the root and every folder of `crates/`.
fn crate_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root().join("crates"))
        .expect("read crates/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    dirs.sort();
    dirs.insert(0, root());
    dirs
}

fn manifest(dir: &Path) -> toml::Table {
    let text = std::fs::read_to_string(dir.join("Cargo.toml")).expect("read a manifest");
    toml::from_str(&text).expect("a manifest is TOML")
}

/// The package's name and the names in its `[dependencies]`.
fn dependencies(dir: &Path) -> (String, BTreeSet<String>) {
    let m = manifest(dir);
    let name = m
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(|n| n.as_str())
        .expect("a package name")
        .to_string();
    let deps = m
        .get("dependencies")
        .and_then(|d| d.as_table())
        .map(|t| t.keys().cloned().collect())
        .unwrap_or_default();
    (name, deps)
}

#[test]
fn every_crate_depends_only_on_the_layers_below_it() {
    let mut broken = Vec::new();
    let mut seen = Vec::new();
    for dir in crate_dirs() {
        let (name, deps) = dependencies(&dir);
        let Some((_, allowed, says)) = LAYERS.iter().find(|(n, ..)| *n == name) else {
            broken.push(format!("{name}: a crate with no layer in LAYERS"));
            continue;
        };
        seen.push(name.clone());
        let ours: BTreeSet<&str> = deps
            .iter()
            .map(String::as_str)
            .filter(|d| d.starts_with("gpulab"))
            .collect();
        let wanted: BTreeSet<&str> = allowed.iter().copied().collect();
        if ours != wanted {
            broken.push(format!(
                "{name} depends on {ours:?}, its layer on {wanted:?} (rule: {says})"
            ));
        }
        let gpu_ok = GPU_USERS
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(&[][..], |(_, c)| *c);
        for gpu in deps.iter().filter(|d| GPU_CRATES.contains(&d.as_str())) {
            if !gpu_ok.contains(&gpu.as_str()) {
                broken.push(format!(
                    "{name} depends on the GPU crate {gpu}: only the backends call a GPU API, and telemetry NVML"
                ));
            }
        }
    }
    assert_eq!(
        seen.len(),
        LAYERS.len(),
        "LAYERS names a crate the workspace lacks: {seen:?}"
    );
    assert!(broken.is_empty(), "layers broken:\n{}", broken.join("\n"));
}

/// The modules a crate's `lib.rs` declares (`pub mod x;`) or re-exports under a
/// name (`pub use gpulab_lab as lab;`, `pub use gpulab_model::{run, trace};`),
/// or names for its own code (`use gpulab_lab as lab;`).
fn modules_of(krate: &str) -> BTreeSet<String> {
    let lib = std::fs::read_to_string(root().join(krate).join("src/lib.rs")).expect("lib.rs");
    let mut out = BTreeSet::new();
    for line in lib.lines().map(str::trim) {
        if let Some(m) = line
            .strip_prefix("pub mod ")
            .or_else(|| line.strip_prefix("mod "))
        {
            out.insert(ident(m));
        } else if let Some(rest) = line.strip_prefix("pub use ").or_else(|| {
            line.strip_prefix("use ")
                .filter(|r| r.starts_with("gpulab_"))
        }) {
            if let Some((_, alias)) = rest.split_once(" as ") {
                out.insert(ident(alias));
            } else if let Some((_, group)) = rest.split_once("::{") {
                out.extend(
                    group
                        .trim_end_matches("};")
                        .split(',')
                        .map(|s| ident(s.trim())),
                );
            } else if let Some((_, last)) = rest.rsplit_once("::") {
                out.insert(ident(last));
            }
        }
    }
    out.retain(|m| !m.is_empty());
    out
}

fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for e in entries {
        rust_files(&e, out);
    }
}

/// The code of a line, without a trailing `//` comment or a doc comment.
fn code(line: &str) -> &str {
    let t = line.trim_start();
    if t.starts_with("//") {
        return "";
    }
    line.split(" //").next().unwrap_or(line)
}

/// Top-level modules a line names through `crate::` (`crate::{a, b::c}` too).
fn crate_modules(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                out.push(ident(item.trim()));
            }
        } else {
            out.push(ident(rest));
        }
    }
    out.retain(|m| !m.is_empty());
    out
}

fn ident(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// Whether `name` appears in `line` as a whole path segment.
fn names(line: &str, name: &str) -> bool {
    line.match_indices(name).any(|(i, _)| {
        let before = line[..i].chars().next_back();
        let after = line[i + name.len()..].chars().next();
        let edge = |c: Option<char>| c.is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        edge(before) && edge(after)
    })
}

fn violations(rule: &Rule) -> (usize, Vec<String>) {
    let known = modules_of(rule.krate);
    let src = root().join(rule.krate).join("src");
    let mut files = Vec::new();
    for part in rule.parts {
        rust_files(&src.join(part), &mut files);
    }
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let shown = file
            .strip_prefix(root())
            .unwrap_or(file)
            .display()
            .to_string();
        for (n, line) in text.lines().enumerate() {
            let line = code(line);
            for m in crate_modules(line) {
                if !rule.modules.allows(&m, &known) {
                    found.push(format!("{shown}:{}: imports crate::{m}", n + 1));
                }
            }
            for name in rule.names {
                if names(line, name) {
                    found.push(format!("{shown}:{}: names {name}", n + 1));
                }
            }
        }
    }
    (files.len(), found)
}

#[test]
fn every_rule_inside_a_crate_holds() {
    let mut broken = Vec::new();
    for rule in RULES {
        let (files, found) = violations(rule);
        assert!(
            files > 0,
            "rule `{}` covers no file: {:?}",
            rule.says,
            rule.parts
        );
        for v in found {
            broken.push(format!("{v}  (rule: {})", rule.says));
        }
    }
    assert!(
        broken.is_empty(),
        "layer rules broken:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_rules_name_real_modules_and_the_checker_sees_imports() {
    for rule in RULES {
        let known = modules_of(rule.krate);
        for m in rule.modules.named() {
            assert!(
                known.contains(*m),
                "rule `{}` names no module `{m}` of {}: {known:?}",
                rule.says,
                rule.krate
            );
        }
        // `""`: the whole crate.
        for part in rule.parts.iter().filter(|p| !p.is_empty()) {
            let module = part.trim_end_matches(".rs");
            assert!(
                known.contains(module),
                "rule `{}` covers `{part}`, which {} does not declare",
                rule.says,
                rule.krate
            );
        }
    }
    let root_modules = modules_of(".");
    for m in ["backend", "lab", "run", "trace", "tui", "units", "watch"] {
        assert!(root_modules.contains(m), "{m} in {root_modules:?}");
    }
    assert_eq!(
        crate_modules("use crate::{history, trace::Event}; crate::tui::x"),
        vec!["history", "trace", "tui"]
    );
    assert!(names("use cl3::memory;", "cl3"));
    assert!(!names("let opencl3x = 1;", "opencl3"));
    assert_eq!(code("// use crate::backend"), "");
}

/// The source crate depends on the agent's package only so that its build
/// script can build the agent from it: no code of gpulab names the crate, so
/// none of the agent's exported symbols (which wrap OpenCL and CUDA calls) is
/// linked into gpulab.
#[test]
fn the_binary_never_links_the_agent() {
    let mut stack: Vec<PathBuf> = crate_dirs()
        .into_iter()
        .filter(|d| !d.ends_with("gpulab-agent"))
        .map(|d| d.join("src"))
        .collect();
    let mut read = 0;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                read += 1;
                let text = std::fs::read_to_string(&path).unwrap();
                let named = [
                    "gpulab_agent::",
                    "use gpulab_agent",
                    "extern crate gpulab_agent",
                ]
                .iter()
                .any(|p| text.contains(p));
                assert!(
                    !named,
                    "{} names the agent crate: its symbols would be linked into gpulab",
                    path.display()
                );
            }
        }
    }
    assert!(read > 20, "gpulab's sources were read: {read}");
}

/// CONTRIBUTING's table of which tests need what names every integration
/// test binary of the root crate, and ARCHITECTURE.md every crate: a binary
/// or a crate added without them fails here.
#[test]
fn contributing_names_every_test_binary_and_architecture_every_crate() {
    let text = |f: &str| std::fs::read_to_string(root().join(f)).expect("readable");
    let contributing = text("CONTRIBUTING.md");
    let table: String = contributing
        .lines()
        .skip_while(|l| !l.starts_with("## Which tests need what"))
        .take_while(|l| l.is_empty() || l.starts_with('|') || l.starts_with("## Which"))
        .collect();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(root().join("tests"))
        .expect("tests/")
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".rs")
            && !table.contains(&format!("`{stem}`"))
        {
            missing.push(stem.to_string());
        }
    }
    missing.sort();
    assert!(
        missing.is_empty(),
        "CONTRIBUTING.md's test table does not name {missing:?}"
    );
    let architecture = text("ARCHITECTURE.md");
    for dir in crate_dirs() {
        let (name, _) = dependencies(&dir);
        assert!(
            architecture.contains(&name),
            "ARCHITECTURE.md does not name the crate {name}"
        );
    }
}
