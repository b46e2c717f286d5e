#!/usr/bin/env bash
# The Dockerfile's runtime stage, verified without a Docker engine: debootstraps a
# Debian 12 root, installs into it what the runtime stage installs, copies in a
# `cargo build --release --locked` binary built here (on Debian 12, as the builder
# stage is), NVRTC from the wheel the Dockerfile names and the shipped recordings,
# then runs gpulab in it as the image's user would. No GPU is needed or used: the
# NVIDIA libraries come from the host's driver at `docker run --gpus all`.
#
#   sudo docker/verify-rootfs.sh            # the default image (POCL=0)
#   sudo POCL=1 docker/verify-rootfs.sh     # the CPU variant: runs cl-finish on PoCL
#
# Needs root, debootstrap, pip and Debian's mirror; ROOTFS (default
# /tmp/gpulab-rootfs) is removed at the end unless KEEP=1.
set -euo pipefail
cd "$(dirname "$0")/.."

POCL=${POCL:-0}
ROOTFS=${ROOTFS:-/tmp/gpulab-rootfs}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
[ "$(id -u)" -eq 0 ] || { echo "run as root (debootstrap, chroot, mount)"; exit 2; }
[ ! -e "$ROOTFS" ] || { echo "$ROOTFS exists; remove it first"; exit 2; }
WHEEL=$(sed -n 's/^ARG NVRTC_WHEEL=//p' Dockerfile)
[ -n "$WHEEL" ] || { echo "no ARG NVRTC_WHEEL= in the Dockerfile"; exit 2; }
SCRATCH=$(mktemp -d)

cleanup() {
  for m in dev sys proc; do umount "$ROOTFS/$m" 2>/dev/null || true; done
  rm -rf "$SCRATCH"
  if [ "${KEEP:-0}" != 1 ]; then rm -rf --one-file-system "$ROOTFS"; fi
}
trap cleanup EXIT

cargo build --release --locked

echo "== debootstrap (minbase bookworm) into $ROOTFS"
debootstrap --variant=minbase bookworm "$ROOTFS" "$MIRROR" >"$SCRATCH/debootstrap.log"
# debian:bookworm-slim's sources: the release, its updates and security.
cat >"$ROOTFS/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
cp /etc/resolv.conf "$ROOTFS/etc/resolv.conf"
mount -t proc proc "$ROOTFS/proc"
mount -t sysfs sysfs "$ROOTFS/sys"
mount --bind /dev "$ROOTFS/dev"

echo "== the runtime stage (POCL=$POCL)"
PACKAGES="ocl-icd-libopencl1"
[ "$POCL" = 1 ] && PACKAGES="$PACKAGES pocl-opencl-icd"
chroot "$ROOTFS" /bin/sh -c "export DEBIAN_FRONTEND=noninteractive
  apt-get update >/dev/null && apt-get install -y --no-install-recommends $PACKAGES >/dev/null
  apt-get clean && rm -rf /var/lib/apt/lists/*"
# The nvrtc stage: the same pip download and the same files picked.
pip download --quiet --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
  --dest "$SCRATCH/wheel" "$WHEEL"
python3 -m zipfile -e "$SCRATCH"/wheel/*.whl "$SCRATCH/unpacked"
mkdir -p "$ROOTFS/opt/nvrtc/lib" "$ROOTFS/usr/share/doc/nvidia-cuda-nvrtc"
find "$SCRATCH/unpacked" -name 'libnvrtc*.so*' ! -name '*.alt.*' -exec cp {} "$ROOTFS/opt/nvrtc/lib/" \;
find "$SCRATCH/unpacked" -name 'License.txt' -exec cp {} "$ROOTFS/usr/share/doc/nvidia-cuda-nvrtc/" \;
chroot "$ROOTFS" /bin/sh -c 'echo /opt/nvrtc/lib > /etc/ld.so.conf.d/gpulab-nvrtc.conf && ldconfig'
install -m 0755 target/release/gpulab "$ROOTFS/usr/local/bin/gpulab"
# The recordings where the image has them. The dashboard looks for them under
# the binary's CARGO_MANIFEST_DIR: the image's path in the image, this checkout's
# path here, so a link from the one to the other stands in for it.
mkdir -p "$ROOTFS/usr/src/gpulab/assets" "$ROOTFS$(dirname "$PWD")"
cp -r assets/recordings assets/watch-recordings assets/cards "$ROOTFS/usr/src/gpulab/assets/"
ln -s /usr/src/gpulab "$ROOTFS$PWD"
chroot "$ROOTFS" useradd --create-home --uid 1000 --shell /bin/sh gpulab
echo "root filesystem: $(du -sx --block-size=1M "$ROOTFS" | cut -f1) MiB"

# USER gpulab, WORKDIR /home/gpulab, the image's ENV, nothing of this host's.
in_image() {
  chroot --userspec=1000:1000 "$ROOTFS" /usr/bin/env -i HOME=/home/gpulab USER=gpulab \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    /bin/sh -c 'cd /home/gpulab && exec "$@"' sh "$@"
}
# Runs one command in the image and checks its exit status.
expect() {
  local want=$1
  shift
  echo "== \$ $* (expect exit $want)"
  local rc=0
  in_image "$@" || rc=$?
  [ "$rc" -eq "$want" ] || { echo "FAILED: exit $rc, expected $want"; exit 1; }
}

failed=0
in_image sh -c 'ldconfig -p | grep -q "libnvrtc.so.[0-9]"' || { echo "no NVRTC on the linker's path"; failed=1; }
if [ "$POCL" = 1 ]; then
  expect 0 gpulab doctor
  expect 0 gpulab run cl-finish
  expect 0 gpulab run cl-finish --all-variants --record finish.jsonl
else
  expect 3 gpulab doctor # nothing to run a lab on without a GPU or PoCL
  expect 3 gpulab run cl-finish
fi
expect 0 gpulab list
expect 3 gpulab run cuda-free-async # no libcuda.so.1 without --gpus all
expect 0 gpulab report /usr/src/gpulab/assets/recordings/nvidia-h100/cuda-free-async--pipeline-free.jsonl
[ "$failed" -eq 0 ] && echo "== the runtime stage works (POCL=$POCL)"
exit "$failed"
