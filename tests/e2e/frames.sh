# Building wire frames in bash, for tests that play a fake agent against
# the real daemon (protocol/PROTOCOL.md). Source after lib.sh.
#
# A payload is built as printf escapes in P (PN bytes) with u8/u16/u32/u64
# (little-endian) and str (u16 length + bytes); `frame TYPE` puts the header
# in front and leaves the whole frame in FRAME; `send FD` writes it.

P=
PN=0
byte() {
	printf -v _x '\\x%02x' $(($1 & 255))
	P+=$_x
	PN=$((PN + 1))
}
le() { # le NBYTES VALUE
	local i
	for ((i = 0; i < $1; i++)); do byte $(($2 >> (8 * i))); done
}
u8() { le 1 "$1"; }
u16() { le 2 "$1"; }
u32() { le 4 "$1"; }
u64() { le 8 "$1"; }
str() {
	local i
	u16 ${#1}
	for ((i = 0; i < ${#1}; i++)); do
		printf -v _c '%d' "'${1:i:1}"
		byte "$_c"
	done
}
# frame TYPE: turns the payload built so far into FRAME, header first.
frame() {
	local p=$P n=$PN
	P= PN=0
	u32 0x43455246; u16 1; u16 "$1"; u32 "$n"; u32 0
	FRAME=$P$p
	P= PN=0
}
send() { printf "$FRAME" >&"$1" || fail "cannot write to the agent port"; }
connect() { # connect VAR: a new connection to the agent port, its fd in VAR
	exec {fd}<>"/dev/tcp/127.0.0.1/$LISTEN_PORT" || fail "cannot connect to the agent port"
	printf -v "$1" '%s' "$fd"
}
START_NS=1700000000000000000
