#!/usr/bin/env bash
# The web page (GET /) in a real browser: headless Chromium, driven through
# chromedriver's WebDriver HTTP API, opens the daemon's page while rank 2 of
# 4 computes forever before all_reduce #5. The page must pick the hung job by
# itself, name rank 2 as the culprit in its verdict and mark rank 2's cell
# (and no other) as the culprit's, list the waiting ranks' operation and the
# incident, open rank 2's panel with its live stack on a click, refresh
# itself, and never ask anything of anyone but the daemon. A screenshot is
# left in $BUILD/artifacts/web-page.png (and copied to $SCREENSHOT_TO when
# set, e.g. docs/web-page.png).
. "$(dirname "$0")/lib.sh"

CHROMIUM=$(command -v chromium || true)
CHROMEDRIVER=$(command -v chromedriver || true)
[ -n "$CHROMIUM" ] && [ -n "$CHROMEDRIVER" ] ||
	fail "this test needs headless Chromium: install the Debian packages chromium and chromium-driver (apt-get install chromium chromium-driver)"
ARTIFACTS=$BUILD_DIR/artifacts
mkdir -p "$ARTIFACTS" || fail "cannot make $ARTIFACTS"

# chromedriver and every browser process it starts run in one session of
# their own (WD_SID), killed together at exit whatever happens.
WD_SID=
stop_browser() {
	[ -n "$WD_SID" ] || return 0
	pkill -KILL -s "$WD_SID" 2>/dev/null
	wait_for 10 sh -c "! pgrep -s $WD_SID >/dev/null" ||
		echo "warning: browser processes of session $WD_SID outlived the test" >&2
	WD_SID=
}
trap 'rc=$?; stop_browser; (exit $rc); cleanup' EXIT

# wd METHOD PATH [JSON]: one WebDriver command; prints the answer.
wd() {
	curl -sS --max-time 30 -X "$1" -H 'Content-Type: application/json' ${3:+-d "$3"} \
		"http://127.0.0.1:$WD_PORT$2"
}

# js SCRIPT: runs SCRIPT (a function body) in the page; prints its value as JSON.
js() {
	wd POST "/session/$SESSION/execute/sync" "$(jq -cn --arg s "$1" '{script: $s, args: []}')" |
		jq -c .value
}

# Appends the URL of every request that a document of the daemon's made
# since the last call to $T/requests.txt (the browser hands each log entry
# out once; the browser's own start page is not ours to judge).
collect_requests() {
	wd POST "/session/$SESSION/se/log" '{"type": "performance"}' |
		jq -r --arg http "$HTTP/" '.value[]?.message | fromjson | .message |
			select(.method == "Network.requestWillBeSent") | .params |
			select(.documentURL | startswith($http)) | .request.url' \
			>>"$T/requests.txt"
	wd POST "/session/$SESSION/se/log" '{"type": "browser"}' |
		jq -r '.value[]? | "\(.level) \(.message)"' >>"$T/console.txt"
}

jobs_fetched_twice() {
	collect_requests
	[ "$(grep -c "^$HTTP/v1/jobs/$JOB\$" "$T/requests.txt")" -ge 2 ]
}

start_daemon --timeout 2 --heartbeat-timeout 10
start_job 4 --scenario compute --culprit 2 --at 5
# Once the incident is complete the daemon calls the job hung.
wait_incident 40
INCIDENT_ID=$(basename "$INCIDENT")

# The page itself: the compiled-in copy of daemon/web/index.html, never
# cached, and held by its Content-Security-Policy to this daemon.
curl -sS --max-time 5 -D "$T/page.headers" -o "$T/page.html" "$HTTP/" || fail "GET / failed"
head -n 1 "$T/page.headers" | grep -q ' 200' || fail "GET /: $(head -n 1 "$T/page.headers")"
cmp -s "$T/page.html" "$ROOT/daemon/web/index.html" ||
	fail "GET / does not serve daemon/web/index.html (is $BIN/flightrecd out of date?)"
grep -qi '^content-type: text/html; charset=utf-8' "$T/page.headers" || fail "GET / content type: $(cat "$T/page.headers")"
grep -qi '^cache-control: no-store' "$T/page.headers" || fail "GET / may be cached: $(cat "$T/page.headers")"
grep -i '^content-security-policy:' "$T/page.headers" | grep -q "default-src 'self'.*connect-src 'self'" ||
	fail "GET / lacks its Content-Security-Policy: $(cat "$T/page.headers")"

WD_PORT=$(free_port)
rm -f "$T/wd.pid"
setsid -f sh -c 'echo $$ >"$0/wd.pid"; TMPDIR="$0" exec "$1" --port="$2" >"$0/chromedriver.out" 2>&1' \
	"$T" "$CHROMEDRIVER" "$WD_PORT"
wait_for 10 test -s "$T/wd.pid" || fail "chromedriver did not start"
WD_SID=$(cat "$T/wd.pid")
wait_for 20 curl -sf --max-time 2 "http://127.0.0.1:$WD_PORT/status" -o /dev/null ||
	fail "chromedriver does not answer: $(cat "$T/chromedriver.out")"

caps=$(jq -cn --arg bin "$CHROMIUM" --arg profile "$T/profile" '{capabilities: {alwaysMatch: {
	browserName: "chrome",
	"goog:chromeOptions": {binary: $bin, args: ["--headless", "--no-sandbox", "--disable-gpu",
		"--disable-dev-shm-usage", "--window-size=1600,1000", "--user-data-dir=" + $profile,
		"--no-first-run", "--disable-background-networking", "--disable-component-update",
		"--disable-sync", "--disable-extensions"]},
	"goog:loggingPrefs": {performance: "ALL", browser: "ALL"}}}}')
SESSION=$(wd POST /session "$caps" | tee "$T/session.json" | jq -r '.value.sessionId // empty')
[ -n "$SESSION" ] || fail "no browser session: $(cat "$T/session.json")"
: >"$T/requests.txt"
: >"$T/console.txt"

# The plain address: the page must pick the hung job itself.
wd POST "/session/$SESSION/url" "$(jq -cn --arg u "$HTTP/" '{url: $u}')" >/dev/null
verdict_shown() {
	[ "$(js 'const v = document.getElementById("verdict"); return v ? v.dataset.culprits : null')" = '"2"' ]
}
wait_for 20 verdict_shown || fail "the page shows no verdict naming rank 2: $(js 'return document.body.innerText')"

text=$(js 'return document.getElementById("verdict").innerText')
case "$text" in
*HANG*"rank 2"*"never entered all_reduce #5 on world"*"culprit rank 2"*) ;;
*) fail "verdict text: $text" ;;
esac
[ "$(js 'return location.hash')" = "\"#job=$JOB\"" ] || fail "the page did not select job $JOB: $(js 'return location.hash')"

# The grid: one cell per rank on world; rank 2's alone is the culprit's, and
# it looks different from the waiting ranks' cells.
js 'return [...document.querySelectorAll("#grid .cell[data-comm=world]")].map(e => +e.dataset.rank)' >"$T/cells.json"
expect 'sort == [0,1,2,3]' "$T/cells.json"
js 'return [...document.querySelectorAll("#grid .cell.culprit")].map(e => +e.dataset.rank)' >"$T/culprit-cells.json"
expect '. == [2]' "$T/culprit-cells.json"
js 'const c = (r) => getComputedStyle(document.querySelector(`#grid .cell[data-comm=world][data-rank="${r}"]`)).backgroundColor;
	return [c(0), c(1), c(2), c(3)]' >"$T/colours.json"
expect '.[0] == .[1] and .[1] == .[3] and .[2] != .[0]' "$T/colours.json"
js 'return document.querySelector("#grid tr[data-rank=\"2\"]").innerText' | grep -q CULPRIT ||
	fail "rank 2's row is not tagged CULPRIT"

# The operation the others wait in, and the incident.
text=$(js 'return document.getElementById("inflight").innerText')
case "$text" in
*"all_reduce #5 on world"*"0-1,3"*) ;;
*) fail "operations in flight: $text" ;;
esac
js 'return document.getElementById("incidents").innerText' | grep -q "$INCIDENT_ID" ||
	fail "the page does not list incident $INCIDENT_ID"

# Merged stacks as GET /v1/jobs/<job>/stacks gives them for a Python job:
# a class with python_frames shows those (function file:line), a class
# without them its native frames.
text=$(js 'const saved = state.stacks;
	state.stacks = { job: "py", ok: true, at: Date.now(), body: { ranks_answered: 4, ranks_asked: 4, groups: [
		{ ranks: "0-1,3", nranks: 3, frames: ["poll_progress", "PMPI_Allreduce"],
		  python_frames: [{ function: "train_step", file: "/srv/train.py", line: 88 },
				  { function: "main", file: "/srv/train.py", line: 120 }] },
		{ ranks: "2", nranks: 1, frames: ["clock_nanosleep", "main"] }] } };
	const d = document.createElement("div");
	d.innerHTML = stacksHTML({ job: "py" }, { culprits: new Map() });
	state.stacks = saved;
	document.body.appendChild(d);
	for (const e of d.querySelectorAll("details")) e.open = true;
	const t = d.innerText;
	d.remove();
	return t')
case "$text" in
*"train_step (train.py:88) ← main (train.py:120)"*"py#0"*"clock_nanosleep ← main"*) ;;
*) fail "the page does not show a class's Python frames: $text" ;;
esac
case "$text" in
*"PMPI_Allreduce"*) fail "the page shows the native frames of a class with Python frames: $text" ;;
esac

# A click on rank 2's cell opens its panel with its live stack (or says why
# there is none). The page redraws itself every few seconds, which can
# replace the cell between finding it and clicking it: click until it opens.
panel_open() {
	[ "$(js 'const p = document.getElementById("rankpanel");
		return !p.hidden && p.querySelector("h3").textContent === "Rank 2"')" = true ]
}
click_rank2() {
	local el
	panel_open && return 0
	el=$(wd POST "/session/$SESSION/element" '{"using": "css selector", "value": "#grid td.cell[data-rank=\"2\"]"}' |
		jq -r '.value | to_entries[0].value // empty')
	[ -n "$el" ] && wd POST "/session/$SESSION/element/$el/click" '{}' >/dev/null
	panel_open
}
wait_for 20 click_rank2 || fail "a click on rank 2's cell does not open its panel"
panel_settled() {
	[ "$(js 'const p = document.getElementById("rankpanel"), s = document.getElementById("rankstack");
		return !p.hidden && p.querySelector("h3").textContent === "Rank 2" && !!s &&
			s.textContent !== "" && !/asking rank/.test(s.textContent)')" = true ]
}
wait_for 20 panel_settled || fail "rank 2's panel did not open: $(js 'return document.getElementById("rankpanel").innerText')"
case "$(js 'return location.hash')" in *rank=2*) ;; *) fail "the rank is not in the page's address" ;; esac
stack=$(js 'return document.getElementById("rankstack").innerText')
if [ "$(http_status "/v1/jobs/$JOB/ranks/2/stacks")" = 200 ]; then
	case "$stack" in *stuck_in_compute*) ;; *) fail "rank 2's live stack lacks stuck_in_compute: $stack" ;; esac
else
	[ "$(js 'return !!document.querySelector("#rankstack .msg")')" = true ] ||
		fail "rank 2's stack is unavailable and the panel does not say so: $stack"
fi

# The pointer out of the way, so that no row shows as hovered.
wd POST "/session/$SESSION/actions" '{"actions": [{"type": "pointer", "id": "mouse",
	"parameters": {"pointerType": "mouse"},
	"actions": [{"type": "pointerMove", "x": 1, "y": 1, "origin": "viewport"}]}]}' >/dev/null
wd GET "/session/$SESSION/screenshot" | jq -r .value | base64 -d >"$ARTIFACTS/web-page.png" ||
	fail "no screenshot"
[ "$(head -c 8 "$ARTIFACTS/web-page.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
	fail "the screenshot is not a PNG"
if [ -n "${SCREENSHOT_TO:-}" ]; then
	cp "$ARTIFACTS/web-page.png" "$SCREENSHOT_TO" || fail "cannot copy the screenshot to $SCREENSHOT_TO"
fi

# It refreshes itself, and asks nothing of anyone but the daemon.
wait_for 15 jobs_fetched_twice || fail "the page did not refresh the job: $(cat "$T/requests.txt")"
outside=$(grep -v "^$HTTP/" "$T/requests.txt")
[ -z "$outside" ] || fail "the page made requests outside the daemon: $outside"
grep -q "^$HTTP/v1/jobs\$" "$T/requests.txt" || fail "no request for the job list: $(cat "$T/requests.txt")"
bad=$(grep -E 'Content Security Policy|Uncaught' "$T/console.txt")
[ -z "$bad" ] || fail "the page's console: $bad"

wd DELETE "/session/$SESSION" >/dev/null
echo "PASS web page: rank 2 shown as the culprit, its stack on click, screenshot in $ARTIFACTS/web-page.png"
