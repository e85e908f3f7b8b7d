#!/usr/bin/env bash
# Fails on an `#[ignore]`d test that no CI step runs (README "Tests": a failing test is never
# ignored; a test is ignored only because a named `.ci` step runs it on purpose).
#
# Every `#[ignore` in tests/ and src/ must give a reason (`#[ignore = "..."]`) that names a
# `.ci/` script (`.ci/run`, `.ci/interop.sh`, ...), and that script must exist and run the
# ignored tests of the test's module: a line holding `--ignored` and the module's filter
# (`sessions::` for tests/it/sessions.rs, `redact::` for src/redact.rs). A reason that is a macro
# metavariable (`#[ignore = $needs]`) is checked at the macro's invocations in the same file:
# every string literal that ends a line with `:` inside `name! { ... }`
# (`"needs ...; run by .ci/interop.sh":`).
#
# Usage: .ci/ignored.sh
set -euo pipefail
cd "$(dirname "$0")/.."

python3 - <<'EOF'
import pathlib, re, sys

failures = []
ignore = re.compile(r'#\[ignore(?P<rest>.*)$')
reason = re.compile(r'^\s*=\s*"(?P<text>(?:[^"\\]|\\.)*)"')
metavar = re.compile(r'^\s*=\s*\$\w+')
invocation = re.compile(r'^\s*"(?P<text>(?:[^"\\]|\\.)*)":\s*$')
script_name = re.compile(r'\.ci/[\w.-]+')


def module_filters(path: pathlib.Path) -> list:
    """The test filters that select the module of `path`: its path and each enclosing
    module's (`schedules::modern_schedules::`, `schedules::`)."""
    parts = list(path.with_suffix("").parts)
    if parts[0] == "tests":
        parts = parts[2:] if len(parts) > 2 else parts[1:]
    else:
        parts = parts[1:]
    if parts and parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return ["::".join(parts[:n]) + "::" for n in range(len(parts), 0, -1)]


def macro_reasons(lines, at):
    """The reason literals of the invocations of the macro whose body holds line `at`: each
    string literal ending a line with `:` between `NAME! {` and the next `}` in column 0."""
    name = next(
        (m.group(1) for l in reversed(lines[:at]) if (m := re.search(r'macro_rules!\s+(\w+)', l))),
        None,
    )
    if name is None:
        return []
    texts, inside = [], False
    for n, l in enumerate(lines, 1):
        if re.match(rf'^{name}!\s*[{{(\[]', l):
            inside = True
        elif inside and re.match(r'^[}\])]', l):
            inside = False
        elif inside and (m := invocation.match(l)):
            texts.append((n, m.group("text")))
    return texts


def check(path, line_no, text):
    names = script_name.findall(text)
    if not names:
        failures.append(f"{path}:{line_no}: the reason names no .ci script: {text!r}")
        return
    wanted = module_filters(path)
    for name in names:
        script = pathlib.Path(name)
        if not script.is_file():
            failures.append(f"{path}:{line_no}: {name} does not exist")
            continue
        runs = any(
            "--ignored" in line and any(f in line for f in wanted)
            for line in script.read_text().splitlines()
            if not line.lstrip().startswith("#")
        )
        if not runs:
            failures.append(
                f"{path}:{line_no}: {name} runs no `{wanted[0]} ... --ignored`, "
                f"yet the reason says it runs this test: {text!r}"
            )


for path in sorted(list(pathlib.Path("tests").rglob("*.rs")) + list(pathlib.Path("src").rglob("*.rs"))):
    lines = path.read_text().splitlines()
    for no, line in enumerate(lines, 1):
        code = line.split("//", 1)[0]
        found = ignore.search(code)
        if not found:
            continue
        rest = found.group("rest")
        if m := reason.match(rest):
            check(path, no, m.group("text"))
        elif metavar.match(rest):
            texts = macro_reasons(lines, no)
            if not texts:
                failures.append(f"{path}:{no}: a macro's ignore reason with no invocation reason found")
            for n, text in texts:
                check(path, n, text)
        else:
            failures.append(f"{path}:{no}: an #[ignore] without a reason naming the .ci step that runs it")

if failures:
    print("ignored.sh: ignored tests no CI step runs:", file=sys.stderr)
    for f in failures:
        print("  " + f, file=sys.stderr)
    sys.exit(1)
print("ignored.sh: every ignored test names the .ci step that runs it")
EOF
