# syntax=docker/dockerfile:1
# gpulab in a container (README, "Docker"):
#
#   docker build -t gpulab .
#   docker run --rm -it --gpus all gpulab                        # the dashboard
#   docker run --rm --gpus all gpulab run cuda-free-async        # one lab, its report
#
# The host needs the NVIDIA driver and the NVIDIA Container Toolkit: with
# `--gpus all` the toolkit mounts the driver's own libraries into the container
# (libcuda, libnvidia-ml, libnvidia-opencl, libnvidia-ptxjitcompiler), so none of
# them is in the image. Without a GPU, PoCL runs the OpenCL labs on the CPU.
#
# CI has no Docker engine, so this file is never built there: tests/packaging.rs
# checks its structure, and docker/verify-rootfs.sh runs its runtime stage as a
# debootstrapped Debian 12 root (keep the two in step).

# NVRTC compiles the CUDA labs' kernels at run time (src/backend/cuda/spin.rs).
# It is part of the CUDA toolkit, not of the driver, so the toolkit does not mount
# it: the image carries NVIDIA's redistributable wheel of it. 13.0's PTX needs a
# driver of the 580 series or newer; for an older driver build with e.g.
# `--build-arg NVRTC_WHEEL=nvidia-cuda-nvrtc-cu12==12.4.127`.
ARG NVRTC_WHEEL=nvidia-cuda-nvrtc==13.0.88

FROM rust:1-bookworm AS builder
# The compiled-in source folder (CARGO_MANIFEST_DIR) is where the dashboard looks
# for the shipped recordings when the working directory has none: the runtime
# stage puts them at the same path.
WORKDIR /usr/src/gpulab
COPY . .
# The registry and the target folder are cache mounts: after a change to gpulab's
# own source, a rebuild compiles gpulab's crates, not its dependencies again.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/src/gpulab/target \
    cargo build --release --locked \
 && install -m 0755 target/release/gpulab /usr/local/bin/gpulab

FROM python:3.12-slim-bookworm AS nvrtc
ARG NVRTC_WHEEL
# The `.alt` builds are NVRTC's variant for sanitizers; gpulab loads the plain one.
RUN pip download --no-deps --only-binary=:all: --dest /wheel "$NVRTC_WHEEL" \
 && python -m zipfile -e /wheel/*.whl /wheel/unpacked \
 && mkdir -p /nvrtc/lib /nvrtc/doc \
 && find /wheel/unpacked -name 'libnvrtc*.so*' ! -name '*.alt.*' -exec cp {} /nvrtc/lib/ \; \
 && find /wheel/unpacked -name 'License.txt' -exec cp {} /nvrtc/doc/ \; \
 && ls /nvrtc/lib/libnvrtc.so.*

FROM debian:bookworm-slim
# What the image is, for registries and scanners (OCI image-spec annotations).
LABEL org.opencontainers.image.title="gpulab" \
      org.opencontainers.image.description="A terminal laboratory for GPU memory lifetime: real OpenCL/CUDA calls, device memory, live objects and a host/device timeline" \
      org.opencontainers.image.licenses="MIT OR Apache-2.0" \
      org.opencontainers.image.base.name="docker.io/library/debian:bookworm-slim"
# 0 (the default): no CPU device. The image is for `--gpus all`, and PoCL would
# add about 550 MB (measured on a Debian 12 root: it compiles kernels with Clang
# 15 and links them with binutils, so it brings both and libc6-dev) to an image
# of about 200. 1: the OpenCL labs run on the CPU too, with no GPU at all; with
# `--gpus all` gpulab still picks the GPU (the first GPU before any CPU device).
ARG POCL=0
# ocl-icd-libopencl1 is the OpenCL ICD loader gpulab calls; the platforms are
# PoCL's (registered in /etc/OpenCL/vendors) and NVIDIA's, which the toolkit mounts
# without registering it and gpulab registers for its own processes.
# Unpinned: bookworm's packages change only by its point and security releases.
# hadolint ignore=DL3008
RUN set -- ocl-icd-libopencl1 \
 && if [ "$POCL" = 1 ]; then set -- "$@" pocl-opencl-icd; fi \
 && apt-get update \
 && apt-get install -y --no-install-recommends "$@" \
 && rm -rf /var/lib/apt/lists/*
COPY --from=nvrtc /nvrtc/lib/ /opt/nvrtc/lib/
COPY --from=nvrtc /nvrtc/doc/ /usr/share/doc/nvidia-cuda-nvrtc/
RUN echo /opt/nvrtc/lib > /etc/ld.so.conf.d/gpulab-nvrtc.conf && ldconfig
COPY --from=builder /usr/local/bin/gpulab /usr/local/bin/gpulab
COPY assets/recordings /usr/src/gpulab/assets/recordings
COPY assets/watch-recordings /usr/src/gpulab/assets/watch-recordings
COPY assets/cards /usr/src/gpulab/assets/cards
# Every licence of what the image carries of gpulab: its own, each crate's in its
# binary (dist/licences.py) and the embedded font's.
COPY LICENSE-MIT LICENSE-APACHE docs/THIRD-PARTY-LICENSES.md assets/fonts/DejaVuSans.LICENSE \
     /usr/share/doc/gpulab/
# compute: libcuda, libnvidia-opencl and the PTX JIT; utility: libnvidia-ml (NVML,
# gpulab's memory readings) and nvidia-smi.
ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility
RUN useradd --create-home --uid 1000 --shell /bin/sh gpulab
# Said outright: the caches under ~/.cache must not depend on how an engine (or a
# cluster's --user) derives HOME for a numeric USER.
ENV HOME=/home/gpulab
# By number, so a cluster's runAsNonRoot can tell it is not root.
USER 1000:1000
# Writable, for `--record FILE` and the dashboard's history; the PTX cache and
# gpulab's OpenCL vendors folder go under ~/.cache.
WORKDIR /home/gpulab
# No CMD: gpulab alone opens the dashboard on a terminal (`docker run -it`) and
# prints the lab list otherwise.
ENTRYPOINT ["gpulab"]
