//! Finds OpenCL platforms, the CUDA driver and NVML; `doctor` reports what is missing (in progress).
