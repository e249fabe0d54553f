#!/usr/bin/env bash
# Member lists as runs (dumps/FORMAT.md, 1.6): the dumps of a generated
# 256-rank incident list world as "0-255" rather than 256 numbers, and
# fr-analyze --json says exactly the same of them as of the same dumps
# written the old way (every "ranks" an array, version 1.4), which jq
# makes here from the runs by the format's own definition. No job, no
# daemon.
. "$(dirname "$0")/lib.sh"

GEN=$BUILD_DIR/bench/gen_dumps
[ -x "$GEN" ] || fail "build $GEN first (make e2e does)"

timeout 60 "$GEN" "$T/runs" 256 32 >"$T/gen.log" 2>&1 || fail "gen_dumps: $(cat "$T/gen.log")"
expect '.version == "1.6" and .pg_config.world.ranks == "0-255"' "$T/runs/rank-0.json"

# The old spelling: each run expanded, "?" as -1 (Python, whose integers
# keep the nanosecond timestamps that jq's doubles would round).
mkdir "$T/arrays"
python3 - "$T/runs" "$T/arrays" <<'PY' || fail "could not rewrite the dumps as arrays"
import json, os, sys
def expand(s):
    out = []
    for item in s.split(","):
        if item.startswith("?"):
            out += [-1] * (1 if item == "?" else int(item[2:]))
        elif "-" in item:
            a, b = map(int, item.split("-"))
            out += range(a, b + 1)
        else:
            out.append(int(item))
    return out
for name in os.listdir(sys.argv[1]):
    with open(os.path.join(sys.argv[1], name)) as f:
        d = json.load(f)
    d["version"] = "1.4"
    for c in d["pg_config"].values():
        if isinstance(c["ranks"], str):
            c["ranks"] = expand(c["ranks"])
    with open(os.path.join(sys.argv[2], name), "w") as f:
        json.dump(d, f, separators=(",", ":"))
PY
expect '.version == "1.4" and (.pg_config.world.ranks | length) == 256 and .pg_config.world.ranks[255] == 255' \
	"$T/arrays/rank-0.json"
runs=$(cat "$T"/runs/*.json | wc -c)
arrays=$(cat "$T"/arrays/*.json | wc -c)
[ "$runs" -lt "$arrays" ] || fail "the runs' dumps ($runs bytes) are not smaller than the arrays' ($arrays)"

for d in runs arrays; do
	timeout 60 "$BIN/fr-analyze" --json "$T/$d" >"$T/$d.json" 2>"$T/$d.log"
	[ $? -eq 1 ] || fail "fr-analyze $d: no hang found: $(cat "$T/$d.log")"
done
expect '.verdict == "hang"' "$T/runs.json"
diff <(jq -S . "$T/runs.json") <(jq -S . "$T/arrays.json") >"$T/diff" ||
	fail "the verdicts differ: $(cat "$T/diff")"
echo "ok: same verdict on runs ($runs bytes) and arrays ($arrays bytes)"
