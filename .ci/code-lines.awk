# Shared by .ci/layers.sh and .ci/no-text-decisions.sh: passes over `#[cfg(test)] mod tests
# { ... }` blocks and whole-line comments, and sets `line` to the current line with any trailing
# `// ...` comment cut. A program that includes this file reads `line` in its own rules.
in_tests { if ($0 ~ /^}/) in_tests = 0; next }
/^#\[cfg\(test\)\]/ { test_attr = 1; next }
test_attr && /^(pub(\([a-z]+\))? )?mod tests/ { test_attr = 0; if ($0 !~ /;/) in_tests = 1; next }
{ test_attr = 0 }
/^[ \t]*\/\// { next }
{ line = $0; sub(/[ \t]\/\/ .*$/, "", line) }
