# Shared helpers for the guest scenarios (sourced; POSIX sh + bash-isms avoided).
# Runs inside the test VM, in the repository root, with .build/ublk-raid built.
BIN=${UBLK_RAID_BIN:-.build/ublk-raid}
SCRATCH=${SCRATCH:-/tmp/scenario}
mkdir -p "$SCRATCH"

# A mark in the kernel log where this scenario starts: the kernel-log
# checks read only what came after it, so an earlier scenario's errors in
# the same boot are not blamed on this one.
KMSG_MARK="ublk-raid scenario $(basename "$0") $$ $(date +%s) start"
echo "$KMSG_MARK" >/dev/kmsg 2>/dev/null || true
# kernel_log: the kernel log since this scenario's mark (all of it when the
# mark cannot be found, e.g. the ring wrapped).
kernel_log() {
	dmesg | awk -v m="$KMSG_MARK" 'index($0, m) { n = NR } { l[NR] = $0 } END { for (i = n + 1; i <= NR; i++) print l[i] }'
}

fail() {
	echo "FAIL: $*" >&2
	if [ -n "${log:-}" ] && [ -s "$log.err" ]; then
		echo "--- last lines of $log.err:" >&2
		tail -n 40 "$log.err" >&2
	fi
	exit 1
}

# On exit (a failure included), stop a server still running so the next
# scenario finds its disks free: SIGTERM makes it delete its device.
stop_servers() {
	if [ -n "${SERVER_PID:-}" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
		umount /mnt/* 2>/dev/null || true
		kill -TERM "$SERVER_PID" 2>/dev/null
		wait "$SERVER_PID" 2>/dev/null || true
	fi
}
trap stop_servers EXIT
step() { echo "--- $*"; }

# start_server LOG ARGS...: starts `ublk-raid ARGS` in the background, waits
# until it prints the device path; sets SERVER_PID and DEV.
start_server() {
	log=$1
	shift
	: >"$log.out"
	"$BIN" "$@" >"$log.out" 2>"$log.err" &
	SERVER_PID=$!
	i=0
	while [ ! -s "$log.out" ]; do
		i=$((i + 1))
		if [ $i -gt 300 ] || ! kill -0 "$SERVER_PID" 2>/dev/null; then
			cat "$log.err" >&2
			fail "server ($*) did not come up"
		fi
		sleep 0.1
	done
	DEV=$(head -n1 "$log.out")
	[ -b "$DEV" ] || fail "server printed $DEV, which is not a block device"
}

# start_serve LOG [ARGS...]: `ublk-raid serve ARGS` in the background with
# the state file $STATE and no metrics listener (ARGS may give one); sets
# SERVER_PID (the exit trap stops it) and log (fail prints $log.err), and
# waits until its socket answers.
start_serve() {
	log=$1
	shift
	"$BIN" serve --state-file "$STATE" --metrics-listen "" "$@" >"$log.out" 2>"$log.err" &
	SERVER_PID=$!
	i=0
	until "$BIN" list -o json >/dev/null 2>&1 && grep -q '"serving"' "$log.err"; do
		i=$((i + 1))
		if [ $i -gt 600 ] || ! kill -0 "$SERVER_PID" 2>/dev/null; then
			fail "serve did not come up"
		fi
		sleep 0.1
	done
}

# del_and_wait N: deletes device N and waits for its server to exit 0.
del_and_wait() {
	"$BIN" del -n "$1" >/dev/null || fail "ublk-raid del -n $1"
	wait "$SERVER_PID" || fail "server exited with $?"
}

assert_no_devices() {
	i=0
	while ls /dev/ublkb* /dev/ublkc* >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -gt 50 ] && fail "ublk device nodes left: $(ls /dev/ublkb* /dev/ublkc* 2>&1)"
		sleep 0.1
	done
}

# wait_log FILE MSG: waits up to 10 s for a log line with "msg":"MSG" in FILE.
wait_log() {
	i=0
	until grep -q "\"msg\":\"$2\"" "$1"; do
		i=$((i + 1))
		[ $i -gt 100 ] && fail "no '$2' log line in $1"
		sleep 0.1
	done
}

# released DEV: nothing holds DEV open exclusively (a member the array let
# go); otherwise says which processes have it open and fails.
released() {
	python3 -c 'import os, sys; os.close(os.open(sys.argv[1], os.O_RDONLY | os.O_EXCL))' "$1" && return 0
	for f in /proc/[0-9]*/fd/*; do
		[ "$(readlink "$f" 2>/dev/null)" = "$1" ] && echo "held by $f: $(tr '\0' ' ' <"${f%/fd/*}/cmdline")"
	done
	fail "$1 is still held open"
}

# fio_errors OUTPUT_FILE: prints the total error count fio reported.
fio_errors() {
	awk -F'err=' '/err=/{split($2,a," "); s+=a[1]} END{print s+0}' "$1"
}

assert_no_kernel_io_errors() {
	if kernel_log | grep -Ei 'I/O error|blk_update_request|Buffer I/O|hung_task|blocked for more than' | grep -v 'vd[a-z].*discard' >/dev/null; then
		kernel_log | grep -Ei 'I/O error|blk_update_request|Buffer I/O|hung_task|blocked for more than' | tail -20 >&2
		fail "kernel log shows I/O errors or hung tasks"
	fi
}
