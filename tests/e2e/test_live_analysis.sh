#!/usr/bin/env bash
# The live verdict over HTTP and fr-analyze --live; an incident's files over
# HTTP. Rank 2 of 4 computes forever before all_reduce #3: before the
# timeout fires, /analysis already names it, and fr-analyze --live prints
# exactly what the daemon sends (text or JSON) with fr-analyze's exit
# status; once the incident is collected, its listing and files come over
# HTTP byte for byte, and nothing else in or around its directory does.
. "$(dirname "$0")/lib.sh"

FRA=$BIN/fr-analyze

# What changes from one look to the next: how long the ranks have waited.
norm_json() {
	jq -S 'walk(if type == "object" then del(.waited_s) else . end) | del(.summary)' "$1"
}
norm_text() {
	sed -E 's/("waited_s": )[0-9.eE+-]+/\1N/; s/[0-9]+(\.[0-9]+)? s\b/N s/g' "$1"
}

# status_of URL: the HTTP status of GET URL (no normalisation of the path).
status_of() {
	curl -s --path-as-is -o "$T/body" -w '%{http_code}' --max-time 5 "$HTTP$1"
}

# The key verdict fields, to compare a live verdict with a directory's.
verdict_key() {
	jq -S '{verdict, culprits: [.culprits[] | {rank, reason}],
		op: (.op | {type, seq, comm, comm_ranks}), waiting_ranks}' "$1"
}

# A timeout long enough to look before it fires; dumps are a few KiB, so
# 1 MiB leaves room and lets a planted bigger file show the bound.
start_daemon --timeout 10 --heartbeat-timeout 20 --max-dump-size 1048576
start_job 4 --scenario compute --culprit 2 --at 3
URL=$HTTP/$JOB

# ---- before the timeout: the live verdict ----
named() {
	curl -s --max-time 5 -D "$T/live.head" -o "$T/live.json" "$HTTP/v1/jobs/$JOB/analysis" &&
		jq -e '.verdict == "hang" and [.culprits[].rank] == [2]' "$T/live.json" >/dev/null 2>&1
}
wait_for 30 named || fail "/analysis never named rank 2: $(cat "$T/live.json" 2>/dev/null)"
[ -e "$T/incidents/$JOB" ] && fail "the timeout fired before the live verdict was looked at"
expect '.culprits[0].reason == "not_entered"' "$T/live.json"
expect '.op.type == "all_reduce" and .op.seq == 3 and .op.comm == "world"' "$T/live.json"
expect '.waiting_ranks == [0,1,3]' "$T/live.json"
grep -qi '^X-Flightrec-Verdict: hang' "$T/live.head" || fail "no verdict header: $(cat "$T/live.head")"
grep -qi '^Content-Type: application/json' "$T/live.head" || fail "JSON not served as JSON"

# fr-analyze --live --json prints the daemon's document (fetched again:
# only the waits have moved), with directory mode's exit status for a hang.
"$FRA" --live "$URL" --json >"$T/cli.json" 2>"$T/cli.err"
RC=$?
[ "$RC" -eq 1 ] || fail "fr-analyze --live --json exit $RC, want 1: $(cat "$T/cli.err")"
[ "$(norm_json "$T/cli.json")" = "$(norm_json "$T/live.json")" ] ||
	fail "fr-analyze --live --json differs from /analysis: $(diff <(norm_json "$T/live.json") <(norm_json "$T/cli.json"))"
# Byte for byte the daemon's body (fr-analyze's layout), but for the waits.
cmp <(norm_text "$T/cli.json") <(norm_text "$T/live.json") || fail "--live --json is not the body as sent"

# Text: the same report as ?format=text, itself fr-analyze's report.
curl -s --max-time 5 -D "$T/text.head" -o "$T/live.txt" "$HTTP/v1/jobs/$JOB/analysis?format=text" ||
	fail "GET /analysis?format=text failed"
grep -qi '^Content-Type: text/plain' "$T/text.head" || fail "text not served as text"
grep -qi '^X-Flightrec-Verdict: hang' "$T/text.head" || fail "no verdict header on the text"
head -n 1 "$T/live.txt" | grep -q '^rank 2 .*never entered all_reduce #3 on world' ||
	fail "text report's first line: $(head -n 1 "$T/live.txt")"
"$FRA" --live "$URL" >"$T/cli.txt" 2>"$T/cli.err"
RC=$?
[ "$RC" -eq 1 ] || fail "fr-analyze --live exit $RC, want 1: $(cat "$T/cli.err")"
[ "$(norm_text "$T/cli.txt")" = "$(norm_text "$T/live.txt")" ] ||
	fail "fr-analyze --live differs from ?format=text: $(diff <(norm_text "$T/live.txt") <(norm_text "$T/cli.txt"))"
[ "$(status_of "/v1/jobs/$JOB/analysis?format=xml")" = 400 ] || fail "an unknown format was not refused"

# The URL's other spellings: a name, the API's own path, a trailing '/'.
"$FRA" --live "http://localhost:$HTTP_PORT/v1/jobs/$JOB/" --json >"$T/cli2.json" 2>"$T/cli.err" ||
	[ $? -eq 1 ] || fail "--live with localhost and /v1/jobs/JOB/: $(cat "$T/cli.err")"
expect '[.culprits[].rank] == [2]' "$T/cli2.json"

# ---- after the incident: its files over HTTP ----
wait_incident 40
ID=$(basename "$INCIDENT")
IURL=/v1/jobs/$JOB/incidents/$ID
[ "$(status_of "$IURL")" = 200 ] || fail "GET $IURL: $(cat "$T/body")"
cp "$T/body" "$T/incident.json"
expect '.complete == true and .truncated == false and .job == "'"$JOB"'" and .incident == "'"$ID"'"' \
	"$T/incident.json"
want=$(cd "$INCIDENT" && for f in manifest.json rank-*.json; do
	printf '{"name":"%s","size":%s}\n' "$f" "$(stat -c %s "$f")"; done | jq -s -c 'sort_by(.name)')
got=$(jq -c '.files | sort_by(.name)' "$T/incident.json")
[ "$got" = "$want" ] || fail "incident files: got $got, want $want"
expect '[.files[].name] | index("rank-3.json") and length == 5' "$T/incident.json"
[ "$(jq -S .manifest "$T/incident.json")" = "$(jq -S . "$INCIDENT/manifest.json")" ] ||
	fail "the listing's manifest is not manifest.json"

for f in rank-1.json manifest.json; do
	curl -s --max-time 5 -D "$T/file.head" -o "$T/got-$f" "$HTTP$IURL/$f" || fail "GET $IURL/$f failed"
	grep -q '^HTTP/1.1 200' "$T/file.head" || fail "GET $IURL/$f: $(head -n 1 "$T/file.head")"
	grep -qi '^Content-Type: application/json' "$T/file.head" || fail "$f not served as JSON"
	cmp "$T/got-$f" "$INCIDENT/$f" || fail "$f over HTTP differs from the file on disk"
done

# The directory's verdict is the one /analysis gave live, exit status too.
analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze on the directory exit $RC, want 1"
[ "$(verdict_key "$T/verdict.json")" = "$(verdict_key "$T/live.json")" ] ||
	fail "directory verdict differs from the live one: $(diff <(verdict_key "$T/live.json") <(verdict_key "$T/verdict.json"))"

# ---- what is not served ----
cp "$INCIDENT/rank-1.json" "$INCIDENT/rank-1.json.tmp.123"
ln -s /etc/passwd "$INCIDENT/rank-9.json"
mkfifo "$INCIDENT/rank-7.json"
mkdir "$INCIDENT/rank-8.json"
echo '{}' >"$INCIDENT/notes.json"
ln -s "$INCIDENT" "$T/incidents/$JOB/linked"
for path in "$IURL/rank-1.json.tmp.123" "$IURL/rank-9.json" "$IURL/rank-7.json" \
	"$IURL/rank-8.json" "$IURL/notes.json" "$IURL/rank-01.json" "$IURL/rank-4.json" \
	"/v1/jobs/$JOB/incidents/linked" "/v1/jobs/$JOB/incidents/linked/rank-1.json" \
	"$IURL/../../../../../../etc/passwd" "$IURL/..%2f..%2fmanifest.json" \
	"/v1/jobs/$JOB/incidents/../incidents/$ID/rank-1.json" "$IURL/%2e%2e" \
	"/v1/jobs/$JOB/incidents/20000101T000000Z-1" "/v1/jobs/$JOB/incidents/20000101T000000Z-1/manifest.json" \
	"/v1/jobs/no-such-job/analysis" "/v1/jobs/no-such-job/incidents/$ID" \
	"/v1/jobs/no-such-job/incidents/$ID/rank-1.json"; do
	code=$(status_of "$path")
	[ "$code" = 404 ] || fail "GET $path answered $code, want 404: $(head -c 300 "$T/body")"
	grep -q root: "$T/body" && fail "GET $path leaked /etc/passwd"
done
status_of "/v1/jobs/no-such-job/analysis" >/dev/null
expect '.error == "no such job"' "$T/body"
status_of "/v1/jobs/$JOB/incidents/20000101T000000Z-1" >/dev/null
expect '.error == "no such incident"' "$T/body"
# The listing names neither the link, the FIFO, the directory, the file
# being written nor a file the API does not serve.
status_of "$IURL" >/dev/null
expect '[.files[].name] == ["manifest.json","rank-0.json","rank-1.json","rank-2.json","rank-3.json"]' "$T/body"
# A listing cut at its limit (every rank of the largest world and the
# manifest) keeps the first files in order, the manifest and the lowest
# ranks, whatever order the directory reads in: the files are made
# highest rank last, which some file systems list first. (Ranks 4-9 are
# left alone: some are the traps above.)
python3 -c '
import os, sys
for i in range(10, 65610):
    os.close(os.open(os.path.join(sys.argv[1], "rank-%d.json" % i),
                     os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))' "$INCIDENT" ||
	fail "cannot make the files of a long listing"
[ "$(status_of "$IURL")" = 200 ] || fail "a listing of 65605 files: HTTP $(head -c 300 "$T/body")"
expect '.truncated and (.files | length) == 65537 and .files[0].name == "manifest.json" and
	.files[1].name == "rank-0.json" and .files[5].name == "rank-10.json" and
	.files[-1].name == "rank-65541.json" and .files[2].size > 0' "$T/body"
python3 -c '
import os, sys
for i in range(10, 65610):
    os.unlink(os.path.join(sys.argv[1], "rank-%d.json" % i))' "$INCIDENT"
# A file over --max-dump-size is not sent.
truncate -s 2M "$INCIDENT/rank-5.json"
[ "$(status_of "$IURL/rank-5.json")" = 500 ] || fail "a file over --max-dump-size was served"
expect '.error | test("larger than --max-dump-size")' "$T/body"

# ---- fr-analyze --live: errors ----
"$FRA" --live "$HTTP/no-such-job" >"$T/out" 2>"$T/err"
RC=$?
[ "$RC" -eq 2 ] || fail "--live for an unknown job exit $RC, want 2"
grep -q 'no such job no-such-job at the daemon at 127.0.0.1:'"$HTTP_PORT" "$T/err" ||
	fail "unknown job message: $(cat "$T/err")"
[ -s "$T/out" ] && fail "--live printed a report for an unknown job"

PORT=$(free_port)
start=$SECONDS
"$FRA" --live "http://127.0.0.1:$PORT/$JOB" >"$T/out" 2>"$T/err"
RC=$?
[ "$RC" -eq 2 ] || fail "--live with nothing listening exit $RC, want 2"
grep -q "cannot connect to the daemon at 127.0.0.1:$PORT: Connection refused" "$T/err" ||
	fail "refused message: $(cat "$T/err")"
[ $((SECONDS - start)) -le 3 ] || fail "a refused connection took $((SECONDS - start)) s"
"$FRA" --live "http://[::1]:$PORT/$JOB" >"$T/out" 2>"$T/err"
[ $? -eq 2 ] && grep -q "cannot connect to the daemon at \[::1\]:$PORT" "$T/err" ||
	fail "IPv6 refused message: $(cat "$T/err")"

# A listener that never answers: the wait is bounded (10 s).
python3 -c '
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(4)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
time.sleep(60)' "$T/mute.port" &
track_pid $!
wait_for 10 test -s "$T/mute.port" || fail "the mute listener did not start"
start=$SECONDS
timeout 20 "$FRA" --live "http://127.0.0.1:$(cat "$T/mute.port")/$JOB" >"$T/out" 2>"$T/err"
RC=$?
[ "$RC" -eq 2 ] || fail "--live against a mute listener exit $RC, want 2: $(cat "$T/err")"
grep -q "did not answer within 10 s" "$T/err" || fail "mute listener message: $(cat "$T/err")"
[ $((SECONDS - start)) -le 13 ] || fail "the mute listener held fr-analyze $((SECONDS - start)) s"

# A server that is not flightrecd: nothing it sends reaches the terminal as
# a control sequence. Its error string is printed with '?' for each control
# character, and a report with control characters is not printed at all.
cat >"$T/hostile.py" <<'PY'
import socket, sys
answers = {
    "esc": b'HTTP/1.0 500 x\r\n\r\n{"error":"\\u001b]0;pwned\\u0007\\u001b[31mred\\u009b"}',
    "body": b"HTTP/1.0 200 OK\r\nX-Flightrec-Verdict: ok\r\n\r\nverdict ok\x1b[2J\n",
    "nul": b"HTTP/1.0 200 OK\r\nX-Flightrec-Verdict: ok\r\n\r\nverdict\x00 ok\n",
}
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(4)
open(sys.argv[1], "w").write(str(srv.getsockname()[1]))
while True:
    c, _ = srv.accept()
    path = c.recv(4096).split(b" ")[1].decode()
    c.sendall(answers[path.split("/")[3]])
    c.close()
PY
python3 "$T/hostile.py" "$T/hostile.port" &
track_pid $!
wait_for 10 test -s "$T/hostile.port" || fail "the hostile server did not start"
HOSTILE=http://127.0.0.1:$(cat "$T/hostile.port")
"$FRA" --live "$HOSTILE/esc" >"$T/out" 2>"$T/err"
RC=$?
[ "$RC" -eq 2 ] || fail "--live against a hostile error exit $RC, want 2"
grep -q 'answered 500 for job esc: ?\]0;pwned??\[31mred??$' "$T/err" ||
	fail "a hostile error string: $(od -c "$T/err" | head)"
for what in body nul; do
	"$FRA" --live "$HOSTILE/$what" >"$T/out" 2>"$T/err"
	RC=$?
	[ "$RC" -eq 2 ] || fail "--live against a report with control characters ($what) exit $RC, want 2"
	grep -q 'sent a report with control characters' "$T/err" || fail "$what: $(cat "$T/err")"
	[ -s "$T/out" ] && fail "a report with control characters ($what) was printed"
done
LC_ALL=C grep -q "$(printf '\033')" "$T/err" && fail "an escape reached the terminal"

for bad in "ftp://127.0.0.1:$HTTP_PORT/$JOB" "https://127.0.0.1:$HTTP_PORT/$JOB" \
	"http://127.0.0.1:$HTTP_PORT" "http://127.0.0.1:$HTTP_PORT/" "http://127.0.0.1:99999/$JOB" \
	"http://[::1:$HTTP_PORT/$JOB" "http://127.0.0.1:$HTTP_PORT/$JOB/analysis" \
	"http://127.0.0.1:$HTTP_PORT/.hidden" "http://user@127.0.0.1:$HTTP_PORT/$JOB" \
	"http://127.0.0.1:$HTTP_PORT/$JOB?x=1"; do
	"$FRA" --live "$bad" >"$T/out" 2>"$T/err"
	RC=$?
	[ "$RC" -eq 2 ] || fail "--live $bad exit $RC, want 2"
	grep -qF -- "--live $bad: " "$T/err" || fail "--live $bad: unclear message: $(cat "$T/err")"
done
"$FRA" --live "$URL" "$INCIDENT" >"$T/out" 2>"$T/err"
[ $? -eq 2 ] && grep -q 'takes no PATH' "$T/err" || fail "--live with a PATH: $(cat "$T/err")"
"$FRA" --live "$URL" --rank 1 >"$T/out" 2>"$T/err"
[ $? -eq 2 ] && grep -q 'takes no --rank or --comm' "$T/err" || fail "--live with --rank: $(cat "$T/err")"

# ---- a healthy job: "ok", exit 0 as for a directory ----
stop_job
JOB=$JOB-ok
start_job 2 --scenario none --iters 3
wait_job_exit 60
[ "$JOB_RC" -eq 0 ] || fail "the healthy job exited $JOB_RC"
"$FRA" --live "$HTTP/$JOB" --json >"$T/ok.json" 2>"$T/cli.err"
RC=$?
[ "$RC" -eq 0 ] || fail "fr-analyze --live on a healthy job exit $RC, want 0: $(cat "$T/cli.err")"
expect '.verdict == "ok" and .culprits == []' "$T/ok.json"
curl -s --max-time 5 -D "$T/ok.head" -o /dev/null "$HTTP/v1/jobs/$JOB/analysis?format=text"
grep -qi '^X-Flightrec-Verdict: ok' "$T/ok.head" || fail "healthy job's header: $(cat "$T/ok.head")"
echo "PASS live analysis: rank 2 named live and in the incident, files served, errors clear"
