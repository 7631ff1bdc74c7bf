#!/bin/sh
# Runs inside the test VM (scripts/test-vm.sh boots it): the Go tests that
# need the real kernel, then the shell scenarios. Disks: /dev/vda for the
# scenarios, /dev/vdb for the Go tests. Ends with "vm: N passed, M failed".
set -u
pass=0
failed=0
names=""
# hung NAME: what a test that ran past its limit was waiting for: kernel
# stacks of the processes involved, Go goroutine dumps of the servers
# (SIGQUIT writes them to their logs), the servers' logs.
hung() {
	echo "=== HUNG $1: diagnostics"
	pgrep -a -f 'ublk-raid|fio|dmsetup|mkfs|\.test'
	for p in $(pgrep -f 'ublk-raid|fio|dmsetup|\.test'); do
		echo "--- kernel stacks of $p: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)"
		for t in /proc/"$p"/task/*; do
			s=$(cat "$t/stack" 2>/dev/null)
			[ -n "$s" ] && echo "$s" | head -n 12
		done
	done
	dmesg | tail -n 40
	pkill -QUIT -f 'ublk-raid (run|serve|passthrough)'
	sleep 2
	for f in /tmp/scenario/*.err; do
		[ -s "$f" ] || continue
		echo "--- tail of $f"
		tail -c 30000 "$f"
	done
}

# limited SECONDS CMD...: runs CMD; past SECONDS it reports what CMD waits
# for, kills it and fails.
limited() {
	limit=$1
	shift
	"$@" &
	pid=$!
	waited=0
	while kill -0 "$pid" 2>/dev/null; do
		if [ "$waited" -ge "$limit" ]; then
			hung "$name"
			pkill -KILL -P "$pid" 2>/dev/null
			kill -KILL "$pid" 2>/dev/null
			pkill -KILL -f 'ublk-raid|fio' 2>/dev/null
			wait "$pid" 2>/dev/null
			return 124
		fi
		sleep 1
		waited=$((waited + 1))
	done
	wait "$pid"
}

run() {
	name=$1
	shift
	echo "=== RUN $name"
	start=$(date +%s)
	if limited 600 "$@"; then
		pass=$((pass + 1))
		echo "=== PASS $name ($(($(date +%s) - start))s)"
	else
		failed=$((failed + 1))
		names="$names $name"
		echo "=== FAIL $name ($(($(date +%s) - start))s)"
	fi
}
for t in .build/vmtest/*.test; do
	pkg=$(basename "$t" .test)
	run "go:$pkg" sh -c "cd '$pkg' && UBLK_RAID_TEST_DISKS=/dev/vdb '../$t' -test.v -test.run '^TestVM' -test.timeout 500s"
done
for s in ${UBLK_RAID_SCENARIOS:-passthrough-fs kill-recover bad-input bad-input-replace bad-input-signatures bad-input-crafted rebuild-kill discard raid-fs raid1-fail raid1-hang raid1-hang-zc kill-recover-raid1 serve live-upgrade raid10-fail grow grow-raid56 raid56 del-pending}; do
	[ "$s" = none ] && continue
	case " ${UBLK_RAID_SKIP_SCENARIOS:-} " in *" $s "*) continue ;; esac
	run "$s" "scripts/vm/scenarios/$s.sh" /dev/vda
done
[ -z "$names" ] || echo "failed:$names"
echo "vm: $pass passed, $failed failed"
[ "$failed" = 0 ]
