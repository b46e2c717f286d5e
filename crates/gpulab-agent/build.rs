//! Says where this package's source is (`DEP_GPULAB_AGENT_DIR` for gpulab's
//! build script), so gpulab built from its published package can build this
//! shared library from it (gpulab's build.rs).

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    if let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") {
        println!("cargo::metadata=dir={}", dir.to_string_lossy());
    }
}
