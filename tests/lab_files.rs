//! Lab file fixtures: every `tests/labs/valid/*.toml` parses, every
//! `tests/labs/invalid/NN-name.toml` gives exactly the one-line message in
//! `NN-name.expected`. `GPULAB_BLESS=1` writes missing `.expected` files.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use std::path::{Path, PathBuf};

use gpulab::lab::catalog::{self, LabSet};
use gpulab::lab::{LabError, Origin};

fn tomls(dir: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
}

/// The path as the message shows it: relative to the crate root.
fn shown(path: &Path) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

fn parse_file(path: &Path) -> Result<gpulab::lab::Lab, LabError> {
    let bytes = std::fs::read(path).unwrap();
    catalog::parse_bytes(&shown(path), bytes, Origin::File(path.to_owned()))
}

#[test]
fn valid_labs_parse() {
    let files = tomls("tests/labs/valid");
    assert!(files.len() >= 2);
    for f in files {
        if let Err(e) = parse_file(&f) {
            panic!("{e}");
        }
    }
}

#[test]
fn shipped_labs_parse() {
    for (name, text) in catalog::SHIPPED {
        if let Err(e) = catalog::parse(name, text, Origin::Builtin) {
            panic!("{e}");
        }
    }
}

#[test]
fn invalid_labs_give_their_expected_message() {
    let files = tomls("tests/labs/invalid");
    assert!(files.len() >= 25, "only {} invalid fixtures", files.len());
    let bless = std::env::var_os("GPULAB_BLESS").is_some();
    let mut failures = Vec::new();
    let mut messages = Vec::new();
    for f in files {
        let expected_path = f.with_extension("expected");
        let got = match parse_file(&f) {
            Ok(_) => "parsed without error".to_owned(),
            Err(e) => e.to_string(),
        };
        assert!(!got.contains('\n'), "{got}");
        if bless && !expected_path.exists() {
            std::fs::write(&expected_path, format!("{got}\n")).unwrap();
        }
        let want = std::fs::read_to_string(&expected_path).unwrap_or_default();
        if got != want.trim_end() {
            failures.push(format!(
                "{}\n  want: {}\n  got:  {got}",
                shown(&f),
                want.trim_end()
            ));
        }
        // Each fixture is a different mistake.
        let message = got
            .split_once(": ")
            .map_or(got.clone(), |(_, m)| m.to_owned());
        assert!(
            !messages.contains(&message),
            "two fixtures give `{message}`"
        );
        messages.push(message);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn render_points_at_the_mistake() {
    let text = "id = \"x\"\ntitle = \"t\"\nbackend = \"opencl\"\nclaim = \"c\"\n\
                [teaching]\nlook = \"l\"\nwhy = \"w\"\ninstead = \"i\"\n\
                [[variants]]\nname = \"v\"\nscript = '''\nctx = clCreateContext()\nq = clCreateCommandQueue(ctx)\n  clFnish(q)\n'''\n";
    let Err(LabError::Invalid(d)) = catalog::parse("lab.toml", text, Origin::Builtin) else {
        panic!("no diagnostic");
    };
    assert_eq!(
        d.to_string(),
        "lab.toml:14:3: unknown call `clFnish`; did you mean `clFinish`?"
    );
    let out = d.render(false);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "lab.toml:14:3: unknown call `clFnish`");
    let code = lines
        .iter()
        .position(|l| l.ends_with("  clFnish(q)") && l.trim_start().starts_with("14"))
        .unwrap_or_else(|| panic!("no source line in\n{out}"));
    let caret = lines[code + 1];
    let at = lines[code].find("clFnish").unwrap();
    assert_eq!(caret.find('^'), Some(at), "\n{out}");
    assert_eq!(caret.matches('^').count(), 7, "\n{out}");
    assert!(out.contains("help: did you mean `clFinish`?"), "\n{out}");
    assert!(
        d.render(true)
            .starts_with("lab.toml:14:3: unknown call `clFnish`\n")
    );
}

#[test]
fn garbage_never_panics() {
    let mut inputs: Vec<String> = vec![
        String::new(),
        "\u{0}\u{1}\u{ff}".into(),
        "x".repeat(1 << 20),
        format!("id = \"{}\"", "a".repeat(1 << 20)),
        "[[variants]]\nscript = '''\n".into(),
        "[teaching]\n[teaching]\n".into(),
        "id = 'é'\n\t\tclaim = \"\u{1F600}\"".into(),
    ];
    // Pseudo-random bytes, and every prefix of a valid lab (cut anywhere, even
    // inside a multi-byte character or a script line).
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..200 {
        let bytes: Vec<u8> = (0..256)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed % 128) as u8
            })
            .collect();
        inputs.push(String::from_utf8_lossy(&bytes).into_owned());
    }
    for f in tomls("tests/labs/valid") {
        let text = std::fs::read_to_string(&f).unwrap();
        let cuts: Vec<usize> = (0..text.len())
            .filter(|i| text.is_char_boundary(*i))
            .collect();
        for i in cuts.into_iter().step_by(7) {
            inputs.push(text[..i].to_owned());
            // And with one byte replaced by something that breaks it.
            let mut broken = text.clone();
            broken.replace_range(i..i, "(#{\"");
            inputs.push(broken);
        }
    }
    for input in inputs {
        if let Err(LabError::Invalid(d)) = catalog::parse("g.toml", &input, Origin::Builtin) {
            let line = d.to_string();
            assert!(line.starts_with("g.toml:"), "{line}");
            let out = d.render(false);
            assert!(out.starts_with("g.toml:"));
        }
    }
}

#[test]
fn lab_set_loads_dirs_and_suggests_ids() {
    let dir = tempfile::tempdir().unwrap();
    let valid = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/labs/valid");
    for f in tomls("tests/labs/valid") {
        std::fs::copy(&f, dir.path().join(f.file_name().unwrap())).unwrap();
    }
    std::fs::write(dir.path().join("broken.toml"), "id = ").unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not a lab").unwrap();
    let set = LabSet::load(&[dir.path().to_owned(), valid.join("missing-dir")]);
    assert!(set.get("cl-premature-release").is_ok());
    // One broken file and one missing folder, both reported, neither fatal.
    let problems: Vec<String> = set.problems.iter().map(|p| p.to_string()).collect();
    assert!(
        problems.iter().any(|p| p.contains("broken.toml:1:")),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p.contains("missing-dir")),
        "{problems:?}"
    );

    let err = set.get("cl-premature-relase").unwrap_err().to_string();
    assert_eq!(
        err,
        "unknown lab `cl-premature-relase`; did you mean `cl-premature-release`?"
    );
    let err = set.get("premature").unwrap_err().to_string();
    assert_eq!(
        err,
        "unknown lab `premature`; did you mean `cl-premature-release`?"
    );
    let err = set.get("cl-").unwrap_err().to_string();
    assert_eq!(err, "unknown lab `cl-`");
}

#[test]
fn later_dirs_replace_earlier_ids() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/labs/valid/cl-premature-release.toml");
    let text = std::fs::read_to_string(&src).unwrap();
    std::fs::write(a.path().join("one.toml"), &text).unwrap();
    let retitled = text.replace(
        "title = \"Releasing a buffer while a kernel still uses it\"",
        "title = \"Mine\"",
    );
    std::fs::write(b.path().join("two.toml"), retitled).unwrap();
    let set = LabSet::load(&[a.path().to_owned(), b.path().to_owned()]);
    let lab = set.get("cl-premature-release").unwrap();
    assert_eq!(lab.title, "Mine");
    assert_eq!(lab.origin, Origin::File(b.path().join("two.toml")));
    assert_eq!(set.labs().iter().filter(|l| l.id == lab.id).count(), 1);
}

#[test]
fn params_resolve_with_clear_errors() {
    let lab = parse_file(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/labs/valid/cl-premature-release.toml"),
    )
    .unwrap();
    let p =
        catalog::resolve_params(&lab, &["size_mib=64".into(), " kernel_ms = 20 ".into()]).unwrap();
    assert_eq!(p.get("size_mib"), Some(&64.0));
    assert_eq!(p.get("kernel_ms"), Some(&20.0));
    assert_eq!(
        catalog::resolve_params(&lab, &[]).unwrap().get("size_mib"),
        Some(&256.0)
    );
    let msg = |s: &str| {
        catalog::resolve_params(&lab, &[s.into()])
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        msg("size_mb=64"),
        "--param size_mb=64: lab `cl-premature-release` has no parameter `size_mb`; did you mean `size_mib`?"
    );
    assert_eq!(
        msg("size_mib=lots"),
        "--param size_mib=lots: `lots` is not a number"
    );
    assert_eq!(
        msg("size_mib=9000"),
        "--param size_mib=9000: 9000 is outside the range of `size_mib`: 1..=8192 MiB"
    );
    assert_eq!(
        msg("size_mib"),
        "--param size_mib: expected NAME=VALUE, e.g. `size_mib=64`"
    );
    assert_eq!(
        msg("zzz=1"),
        "--param zzz=1: lab `cl-premature-release` has no parameter `zzz` (parameters: size_mib, kernel_ms)"
    );
}

/// Labs whose teaching text says an error is the finding mark the line that
/// returns it, so the run reports the finding and exits 0 instead of failing.
#[test]
fn shipped_labs_mark_the_errors_they_look_for() {
    let set = gpulab::lab::LabSet::load(&[]);
    for (lab, variant, tag) in [
        ("cuda-cross-stream-free", "unordered", "sync"),
        ("cuda-mixed-free", "async-alloc-sync-free", "sync"),
        ("cuda-double-free", "sync", "again"),
        ("cuda-double-free", "async", "again"),
    ] {
        let lab = set.get(lab).expect("shipped lab");
        let v = lab.find_variant(variant).expect("variant");
        let line = v
            .script
            .iter()
            .find(|s| s.tag.as_deref() == Some(tag))
            .unwrap_or_else(|| panic!("{} [{variant}] has no `{tag}`", lab.id));
        assert!(
            line.expect_error,
            "{} [{variant}] line {}",
            lab.id, line.line
        );
    }
    // The variants that show the safe way mark nothing.
    for (lab, variant) in [
        ("cuda-cross-stream-free", "ordered"),
        ("cuda-mixed-free", "sync-alloc-async-free"),
    ] {
        let lab = set.get(lab).expect("shipped lab");
        let v = lab.find_variant(variant).expect("variant");
        assert!(
            v.script.iter().all(|s| !s.expect_error),
            "{} [{variant}]",
            lab.id
        );
    }
}
