#!/bin/sh
# Runs inside the test VM (scripts/test-vm.sh boots it): the Go tests that
# need the real kernel, then the shell scenarios. Disks: /dev/vda for the
# scenarios, /dev/vdb for the Go tests. Ends with "vm: N passed, M failed".
set -u
pass=0
failed=0
names=""
run() {
	name=$1
	shift
	echo "=== RUN $name"
	start=$(date +%s)
	if "$@"; then
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
	run "go:$pkg" sh -c "cd '$pkg' && UBLK_RAID_TEST_DISKS=/dev/vdb '../$t' -test.v -test.run '^TestVM' -test.timeout 900s"
done
for s in ${UBLK_RAID_SCENARIOS:-passthrough-fs kill-recover bad-input raid-fs raid1-fail raid1-hang kill-recover-raid1 serve}; do
	[ "$s" = none ] && continue
	run "$s" "scripts/vm/scenarios/$s.sh" /dev/vda
done
[ -z "$names" ] || echo "failed:$names"
echo "vm: $pass passed, $failed failed"
[ "$failed" = 0 ]
