#!/bin/sh
# Discard and write-zeroes on an array whose members lack them: null_blk
# devices (memory backed, no discard, no write-zeroes) - a raid1 of two,
# and a raid1 of one with a virtio disk that has both; files on tmpfs and
# on ext4 without extents (no FALLOC_FL_ZERO_RANGE). blkdiscard may be
# refused (the array need not offer discard), blkdiscard -z and fallocate
# --zero-range must zero the range (the kernel writes zeroes if it has to),
# and whatever happens the array keeps all its members: none is failed,
# check counts no mismatch, no I/O error in the kernel log.
set -eu
. scripts/vm/scenarios/lib.sh
VIRTIO=${DISCARD_DISK:-/dev/vdc}
STATE=$SCRATCH/dc-state/arrays.json
CFG=/sys/kernel/config/nullb
rm -rf "$SCRATCH/dc-state"
dmesg_start=$(dmesg | wc -l)
trap 'stop_servers; "$BIN" del --all >/dev/null 2>&1; for n in ubr0 ubr1; do [ -d $CFG/$n ] && { echo 0 >$CFG/$n/power; rmdir $CFG/$n; }; done; modprobe -r null_blk 2>/dev/null || true' EXIT

modprobe null_blk nr_devices=0 || fail "modprobe null_blk"
[ -d $CFG ] || fail "no $CFG (configfs null_blk)"
NULLS=""
for n in ubr0 ubr1; do
	mkdir $CFG/$n
	echo 256 >$CFG/$n/size # MiB
	echo 1 >$CFG/$n/memory_backed
	echo 0 >$CFG/$n/discard
	echo 512 >$CFG/$n/blocksize
	echo 1 >$CFG/$n/power
	d=/dev/nullb$(cat $CFG/$n/index)
	[ -b /dev/$n ] && d=/dev/$n # the configfs name, on kernels that name the disk after it
	NULLS="$NULLS $d"
done
set -- $NULLS
N0=$1
N1=$2
for d in $N0 $N1; do
	[ -b "$d" ] || fail "$d is not a block device"
	q=/sys/block/${d#/dev/}/queue
	echo "$d: discard_max_bytes $(cat $q/discard_max_bytes) write_zeroes_max_bytes $(cat $q/write_zeroes_max_bytes)"
done
dd if=/dev/zero of="$VIRTIO" bs=1M count=4 oflag=direct 2>/dev/null
q=/sys/block/${VIRTIO#/dev/}/queue
echo "$VIRTIO: discard_max_bytes $(cat $q/discard_max_bytes) write_zeroes_max_bytes $(cat $q/write_zeroes_max_bytes)"

start_serve "$SCRATCH/dc"

# zero_range DEV OFF_MIB LEN_MIB: the range reads as zeroes.
zeroes() {
	dd if="$1" bs=1M skip="$2" count="$3" iflag=direct 2>/dev/null | cmp -s -n $(($3 << 20)) - /dev/zero ||
		fail "$1: [$2, +$3) MiB does not read as zeroes"
}

# trial NAME MEMBERS...: raid1 over MEMBERS, random data, then discard,
# write-zeroes and zero-range on parts of it.
trial() {
	name=$1
	shift
	for d in "$@"; do dd if=/dev/zero of="$d" bs=1M count=4 oflag=direct conv=notrunc 2>/dev/null; done
	step "$name: raid1 over $*"
	# Not --assume-clean: the members hold what earlier scenarios left, and
	# check then compares only the regions written here (whole 4 MiB
	# regions of the first 48 MiB).
	DEV=$("$BIN" add --level 1 "$@") || fail "add"
	N=$(echo "$DEV" | tr -dc 0-9)
	q=/sys/block/${DEV#/dev/}/queue
	echo "$DEV: discard_max_bytes $(cat $q/discard_max_bytes) write_zeroes_max_bytes $(cat $q/write_zeroes_max_bytes)"
	dd if=/dev/urandom of="$DEV" bs=1M count=48 oflag=direct 2>/dev/null || fail "write"
	set +e
	out=$(blkdiscard -o 0 -l $((16 << 20)) "$DEV" 2>&1)
	echo "blkdiscard: exit $? $out"
	out=$(blkdiscard -z -o $((16 << 20)) -l $((16 << 20)) "$DEV" 2>&1)
	rc=$?
	set -e
	echo "blkdiscard -z: exit $rc $out"
	[ $rc = 0 ] || fail "blkdiscard -z on $DEV: $out; members: $("$BIN" detail -n "$N" -o json | jq -c '[.members[] | [.role, .state, .path]]')"
	zeroes "$DEV" 16 16
	fallocate --zero-range -o $((32 << 20)) -l $((16 << 20)) "$DEV" || fail "fallocate --zero-range on $DEV"
	zeroes "$DEV" 32 16
	sync
	j=$("$BIN" detail -n "$N" -o json)
	echo "$j" | jq -e '.state == "active" and ([.members[] | select(.state != "active")] | length == 0)' >/dev/null ||
		fail "$name: the array lost a member: $(echo "$j" | jq -c '{state, members}')"
	"$BIN" check -n "$N" >/dev/null || fail "check"
	"$BIN" detail -n "$N" --wait >"$SCRATCH/dc-detail.txt" || fail "detail --wait"
	grep -q 'last check: ok, mismatch_cnt 0' "$SCRATCH/dc-detail.txt" || { cat "$SCRATCH/dc-detail.txt"; fail "$name: check"; }
	"$BIN" detail -n "$N" -o json | jq -e '[.members[] | select(.state != "active")] | length == 0' >/dev/null ||
		fail "$name: a member failed during check"
	"$BIN" del -n "$N" >/dev/null || fail "del"
	echo "$name: ok"
}
# Each trial in a subshell: a failed one is reported and the next runs.
failed=""
(trial "two null_blk members (no discard, no write-zeroes)" $N0 $N1) || { failed="$failed null+null"; "$BIN" del --all >/dev/null 2>&1 || true; }
(trial "null_blk + virtio disk (discard, write-zeroes)" $N0 "$VIRTIO") || { failed="$failed null+virtio"; "$BIN" del --all >/dev/null 2>&1 || true; }
# Files as members: tmpfs can punch holes (discard) but not zero a range;
# ext4 without extents cannot zero a range either.
truncate -s 128M "$SCRATCH/dc0.img" "$SCRATCH/dc1.img"
(trial "two files on tmpfs (no FALLOC_FL_ZERO_RANGE)" "$SCRATCH/dc0.img" "$SCRATCH/dc1.img") ||
	{ failed="$failed tmpfs-files"; "$BIN" del --all >/dev/null 2>&1 || true; }
rm -f "$SCRATCH/dc0.img" "$SCRATCH/dc1.img"
EXT=${DISCARD_EXT_DISK:-/dev/vdd}
mkfs.ext4 -q -F -O ^extent,^64bit,^flex_bg "$EXT" || fail "mkfs.ext4 -O ^extent $EXT"
mkdir -p /mnt/dc-noext && mount "$EXT" /mnt/dc-noext || fail "mount $EXT"
truncate -s 128M /mnt/dc-noext/m0.img /mnt/dc-noext/m1.img
(trial "two files on ext4 without extents" /mnt/dc-noext/m0.img /mnt/dc-noext/m1.img) ||
	{ failed="$failed ext4-noextent-files"; "$BIN" del --all >/dev/null 2>&1 || true; }
umount /mnt/dc-noext
dd if=/dev/zero of="$EXT" bs=1M count=4 oflag=direct 2>/dev/null
[ -z "$failed" ] || fail "failed trials:$failed"
if dmesg | tail -n +$((dmesg_start + 1)) | grep -Ei 'I/O error|blk_update_request|Buffer I/O|hung_task|blocked for more than'; then
	fail "kernel log shows I/O errors or hung tasks"
fi
echo "discard: ok"
