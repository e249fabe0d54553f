#!/usr/bin/env bash
# A reduced size of bench/central.sh (in make bench at 65,536 ranks): 2,048
# ranks behind 16 fake node daemons, then 4,096 behind 512 (8 a node, as
# on a GPU cluster), answer a dump request with their
# summaries at once; the central daemon writes them to one file per node,
# judges the incident, fetches the culprit's full dump, and fr-analyze on
# the incident names the planted rank. bench/central.sh fails (exits
# non-zero) on a missing incident or a wrong verdict.
. "$(dirname "$0")/lib.sh"

RANKS=2048 NODES=16 ENTRIES=32 timeout -k 5 120 "$ROOT/bench/central.sh" >"$T/central.out" 2>&1 ||
	fail "bench/central.sh at 2,048 ranks: $(tail -n 20 "$T/central.out")"
grep -q "^== central: incident complete .* 2048 of 2048 ranks answered" "$T/central.out" ||
	fail "not every rank answered: $(cat "$T/central.out")"
grep -q "^== central: fr-analyze on the incident (1[78] files" "$T/central.out" ||
	fail "the incident is not 16 node files, the culprit's full dump and the manifest: $(cat "$T/central.out")"
grep -q "^== central: full dumps fetched: 1$" "$T/central.out" || fail "the culprit's full dump was not fetched: $(cat "$T/central.out")"
first=$(grep -o 'incident complete [0-9.]* s' "$T/central.out")

# The shape of a GPU cluster: 8 ranks a node, 512 nodes. Each node's
# messages find it by name, and a node that answered for all its ranks
# is not a line of the log; past 256 nodes, a file holds a group of them.
RANKS=4096 NODES=512 ENTRIES=16 timeout -k 5 180 "$ROOT/bench/central.sh" >"$T/many.out" 2>&1 ||
	fail "bench/central.sh at 4,096 ranks behind 512 nodes: $(tail -n 20 "$T/many.out")"
grep -q "^== central: incident complete .* 4096 of 4096 ranks answered" "$T/many.out" ||
	fail "not every rank answered behind 512 nodes: $(cat "$T/many.out")"
grep -q "^== central: fr-analyze on the incident (258 files" "$T/many.out" ||
	fail "the incident is not 256 files of 2 nodes each, the culprit's full dump and the manifest: $(cat "$T/many.out")"
lines=$(sed -n 's/^== central: daemon log: \([0-9]*\) lines.*/\1/p' "$T/many.out")
[ -n "$lines" ] && [ "$lines" -lt 32 ] || fail "the daemon logged ${lines:-?} lines for one incident of 512 nodes: $(cat "$T/many.out")"
echo "PASS central_scale: $first at 2,048 ranks behind 16 node daemons, \
$(grep -o 'incident complete [0-9.]* s' "$T/many.out") at 4,096 behind 512 ($lines log lines); \
$(grep '^== central: verdict' "$T/central.out" | cut -c 22-90)"
