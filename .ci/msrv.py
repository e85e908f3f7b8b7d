#!/usr/bin/env python3
"""Checks that `rust-version` in Cargo.toml holds for everything `cargo test` builds.

The toolchain here is newer than the declared rust-version, so two checks stand in for a build
with the old compiler: clippy's `incompatible_msrv` lint (run by `.ci/run` with `-D warnings`)
catches standard-library items newer than rust-version in our own code, and this script checks
every package in the build graph of `cargo test` (the default workspace members, their normal,
build and dev dependencies, and everything those pull in) declares a rust-version no newer than
ours. A package that declares none is listed as unknown but does not fail the check.

Usage: python3 .ci/msrv.py   (from the repository root; prints one line, exits 1 on a violation)
"""
import json
import subprocess
import sys


def version(text):
    parts = [int(p) for p in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def main():
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--locked",
             "--filter-platform", host_triple()],
            check=True, capture_output=True, text=True,
        ).stdout
    )
    packages = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    roots = meta["workspace_default_members"]
    ours = version(packages[roots[0]]["rust_version"])

    seen, unknown, newer = set(), [], []
    stack = [(r, True) for r in roots]
    while stack:
        pid, is_root = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        pkg = packages[pid]
        rv = pkg.get("rust_version")
        if rv is None:
            unknown.append(pkg["name"])
        elif version(rv) > ours:
            newer.append(f"{pkg['name']} {pkg['version']} needs {rv}")
        for dep in nodes[pid]["deps"]:
            kinds = {k["kind"] for k in dep["dep_kinds"]}
            # Dev-dependencies count only for the workspace members cargo test builds.
            if kinds - {"dev"} or is_root:
                stack.append((dep["pkg"], False))

    wanted = ".".join(str(p) for p in ours)
    if newer:
        print(f"msrv: {len(newer)} of {len(seen)} packages need a Rust newer than {wanted}:")
        for line in sorted(newer):
            print(f"  {line}")
        return 1
    print(f"msrv: {len(seen)} packages fit rust-version {wanted} "
          f"({len(unknown)} declare none)")
    return 0


def host_triple():
    out = subprocess.run(["rustc", "-vV"], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("host: "):
            return line[len("host: "):]
    raise SystemExit("msrv: rustc -vV named no host")


if __name__ == "__main__":
    sys.exit(main())
