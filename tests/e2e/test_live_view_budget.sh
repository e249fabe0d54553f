#!/usr/bin/env bash
# What an HTTP request's live view holds is charged to the memory budget
# (review of issue 16, finding 2): 2048 ranks make a view of about 1.8 MB
# of traces (the member lists are shared, not counted again). Under
# --max-memory 1 MiB, GET /v1/jobs, /v1/jobs/<job> and its /analysis are
# answered 503 with the reason and a Retry-After, the refusals are counted,
# nothing stays charged, and what needs no view (the incidents, /healthz,
# /metrics) is answered as before. Those views were made, uncounted,
# however many requests held one at once.
. "$(dirname "$0")/lib.sh"

N=2048
start_daemon --timeout 1000 --heartbeat-timeout 1000 --max-pending-per-address 4096 --max-memory 1048576
python3 "$ROOT/tests/e2e/many_ranks.py" "$LISTEN_PORT" "$JOB" "$N" >"$T/ranks.out" 2>&1 &
track_pid $!
wait_for 60 grep -q "up $N" "$T/ranks.out" || fail "the ranks did not connect: $(cat "$T/ranks.out")"
wait_for 30 metric_is ranks_connected "$N" || fail "$(metric ranks_connected) of $N ranks connected"
wait_for 30 metric_is memory_member_lists_bytes $((4 * N)) || fail "world's list is not held: $(metric memory_member_lists_bytes)"

refused=$(metric memory_refused_total)
for path in "/v1/jobs" "/v1/jobs/$JOB" "/v1/jobs/$JOB/analysis"; do
	code=$(curl -s -D "$T/headers" -o "$T/body" -w '%{http_code}' --max-time 30 "$HTTP$path")
	[ "$code" = 503 ] || fail "GET $path answered $code over the budget: $(head -c 200 "$T/body")"
	jq -e '.error | test("memory budget \\(--max-memory\\)")' "$T/body" >/dev/null ||
		fail "GET $path did not say why: $(cat "$T/body")"
	grep -qi '^retry-after: 1' "$T/headers" || fail "GET $path has no Retry-After"
done
metric_is memory_refused_total $((refused + 3)) ||
	fail "refusals counted: $(metric memory_refused_total), want $((refused + 3))"
metric_is memory_views_bytes 0 || fail "refused views still hold $(metric memory_views_bytes) bytes"
[ "$(http_status "/v1/jobs/$JOB/incidents")" = 200 ] || fail "the incidents were refused too"
[ "$(http_status /healthz)" = 200 ] || fail "/healthz did not answer 200"
echo "PASS live view budget: views of $N ranks refused over a 1 MiB budget with 503, counted, nothing held"
