#!/bin/sh
# Online grow (mdadm --grow --size=max): a raid1 on two small members
# (dm-linear, 160 MiB) with ext4 and fio-verified data; each member is
# replaced by a larger disk (rebuilt); then `grow -n N --size max`.
# Where the device has UBLK_F_UPDATE_SIZE (6.16+; 7.3 here): the device
# grows while mounted and fio verify writes to it (no error), resize2fs grows ext4 online, the old data verifies,
# fio writes and verifies across the new space, check finds mismatch_cnt
# 0, and a reassembly keeps the grown size. Without it (6.12): grow is
# refused with exit 1 and one line naming UPDATE_SIZE, and the members'
# superblock and bitmap area are byte for byte what they were.
set -eu
. scripts/vm/scenarios/lib.sh
set -- ${GROW_DISKS:-/dev/vdc /dev/vdd /dev/vde /dev/vdf}
A=$1
B=$2
C=$3
D=$4
STATE=$SCRATCH/grow-state/arrays.json
MNT=/mnt/grow
rm -rf "$SCRATCH/grow-state"
for d in $A $B $C $D; do dd if=/dev/zero of="$d" bs=1M count=4 oflag=direct 2>/dev/null; done
small=$((160 * 2048))
dmsetup create ubr-g0 --table "0 $small linear $A 0" || fail "dmsetup create"
dmsetup create ubr-g1 --table "0 $small linear $B 0" || fail "dmsetup create"
cleanup() {
	fsfreeze -u "$MNT" 2>/dev/null || true
	umount "$MNT" 2>/dev/null || true
	stop_servers
	dmsetup remove ubr-g0 2>/dev/null || true
	dmsetup remove ubr-g1 2>/dev/null || true
}
trap cleanup EXIT
json() { "$BIN" detail -n "$N" -o json; }
field() { json | python3 -c 'import json,sys; d=json.load(sys.stdin); v=d
for k in sys.argv[1].split("."): v=v[k]
print(v if not isinstance(v, list) else " ".join(v))' "$1"; }

step "serve, add --level 1 over two 160 MiB members, ext4, fio data"
start_serve "$SCRATCH/gr1"
DEV=$("$BIN" add --level 1 --name grow /dev/mapper/ubr-g0 /dev/mapper/ubr-g1) || fail "add"
N=$(echo "$DEV" | tr -dc 0-9)
# (4 KiB blocks: see raid-fs.sh on 1 KiB ones with zero copy in this VM.)
mkfs.ext4 -q -F -b 4096 "$DEV" || fail "mkfs"
mkdir -p "$MNT"
mount "$DEV" "$MNT" || fail "mount"
fio --name=old --filename="$MNT/old.fio" --rw=randwrite --bs=8k --iodepth=8 --direct=1 --ioengine=libaio --eta=never \
	--verify_state_save=0 --size=64M --verify=crc32c --do_verify=1 --verify_fatal=1 --output="$SCRATCH/gr-old.fio" ||
	{ cat "$SCRATCH/gr-old.fio"; fail "fio old"; }
old_size=$(blockdev --getsize64 "$DEV")
cur_size=$old_size
old_fs=$(df -B1 --output=size "$MNT" | tail -n1 | tr -d ' ')

step "replace each member by a larger disk"
# The new disks hold different leftovers (the worst case: new disks are
# usually zeroed). The space the grow adds is never written, so no initial
# sync copies it; the first write to each of its regions has the rest of
# that region synced, so check still finds the copies equal (CI on 7.3,
# before that: mismatch_cnt 44).
for dv in "$C:132" "$D:245"; do # (octal bytes: 0x5a, 0xa5)
	d=${dv%:*}
	mb=$(($(blockdev --getsize64 "$d") >> 20))
	tr '\000' "\\${dv#*:}" </dev/zero | dd of="$d" bs=1M count=$mb iflag=fullblock oflag=direct 2>/dev/null ||
		fail "filling $d"
done
[ "$(od -An -tx1 -N1 "$C")" != "$(od -An -tx1 -N1 "$D")" ] || fail "$C and $D hold the same bytes"
"$BIN" replace -n "$N" /dev/mapper/ubr-g0 --with "$C" || fail "replace 0"
"$BIN" detail -n "$N" --wait >/dev/null || fail "detail --wait"
"$BIN" replace -n "$N" /dev/mapper/ubr-g1 --with "$D" || fail "replace 1"
"$BIN" detail -n "$N" --wait >/dev/null || fail "detail --wait"
[ "$(field state)" = active ] || { json; fail "not active after the rebuilds"; }
[ "$(blockdev --getsize64 "$DEV")" = "$old_size" ] || fail "the size changed before grow"

step "bad usage: exit 2"
set +e
"$BIN" grow -n "$N" >/dev/null 2>&1
[ $? = 2 ] || fail "grow without --size: want exit 2"
"$BIN" grow -n "$N" --size 12Q >/dev/null 2>&1
[ $? = 2 ] || fail "grow --size 12Q: want exit 2"
"$BIN" grow --size max >/dev/null 2>&1
[ $? = 2 ] || fail "grow without -n: want exit 2"
set -e

# meta DEV: the superblock and the start of the bitmap area, hashed.
meta() { dd if="$1" bs=4096 skip=1 count=64 2>/dev/null | md5sum; }
# quiet: the array's own metadata writes stop changing the members (the
# filesystem frozen, the bitmap's dirty bits cleared after their delay),
# so that a refusal's "nothing changed" can be checked byte for byte. CI
# saw a refusal "change a member" when bits cleared meanwhile.
quiet() {
	fsfreeze -f "$MNT" || fail "fsfreeze"
	i=0
	until [ "$(field bitmap.dirty_regions)" = 0 ]; do
		i=$((i + 1))
		[ $i -le 120 ] || fail "bitmap regions still dirty 2 minutes after the filesystem was frozen"
		sleep 1
	done
	prev=
	i=0
	while :; do
		cur="$(meta "$C")$(meta "$D")"
		[ "$cur" = "$prev" ] && break
		prev=$cur
		i=$((i + 1))
		[ $i -le 60 ] || fail "the members' metadata kept changing for 2 minutes with the filesystem frozen"
		sleep 2
	done
}
refused() { # refused WHAT ARGS...: exit 1, one line, members unchanged
	what=$1
	shift
	quiet
	mc=$(meta "$C")
	md=$(meta "$D")
	set +e
	"$BIN" grow -n "$N" "$@" 2>"$SCRATCH/gr-ref.err"
	rc=$?
	set -e
	[ $rc = 1 ] || { cat "$SCRATCH/gr-ref.err"; fail "grow $* ($what): exit $rc, want 1"; }
	[ "$(wc -l <"$SCRATCH/gr-ref.err")" = 1 ] || { cat "$SCRATCH/gr-ref.err"; fail "grow $*: not one line"; }
	[ "$(meta "$C")" = "$mc" ] && [ "$(meta "$D")" = "$md" ] || fail "grow $* ($what) changed a member"
	fsfreeze -u "$MNT" || fail "fsfreeze -u"
	[ "$(blockdev --getsize64 "$DEV")" = "$cur_size" ] || fail "grow $* ($what) changed the size"
	echo "refused ($what): $(cat "$SCRATCH/gr-ref.err")"
}
refused "shrink" --size 64M
refused "larger than the members" --size 100G

if ! field ublk_flags | grep -qw update_size; then
	step "$(uname -r): no UBLK_F_UPDATE_SIZE: grow is refused"
	refused "no UPDATE_SIZE" --size max
	grep -q UPDATE_SIZE "$SCRATCH/gr-ref.err" || fail "the refusal does not name UPDATE_SIZE"
	fio --name=old --filename="$MNT/old.fio" --rw=randwrite --bs=8k --size=64M --verify=crc32c --verify_only=1 \
		--verify_state_save=0 --eta=never --output="$SCRATCH/gr-old2.fio" || fail "old data no longer verifies"
	umount "$MNT"
	"$BIN" del -n "$N" >/dev/null || fail "del"
	echo "grow: ok (refused on $(uname -r))"
	exit 0
fi

step "$(uname -r): grow -n $N --size max while mounted, under fio verify"
fio --name=busy --filename="$MNT/busy.fio" --rw=randwrite --bs=8k --iodepth=16 --direct=1 --ioengine=libaio \
	--eta=never --verify_state_save=0 --size=32M --loops=4 --verify=crc32c --do_verify=1 --verify_fatal=1 \
	--output="$SCRATCH/gr-busy.fio" &
FIO=$!
sleep 1
kill -0 $FIO 2>/dev/null || { cat "$SCRATCH/gr-busy.fio"; fail "fio ended before the grow"; }
"$BIN" grow -n "$N" --size max >"$SCRATCH/gr-grow.out" 2>"$SCRATCH/gr-grow.err" ||
	{ cat "$SCRATCH/gr-grow.err"; tail -n 30 "$SCRATCH/gr1.err"; fail "grow exited $?"; }
cat "$SCRATCH/gr-grow.out"
wait $FIO || { cat "$SCRATCH/gr-busy.fio"; fail "fio under grow exited $?"; }
[ "$(fio_errors "$SCRATCH/gr-busy.fio")" = 0 ] || { cat "$SCRATCH/gr-busy.fio"; fail "fio under grow reported errors"; }
new_size=$(blockdev --getsize64 "$DEV")
cur_size=$new_size
[ "$new_size" -gt $((old_size + 256 * 1048576)) ] || fail "device is $new_size bytes after grow (was $old_size)"
[ "$(field size_bytes)" = "$new_size" ] || fail "detail says $(field size_bytes), the device $new_size"
"$BIN" examine -o json "$C" | grep -q "\"data_bytes\": $new_size" || { "$BIN" examine "$C"; fail "superblock of $C does not hold the new size"; }
refused "already grown: max again is a no-op" --size 64M
"$BIN" grow -n "$N" --size max >/dev/null || fail "grow --size max again (no-op) failed"

step "resize2fs online, old data verifies, fio across the new space"
resize2fs "$DEV" >"$SCRATCH/gr-resize.out" 2>&1 || { cat "$SCRATCH/gr-resize.out"; fail "resize2fs"; }
new_fs=$(df -B1 --output=size "$MNT" | tail -n1 | tr -d ' ')
[ "$new_fs" -gt $((old_fs + 256 * 1048576)) ] || fail "ext4 is $new_fs bytes after resize2fs (was $old_fs)"
fio --name=old --filename="$MNT/old.fio" --rw=randwrite --bs=8k --size=64M --verify=crc32c --verify_only=1 \
	--verify_state_save=0 --eta=never --output="$SCRATCH/gr-old2.fio" || { cat "$SCRATCH/gr-old2.fio"; fail "old data no longer verifies"; }
fio --name=new --filename="$MNT/new.fio" --rw=write --bs=256k --iodepth=8 --direct=1 --ioengine=libaio --eta=never \
	--verify_state_save=0 --size=320M --verify=crc32c --do_verify=1 --verify_fatal=1 --output="$SCRATCH/gr-new.fio" ||
	{ cat "$SCRATCH/gr-new.fio"; fail "fio new"; }
[ "$(fio_errors "$SCRATCH/gr-new.fio")" = 0 ] || fail "fio new reported errors"
sync

step "check: mismatch_cnt 0"
"$BIN" detail -n "$N" --wait >/dev/null || true
"$BIN" check -n "$N" >/dev/null || fail "check"
"$BIN" detail -n "$N" --wait >/dev/null || true
[ "$(field sync.mismatch_cnt)" = 0 ] || { json; fail "check found mismatches"; }

step "reassembly keeps the grown size"
umount "$MNT"
"$BIN" del -n "$N" >/dev/null || fail "del"
DEV=$("$BIN" add "$C" "$D") || fail "assemble"
N=$(echo "$DEV" | tr -dc 0-9)
[ "$(blockdev --getsize64 "$DEV")" = "$new_size" ] || fail "reassembled at $(blockdev --getsize64 "$DEV"), grown was $new_size"
mount "$DEV" "$MNT" || fail "mount after reassembly"
fio --name=new --filename="$MNT/new.fio" --rw=write --bs=256k --size=320M --verify=crc32c --verify_only=1 \
	--verify_state_save=0 --eta=never --output="$SCRATCH/gr-new2.fio" || fail "new data no longer verifies after reassembly"
umount "$MNT"
"$BIN" del -n "$N" >/dev/null || fail "del"
assert_no_kernel_io_errors
echo "grow: ok (grown on $(uname -r))"
