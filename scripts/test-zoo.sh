#!/usr/bin/env bash
# The plugin-zoo tier (opt-in; CI does not run it): every Linux PJRT plugin published on
# PyPI, on a machine that has none of their devices. For each wheel it checks that
#   1. the wheel downloads (pip download --no-deps into .deps/zoo/wheels; a wheel that cannot
#      be downloaded FAILS the tier, nothing is skipped),
#   2. discovery finds its plugin library (RPJRT_PLUGIN_PATH pointed at the unpacked wheel),
#   3. `rpjrt info --json` answers within 60 s (client creation included) and either prints
#      JSON that parses, or fails with a message naming every library the loader cannot find
#      (compared with `ldd`'s "not found" lines),
#   4. `rpjrt conform` reports the missing device as ONE failure: either the client-creation
#      failure plus checks marked `blocked` (the status the conform crate is gaining), or,
#      with today's conform, failures that all carry that same client-creation error; no
#      crash and no timeout either way. Failures of the API-table checks (group "api",
#      which need no device) are the plugin's own defects: named in the summary, not counted.
#
#   bash scripts/test-zoo.sh                      # every wheel below (several GB to download)
#   bash scripts/test-zoo.sh libtpu jax-tt-plugin # just these
#
# Wheels are cached in .deps/zoo (delete it to download again). RPJRT_BIN picks the binary
# (default: target/debug/rpjrt, built here).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

all=(libtpu jax-tt-plugin jax-rocm7-pjrt jax-rocm60-pjrt jax-oneapi-pjrt
     intel-extension-for-openxla jax-cuda12-pjrt jax-cuda13-pjrt xla-cuda12-pjrt
     xla-cuda13-pjrt fastatomstruct-xla-cpu)
if [ $# -gt 0 ]; then wanted=("$@"); else wanted=("${all[@]}"); fi

zoo="$root/.deps/zoo"
mkdir -p "$zoo/wheels" "$zoo/x" "$zoo/logs"
pip=${PIP:-}
if [ -z "$pip" ]; then
  if [ -x "$root/.venv/bin/pip" ]; then pip="$root/.venv/bin/pip"; else pip="python3 -m pip"; fi
fi
python=${PYTHON:-python3}
if [ -z "${RPJRT_BIN:-}" ]; then
  cargo build -q -p rpjrt-cli || { echo "zoo: cannot build the rpjrt binary"; exit 1; }
  RPJRT_BIN="$root/target/debug/rpjrt"
fi

# A clean discovery environment: only the unpacked wheel is searched.
rp() { env -u VIRTUAL_ENV -u RPJRT_PLUGIN -u PJRT_NAMES_AND_LIBRARY_PATHS -u TPU_LIBRARY_PATH \
  -u RPJRT_PLUGIN_LOG RPJRT_PYTHON= NO_COLOR=1 "$RPJRT_BIN" "$@"; }

failures=()
summary=()
fail() { failures+=("$1: $2"); summary+=("FAIL  $1: $2"); echo "  FAIL: $2"; }
pass() { summary+=("ok    $1: $2"); echo "  ok: $2"; }

for pkg in "${wanted[@]}"; do
  echo "== $pkg"
  norm=$(echo "$pkg" | tr 'A-Z-' 'a-z_')
  wheel=$(ls "$zoo/wheels/" 2>/dev/null | grep -i "^${norm}-.*\.whl$" | head -1)
  if [ -z "$wheel" ]; then
    if ! $pip download --no-deps -q -d "$zoo/wheels" "$pkg" >"$zoo/logs/$pkg.pip" 2>&1; then
      fail "$pkg" "cannot be downloaded: $(tail -1 "$zoo/logs/$pkg.pip")"; continue
    fi
    wheel=$(ls "$zoo/wheels/" | grep -i "^${norm}-.*\.whl$" | head -1)
    [ -n "$wheel" ] || { fail "$pkg" "pip reported success but no wheel named ${norm}-*.whl"; continue; }
  fi
  dir="$zoo/x/${wheel%.whl}"
  if [ ! -f "$dir/.unpacked" ]; then
    rm -rf "$dir" && mkdir -p "$dir"
    (cd "$dir" && $python -m zipfile -e "$zoo/wheels/$wheel" . ) && touch "$dir/.unpacked" \
      || { fail "$pkg" "cannot unpack $wheel"; continue; }
  fi

  # 2. discovery
  lib=$(RPJRT_PLUGIN_PATH="$dir" rp plugins --json 2>/dev/null | $python -c '
import json, sys
d = json.load(sys.stdin)
for p in d["plugins"]:
    if p["path"].startswith(sys.argv[1]):
        print(p["path"]); break' "$dir")
  if [ -z "$lib" ]; then fail "$pkg" "discovery finds no plugin in $wheel"; continue; fi
  pass "$pkg" "discovery finds ${lib#"$dir"/}"

  # 3. info within 60 s
  out="$zoo/logs/$pkg.info.json"; err="$zoo/logs/$pkg.info.err"
  start=$(date +%s)
  timeout 60 env RPJRT_PLUGIN_PATH="$dir" "$RPJRT_BIN" info --json "$lib" >"$out" 2>"$err"
  rc=$?; took=$(( $(date +%s) - start ))
  if [ $rc -eq 124 ]; then fail "$pkg" "rpjrt info did not answer within 60 s"; continue; fi
  client_error=""
  if [ -s "$out" ]; then
    if ! client_error=$($python -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(d.get("client_error") or "")' "$out" 2>&1); then
      fail "$pkg" "rpjrt info --json printed something that is not JSON: $client_error"; continue
    fi
    pass "$pkg" "info --json parses (rc $rc, ${took}s)${client_error:+; client: ${client_error:0:120}}"
  else
    # Not loadable: every library ldd cannot find must be named.
    if ! grep -q "cannot be found by the dynamic loader" "$err"; then
      fail "$pkg" "info failed without naming missing libraries: $(head -c 300 "$err")"; continue
    fi
    unnamed=""
    for name in $(ldd "$lib" 2>/dev/null | awk '/not found/ {print $1}' | sort -u); do
      grep -qF "$name" "$err" || unnamed="$unnamed $name"
    done
    if [ -n "$unnamed" ]; then fail "$pkg" "missing libraries not named:$unnamed"; continue; fi
    count=$(ldd "$lib" 2>/dev/null | grep -c "not found")
    pass "$pkg" "fails naming every missing library ($(head -1 "$err" | grep -o '[0-9]* librar[a-z]*' | head -1); ldd: $count lines)"
    continue
  fi

  # 4. conform: the missing device is one failure
  report="$zoo/logs/$pkg.conform.json"
  timeout 900 env RPJRT_PLUGIN_PATH="$dir" "$RPJRT_BIN" conform "$lib" --json "$report" \
    >"$zoo/logs/$pkg.conform.txt" 2>&1
  rc=$?
  if [ $rc -eq 124 ]; then fail "$pkg" "rpjrt conform did not finish within 15 minutes"; continue; fi
  verdict=$($python - "$report" "$client_error" <<'PY'
import json, sys
report, client_error = sys.argv[1], sys.argv[2]
try:
    d = json.load(open(report))
except Exception as e:
    print(f"BAD report unreadable: {e}"); sys.exit()
res = d["results"]
outcomes = {}
for r in res:
    outcomes.setdefault(r["outcome"], []).append(r)
bad = [r["name"] for r in res if r["outcome"] in ("crash", "timeout")]
if bad:
    print(f"BAD crash/timeout in {', '.join(bad[:5])}"); sys.exit()
# Checks of the API table itself (group "api") need no client and no device: a failure
# there is the plugin's own defect (jax-tt-plugin 0.1.3 leaves pjrt_api_version's
# struct_size at 0), which conform rightly reports; it is named, not counted, since this
# tier asks whether the MISSING DEVICE is one failure.
own = [r["name"] for r in outcomes.get("fail", []) if r.get("group") == "api"]
fails = [r for r in outcomes.get("fail", []) if r.get("group") != "api"]
note = f"; plugin's own defects reported: {', '.join(own)}" if own else ""
counts = ", ".join(f"{len(v)} {k}" for k, v in sorted(outcomes.items()))
if not client_error:
    print(f"OK client created; {counts}{note}"); sys.exit()
if "blocked" in outcomes:
    if len(fails) != 1:
        print(f"BAD {len(fails)} failures beside blocked checks (want 1): {counts}")
    else:
        print(f"OK one failure, {len(outcomes['blocked'])} blocked ({counts}){note}")
    sys.exit()
# Today's conform: every failure is the client-creation failure (some checks wrap it in
# their own words, so the failing entry and code are compared: "PJRT_Client_Create failed
# with NOT_FOUND").
cause = client_error.split(":")[0]
other = [r["name"] for r in fails if cause not in r["detail"]]
if not other:
    print(f"OK (no blocked status yet) all {len(fails)} failures are {cause!r} ({counts}){note}")
else:
    print(f"BAD failures other than {cause!r}: {', '.join(other[:5])}")
PY
)
  case "$verdict" in
    OK*) pass "$pkg" "conform: ${verdict#OK }" ;;
    *) fail "$pkg" "conform: ${verdict#BAD }" ;;
  esac
done

echo
echo "== plugin zoo summary"
printf '%s\n' "${summary[@]}"
if [ ${#failures[@]} -gt 0 ]; then
  echo "zoo: ${#failures[@]} failure(s)"; exit 1
fi
echo "zoo: all passed"
