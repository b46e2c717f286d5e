//! The Dockerfile's structure, held to the repository: CI has no Docker engine, so
//! the image is never built there, and what would break it silently (a `COPY` of a
//! file that moved, a renamed package, a Rust image older than `rust-version`, a
//! runtime without the OpenCL loader or NVRTC) is checked here instead. The image
//! itself is checked by `docker/verify-rootfs.sh`, which runs its runtime stage as
//! a debootstrapped Debian 12 root (README, "Docker").
//!
//! And the crates, held to what `cargo package` needs: one version for all, and
//! no file a crate embeds from outside its own folder (a shared file is a
//! symlink inside it, which `cargo package` follows); `cargo package --list`
//! confirms what the packages hold.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// One instruction: its keyword (upper case) and the rest, continuation lines
/// joined and comments dropped.
#[derive(Debug)]
struct Instr {
    op: String,
    args: String,
}

/// The instructions of one `FROM` to the next.
#[derive(Debug)]
struct Stage {
    image: String,
    name: Option<String>,
    body: Vec<Instr>,
}

impl Stage {
    fn all<'a>(&'a self, op: &str) -> impl Iterator<Item = &'a str> + 'a {
        let op = op.to_string();
        self.body
            .iter()
            .filter(move |i| i.op == op)
            .map(|i| i.args.as_str())
    }

    fn last(&self, op: &str) -> Option<&str> {
        self.all(op).last()
    }
}

fn instructions(text: &str) -> Vec<Instr> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('#') || (t.is_empty() && pending.is_empty()) {
            continue;
        }
        match t.strip_suffix('\\') {
            Some(head) => {
                pending.push_str(head);
                pending.push(' ');
            }
            None => {
                pending.push_str(t);
                let (op, args) = pending
                    .split_once(char::is_whitespace)
                    .unwrap_or((&pending, ""));
                out.push(Instr {
                    op: op.to_ascii_uppercase(),
                    args: args.split_whitespace().collect::<Vec<_>>().join(" "),
                });
                pending.clear();
            }
        }
    }
    assert!(
        pending.is_empty(),
        "the Dockerfile ends inside a continued line"
    );
    out
}

/// The global `ARG`s (before the first `FROM`) and the stages.
fn dockerfile() -> (Vec<String>, Vec<Stage>) {
    let text = std::fs::read_to_string(Path::new(ROOT).join("Dockerfile")).expect("a Dockerfile");
    let mut args = Vec::new();
    let mut stages: Vec<Stage> = Vec::new();
    for i in instructions(&text) {
        if i.op == "FROM" {
            let words: Vec<&str> = i.args.split_whitespace().collect();
            let name = match words.as_slice() {
                [_, as_, n] if as_.eq_ignore_ascii_case("as") => Some(n.to_string()),
                _ => None,
            };
            stages.push(Stage {
                image: words[0].to_string(),
                name,
                body: Vec::new(),
            });
        } else if let Some(s) = stages.last_mut() {
            s.body.push(i);
        } else {
            args.push(i.args);
        }
    }
    (args, stages)
}

fn stage<'a>(stages: &'a [Stage], name: &str) -> &'a Stage {
    stages
        .iter()
        .find(|s| s.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("no stage `{name}`"))
}

/// The stage the image is: the last one.
fn runtime(stages: &[Stage]) -> &Stage {
    stages.last().expect("at least one FROM")
}

fn manifest() -> toml::Table {
    let text = std::fs::read_to_string(Path::new(ROOT).join("Cargo.toml")).unwrap();
    text.parse().unwrap()
}

/// A `[package]` key of the root manifest.
fn package(key: &str) -> String {
    let root = manifest();
    let package = root["package"].as_table().unwrap();
    inherited(package, &root, key).to_string()
}

/// `key` of a member's `[package]`; `key.workspace = true` takes it from the
/// root's `[workspace.package]`, as Cargo does.
fn inherited<'a>(package: &'a toml::Table, root: &'a toml::Table, key: &str) -> &'a str {
    let value = &package[key];
    let value = match value.get("workspace").and_then(toml::Value::as_bool) {
        Some(true) => &root["workspace"]["package"][key],
        _ => value,
    };
    value
        .as_str()
        .unwrap_or_else(|| panic!("[package] {key}: {value}"))
}

/// `(major, minor)` of `1.88` or `1.88.0`; a bare major (`1`) is the floating tag
/// that always names the newest stable release of that major.
fn version(v: &str) -> (u32, Option<u32>) {
    let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap());
    (parts.next().unwrap(), parts.next())
}

/// `COPY [--flags] SRC… DEST`: the flags and the sources.
fn copy_parts(args: &str) -> (Vec<&str>, Vec<&str>) {
    let words: Vec<&str> = args.split_whitespace().collect();
    let (flags, paths): (Vec<&str>, Vec<&str>) = words.iter().partition(|w| w.starts_with("--"));
    let sources = paths[..paths.len().saturating_sub(1)].to_vec();
    (flags, sources)
}

#[test]
fn every_copy_from_the_context_exists_and_is_not_ignored() {
    let ignored = std::fs::read_to_string(Path::new(ROOT).join(".dockerignore")).unwrap();
    let ignored: Vec<&str> = ignored
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    for want in ["target", ".git", ".dev"] {
        assert!(ignored.contains(&want), ".dockerignore must exclude {want}");
    }
    let (_, stages) = dockerfile();
    let mut copies = 0;
    for s in &stages {
        for args in s.all("COPY") {
            let (flags, sources) = copy_parts(args);
            if flags.iter().any(|f| f.starts_with("--from=")) {
                continue;
            }
            for src in sources {
                copies += 1;
                let path = Path::new(ROOT).join(src);
                assert!(path.exists(), "COPY {src}: no such path in the repository");
                let first = src.trim_start_matches("./").split('/').next().unwrap();
                assert!(
                    src == "." || !ignored.contains(&first),
                    "COPY {src}: .dockerignore leaves it out of the context"
                );
            }
        }
    }
    assert!(
        copies > 0,
        "the Dockerfile copies nothing from the repository"
    );
}

#[test]
fn the_builder_uses_a_rust_new_enough_for_rust_version() {
    let (_, stages) = dockerfile();
    let builder = stage(&stages, "builder");
    let tag = builder.image.strip_prefix("rust:").unwrap_or_else(|| {
        panic!(
            "the builder is not an official rust image: {}",
            builder.image
        )
    });
    let (major, minor) = version(tag.split('-').next().unwrap());
    let (need_major, need_minor) = version(&package("rust-version"));
    let ok = match minor {
        None => major >= need_major, // `rust:1-…` floats to the newest 1.x
        Some(m) => (major, m) >= (need_major, need_minor.unwrap_or(0)),
    };
    assert!(
        ok,
        "{} is older than rust-version {}",
        builder.image,
        package("rust-version")
    );
}

#[test]
fn the_runtime_copies_the_binary_cargo_builds() {
    let (_, stages) = dockerfile();
    let builder = stage(&stages, "builder");
    let name = package("name");
    let build = builder
        .all("RUN")
        .find(|r| r.contains("cargo build"))
        .expect("the builder runs cargo build");
    assert!(
        build.contains("--release") && build.contains("--locked"),
        "{build}"
    );
    let built = format!("target/release/{name}");
    let installed = format!("/usr/local/bin/{name}");
    assert!(
        build.contains(&format!("install -m 0755 {built} {installed}")),
        "the builder must install {built} (cargo's output for package `{name}`) as {installed}: {build}"
    );
    let rt = runtime(&stages);
    assert!(
        rt.all("COPY")
            .any(|c| c == format!("--from=builder {installed} {installed}")),
        "the runtime stage must copy {installed} from the builder"
    );
    assert_eq!(
        rt.last("ENTRYPOINT"),
        Some(format!("[\"{name}\"]").as_str())
    );
}

/// One `[[package]]` of `Cargo.lock`: what the resolver chose.
#[derive(Debug)]
struct Locked {
    name: String,
    version: semver::Version,
    /// Registry or git source; `None` for a workspace member or a path crate.
    source: Option<String>,
    /// Entries as Cargo writes them: `name`, `name version` or `name version (source)`.
    deps: Vec<String>,
}

fn lock_file() -> Vec<Locked> {
    let text = std::fs::read_to_string(Path::new(ROOT).join("Cargo.lock")).unwrap();
    let lock: toml::Table = toml::from_str(&text).expect("Cargo.lock is TOML");
    let str_of = |t: &toml::Table, k: &str| t.get(k).and_then(|v| v.as_str()).map(String::from);
    lock["package"]
        .as_array()
        .expect("[[package]] entries")
        .iter()
        .map(|p| {
            let p = p.as_table().expect("a package table");
            Locked {
                name: str_of(p, "name").expect("a name"),
                version: semver::Version::parse(&str_of(p, "version").expect("a version"))
                    .expect("a semver version"),
                source: str_of(p, "source"),
                deps: p
                    .get("dependencies")
                    .and_then(|d| d.as_array())
                    .map(|d| {
                        d.iter()
                            .filter_map(|e| e.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default(),
            }
        })
        .collect()
}

/// A dependency a workspace manifest asks for: the package's name (after a
/// `package = ` rename), its version requirement, and whether it is a path crate.
#[derive(Debug)]
struct Wanted {
    package: String,
    req: Option<semver::VersionReq>,
    path: bool,
}

/// Every dependency of one manifest, in every table Cargo resolves for the lock:
/// normal, dev and build, for every target (the lock is the same on every platform).
/// A `name = { workspace = true }` entry takes its spec from the root's
/// `[workspace.dependencies]`, as Cargo does.
fn wanted(manifest: &toml::Table, workspace: &toml::Table) -> Vec<Wanted> {
    let kinds = ["dependencies", "dev-dependencies", "build-dependencies"];
    let mut tables: Vec<&toml::Table> = kinds
        .iter()
        .filter_map(|k| manifest.get(*k).and_then(|t| t.as_table()))
        .collect();
    if let Some(targets) = manifest.get("target").and_then(|t| t.as_table()) {
        for target in targets.values().filter_map(|t| t.as_table()) {
            tables.extend(
                kinds
                    .iter()
                    .filter_map(|k| target.get(*k).and_then(|t| t.as_table())),
            );
        }
    }
    let mut out = Vec::new();
    for (name, spec) in tables.iter().flat_map(|t| t.iter()) {
        let inherited = spec
            .get("workspace")
            .and_then(toml::Value::as_bool)
            .unwrap_or(false);
        let spec = if inherited {
            workspace
                .get(name)
                .unwrap_or_else(|| panic!("{name}: not in [workspace.dependencies]"))
        } else {
            spec
        };
        let (package, req, path) = match spec {
            toml::Value::String(req) => (name.clone(), Some(req.clone()), false),
            toml::Value::Table(t) => (
                t.get("package")
                    .and_then(|p| p.as_str())
                    .unwrap_or(name)
                    .to_string(),
                t.get("version").and_then(|v| v.as_str()).map(String::from),
                t.contains_key("path"),
            ),
            other => panic!("dependency {name}: unexpected {other}"),
        };
        let req = req.map(|r| {
            semver::VersionReq::parse(&r).unwrap_or_else(|e| panic!("{name} = {r:?}: {e}"))
        });
        out.push(Wanted { package, req, path });
    }
    out
}

/// The workspace's members, a `crates/*` glob expanded to the folders with a
/// manifest.
fn members(root: &toml::Table) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for m in root["workspace"]["members"]
        .as_array()
        .expect("workspace members")
        .iter()
        .filter_map(|m| m.as_str())
    {
        match m.strip_suffix("/*") {
            Some(dir) => {
                let mut found: Vec<_> = std::fs::read_dir(Path::new(ROOT).join(dir))
                    .expect("the members' folder")
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.join("Cargo.toml").is_file())
                    .collect();
                found.sort();
                out.extend(found);
            }
            None => out.push(Path::new(ROOT).join(m)),
        }
    }
    out
}

/// The Docker image builds with `cargo build --locked`, which fails when
/// `Cargo.lock` no longer satisfies a manifest. This checks the same from the
/// files alone (no cargo, no network, no cargo cache): every workspace member is
/// locked at its version with exactly the dependencies its manifest names, and
/// each of those is locked at a version its requirement accepts. What a registry
/// crate depends on is fixed by its published manifest, so the lock's own entries
/// for it cannot go stale. `.ci/run` also runs `cargo fetch --locked` against the
/// registries, the image's own check, on an empty cargo home.
#[test]
fn cargo_lock_satisfies_locked() {
    let lock = lock_file();
    let root = manifest();
    let members = members(&root);
    assert!(members.iter().any(|m| m == Path::new(ROOT)), "{members:?}");
    assert!(
        members.len() > 2,
        "the crates/* glob was expanded: {members:?}"
    );
    let empty = toml::Table::new();
    let workspace = root["workspace"]
        .get("dependencies")
        .and_then(|d| d.as_table())
        .unwrap_or(&empty);
    for member in members {
        let path = member.join("Cargo.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        let manifest: toml::Table = toml::from_str(&text).unwrap();
        let package = manifest["package"].as_table().expect("[package]");
        let (name, version) = (
            package["name"].as_str().expect("a name"),
            inherited(package, &root, "version"),
        );
        let entry = lock
            .iter()
            .find(|p| p.name == name && p.source.is_none())
            .unwrap_or_else(|| panic!("Cargo.lock has no entry for the member {name}"));
        assert_eq!(
            entry.version.to_string(),
            version,
            "{name}: locked at another version"
        );
        let locked_names: std::collections::BTreeSet<&str> = entry
            .deps
            .iter()
            .map(|d| d.split(' ').next().unwrap_or(d))
            .collect();
        let wants = wanted(&manifest, workspace);
        let wanted_names: std::collections::BTreeSet<&str> =
            wants.iter().map(|w| w.package.as_str()).collect();
        assert_eq!(
            locked_names,
            wanted_names,
            "{name}: Cargo.lock's dependencies differ from {}; `cargo build --locked` would fail",
            path.display()
        );
        for w in &wants {
            // An entry names a version only when two versions of the crate are locked.
            let locked: Vec<&Locked> = entry
                .deps
                .iter()
                .filter(|d| d.split(' ').next() == Some(w.package.as_str()))
                .map(|d| {
                    let version = d.split(' ').nth(1);
                    lock.iter()
                        .find(|p| {
                            p.name == w.package
                                && version.is_none_or(|v| p.version.to_string() == v)
                        })
                        .unwrap_or_else(|| panic!("{d} is not in Cargo.lock"))
                })
                .collect();
            for p in &locked {
                assert_eq!(
                    p.source.is_none(),
                    w.path,
                    "{name}: {} is locked from {:?}",
                    w.package,
                    p.source
                );
            }
            if let Some(req) = &w.req {
                assert!(
                    locked.iter().any(|p| req.matches(&p.version)),
                    "{name}: {} {req} is locked at {:?}; `cargo build --locked` would fail",
                    w.package,
                    locked
                        .iter()
                        .map(|p| p.version.to_string())
                        .collect::<Vec<_>>()
                );
            }
        }
    }
}

#[test]
fn the_runtime_has_the_opencl_loader_and_the_driver_capabilities() {
    let (_, stages) = dockerfile();
    let rt = runtime(&stages);
    assert!(rt.image.starts_with("debian:"), "{}", rt.image);
    assert!(
        rt.all("RUN")
            .any(|r| r.contains("apt-get install") && r.contains("ocl-icd-libopencl1")),
        "the runtime stage must install the OpenCL ICD loader (ocl-icd-libopencl1)"
    );
    let caps = rt
        .all("ENV")
        .find_map(|e| e.strip_prefix("NVIDIA_DRIVER_CAPABILITIES="))
        .expect("ENV NVIDIA_DRIVER_CAPABILITIES");
    let caps: Vec<&str> = caps.split(',').collect();
    // compute: libcuda and libnvidia-opencl; utility: libnvidia-ml (NVML).
    for want in ["compute", "utility"] {
        assert!(
            caps.contains(&want) || caps.contains(&"all"),
            "{caps:?} lacks {want}"
        );
    }
    let user = rt.last("USER").expect("a USER");
    let name = user.split(':').next().unwrap();
    assert!(
        name != "root" && name != "0",
        "the image runs as root: USER {user}"
    );
}

#[test]
fn the_runtime_ships_an_nvrtc_cudarc_loads() {
    let (args, stages) = dockerfile();
    let wheel = args
        .iter()
        .find_map(|a| a.strip_prefix("NVRTC_WHEEL="))
        .expect("a global ARG NVRTC_WHEEL=");
    // nvidia-cuda-nvrtc==13.0.88 ships libnvrtc.so.13; nvidia-cuda-nvrtc-cu12==… .12
    let (package, version) = wheel.split_once("==").expect("a pinned wheel");
    let major = match package.strip_prefix("nvidia-cuda-nvrtc-cu") {
        Some(m) => m.to_string(),
        None => version.split('.').next().unwrap().to_string(),
    };
    let lib = format!("libnvrtc.so.{major}");
    assert!(
        cudarc::get_lib_name_candidates("nvrtc").contains(&lib),
        "{wheel} ships {lib}, which cudarc never tries to load"
    );
    let rt = runtime(&stages);
    let dir = rt
        .all("COPY")
        .find_map(|c| c.strip_prefix("--from=nvrtc /nvrtc/lib/ "))
        .expect("the runtime copies the nvrtc stage's libraries");
    assert!(
        rt.all("RUN").any(
            |r| r.contains(&format!("echo {}", dir.trim_end_matches('/')))
                && r.contains("ldconfig")
        ),
        "{dir} must be on the dynamic linker's path (an ld.so.conf.d entry and ldconfig)"
    );
}

#[test]
fn the_shipped_recordings_sit_where_the_binary_looks_for_them() {
    let (_, stages) = dockerfile();
    let workdir = stage(&stages, "builder")
        .last("WORKDIR")
        .expect("the builder's WORKDIR");
    let rt = runtime(&stages);
    // The dashboard looks under the working directory, then under the folder the
    // binary was built in (CARGO_MANIFEST_DIR): the builder's WORKDIR.
    for folder in gpulab::tui::recordings::FOLDERS
        .iter()
        .filter(|f| f.starts_with("assets/"))
    {
        let want = format!("{folder} {workdir}/{folder}");
        assert!(
            rt.all("COPY").any(|c| c == want),
            "the runtime stage must `COPY {want}`"
        );
    }
}

/// The image says what it is and under which licence, as registries and
/// scanners read it (OCI image-spec annotations), matching the manifest.
#[test]
fn the_runtime_is_labelled_with_what_it_is_and_its_licence() {
    let (_, stages) = dockerfile();
    let labels: String = runtime(&stages).all("LABEL").collect::<Vec<_>>().join(" ");
    assert!(
        labels.contains("org.opencontainers.image.title=\"gpulab\""),
        "{labels}"
    );
    assert!(
        labels.contains(&format!(
            "org.opencontainers.image.licenses=\"{}\"",
            package("license")
        )),
        "{labels}"
    );
    // And the licences themselves: gpulab's, every crate's, the font's.
    let copied: Vec<&str> = runtime(&stages).all("COPY").collect();
    for file in [
        "LICENSE-MIT",
        "LICENSE-APACHE",
        "docs/THIRD-PARTY-LICENSES.md",
        "assets/fonts/DejaVuSans.LICENSE",
    ] {
        assert!(
            copied
                .iter()
                .any(|c| c.split_whitespace().any(|w| w == file)),
            "the image carries no {file}: {copied:?}"
        );
    }
}

/// Every `include_str!`/`include_bytes!` of a literal path, in every member's
/// sources, names a file inside that member's folder (lexically, as the packaged
/// crate will have it: a symlinked folder or file inside the member counts), so
/// `cargo package` takes it along and the published crate builds.
#[test]
fn every_embedded_file_is_inside_its_crate() {
    let root = manifest();
    let mut seen = 0;
    for member in members(&root) {
        let mut stack = vec![member.join("src")];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                if path.extension().is_none_or(|e| e != "rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                for literal in embedded(&text) {
                    seen += 1;
                    let mut at = path.parent().unwrap().to_path_buf();
                    for part in Path::new(literal).components() {
                        match part {
                            std::path::Component::ParentDir => {
                                at.pop();
                            }
                            other => at.push(other),
                        }
                    }
                    assert!(
                        at.starts_with(&member),
                        "{} embeds {literal}, outside {}: `cargo package` leaves it \
                         behind (link it into the crate's folder)",
                        path.display(),
                        member.display()
                    );
                    assert!(at.exists(), "{}: {literal} is missing", path.display());
                }
            }
        }
    }
    assert!(seen > 20, "the labs, kernels and font were found: {seen}");
}

/// The literal paths of `include_str!("…")` and `include_bytes!("…")` in `text`.
fn embedded(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for macro_name in ["include_str!(\"", "include_bytes!(\""] {
        for (at, _) in text.match_indices(macro_name) {
            let rest = &text[at + macro_name.len()..];
            if let Some(end) = rest.find('"') {
                out.push(&rest[..end]);
            }
        }
    }
    out
}

/// `cargo package --list` (no build, no network): every crate packages, and
/// holds what it embeds, through the symlinks, gpulab-source its build script,
/// and gpulab its labs and recordings but not the tests.
#[test]
fn every_crate_packages_with_what_it_embeds() {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "package",
            "--workspace",
            "--list",
            "--allow-dirty",
            "--offline",
        ])
        .current_dir(ROOT)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "cargo package --list: {stderr}");
    let listed = String::from_utf8_lossy(&out.stdout);
    for file in [
        "labs/cl-finish.toml",
        "kernels/spin.cl",
        "fonts/DejaVuSans.ttf",
        "fonts/DejaVuSans.LICENSE",
        "build.rs",
        "assets/recordings/nvidia-h100/cl-finish--finish.jsonl",
        "docs/gpulab.schema.json",
        "LICENSE-MIT",
    ] {
        assert!(
            listed.lines().any(|l| l == file),
            "no package holds {file}:\n{listed}"
        );
    }
    assert!(
        !listed.lines().any(|l| l.starts_with("tests/fixtures/")),
        "gpulab's package leaves the test fixtures behind"
    );
}

/// Every member's manifest, by its package's name.
fn member_manifests(root: &toml::Table) -> BTreeMap<String, toml::Table> {
    members(root)
        .iter()
        .map(|member| {
            let text = std::fs::read_to_string(member.join("Cargo.toml")).unwrap();
            let manifest: toml::Table = toml::from_str(&text).unwrap();
            let name = manifest["package"]["name"].as_str().unwrap().to_string();
            (name, manifest)
        })
        .collect()
}

/// A manifest's dependency tables outside its dev-dependencies, every target's.
fn normal_tables(manifest: &toml::Table) -> Vec<&toml::Table> {
    let mut tables: Vec<&toml::Table> = Vec::new();
    for kind in ["dependencies", "build-dependencies"] {
        tables.extend(manifest.get(kind).and_then(|t| t.as_table()));
        if let Some(targets) = manifest.get("target").and_then(|t| t.as_table()) {
            tables.extend(
                targets
                    .values()
                    .filter_map(|t| t.get(kind).and_then(|d| d.as_table())),
            );
        }
    }
    tables
}

/// (member, dependency) of every optional dependency turned on by a feature a
/// member's `default` or another member's normal dependency on it asks for (its
/// `features`, with those of its `[workspace.dependencies]` entry), features that
/// name other features or members' features followed: `dist/licences.py`'s rule.
fn optional_on(
    manifests: &BTreeMap<String, toml::Table>,
    root: &toml::Table,
) -> BTreeSet<(String, String)> {
    let strings = |v: Option<&toml::Value>| -> Vec<String> {
        v.and_then(|v| v.as_array())
            .into_iter()
            .flatten()
            .filter_map(|f| f.as_str().map(str::to_string))
            .collect()
    };
    let features_of = |member: &str| manifests[member].get("features").and_then(|f| f.as_table());
    let inherited = root["workspace"].get("dependencies");
    let mut asked: Vec<(String, String)> = manifests
        .keys()
        .map(|m| (m.clone(), "default".to_string()))
        .collect();
    for manifest in manifests.values() {
        for (name, spec) in normal_tables(manifest).iter().flat_map(|t| t.iter()) {
            if !manifests.contains_key(name) {
                continue;
            }
            let mut features = strings(spec.get("features"));
            if spec.get("workspace").and_then(toml::Value::as_bool) == Some(true) {
                features.extend(strings(
                    inherited.and_then(|d| d.get(name)?.get("features")),
                ));
            }
            asked.extend(features.into_iter().map(|f| (name.clone(), f)));
        }
    }
    let (mut seen, mut on) = (BTreeSet::new(), BTreeSet::new());
    while let Some((member, feature)) = asked.pop() {
        if !seen.insert((member.clone(), feature.clone())) {
            continue;
        }
        let items = strings(features_of(&member).and_then(|f| f.get(&feature)));
        for item in items {
            let is_feature = features_of(&member).is_some_and(|f| f.contains_key(&item));
            match (item.strip_prefix("dep:"), item.split_once('/')) {
                (Some(dep), _) => _ = on.insert((member.clone(), dep.to_string())),
                (None, Some((dep, sub))) => {
                    if !dep.ends_with('?') {
                        on.insert((member.clone(), dep.to_string()));
                    }
                    let dep = dep.trim_end_matches('?');
                    if manifests.contains_key(dep) {
                        asked.push((dep.to_string(), sub.to_string()));
                    }
                }
                (None, None) if is_feature => asked.push((member.clone(), item)),
                (None, None) => _ = on.insert((member.clone(), item)),
            }
        }
    }
    on
}

/// `docs/THIRD-PARTY-LICENSES.md` (shipped in the release archives and the
/// image) lists exactly the crates `dist/licences.py` takes from `Cargo.lock`:
/// those the members depend on outside their dev-dependencies (an optional one
/// only when a feature they turn on names it: `optional_on`), and everything
/// those depend on as the lock records it. A dependency added or updated
/// without running the script again fails here.
#[test]
fn the_third_party_licences_list_every_crate_the_lock_ships() {
    let lock = lock_file();
    let root = manifest();
    let local: BTreeSet<&str> = lock
        .iter()
        .filter(|p| p.source.is_none())
        .map(|p| p.name.as_str())
        .collect();
    let versions_of = |name: &str| -> Vec<(String, String)> {
        lock.iter()
            .filter(|p| p.name == name)
            .map(|p| (p.name.clone(), p.version.to_string()))
            .collect()
    };
    let manifests = member_manifests(&root);
    let on = optional_on(&manifests, &root);
    let mut stack: Vec<(String, String)> = Vec::new();
    for (member, manifest) in &manifests {
        for (name, spec) in normal_tables(manifest).iter().flat_map(|t| t.iter()) {
            let optional = spec.get("optional").and_then(toml::Value::as_bool) == Some(true);
            if optional && !on.contains(&(member.clone(), name.clone())) {
                continue;
            }
            let name = spec.get("package").and_then(|p| p.as_str()).unwrap_or(name);
            if !local.contains(name) {
                stack.extend(versions_of(name));
            }
        }
    }
    let mut shipped: BTreeSet<(String, String)> = BTreeSet::new();
    while let Some(key) = stack.pop() {
        if !shipped.insert(key.clone()) {
            continue;
        }
        let entry = lock
            .iter()
            .find(|p| p.name == key.0 && p.version.to_string() == key.1)
            .unwrap();
        for dep in &entry.deps {
            let mut parts = dep.split(' ');
            let name = parts.next().unwrap();
            if local.contains(name) {
                continue;
            }
            match parts.next() {
                Some(version) => stack.push((name.to_string(), version.to_string())),
                None => stack.extend(versions_of(name)),
            }
        }
    }
    let text =
        std::fs::read_to_string(Path::new(ROOT).join("docs/THIRD-PARTY-LICENSES.md")).unwrap();
    let listed: BTreeSet<(String, String)> = text
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.strip_prefix("| ")?.split(" | ").collect();
            (cells.len() == 3 && cells[0] != "crate" && !cells[0].starts_with("---"))
                .then(|| (cells[0].to_string(), cells[1].to_string()))
        })
        .collect();
    assert!(
        shipped.len() > 100,
        "the closure was walked: {}",
        shipped.len()
    );
    let missing: Vec<_> = shipped.difference(&listed).collect();
    let stale: Vec<_> = listed.difference(&shipped).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/THIRD-PARTY-LICENSES.md is not the lock's: missing {missing:?}, stale {stale:?}; \
         run `cargo fetch --locked && python3 dist/licences.py`"
    );
}
