#!/usr/bin/env bash
# Secure by default, and names the daemon answers to. Listening for agents
# or HTTP on an address other hosts can reach, without --token-file, stops
# the daemon at startup (exit 2, saying which address and what to give)
# unless --insecure (or "insecure = true" in --config) is given; loopback
# needs neither, a token is enough. Over HTTP, a request whose Host is not
# the daemon's address, localhost or a name of --http-allowed-hosts (DNS
# rebinding) reads nothing (421), while /healthz and /metrics answer any
# Host; a bad --http-allowed-hosts stops the daemon with the reason.
. "$(dirname "$0")/lib.sh"

refused() { # refused NAME ARGS...: the daemon exits 2 and says why in $T/NAME.log
	local name=$1
	shift
	timeout 10 "$BIN/flightrecd" --dump-dir "$T/incidents" "$@" >"$T/$name.log" 2>&1
	local rc=$?
	[ "$rc" = 2 ] || fail "flightrecd $*: exit $rc, want 2: $(cat "$T/$name.log")"
}

refused open-listen --listen 0.0.0.0:0 --http 127.0.0.1:0
grep -q -- "--listen 0.0.0.0:0 is reachable from other hosts and no --token-file is set" "$T/open-listen.log" ||
	fail "no reason for refusing an open agent port: $(cat "$T/open-listen.log")"
grep -q -- "give --token-file FILE, or --insecure" "$T/open-listen.log" || fail "the refusal names no way out"
refused open-http --listen 127.0.0.1:0 --http '[::]:0'
grep -q -- "--http \[::\]:0 is reachable from other hosts" "$T/open-http.log" ||
	fail "no reason for refusing an open HTTP port: $(cat "$T/open-http.log")"
refused bad-hosts --http-allowed-hosts 'node1,,node2'
grep -q "http-allowed-hosts: an empty name" "$T/bad-hosts.log" ||
	fail "no reason for a bad --http-allowed-hosts: $(cat "$T/bad-hosts.log")"
printf 'insecure = maybe\n' >"$T/bad-insecure.conf"
refused bad-insecure --config "$T/bad-insecure.conf"
grep -q "insecure takes true or false, not 'maybe'" "$T/bad-insecure.log" ||
	fail "no reason for a bad insecure setting: $(cat "$T/bad-insecure.log")"

# --insecure, "insecure = true" and a token each let it run.
printf 'flightrec-e2e-%s-0123456789abcdef\n' "$RANDOM" >"$T/token"
chmod 600 "$T/token"
LISTEN_ADDR=0.0.0.0:0 start_daemon --insecure
[ "$(http_status /healthz)" = 200 ] || fail "the daemon with --insecure is not healthy"
stop_daemon
printf 'insecure = true\n' >"$T/insecure.conf"
LISTEN_ADDR=0.0.0.0:0 start_daemon --config "$T/insecure.conf"
grep -q "settings (startup, config $T/insecure.conf).*, insecure" "$T/daemon.log" ||
	fail "the insecure setting is not in the settings logged"
stop_daemon
LISTEN_ADDR=0.0.0.0:0 start_daemon --token-file "$T/token"
stop_daemon

# Names: only the daemon's own, and those it was given.
start_daemon --http-allowed-hosts 'flightrec.example, node7'
host_status() { # host_status HOST URL
	curl -s -o "$T/host.json" -w '%{http_code}' --max-time 5 -H "Host: $1" -H 'X-Flightrec: 1' "$HTTP$2"
}
for url in / /v1/jobs /v1/jobs/some-job /v1/jobs/some-job/incidents/i/manifest.json; do
	[ "$(host_status "attacker.example:$HTTP_PORT" "$url")" = 421 ] ||
		fail "GET $url with Host attacker.example: $(cat "$T/host.json"), want 421"
	[ "$(host_status "127.0.0.2:$HTTP_PORT" "$url")" = 421 ] ||
		fail "GET $url with Host 127.0.0.2, not the bound address: want 421"
done
expect '.error | test("--http-allowed-hosts")' "$T/host.json"
for host in "localhost:$HTTP_PORT" "127.0.0.1:$HTTP_PORT" "FLIGHTREC.example:$HTTP_PORT" node7; do
	[ "$(host_status "$host" /v1/jobs)" = 200 ] || fail "GET /v1/jobs with Host $host: $(cat "$T/host.json")"
done
for url in /healthz /metrics; do
	[ "$(host_status "attacker.example:$HTTP_PORT" "$url")" = 200 ] ||
		fail "GET $url with any Host must answer: $(cat "$T/host.json")"
done
echo "PASS http_exposure: open addresses need a token or --insecure; only the daemon's names are answered"
