#!/usr/bin/env bash
# Proves the module graph of src/ has no import circle and no import running back up.
#
# Every module of src/ is declared in LAYERS below, lowest first. A module may import only from
# modules listed before it (lower in the stack), with one exception: a file of a directory
# module may import from its own facade (`src/a.rs` of `src/a/b.rs`: the file that declares it and holds the type its
# `impl` blocks extend, such as `http::Connection`). The edges are read from the code: every
# `use` statement (multi-line `use crate::{...}` blocks included, `crate::`, `super::`, `self::`
# and child-module paths) and every inline `crate::`/`super::` path, outside comments and
# outside a `#[cfg(test)] mod tests { ... }` (which ends at the first `}` in column 0). A
# circle is then looked for with `tsort`, on every edge but the facade ones, independently of
# the declared order.
#
# Usage: .ci/layers.sh [--graph]   (--graph prints the edges it found, `from -> to`)
set -euo pipefail
cd "$(dirname "$0")/.."
code_lines=$(<.ci/code-lines.awk)  # the shared prelude: test blocks and comments skipped

# Lowest first. A new module must be placed here, or the check fails.
LAYERS='
limits
protocol
json
jsonc
substitute
redact
schema
search
jsonrpc
sse
notices
auth::policy
auth::challenge
auth::dpop
auth::net
auth::discovery
auth::config
auth::scopes
auth::client
auth::flow
auth::store
auth::tokens
auth::callback
auth::signin
auth
config
http::verdict
http::error
http::trace
http::events
http::modern
http::client
http::session
http::inflight
http::reply
http::auth
http
server
listing
result
pack::host_only
pack
crate
'

# The module path of a file: src/lib.rs is `crate`, src/a.rs (or src/a/mod.rs) is `a`, src/a/b.rs is `a::b`.
module_of() {
    local path=${1#src/}
    path=${path%.rs}
    path=${path%/mod}
    [[ $path == lib ]] && path=crate
    printf '%s\n' "${path//\//::}"
}

files=$(find src -name '*.rs' | sort)
modules=$(for f in $files; do module_of "$f"; done)

edges=$(
    for f in $files; do
        awk -v self="$(module_of "$f")" -v known="$(printf '%s ' $modules)" "$code_lines"'
        function parent(m) { if (m == "crate" || index(m, "::") == 0) return "crate"; sub(/::[^:]*$/, "", m); return m }
        function child(base, seg) { return base == "crate" ? seg : base "::" seg }
        function resolve(path,   n, seg, i, base) {
            n = split(path, seg, "::")
            i = 1
            if (seg[1] == "crate") { base = "crate"; i = 2 }
            else if (seg[1] == "self") { base = self; i = 2 }
            else if (seg[1] == "super") {
                base = self
                while (i <= n && seg[i] == "super") { base = parent(base); i++ }
            } else if (child(self, seg[1]) in mods) { base = self }
            else return ""
            for (; i <= n; i++) {
                if (!(child(base, seg[i]) in mods)) break
                base = child(base, seg[i])
            }
            return base
        }
        function emit(path,   to) {
            to = resolve(path)
            if (to != "" && to != self) print self, to
        }
        function join(prefix, item) { return prefix == "" ? item : prefix "::" item }
        function expand(prefix, body,   depth, i, n, c, start) {
            depth = 0; start = 1; n = length(body)
            for (i = 1; i <= n + 1; i++) {
                c = i <= n ? substr(body, i, 1) : ","
                if (c == "{") depth++
                else if (c == "}") depth--
                else if (c == "," && depth == 0) { one(prefix, substr(body, start, i - start)); start = i + 1 }
            }
        }
        function one(prefix, item,   p, head) {
            if (item == "") return
            p = index(item, "{")
            if (p == 0) { emit(join(prefix, item)); return }
            head = substr(item, 1, p - 1); sub(/::$/, "", head)
            expand(join(prefix, head), substr(item, p + 1, length(item) - p - 1))
        }
        function inline(line,   rest) {
            rest = line
            while (match(rest, /(crate|super|self)(::[A-Za-z_][A-Za-z_0-9]*)+/)) {
                emit(substr(rest, RSTART, RLENGTH))
                rest = substr(rest, RSTART + RLENGTH)
            }
        }
        BEGIN { n = split(known, list, " "); for (i = 1; i <= n; i++) mods[list[i]] = 1 }
        {
            if (stmt == "" && line !~ /^[ \t]*(pub(\([a-z]+\))? )?use /) { inline(line); next }
            stmt = stmt " " line
            if (index(stmt, ";") == 0) next
            s = stmt; stmt = ""
            sub(/^[ \t]*(pub(\([a-z]+\))? )?use /, "", s)
            sub(/;.*$/, "", s)
            gsub(/ as [A-Za-z_0-9]+/, "", s)
            gsub(/[ \t]/, "", s)
            expand("", s)
        }
        ' "$f"
    done | sort -u
)

if [[ ${1:-} == --graph ]]; then
    printf '%s\n' "$edges" | awk 'NF { print $1, "->", $2 }'
fi

status=0
declare -A rank=()
i=0
for m in $LAYERS; do rank[$m]=$((i += 1)); done
for m in $modules; do
    if [[ -z ${rank[$m]:-} ]]; then
        echo "layers: module \`$m\` is not declared in LAYERS (.ci/layers.sh)" >&2
        status=1
    fi
done
for m in $LAYERS; do
    if ! grep -qx -- "$m" <<<"$modules"; then
        echo "layers: LAYERS declares \`$m\`, which is not a module of src/" >&2
        status=1
    fi
done

parent() { [[ $1 == *::* ]] && printf '%s\n' "${1%::*}" || printf 'crate\n'; }
acyclic=""
while read -r from to; do
    [[ -n $from ]] || continue
    if [[ $(parent "$from") == "$to" ]]; then continue; fi
    acyclic+="$from $to"$'\n'
    if [[ -n ${rank[$from]:-} && -n ${rank[$to]:-} ]] && ((rank[$to] >= rank[$from])); then
        echo "layers: \`$from\` imports \`$to\`, which is not below it" >&2
        status=1
    fi
done <<<"$edges"

if ! printf '%s' "$acyclic" | tsort >/dev/null 2>/tmp/layers-tsort.$$; then
    echo "layers: an import circle:" >&2
    cat /tmp/layers-tsort.$$ >&2
    status=1
fi
rm -f /tmp/layers-tsort.$$

if ((status == 0)); then
    echo "layers: $(wc -l <<<"$modules") modules, $(grep -c . <<<"$edges") import edges, no circle, none upward"
fi
exit "$status"
