#!/usr/bin/env bash
# make install lays out the binaries, the agent, the public header, the
# systemd unit, its environment file and the daemon's config file;
# systemd-analyze finds nothing to say about the unit (it exits 0 on
# warnings, so any output is a failure), and the daemon starts with the
# installed config file.
. "$(dirname "$0")/lib.sh"

make -s -C "$ROOT" install DESTDIR="$T/root" PREFIX=/usr/local >"$T/install.log" 2>&1 ||
	fail "make install failed: $(cat "$T/install.log")"
for f in usr/local/bin/flightrecd usr/local/bin/fr-analyze usr/local/lib/libflightrec.so \
	usr/local/include/flightrec.h usr/local/lib/systemd/system/flightrecd.service \
	etc/default/flightrecd etc/flightrec/flightrecd.conf; do
	[ -s "$T/root/$f" ] || fail "make install did not install /$f"
done
unit=$T/root/usr/local/lib/systemd/system/flightrecd.service
grep -q '^ExecStart=/usr/local/bin/flightrecd ' "$unit" || fail "ExecStart does not point at PREFIX/bin"
grep -q '^ExecStart=.* --config /etc/flightrec/flightrecd.conf' "$unit" ||
	fail "ExecStart does not read the installed config file"

# Verify the installed unit, with ExecStart pointing at a binary that exists here.
sed "s|/usr/local/bin/flightrecd|$BIN/flightrecd|" "$unit" >"$T/flightrecd.service"
out=$(systemd-analyze verify "$T/flightrecd.service" 2>&1)
[ -z "$out" ] || fail "systemd-analyze verify: $out"

# The installed settings are valid (the addresses and the dump directory
# given here override the file's, as the command line does).
start_daemon --config "$T/root/etc/flightrec/flightrecd.conf"
grep -q "settings (startup, config $T/root/etc/flightrec/flightrecd.conf): .* timeout 300 s" "$T/daemon.log" ||
	fail "the daemon did not take its settings from the installed config file"
echo "PASS install: layout complete, unit verifies cleanly, daemon starts with the installed config"
