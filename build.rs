//! Builds the watch agent (`crates/gpulab-agent`, a shared library) and tells the
//! compiler where it is, so the gpulab binary carries it (`include_bytes!` in
//! `src/watch/agent.rs`) and `gpulab watch` works from `cargo run`, `cargo
//! install` or a copied binary alike, with nothing to install beside it.
//!
//! The agent is built in release mode into its own target directory next to
//! gpulab's, so the outer build's lock is never needed twice.

// A build script fails by panicking: cargo prints the message and stops.
#![expect(clippy::panic, reason = "a build script reports failure by panicking")]

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let root = PathBuf::from(env("CARGO_MANIFEST_DIR"));
    for path in [
        "crates/gpulab-agent/src",
        "crates/gpulab-agent/Cargo.toml",
        "crates/gpulab-events/src",
        "crates/gpulab-events/Cargo.toml",
        "Cargo.lock",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(path).display());
    }
    let out = PathBuf::from(env("OUT_DIR"));
    // OUT_DIR is <target>/<profile>/build/gpulab-<hash>/out.
    let target_dir = out
        .ancestors()
        .nth(4)
        .map(|t| t.join("gpulab-agent"))
        .unwrap_or_else(|| out.join("gpulab-agent"));
    let target = env("TARGET");
    let host = env("HOST");

    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo
        .args(["build", "--release", "--locked", "-p", "gpulab-agent"])
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        // Lints and wrappers meant for the outer build (clippy) stay there.
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CLIPPY_ARGS")
        .env_remove("CARGO_TARGET_DIR");
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

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("cargo sets {name} for build scripts"))
}
