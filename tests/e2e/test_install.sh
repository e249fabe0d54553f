#!/usr/bin/env bash
# make install lays out the binaries, the agent, the public header, the
# systemd units (the central daemon's and the node daemon's), their
# environment files and config files; systemd-analyze finds nothing to say
# about either unit (it exits 0 on warnings, so any output is a failure);
# the daemon starts with the installed config file; the installed node
# config refuses to start until it names the central daemon, and with that
# set the node daemon reports to the daemon started from the central one.
. "$(dirname "$0")/lib.sh"

make -s -C "$ROOT" install DESTDIR="$T/root" PREFIX=/usr/local >"$T/install.log" 2>&1 ||
	fail "make install failed: $(cat "$T/install.log")"
for f in usr/local/bin/flightrecd usr/local/bin/fr-analyze usr/local/lib/libflightrec.so \
	usr/local/include/flightrec.h usr/local/lib/systemd/system/flightrecd.service \
	usr/local/lib/systemd/system/flightrecd-node.service etc/default/flightrecd \
	etc/default/flightrecd-node etc/flightrec/flightrecd.conf etc/flightrec/flightrecd-node.conf; do
	[ -s "$T/root/$f" ] || fail "make install did not install /$f"
done
for u in flightrecd flightrecd-node; do
	unit=$T/root/usr/local/lib/systemd/system/$u.service
	grep -q '^ExecStart=/usr/local/bin/flightrecd ' "$unit" || fail "$u: ExecStart does not point at PREFIX/bin"
	grep -q "^ExecStart=.* --config /etc/flightrec/$u.conf" "$unit" ||
		fail "$u: ExecStart does not read the installed config file"
	grep -q "^EnvironmentFile=-/etc/default/$u\$" "$unit" || fail "$u: does not read /etc/default/$u"
	# Verify the installed unit, with ExecStart pointing at a binary that exists here.
	sed "s|/usr/local/bin/flightrecd|$BIN/flightrecd|" "$unit" >"$T/$u.service"
	out=$(systemd-analyze verify "$T/$u.service" 2>&1)
	[ -z "$out" ] || fail "systemd-analyze verify $u.service: $out"
done
# The node daemon's socket directory is made by the unit, root's and closed
# to others (or agents would not trust the socket in it), where the node
# config puts the socket.
node_unit=$T/root/usr/local/lib/systemd/system/flightrecd-node.service
grep -q '^RuntimeDirectory=flightrec$' "$node_unit" && grep -q '^RuntimeDirectoryMode=0755$' "$node_unit" &&
	grep -q '^User=root$' "$node_unit" || fail "the node unit does not make /run/flightrec root's, mode 0755"
grep -q '^agent-socket = /run/flightrec/agent.sock$' "$T/root/etc/flightrec/flightrecd-node.conf" ||
	fail "the node config does not put the agents' socket at /run/flightrec/agent.sock"

# The installed settings are valid (the addresses and the dump directory
# given here override the file's, as the command line does).
make_token
start_daemon --config "$T/root/etc/flightrec/flightrecd.conf" --token-file "$TOKEN"
grep -q "settings (startup, config $T/root/etc/flightrec/flightrecd.conf): .* timeout 300 s" "$T/daemon.log" ||
	fail "the daemon did not take its settings from the installed config file"

# The node config as installed names no central daemon: it refuses to
# start, saying which line to set.
node_conf=$T/root/etc/flightrec/flightrecd-node.conf
node_args=(--listen 127.0.0.1:0 --http 127.0.0.1:0 --dump-dir "$T/node-dumps"
	--agent-socket "$T/run/agent.sock" --token-file "$TOKEN" --ports-file "$T/node-ports.json")
mkdir -m 0755 "$T/run"
rc=0
timeout 10 "$BIN/flightrecd" --config "$node_conf" "${node_args[@]}" >"$T/node.log" 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "the node config without a central daemon exited $rc, want 2: $(cat "$T/node.log")"
line=$(grep -n '^upstream = ' "$node_conf" | cut -d: -f1)
grep -qF "$node_conf:$line: invalid value for upstream" "$T/node.log" ||
	fail "the refusal does not name the upstream line: $(cat "$T/node.log")"

# With upstream set to the daemon above, the node daemon starts with the
# rest of the installed settings and the daemon lists it as a node.
sed -i "s/^upstream = .*/upstream = 127.0.0.1:$LISTEN_PORT/" "$node_conf"
"$BIN/flightrecd" --config "$node_conf" "${node_args[@]}" >>"$T/node.log" 2>&1 &
track_pid $!
wait_for 10 test -s "$T/node-ports.json" || fail "the node daemon did not start: $(cat "$T/node.log")"
grep -q "settings (startup, config $node_conf): .* max-connections 8192, .*agent-socket $T/run/agent.sock, upstream 127.0.0.1:$LISTEN_PORT" "$T/node.log" ||
	fail "the node daemon did not take its settings from the installed node config: $(cat "$T/node.log")"
node_listed() { http_get /v1/nodes | jq -e '.nodes | length == 1 and .[0].connected' >/dev/null 2>&1; }
wait_for 10 node_listed ||
	fail "the node daemon did not connect to the daemon: $(http_get /v1/nodes); $(cat "$T/node.log")"
echo "PASS install: layout complete, both units verify cleanly, daemon and node daemon start with the installed configs"
