#!/usr/bin/env bash
# A release archive (dist/build.sh), run where GPU clusters live: in a
# debootstrapped Debian 11 root (glibc 2.31; the archives are linked for 2.28)
# with nothing but the OpenCL loader, PoCL and clinfo installed. It runs
# `gpulab list`, `gpulab doctor`, a lab on PoCL (JSON, checked), and `gpulab
# watch` on clinfo (its agent loaded into a program of that root), as a user's
# shell would, from the unpacked archive on PATH.
#
#   sudo dist/verify-old-glibc.sh target/dist/gpulab-*-x86_64-linux-gnu.tar.gz
#   sudo ROOTFS=DIR dist/verify-old-glibc.sh --prepare   # the root alone, first
#
# Needs root (debootstrap, chroot, mount), debootstrap and Debian's mirror;
# SUITE (default bullseye) and MIRROR choose the root. ROOTFS (default a fresh
# temporary folder) is removed at the end unless KEEP=1. `--prepare` only makes
# the root in ROOTFS (an empty folder) and keeps it: a later run with the same
# ROOTFS uses it, so CI makes it while it builds (the download and unpacking
# wait on the network and the disk, the build on the CPU).
set -euo pipefail

SUITE=${SUITE:-bullseye}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
[ "$(id -u)" -eq 0 ] || { echo "run as root (debootstrap, chroot, mount)" >&2; exit 2; }
READY=.gpulab-root-ready

debootstrap_root() {
  echo "== debootstrap $SUITE (minbase, the OpenCL loader, PoCL, clinfo) into $ROOTFS"
  debootstrap --variant=minbase --include=ocl-icd-libopencl1,pocl-opencl-icd,clinfo \
    "$SUITE" "$ROOTFS" "$MIRROR" >"$ROOTFS.debootstrap.log" 2>&1 \
    || { tail -n 30 "$ROOTFS.debootstrap.log"; rm -f "$ROOTFS.debootstrap.log"; exit 1; }
  rm -f "$ROOTFS.debootstrap.log"
  touch "$ROOTFS/$READY"
}

if [ "${1:-}" = --prepare ]; then
  : "${ROOTFS:?--prepare needs ROOTFS, an empty folder}"
  debootstrap_root
  exit 0
fi

ARCHIVE=${1:?usage: dist/verify-old-glibc.sh ARCHIVE.tar.gz | --prepare}
[ -f "$ARCHIVE" ] || { echo "$ARCHIVE: no such archive" >&2; exit 2; }
ROOTFS=${ROOTFS:-$(mktemp -d "${TMPDIR:-/tmp}/gpulab-$SUITE.XXXXXX")}

cleanup() {
  for m in dev/pts dev sys proc; do umount "$ROOTFS/$m" 2>/dev/null || true; done
  if [ "${KEEP:-0}" != 1 ]; then rm -rf --one-file-system "$ROOTFS"; fi
}
trap cleanup EXIT

if [ -f "$ROOTFS/$READY" ]; then
  echo "== the $SUITE root made beforehand (--prepare) in $ROOTFS"
else
  debootstrap_root
fi
mount -t proc proc "$ROOTFS/proc"
mount -t sysfs sys "$ROOTFS/sys"
mount --bind /dev "$ROOTFS/dev"
mount --bind /dev/pts "$ROOTFS/dev/pts"

mkdir -p "$ROOTFS/opt/gpulab"
tar -C "$ROOTFS/opt/gpulab" --strip-components=1 -xzf "$ARCHIVE"
echo "glibc in the root: $(chroot "$ROOTFS" ldd --version | head -n1)"

# As a user would: a home, the archive's bin on PATH, no Rust anywhere.
in_root() {
  chroot "$ROOTFS" /usr/bin/env -i HOME=/root PATH=/opt/gpulab/bin:/usr/bin:/bin \
    TERM=dumb LANG=C.UTF-8 "$@"
}
in_root gpulab --version
in_root gpulab list
in_root gpulab doctor
# PoCL 1.6 (Debian 11) compiles kernels with LLVM 9, which names a CPU it
# does not know (AMD's Zen 3 and later) "generic" and then refuses it as a
# target: no OpenCL program builds in this root on such a host, gpulab's or
# any other (clinfo's own test build says so). The lab is run wherever this
# root's PoCL can build one; elsewhere that is said, and the rest still runs.
LAB=cl-finish
# (Read whole first: with pipefail, grep -q leaving early would fail clinfo's
# side of a pipe with SIGPIPE and the test with it.)
CLINFO=$(in_root clinfo 2>&1 || true)
if grep -q "unknown target CPU" <<<"$CLINFO"; then
  echo "== this root's PoCL cannot compile for this host's CPU (LLVM 9 does not know it):" \
    "the lab on PoCL is not run here"
  LAB=
fi
if [ -n "$LAB" ]; then
  in_root gpulab run "$LAB" --variant finish --param kernel_ms=20 --param size_mib=4 \
    --json >"$ROOTFS/run.json"
  grep -q '"kind": "run"' "$ROOTFS/run.json" || { echo "run --json wrote no run" >&2; exit 1; }
  grep -q '"status": "finished"' "$ROOTFS/run.json" \
    || { echo "the lab did not finish:" >&2; cat "$ROOTFS/run.json" >&2; exit 1; }
  in_root gpulab run "$LAB" --variant finish --param kernel_ms=20 --param size_mib=4
fi
# The embedded agent, loaded into a program linked against this root's glibc.
in_root gpulab watch -- clinfo -l
echo "== $ARCHIVE runs on Debian $SUITE: list, doctor,${LAB:+ a PoCL lab,} watch"
