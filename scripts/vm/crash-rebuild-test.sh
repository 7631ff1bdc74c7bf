#!/usr/bin/env bash
# Power cut during a rebuild (issue "Trust under every fault", scenario ii),
# ROUNDS times (default 5; or the rounds ROUND_LIST names), alternating raid1 and raid10: boot a VM, create
# the array with `serve` + `add`, put a blank disk in a member's role
# (`replace`; rounds 3 and 4: `fail`, `remove`, `add --spare`) so that a
# (slowed) rebuild runs, write with O_DSYNC at random offsets recording every
# acknowledged write on a disk outside the array, cut the power at a random
# moment (scripts/vm/crash/rebuild-phase1.sh); boot a second VM on the same
# disk files, assemble with `add`, let the rebuild end, read every recorded
# write back and `check` for mismatch_cnt 0 (rebuild-phase2.sh).
# Needs .build/ublk-raid (scripts/test-vm.sh builds it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
rounds=${ROUNDS:-5}
[ -x .build/ublk-raid ] || go build -o .build/ublk-raid ./cmd/ublk-raid
pass=0
failed=0
why=
# ROUND_LIST picks rounds (e.g. "2 3": raid10 replace, raid1 spare).
for r in ${ROUND_LIST:-$(seq 1 "$rounds")}; do
	level=raid1
	disks=(--disk 256M --disk 256M --disk 256M --disk 64M)
	if [ $((r % 2)) = 0 ]; then
		level=raid10
		disks=(--disk 256M --disk 256M --disk 256M --disk 256M --disk 256M --disk 64M)
	fi
	method=replace
	case $r in 3 | 4) method=spare ;; esac
	dir=$(mktemp -d /tmp/ublk-raid-crash-rebuild.XXXXXX)
	echo "=== power cut during rebuild, round $r ($level, $method)"
	ok=1
	# (pipefail: a pipeline fails with run.sh)
	if ! scripts/vm/run.sh --cpus 2 --timeout 600 --disk-dir "$dir/disks" --out "$dir/out" "${disks[@]}" --expect-crash \
		-- scripts/vm/crash/rebuild-phase1.sh "$level" "$method" 2>&1 | tee "$dir/phase1.log"; then
		ok=0
	fi
	if [ $ok = 1 ] && ! scripts/vm/run.sh --cpus 2 --timeout 600 --disk-dir "$dir/disks" --out "$dir/out" "${disks[@]}" \
		-- scripts/vm/crash/rebuild-phase2.sh "$level" 2>&1 | tee "$dir/phase2.log"; then
		ok=0
	fi
	if [ $ok = 1 ]; then
		pass=$((pass + 1))
		echo "=== power cut during rebuild, round $r ($level, $method): PASS"
		rm -rf "$dir"
	else
		failed=$((failed + 1))
		echo "=== power cut during rebuild, round $r ($level, $method): FAIL (logs and disks in $dir)"
		# Why, again at the end: CI shows the tail of the output.
		why+="round $r ($level, $method): $(grep -h 'FAIL\|TIMEOUT' "$dir"/phase*.log 2>/dev/null | tail -n 3 | tr '\n' ' ')"$'\n'
	fi
done
[ -z "$why" ] || printf 'crash-rebuild failures:\n%s' "$why"
echo "crash-rebuild: $pass passed, $failed failed"
[ "$failed" = 0 ]
