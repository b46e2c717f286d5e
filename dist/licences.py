#!/usr/bin/env python3
"""Writes docs/THIRD-PARTY-LICENSES.md: the licence of every crate gpulab's
binary can be built from, with each distinct licence text once.

    cargo fetch --locked && python3 dist/licences.py

Which crates: from Cargo.lock and the workspace's manifests, the crates the
workspace's members depend on outside their dev-dependencies, then everything
those depend on as the lock records it (a registry crate's lock entry names its
normal and build dependencies, for every platform). So build-time crates and
other platforms' crates are listed too, and none the binary has is missed. An
optional dependency counts only when a feature such a build turns on names it
(a member's `default`, or one another member's normal dependency asks for):
schemars, behind the `schema` features gpulab's tests alone turn on, does not.
tests/packaging.rs computes the same set from the same files and fails when the
document lists another: run this again after a dependency changes.

Texts come from each crate's published package in the cargo cache: its
`license-file`, or its files named LICENSE*, LICENCE*, COPYING*, NOTICE*, UNLICENSE.
"""

import glob
import os
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load(path):
    with open(path, "rb") as f:
        return tomllib.load(f)


def members(root):
    out = []
    for m in root["workspace"]["members"]:
        if m.endswith("/*"):
            for d in sorted(glob.glob(os.path.join(ROOT, m[:-2], "*"))):
                if os.path.isfile(os.path.join(d, "Cargo.toml")):
                    out.append(d)
        else:
            out.append(os.path.normpath(os.path.join(ROOT, m)))
    return out


def normal_tables(manifest):
    tables = [manifest.get(k, {}) for k in ("dependencies", "build-dependencies")]
    for target in manifest.get("target", {}).values():
        tables += [target.get(k, {}) for k in ("dependencies", "build-dependencies")]
    return tables


def optional_on(manifests, root):
    """(member, dependency) of every optional dependency a feature turns on that
    a member's `default` or another member's normal dependency on it asks for."""
    inherited = root.get("workspace", {}).get("dependencies", {})
    asked = [(m, "default") for m in manifests]
    for manifest in manifests.values():
        for table in normal_tables(manifest):
            for name, spec in table.items():
                if name in manifests and isinstance(spec, dict):
                    features = list(spec.get("features", []))
                    if spec.get("workspace"):
                        features += inherited.get(name, {}).get("features", [])
                    asked += [(name, f) for f in features]
    seen, on = set(), set()
    while asked:
        member, feature = asked.pop()
        if (member, feature) in seen:
            continue
        seen.add((member, feature))
        for item in manifests[member].get("features", {}).get(feature, []):
            dep, _, sub = item.removeprefix("dep:").partition("/")
            if item.startswith("dep:") or (not sub and item not in manifests[member].get("features", {})):
                on.add((member, dep))
            elif not sub:
                asked.append((member, item))
            else:
                if not dep.endswith("?"):
                    on.add((member, dep))
                if dep.rstrip("?") in manifests:
                    asked.append((dep.rstrip("?"), sub))
    return on


def shipped(lock, root):
    """(name, version) of every registry crate in the set the module doc says."""
    by_name = {}
    for p in lock["package"]:
        by_name.setdefault(p["name"], []).append(p)
    local = {p["name"] for p in lock["package"] if "source" not in p}
    manifests = {}
    for d in members(root):
        manifest = load(os.path.join(d, "Cargo.toml"))
        manifests[manifest["package"]["name"]] = manifest
    on = optional_on(manifests, root)
    wanted = []
    for member, manifest in manifests.items():
        for table in normal_tables(manifest):
            for name, spec in table.items():
                if isinstance(spec, dict) and spec.get("optional") and (member, name) not in on:
                    continue
                if isinstance(spec, dict) and spec.get("package"):
                    name = spec["package"]
                wanted.append(name)
    seen = set()
    stack = []
    for name in wanted:
        if name in local:
            continue
        stack += [(p["name"], p["version"]) for p in by_name[name]]
    entries = {(p["name"], p["version"]): p for p in lock["package"]}
    while stack:
        key = stack.pop()
        if key in seen:
            continue
        seen.add(key)
        for dep in entries[key].get("dependencies", []):
            parts = dep.split(" ")
            name = parts[0]
            if name in local:
                continue
            if len(parts) > 1:
                stack.append((name, parts[1]))
            else:
                stack += [(p["name"], p["version"]) for p in by_name[name]]
    return sorted(seen)


def source_dir(name, version):
    home = os.environ.get("CARGO_HOME", os.path.expanduser("~/.cargo"))
    found = glob.glob(os.path.join(home, "registry", "src", "*", f"{name}-{version}"))
    if not found:
        sys.exit(f"{name} {version} is not in {home}/registry/src: run `cargo fetch --locked`")
    return found[0]


def texts(d, manifest):
    files = []
    declared = manifest.get("package", {}).get("license-file")
    if isinstance(declared, str) and os.path.isfile(os.path.join(d, declared)):
        files.append(os.path.join(d, declared))
    for f in sorted(os.listdir(d)):
        upper = f.upper()
        if upper.startswith(("LICENSE", "LICENCE", "COPYING", "NOTICE", "UNLICENSE")):
            path = os.path.join(d, f)
            if os.path.isfile(path) and path not in files:
                files.append(path)
    out = []
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            out.append((os.path.basename(path), f.read().strip()))
    return out


def main():
    lock = load(os.path.join(ROOT, "Cargo.lock"))
    root = load(os.path.join(ROOT, "Cargo.toml"))
    crates = shipped(lock, root)
    by_text = {}
    rows = []
    for name, version in crates:
        d = source_dir(name, version)
        manifest = load(os.path.join(d, "Cargo.toml"))
        licence = manifest.get("package", {}).get("license") or "see its licence files"
        rows.append((name, version, licence))
        for file, text in texts(d, manifest):
            # One entry per text, however its lines were wrapped or indented.
            key = " ".join(text.split())
            by_text.setdefault(key, (text, []))[1].append(f"{name} {version} ({file})")
    out = [
        "# Third-party licences",
        "",
        "gpulab is MIT OR Apache-2.0 (LICENSE-MIT, LICENSE-APACHE). Its binary is built",
        "from the crates below and embeds the DejaVu Sans font (assets/fonts/DejaVuSans.LICENSE).",
        "Made by `dist/licences.py` from Cargo.lock: every crate the workspace depends on",
        "outside its tests, build-time and other platforms' crates included.",
        "",
        "| crate | version | licence |",
        "|---|---|---|",
    ]
    out += [f"| {n} | {v} | {lic} |" for n, v, lic in rows]
    out += ["", "## Licence texts", "", "Each text once, with the crates whose packages hold it.", ""]
    for text, holders in sorted(by_text.values(), key=lambda kv: kv[1][0]):
        out += ["### " + ", ".join(holders), "", "```text", text.replace("```", "'''"), "```", ""]
    with open(os.path.join(ROOT, "docs", "THIRD-PARTY-LICENSES.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(out).rstrip() + "\n")
    print(f"docs/THIRD-PARTY-LICENSES.md: {len(rows)} crates, {len(by_text)} distinct texts")


if __name__ == "__main__":
    main()
