#!/usr/bin/env bash
# Power-cut test of the write-intent bitmap (issue 4), ROUNDS times
# (default 5), alternating a raw device and a mounted ext4: boot a VM, write
# to a raid1 and cut the power (scripts/vm/crash/phase1.sh); boot a second VM
# on the same disk files and check resync, copies, fio verify and e2fsck
# (phase2.sh). Needs .build/ublk-raid (scripts/test-vm.sh builds it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
rounds=${ROUNDS:-5}
[ -x .build/ublk-raid ] || go build -o .build/ublk-raid ./cmd/ublk-raid
pass=0
failed=0
for r in $(seq 1 "$rounds"); do
	mode=raw
	[ $((r % 2)) = 0 ] && mode=fs
	mode=${CRASH_MODE:-$mode} # raw or fs for every round
	dir=$(mktemp -d /tmp/ublk-raid-crash.XXXXXX)
	echo "=== crash round $r ($mode)"
	ok=1
	scripts/vm/run.sh --cpus 2 --disk-dir "$dir/disks" --out "$dir/out" --disk 1G --disk 1G --expect-crash \
		-- scripts/vm/crash/phase1.sh "$mode" || ok=0
	if [ $ok = 1 ]; then
		scripts/vm/run.sh --cpus 2 --disk-dir "$dir/disks" --out "$dir/out" --disk 1G --disk 1G \
			-- scripts/vm/crash/phase2.sh "$mode" || ok=0
	fi
	if [ $ok = 1 ]; then
		pass=$((pass + 1))
		echo "=== crash round $r: PASS"
		rm -rf "$dir"
	else
		failed=$((failed + 1))
		echo "=== crash round $r: FAIL (logs in $dir/out)"
	fi
done
echo "crash: $pass passed, $failed failed"
[ "$failed" = 0 ]
