#!/bin/sh
# Superblocks crafted with a valid checksum (sbpatch.py) but impossible
# values on the 512 MiB members of a stopped raid1: data of 2^30 sectors
# (512 GiB), a data offset of 1 TiB, events 2^64-1. Assembling them (add
# without --level, as after a reboot) is refused with exit 1 in one line,
# and nothing is written to them (the events never wrap); the untouched
# superblocks then assemble.
set -eu
. scripts/vm/scenarios/lib.sh
. scripts/vm/scenarios/bad-lib.sh

bad_serve
reset "$C" "$D"
mkarray --level 1 "$C" "$D"
"$BIN" del -n "$N" >/dev/null || fail "del -n $N"
for d in "$C" "$D"; do
	dd if="$d" of="$SCRATCH/orig$(echo "$d" | tr / _)" bs=1M count=8 iflag=direct 2>/dev/null
done

# crafted NAME FIELD VALUE: FIELD set to VALUE on both members; assembly is
# refused and changes nothing. Then the original first 8 MiB (superblock,
# bitmap) are put back.
crafted() {
	CASE=$1
	step "$1: $2 = $3"
	for d in "$C" "$D"; do
		python3 "$HERE/sbpatch.py" "$d" "$2" "$3" || { bad "cannot craft $2=$3 on $d"; return; }
	done
	snap "$C" "$D"
	expect 1 "$C|$D|superblock|member" "$BIN" add "$C" "$D"
	none_created || true
	unchanged || true
	for d in "$C" "$D"; do
		dd if="$SCRATCH/orig$(echo "$d" | tr / _)" of="$d" bs=1M count=8 oflag=direct conv=notrunc 2>/dev/null
	done
}
crafted 5-data-sectors-2^30 data_sectors $((1 << 30))
crafted 5-data-offset-1TiB data_offset $((1 << 40))
crafted 9-events-max events 0xffffffffffffffff
CASE=control
step "the superblocks as written assemble"
mkarray "$C" "$D"
echo "ok: /dev/ublkb$N"

bad_finish bad-input-crafted
