//! Builds the watch agent (`crates/gpulab-agent`, a shared library) and tells the
//! compiler where it is, so the gpulab binary carries it (`include_bytes!` in
//! `crates/gpulab-source/src/watch/agent.rs`) and `gpulab watch` works from `cargo run`, `cargo
//! install` or a copied binary alike, with nothing to install beside it.
//!
//! A release build (`cargo build --release`, `cargo install`, the release
//! archives) builds the agent in release mode into its own target directory
//! next to gpulab's, so the outer build's lock is never needed twice.
//!
//! A debug build in the workspace (`cargo build`, `cargo test`, `cargo
//! clippy`) builds no second agent: cargo already builds the agent's shared
//! library as the dependency it is (`<target>/debug/deps/libgpulab_agent.so`),
//! and gpulab reads it from there when a watch starts (`cfg(agent_beside)`).
//! That saves every debug and CI build a release build of the agent and its
//! dependencies; a debug binary copied elsewhere says where its agent should be. In the workspace it
//! is built as the member it is. From this crate's published package (`cargo install
//! gpulab`, or `cargo package`'s check of it) there is no workspace: the agent and
//! the events crate are dependencies of gpulab whose build scripts say where their
//! sources were unpacked (`DEP_GPULAB_AGENT_DIR`, `DEP_GPULAB_EVENTS_DIR`), and
//! the agent is built from a copy of its package, against that events crate and
//! the versions of gpulab's own `Cargo.lock`.

// A build script fails by panicking: cargo prints the message and stops.
#![expect(clippy::panic, reason = "a build script reports failure by panicking")]

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(agent_beside)");
    let root = PathBuf::from(env("CARGO_MANIFEST_DIR"));
    // The workspace this crate is a member of: two folders up.
    let workspace = root.join("../..");
    let out = PathBuf::from(env("OUT_DIR"));
    // OUT_DIR is <target>/<profile>/build/gpulab-source-<hash>/out.
    let target_dir = out
        .ancestors()
        .nth(4)
        .map(|t| t.join("gpulab-agent"))
        .unwrap_or_else(|| out.join("gpulab-agent"));
    // `cargo package` keeps the manifest as written beside the one it rewrote.
    let packaged = root.join("Cargo.toml.orig").exists();
    if !packaged && env("PROFILE") == "debug" {
        // OUT_DIR is <target>/[<triple>/]debug/build/gpulab-source-<hash>/out;
        // the dependency's library is in that debug folder's deps/.
        let debug = out.ancestors().nth(3).unwrap_or(&out);
        let lib = debug.join("deps").join("libgpulab_agent.so");
        println!("cargo:rerun-if-changed=build.rs");
        println!("cargo:rustc-cfg=agent_beside");
        println!("cargo:rustc-env=GPULAB_AGENT_LIB={}", lib.display());
        return;
    }
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo.arg("build").arg("--release");
    if packaged {
        let manifest = standalone_agent(&root, &out);
        cargo.arg("--manifest-path").arg(manifest);
    } else {
        for path in [
            "crates/gpulab-agent/src",
            "crates/gpulab-agent/Cargo.toml",
            "crates/gpulab-events/src",
            "crates/gpulab-events/Cargo.toml",
            "Cargo.lock",
        ] {
            println!("cargo:rerun-if-changed={}", workspace.join(path).display());
        }
        cargo
            .args(["--locked", "-p", "gpulab-agent", "--manifest-path"])
            .arg(workspace.join("Cargo.toml"));
    }
    cargo
        .arg("--target-dir")
        .arg(&target_dir)
        // Lints and wrappers meant for the outer build (clippy) stay there.
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CLIPPY_ARGS")
        .env_remove("CARGO_TARGET_DIR");
    let target = env("TARGET");
    let host = env("HOST");
    if target != host {
        cargo.args(["--target", &target]);
    }
    let status = cargo
        .status()
        .unwrap_or_else(|e| panic!("could not run cargo to build the watch agent: {e}"));
    assert!(
        status.success(),
        "building the watch agent (crates/gpulab-agent) failed"
    );

    let mut lib = target_dir;
    if target != host {
        lib.push(&target);
    }
    lib.push("release");
    lib.push("libgpulab_agent.so");
    assert!(
        lib.exists(),
        "the watch agent was built but {} is missing",
        lib.display()
    );
    println!("cargo:rustc-env=GPULAB_AGENT_LIB={}", lib.display());
}

/// The agent's package, copied under `out` as a workspace of its own whose
/// events crate is the one gpulab is built with, locked to gpulab's versions;
/// its manifest's path.
fn standalone_agent(root: &Path, out: &Path) -> PathBuf {
    let agent = PathBuf::from(env("DEP_GPULAB_AGENT_DIR"));
    let events = PathBuf::from(env("DEP_GPULAB_EVENTS_DIR"));
    for dir in [&agent, &events] {
        println!("cargo:rerun-if-changed={}", dir.display());
    }
    let copy = out.join("gpulab-agent");
    let _ = std::fs::remove_dir_all(&copy);
    copy_dir(&agent, &copy);
    let manifest = copy.join("Cargo.toml");
    let mut text = std::fs::read_to_string(&manifest)
        .unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
    // TOML strings: a path's backslashes and quotes escaped.
    let events = events
        .display()
        .to_string()
        .replace('\\', "\\\\")
        .replace('"', "\\\"");
    text.push_str(&format!(
        "\n[workspace]\n\n[patch.crates-io]\ngpulab-events = {{ path = \"{events}\" }}\n"
    ));
    write(&manifest, &text);
    if let Ok(lock) = std::fs::read(root.join("Cargo.lock")) {
        write(&copy.join("Cargo.lock"), &lock);
    }
    manifest
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("{}: {e}", to.display()));
    let entries = std::fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    for entry in entries {
        let entry = entry.unwrap_or_else(|e| panic!("{}: {e}", from.display()));
        let path = entry.path();
        let dest = to.join(entry.file_name());
        if path.is_dir() {
            copy_dir(&path, &dest);
        } else {
            std::fs::copy(&path, &dest).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
    }
}

fn write(path: &Path, contents: impl AsRef<[u8]>) {
    std::fs::write(path, contents).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("cargo sets {name} for build scripts"))
}
