//! Says where this package's source is (`DEP_GPULAB_EVENTS_DIR` for gpulab's
//! build script): gpulab built from its published package builds the watch
//! agent against this very crate (gpulab's build.rs).

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    if let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") {
        println!("cargo::metadata=dir={}", dir.to_string_lossy());
    }
}
