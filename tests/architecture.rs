//! The layer rules of docs/architecture.md, checked against the code's own
//! imports. Each rule names a part of `src/` and what it may not reach; a broken
//! rule fails with the file and line that broke it.
//!
//! The events crate's rule ("events know no labs, GPU APIs or UI") is checked on
//! its manifest by `crates/gpulab-events/tests/leaf.rs`, the agent's by
//! `crates/gpulab-agent/tests/deps.rs`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use std::path::{Path, PathBuf};

/// Top-level modules of the `gpulab` library.
const MODULES: &[&str] = &[
    "backend",
    "clock",
    "color",
    "engine",
    "export",
    "history",
    "lab",
    "report",
    "run",
    "signals",
    "source",
    "telemetry",
    "text",
    "trace",
    "tui",
    "units",
    "verdict",
    "watch",
];

/// Crates that call a GPU API (or NVIDIA's management library).
const GPU_CRATES: &[&str] = &["cl3", "opencl3", "cudarc", "nvml_wrapper"];

enum Modules {
    /// Any but these.
    Except(&'static [&'static str]),
    /// These alone.
    Only(&'static [&'static str]),
}

impl Modules {
    fn allows(&self, module: &str) -> bool {
        match self {
            Modules::Except(no) => !no.contains(&module),
            Modules::Only(yes) => yes.contains(&module) || !MODULES.contains(&module),
        }
    }

    fn named(&self) -> &'static [&'static str] {
        match self {
            Modules::Except(m) | Modules::Only(m) => m,
        }
    }
}

struct Rule {
    /// What the rule says, as docs/architecture.md words it.
    says: &'static str,
    /// Files it covers: these paths under the repository, and what lies below them.
    parts: &'static [&'static str],
    /// Modules of the library the parts may import.
    modules: Modules,
    /// External crates or std paths the parts may not name.
    names: &'static [&'static str],
}

const RULES: &[Rule] = &[
    Rule {
        says: "the Run model is pure: events in, data out",
        parts: &["src/run"],
        modules: Modules::Only(&["trace", "units"]),
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
        says: "the UI never calls a GPU API and never speaks the worker protocol",
        parts: &["src/tui"],
        modules: Modules::Except(&["backend", "engine", "telemetry"]),
        names: &[
            "protocol",
            "cl3",
            "opencl3",
            "cudarc",
            "nvml_wrapper",
            "std::process",
        ],
    },
    Rule {
        says: "telemetry knows no labs, no backend and no consumer",
        parts: &["src/telemetry"],
        modules: Modules::Except(&[
            "lab", "engine", "backend", "source", "tui", "run", "report", "verdict", "export",
            "watch",
        ]),
        names: &[],
    },
    Rule {
        says: "the lab language knows no GPU, no run and no consumer",
        parts: &["src/lab"],
        modules: Modules::Except(&[
            "backend",
            "engine",
            "telemetry",
            "source",
            "tui",
            "run",
            "report",
            "verdict",
            "export",
            "watch",
        ]),
        names: &[],
    },
    Rule {
        says: "the engine (worker side) knows nothing of the parent",
        parts: &["src/engine"],
        modules: Modules::Except(&[
            "source", "tui", "run", "report", "verdict", "export", "watch",
        ]),
        names: &[],
    },
    Rule {
        says: "reports, exports and verdicts read a Run; they start and call nothing",
        parts: &["src/report", "src/export", "src/verdict", "src/verdict.rs"],
        modules: Modules::Except(&["backend", "engine", "source", "telemetry", "tui", "watch"]),
        names: &["std::process", "cl3", "opencl3", "cudarc", "nvml_wrapper"],
    },
    Rule {
        says: "machine reads what is installed; it calls no GPU API and knows no lab or run",
        parts: &["src/machine"],
        modules: Modules::Only(&["trace", "units", "clock"]),
        names: &["cl3", "opencl3", "cudarc", "nvml_wrapper"],
    },
    Rule {
        says: "watch runs the user's program; it knows no lab, worker or UI",
        parts: &["src/watch"],
        modules: Modules::Except(&["backend", "engine", "lab", "tui"]),
        names: &["cl3", "opencl3", "cudarc"],
    },
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
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
    let mut files = Vec::new();
    for part in rule.parts {
        rust_files(&root().join(part), &mut files);
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
                if !rule.modules.allows(&m) {
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
fn every_layer_rule_holds() {
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
fn only_the_backend_calls_a_gpu_api() {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let mut broken = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(root()).unwrap_or(file);
        let allowed: &[&str] = if rel.starts_with("src/backend") {
            GPU_CRATES
        } else if rel.starts_with("src/telemetry") {
            &["nvml_wrapper"]
        } else {
            &[]
        };
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            for name in GPU_CRATES.iter().filter(|c| !allowed.contains(c)) {
                if names(code(line), name) {
                    broken.push(format!("{}:{}: names {name}", rel.display(), n + 1));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "GPU API outside backend/:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_rules_name_real_modules_and_the_checker_sees_imports() {
    for rule in RULES {
        for m in rule.modules.named() {
            assert!(
                MODULES.contains(m),
                "rule `{}` names no module `{m}`",
                rule.says
            );
        }
    }
    assert_eq!(
        crate_modules("use crate::{history, trace::Event}; crate::tui::x"),
        vec!["history", "trace", "tui"]
    );
    assert!(names("use cl3::memory;", "cl3"));
    assert!(!names("let opencl3x = 1;", "opencl3"));
    assert_eq!(code("// use crate::backend"), "");
    // The library's own list of modules is the one checked against.
    let lib = std::fs::read_to_string(root().join("src/lib.rs")).unwrap_or_default();
    for m in MODULES {
        assert!(
            lib.contains(&format!("pub mod {m};"))
                || lib.contains(&format!("pub use gpulab_events::{m}")),
            "src/lib.rs has no module `{m}`"
        );
    }
}
