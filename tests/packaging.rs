//! The Dockerfile's structure, held to the repository: CI has no Docker engine, so
//! the image is never built there, and what would break it silently (a `COPY` of a
//! file that moved, a renamed package, a Rust image older than `rust-version`, a
//! runtime without the OpenCL loader or NVRTC) is checked here instead. The image
//! itself is checked by `docker/verify-rootfs.sh`, which runs its runtime stage as
//! a debootstrapped Debian 12 root (README, "Docker").

use std::path::Path;
use std::process::Command;

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

fn package(key: &str) -> String {
    manifest()["package"][key].as_str().unwrap().to_string()
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

#[test]
fn cargo_lock_satisfies_locked() {
    assert!(Path::new(ROOT).join("Cargo.lock").is_file());
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--locked", "--offline", "--format-version", "1"])
        .current_dir(ROOT)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "`cargo build --locked` (as the image builds) would fail: {}",
        String::from_utf8_lossy(&out.stderr)
    );
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
