#!/bin/sh
# add --level 1 over a disk that holds something (ext4, a stopped md
# member, an MBR or GPT partition table, swap, LVM if pvcreate exists) is
# refused with exit 1 in one line naming what was found and the disk, and
# writes nothing (the md superblock survives); --force then creates the
# array. blkid must see each signature first, or the case is a failure of
# the scenario.
set -eu
. scripts/vm/scenarios/lib.sh
. scripts/vm/scenarios/bad-lib.sh
MD=/dev/md/ubr-bad
trap 'mdadm --stop $MD >/dev/null 2>&1 || true; bad_cleanup' EXIT

bad_serve
reset "$E" "$F"

# sig NAME PATTERN: $E carries signature NAME (made by the caller, seen by
# blkid as PATTERN); add over $E $F is refused naming PATTERN and $E, with
# the bytes unchanged; then --force creates the array.
sig() {
	CASE=3-$1
	blkid -p "$E" >"$SCRATCH/blkid.txt" 2>&1 || true
	echo "blkid: $(cat "$SCRATCH/blkid.txt")"
	grep -Eqi -- "$2" "$SCRATCH/blkid.txt" || { bad "blkid does not see $1 on $E"; reset "$E" "$F"; return; }
	snap "$E" "$F"
	expect 1 "$2" "$BIN" add --level 1 "$E" "$F"
	echo "$OUT" | grep -q -- "$E" || bad "the refusal does not name $E: $OUT"
	none_created || true
	unchanged || true
	if [ "$1" = md ]; then
		mdadm --examine "$E" >/dev/null 2>&1 || bad "the md superblock of $E did not survive"
	fi
	expect 0 "^/dev/ublkb[0-9]+$" "$BIN" add --force --level 1 "$E" "$F"
	reset "$E" "$F"
}

step "3. ext4"
mkfs.ext4 -q -F "$E"
sig ext4 ext4
step "3. md member (mdadm --create, --stop)"
mdadm --create $MD --run --quiet --level=1 --raid-devices=2 --metadata=1.2 --assume-clean --bitmap=none \
	"$E" "$F" >"$SCRATCH/mdadm.txt" 2>&1 || { cat "$SCRATCH/mdadm.txt"; bad "mdadm --create"; }
mdadm --stop $MD >/dev/null 2>&1 || bad "mdadm --stop"
sig md "linux_raid|md"
step "3. MBR partition table"
# one Linux partition from sector 2048, 128 MiB; boot signature 55 aa
printf '\000\040\041\000\203\376\377\377\000\010\000\000\000\000\004\000' | dd of="$E" bs=1 seek=446 conv=notrunc 2>/dev/null
printf '\125\252' | dd of="$E" bs=1 seek=510 conv=notrunc 2>/dev/null
sync
sig mbr "dos|mbr|partition"
step "3. GPT"
if command -v sfdisk >/dev/null; then
	echo 'label: gpt' | sfdisk -q "$E" >/dev/null
else
	python3 "$HERE/mkgpt.py" "$E"
fi
sig gpt "gpt|partition"
step "3. swap"
mkswap "$E" >/dev/null
sig swap swap
if command -v pvcreate >/dev/null; then
	step "3. LVM"
	pvcreate -q -f "$E" >/dev/null
	sig lvm "lvm"
else
	echo "SKIP 3-lvm: no pvcreate on this host"
fi

bad_finish bad-input-signatures
