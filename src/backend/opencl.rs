//! OpenCL backend (in progress).
