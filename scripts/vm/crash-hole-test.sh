#!/usr/bin/env bash
# The raid5/6 write hole under a power cut (issue 14), one round per mode
# in MODES (default: healthy5 degraded5 degraded6 healthy6 healthy5, five
# power cuts): boot a VM, write to a raid5/6 (degraded or not) with each
# acknowledged write recorded, cut the power
# (scripts/vm/crash/hole-phase1.sh); boot a second VM on the same disk
# files, assemble, lose a member (healthy5; healthy6: two) and read every
# sector back (hole-phase2.sh). Needs .build/ublk-raid (scripts/test-vm.sh builds it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
[ -x .build/ublk-raid ] || go build -o .build/ublk-raid ./cmd/ublk-raid
pass=0
failed=0
for mode in ${MODES:-healthy5 degraded5 degraded6 healthy6 healthy5}; do
	disks=(--disk 256M --disk 256M --disk 256M --disk 256M --disk 64M)
	case $mode in *6) disks=(--disk 256M --disk 256M --disk 256M --disk 256M --disk 256M --disk 64M) ;; esac
	dir=$(mktemp -d /tmp/ublk-raid-crash-hole.XXXXXX)
	echo "=== write hole, $mode"
	ok=1
	if ! scripts/vm/run.sh --cpus 2 --timeout 600 --disk-dir "$dir/disks" --out "$dir/out" "${disks[@]}" --expect-crash \
		"$@" -- scripts/vm/crash/hole-phase1.sh "$mode" 2>&1 | tee "$dir/phase1.log"; then
		ok=0
	fi
	if [ $ok = 1 ] && ! scripts/vm/run.sh --cpus 2 --timeout 600 --disk-dir "$dir/disks" --out "$dir/out" "${disks[@]}" \
		"$@" -- scripts/vm/crash/hole-phase2.sh "$mode" 2>&1 | tee "$dir/phase2.log"; then
		ok=0
	fi
	if [ $ok = 1 ]; then
		pass=$((pass + 1))
		echo "=== write hole, $mode: PASS"
		rm -rf "$dir"
	else
		failed=$((failed + 1))
		echo "=== write hole, $mode: FAIL (logs in $dir)"
	fi
done
echo "crash-hole: $pass passed, $failed failed"
[ "$failed" = 0 ]
