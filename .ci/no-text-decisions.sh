#!/usr/bin/env bash
# Proves no decision in src/ is made on text: no error, reason, message or body is compared
# or searched as a string to choose what happens (decisions are made on types: README and
# ARCHITECTURE "errors"). Where a server's own words are the only signal, the comparison lives
# in ONE named, documented, unit-tested function listed in ALLOWED below.
#
# Looks at the code of src/ outside comments and outside `#[cfg(test)] mod tests { ... }`
# (tests assert exact texts on purpose). Fails, naming file, line and function, on:
#   - `to_string() ==` / `to_string().starts_with(` ... (comparing an error's text);
#   - `.starts_with(SIGN_IN...` (a status chosen from a reason's prefix);
#   - `reason`, `message`, `text`, `body`, `preview`, `error`, `err` or `e` (or their
#     `.message()` / `.to_string()` / `.as_str()`) followed by `.starts_with(`, `.contains(`,
#     `.ends_with(` or `== "`.
set -euo pipefail
cd "$(dirname "$0")/.."
code_lines=$(<.ci/code-lines.awk)  # the shared prelude: test blocks and comments skipped

# Functions allowed to read a server's words, each documented and unit-tested where it is.
#   speaks_of_session (src/http/reply.rs): a 400 whose JSON-RPC error message, or plain-text
#   body, says the session is gone ("No valid session ID", "Session not found"), the only signal
#   old servers give.
#   looks_like_markup (src/http/reply.rs): an error body whose first non-blank character is
#   `<` is a web page, named and not pasted, whatever its Content-Type said.
# header_value (src/http/modern.rs) reads no server text: it encodes an outgoing header value by
# MCP 2026-07-28's value-encoding rule, which is defined on the value's characters.
ALLOWED='speaks_of_session looks_like_markup header_value'
# Modules whose job is reading text, not deciding on a reason or a body: the Redactor finds
# secrets in text; jsonc parses the config file's text a Host passes.
ALLOWED_FILES='src/redact.rs src/jsonc.rs'

hits=$(
    for f in $(find src -name '*.rs' | sort); do
        [[ " $ALLOWED_FILES " == *" $f "* ]] && continue
        awk -v file="$f" -v allowed=" $ALLOWED " "$code_lines"'
        {
            if (match(line, /fn [A-Za-z_][A-Za-z_0-9]*/)) fn_name = substr(line, RSTART + 3, RLENGTH - 3)
            subject = "(reason|message|text|body|preview|error|err|e)(\\.(message|to_string|as_str)\\(\\))?"
            bad = line ~ /to_string\(\)[ \t]*==/ \
               || line ~ /to_string\(\)\.(starts_with|contains|ends_with)\(/ \
               || line ~ /\.starts_with\(SIGN_IN/ \
               || line ~ ("(^|[^A-Za-z_0-9.])" subject "\\.(starts_with|contains|ends_with)\\(") \
               || line ~ ("(^|[^A-Za-z_0-9.])" subject "[ \t]*==[ \t]*\"")
            if (bad && index(allowed, " " fn_name " ") == 0) printf "%s:%d (fn %s): %s\n", file, NR, fn_name, line
        }
        ' "$f"
    done
)

if [[ -n $hits ]]; then
    echo "no-text-decisions: a decision on text in src/ (decide on a type, or move it into a" >&2
    echo "named, documented, tested function and add it to ALLOWED in .ci/no-text-decisions.sh):" >&2
    printf '%s\n' "$hits" >&2
    exit 1
fi
echo "no-text-decisions: none in src/ (allowed: $ALLOWED)"
