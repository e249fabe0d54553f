#!/usr/bin/env bash
# make install lays out the binaries, the agent, the public header, the
# systemd unit and its settings; systemd-analyze finds nothing to say about
# the unit (it exits 0 on warnings, so any output is a failure).
. "$(dirname "$0")/lib.sh"

make -s -C "$ROOT" install DESTDIR="$T/root" PREFIX=/usr/local >"$T/install.log" 2>&1 ||
	fail "make install failed: $(cat "$T/install.log")"
for f in usr/local/bin/flightrecd usr/local/bin/fr-analyze usr/local/lib/libflightrec.so \
	usr/local/include/flightrec.h usr/local/lib/systemd/system/flightrecd.service \
	etc/default/flightrecd; do
	[ -s "$T/root/$f" ] || fail "make install did not install /$f"
done
unit=$T/root/usr/local/lib/systemd/system/flightrecd.service
grep -q '^ExecStart=/usr/local/bin/flightrecd ' "$unit" || fail "ExecStart does not point at PREFIX/bin"

# Verify the installed unit, with ExecStart pointing at a binary that exists here.
sed "s|/usr/local/bin/flightrecd|$BIN/flightrecd|" "$unit" >"$T/flightrecd.service"
out=$(systemd-analyze verify "$T/flightrecd.service" 2>&1)
[ -z "$out" ] || fail "systemd-analyze verify: $out"
echo "PASS install: layout complete, unit verifies cleanly"
