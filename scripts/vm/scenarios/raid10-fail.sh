#!/bin/sh
# raid10 (far layout, 4 members + a spare, all dm devices on one disk)
# under the daemon: a member with a range that fails reads (dm-flakey
# error_reads) is read around — fio verify passes; the ranges are
# rewritten from the other copy (read repair) and read back, which still
# fails, so the member is failed (md's fix_read_error) and the spare
# takes its role; the device, whole again and wiped, is the next spare.
# Then a member dies (dm error) during fio randwrite verify: fio sees no
# error, the spare takes the role and is rebuilt, check finds no
# mismatch, and the dead device is let go.
set -eu
. scripts/vm/scenarios/lib.sh
DISK=${1:-/dev/vda}
STATE=$SCRATCH/r10-state/arrays.json
METRICS=127.0.0.1:9998
SZ=$((288 * 2048)) # sectors per dm device (288 MiB)
rm -rf "$SCRATCH/r10-state"
dd if=/dev/zero of="$DISK" bs=1M count=4 oflag=direct 2>/dev/null
for i in 0 1 2 3 4; do
	dd if=/dev/zero of="$DISK" bs=1M count=2 seek=$((i * 288)) oflag=direct 2>/dev/null
	dmsetup create "ubr-t$i" --table "0 $SZ linear $DISK $((i * SZ))" || fail "dmsetup create ubr-t$i"
done
cleanup() {
	if [ -n "${SERVER_PID:-}" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
		"$BIN" del --all >/dev/null 2>&1 || true
		kill -TERM "$SERVER_PID" 2>/dev/null
		wait "$SERVER_PID" 2>/dev/null || true
	fi
	for i in 0 1 2 3 4; do dmsetup remove "ubr-t$i" 2>/dev/null || true; done
}
trap cleanup EXIT
M0=/dev/mapper/ubr-t0
M1=/dev/mapper/ubr-t1
M2=/dev/mapper/ubr-t2
M3=/dev/mapper/ubr-t3
SP=/dev/mapper/ubr-t4

start_serve "$SCRATCH/r10" --metrics-listen "$METRICS"
DEV=$("$BIN" add --level 10 --layout f2 --chunk 64K --spare "$SP" "$M0" "$M1" "$M2" "$M3") || fail "add"
N=$(echo "$DEV" | tr -dc 0-9)
D=ublkb$N
detail() { "$BIN" detail -n "$N" >"$SCRATCH/r10-detail.txt" || true; }
row() { awk -v want="$*" '{ $1 = $1 } $0 == want { found = 1 } END { exit !found }' "$SCRATCH/r10-detail.txt"; }

step "fill $DEV with verifiable data"
fio --name=fill --filename="$DEV" --rw=write --bs=256k --iodepth=8 --direct=1 --ioengine=libaio --eta=never \
	--verify=crc32c --do_verify=0 --verify_state_save=0 --size=256M --output="$SCRATCH/r10-fill.fio" || fail "fio fill"

step "member 2 fails reads of a 64 MiB range (dm-flakey error_reads): reads go to the other copy, member 2 is failed"
# 4 MiB into member 2's data area (after the 1 MiB data offset), in the
# half of it that holds f2's first copies.
bad=$((2048 + 8192))
badn=131072
dmsetup suspend ubr-t2
dmsetup reload ubr-t2 --table "0 $bad linear $DISK $((2 * SZ))
$bad $badn flakey $DISK $((2 * SZ + bad)) 0 1 1 error_reads
$((bad + badn)) $((SZ - bad - badn)) linear $DISK $((2 * SZ + bad + badn))" || fail "dm-flakey table"
dmsetup resume ubr-t2
dd if=$M2 of=/dev/null bs=4k skip=$((bad / 8)) count=1 iflag=direct 2>/dev/null && fail "dm-flakey does not fail reads"
fio --name=fill --filename="$DEV" --rw=write --bs=256k --iodepth=8 --direct=1 --ioengine=libaio --eta=never \
	--verify=crc32c --verify_only=1 --verify_state_save=0 --size=256M --output="$SCRATCH/r10-verify.fio" || { cat "$SCRATCH/r10-verify.fio"; fail "fio verify"; }
[ "$(fio_errors "$SCRATCH/r10-verify.fio")" = 0 ] || { cat "$SCRATCH/r10-verify.fio"; fail "fio verify reported errors"; }
# A rewrite that does not read back fails its member, as md's
# fix_read_error does (a range that reads again after its rewrite is
# repaired and the member kept: TestReadRepairVerifiesRewrite and
# TestReadRepairWaitsForWrites; dm-flakey cannot be cured by a write).
wait_log "$SCRATCH/r10.err" "member failed"
grep '"msg":"member failed"' "$SCRATCH/r10.err" | grep -q '"role":2,"member":"/dev/mapper/ubr-t2"' || fail "the member failed is not ubr-t2"
wait_log "$SCRATCH/r10.err" "spare activated"
"$BIN" detail -n "$N" --wait >"$SCRATCH/r10-detail.txt" || fail "detail --wait"
row 2 active "$SP" || { cat "$SCRATCH/r10-detail.txt"; fail "the spare did not take role 2"; }
released "$M2"
dmsetup suspend ubr-t2 && dmsetup reload ubr-t2 --table "0 $SZ linear $DISK $((2 * SZ))" && dmsetup resume ubr-t2 ||
	fail "ubr-t2 whole again"
# Wiped (superblock and data signatures), it is a blank spare again.
dd if=/dev/zero of="$M2" bs=1M count=8 oflag=direct 2>/dev/null || fail "wipe the start of $M2"
dd if=/dev/zero of="$M2" bs=1M count=2 seek=$((SZ / 2048 - 2)) oflag=direct 2>/dev/null || fail "wipe the end of $M2"
"$BIN" add -n "$N" --spare "$M2" >/dev/null || fail "add $M2 as a spare"

step "member 1 dies during fio randwrite verify: no error, the spare takes role 1"
fio --name=rw --filename="$DEV" --rw=randwrite --bs=8k --iodepth=16 --direct=1 --ioengine=libaio --eta=never \
	--verify_state_save=0 --size=96M --verify=crc32c --do_verify=1 --verify_fatal=1 --output="$SCRATCH/r10-rw.fio" &
FIO=$!
sleep 3
kill -0 $FIO 2>/dev/null || fail "fio ended before the failure was injected"
dmsetup suspend ubr-t1 && dmsetup reload ubr-t1 --table "0 $SZ error" && dmsetup resume ubr-t1 || fail "dm-error swap"
wait $FIO || { cat "$SCRATCH/r10-rw.fio"; fail "fio failed"; }
[ "$(fio_errors "$SCRATCH/r10-rw.fio")" = 0 ] || { cat "$SCRATCH/r10-rw.fio"; fail "fio reported errors"; }
[ "$(grep -c '"msg":"member failed"' "$SCRATCH/r10.err")" -ge 2 ] || fail "no 'member failed' log line for member 1"
i=0
until [ "$(grep -c '"msg":"spare activated"' "$SCRATCH/r10.err")" -ge 2 ]; do
	i=$((i + 1))
	[ $i -gt 100 ] && fail "no second 'spare activated' log line"
	sleep 0.1
done
"$BIN" detail -n "$N" --wait >"$SCRATCH/r10-detail.txt" || fail "detail --wait"
cat "$SCRATCH/r10-detail.txt"
row 1 active "$M2" && grep -q 'State : active' "$SCRATCH/r10-detail.txt" || fail "detail after the spare's rebuild"
released "$M1"

step "check: the copies agree; the data verifies"
"$BIN" check -n "$N" || fail "check"
"$BIN" detail -n "$N" --wait >"$SCRATCH/r10-detail.txt" || fail "detail --wait"
grep -q 'last check: ok, mismatch_cnt 0' "$SCRATCH/r10-detail.txt" || { cat "$SCRATCH/r10-detail.txt"; fail "check"; }
fio --name=rw --filename="$DEV" --rw=randwrite --bs=8k --iodepth=16 --direct=1 --ioengine=libaio --eta=never \
	--verify_state_save=0 --size=96M --verify=crc32c --verify_only=1 --output="$SCRATCH/r10-v2.fio" ||
	{ cat "$SCRATCH/r10-v2.fio"; fail "fio verify after the rebuild"; }
[ "$(fio_errors "$SCRATCH/r10-v2.fio")" = 0 ] || { cat "$SCRATCH/r10-v2.fio"; fail "verify after the rebuild reported errors"; }
[ "$("$BIN" del -n "$N")" = "deleted $DEV" ] || fail "del"
assert_no_devices
echo "raid10-fail: ok"
