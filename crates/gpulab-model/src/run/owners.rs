//! Who made an object: the program's own code, or a library that called the
//! driver for it (PyTorch's allocator, NCCL, cuBLAS, XLA, CuPy), told from
//! the file of the calling frame the agent took with each creating call.

use gpulab_events::{Frame, Framework};

/// Libraries that call the driver for memory of their own, by the start of
/// their file's name (or a part of its path), and what they are called.
const LIBRARIES: [(&str, Owner); 16] = [
    ("libc10_cuda", Owner::Pytorch),
    ("libtorch_cuda", Owner::Pytorch),
    ("libtorch", Owner::Pytorch),
    ("libc10", Owner::Pytorch),
    ("libnccl", Owner::Nccl),
    ("libcublas", Owner::Cublas),
    ("libcudnn", Owner::Cudnn),
    ("libcufft", Owner::CudaLibrary),
    ("libcusparse", Owner::CudaLibrary),
    ("libcusolver", Owner::CudaLibrary),
    ("libcurand", Owner::CudaLibrary),
    ("libnvrtc", Owner::CudaLibrary),
    ("xla_", Owner::Xla),
    ("libxla", Owner::Xla),
    ("pjrt", Owner::Xla),
    ("cupy", Owner::Cupy),
];

/// Who made an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Owner {
    /// The program's own code (or a library this does not name).
    Program,
    Pytorch,
    Nccl,
    Cublas,
    Cudnn,
    /// Another CUDA library (cuFFT, cuSPARSE, cuSOLVER, cuRAND, NVRTC).
    CudaLibrary,
    Xla,
    Cupy,
    /// No stack was taken (`--backtrace=off`), or none past the driver.
    Unknown,
}

impl Owner {
    pub const ALL: [Owner; 9] = [
        Owner::Program,
        Owner::Pytorch,
        Owner::Nccl,
        Owner::Cublas,
        Owner::Cudnn,
        Owner::CudaLibrary,
        Owner::Xla,
        Owner::Cupy,
        Owner::Unknown,
    ];

    /// The owner its JSON name names.
    pub fn parse(name: &str) -> Option<Owner> {
        Owner::ALL.into_iter().find(|o| o.as_str() == name)
    }

    /// Who made an object, from its stack (the calling frame first).
    pub fn of(frames: &[Frame]) -> Owner {
        // The native caller of the API: a Python line above it says where
        // the program was, not which library called the driver.
        let Some(caller) = frames.iter().find(|f| !f.python) else {
            return Owner::Unknown;
        };
        let path = caller.module.as_str();
        let file = path.rsplit('/').next().unwrap_or(path);
        LIBRARIES
            .iter()
            .find(|(name, _)| file.starts_with(name) || path.contains(&format!("/{name}")))
            .map_or(Owner::Program, |(_, owner)| *owner)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Owner::Program => "program",
            Owner::Pytorch => "pytorch",
            Owner::Nccl => "nccl",
            Owner::Cublas => "cublas",
            Owner::Cudnn => "cudnn",
            Owner::CudaLibrary => "cuda_library",
            Owner::Xla => "xla",
            Owner::Cupy => "cupy",
            Owner::Unknown => "unknown",
        }
    }

    /// Its name in prose.
    pub fn label(self) -> &'static str {
        match self {
            Owner::Program => "the program's own code",
            Owner::Pytorch => "PyTorch",
            Owner::Nccl => "NCCL",
            Owner::Cublas => "cuBLAS",
            Owner::Cudnn => "cuDNN",
            Owner::CudaLibrary => "a CUDA library",
            Owner::Xla => "XLA (JAX)",
            Owner::Cupy => "CuPy",
            Owner::Unknown => "not known (no stack)",
        }
    }

    /// The prose name of the owner a report names by its JSON name (anything
    /// else reads as not known).
    pub fn label_of(name: &str) -> &'static str {
        Owner::parse(name).unwrap_or(Owner::Unknown).label()
    }

    /// The framework whose allocator this library is, when it reports its
    /// own figures.
    /// A CUDA library whose handles keep what they made (cuBLAS's and
    /// cuDNN's workspaces, cuFFT's plans) until they are destroyed, which
    /// frameworks leave to the exit.
    pub fn keeps_for_its_handles(self) -> bool {
        matches!(self, Owner::Cublas | Owner::Cudnn | Owner::CudaLibrary)
    }

    pub fn framework(self) -> Option<Framework> {
        match self {
            Owner::Pytorch => Some(Framework::Pytorch),
            Owner::Xla => Some(Framework::Jax),
            Owner::Cupy => Some(Framework::Cupy),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn called_from(module: &str) -> Vec<Frame> {
        vec![Frame {
            module: module.into(),
            address: 0x1234,
            build_id: None,
            function: None,
            location: None,
            python: false,
        }]
    }

    /// A Python program's stack starts at its own line; the library that
    /// called the driver is the first native frame after it.
    #[test]
    fn a_python_line_above_the_caller_leaves_the_owner_to_the_caller() {
        let mut frames = vec![Frame {
            module: String::new(),
            address: 0,
            build_id: None,
            function: Some("step".into()),
            location: Some("/home/u/train.py:12".into()),
            python: true,
        }];
        assert_eq!(Owner::of(&frames), Owner::Unknown);
        frames.extend(called_from(
            "/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so",
        ));
        assert_eq!(Owner::of(&frames), Owner::Pytorch);
    }

    #[test]
    fn the_calling_file_names_the_owner() {
        for (module, owner) in [
            (
                "/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so",
                Owner::Pytorch,
            ),
            (
                "/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
                Owner::Nccl,
            ),
            ("/usr/local/cuda/lib64/libcublasLt.so.13", Owner::Cublas),
            (
                "/venv/lib/python3.12/site-packages/jax_plugins/xla_cuda13/xla_cuda_plugin.so",
                Owner::Xla,
            ),
            (
                "/venv/lib/python3.12/site-packages/cupy_backends/cuda/api/runtime.cpython-312-x86_64-linux-gnu.so",
                Owner::Cupy,
            ),
            ("/home/u/train", Owner::Program),
            (
                "/usr/lib/python3/dist-packages/pyopencl/_cl.so",
                Owner::Program,
            ),
        ] {
            assert_eq!(Owner::of(&called_from(module)), owner, "{module}");
        }
        assert_eq!(Owner::of(&[]), Owner::Unknown);
        for o in Owner::ALL {
            assert_eq!(Owner::parse(o.as_str()), Some(o));
        }
    }
}
