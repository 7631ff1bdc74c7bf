# Shared by rebuild-phase1.sh and rebuild-phase2.sh (sourced): the disks of
# a LEVEL (raid1 or raid10) round and the daemon.
#   raid1:  members /dev/vda /dev/vdb, NEW /dev/vdc, LOG /dev/vdd
#   raid10: members /dev/vda../dev/vdd, NEW /dev/vde, LOG /dev/vdf
# Phase 1 replaces the last member (OLD) by NEW; LOG, outside the array,
# records every acknowledged write (scripts/vm/crash/pcut.py).
. "$(dirname "$0")/daemon.sh"
case "$LEVEL" in
raid1) MEMBERS="/dev/vda /dev/vdb" NEW=/dev/vdc LOG=/dev/vdd ;;
raid10) MEMBERS="/dev/vda /dev/vdb /dev/vdc /dev/vdd" NEW=/dev/vde LOG=/dev/vdf ;;
*)
	echo "usage: $0 raid1|raid10" >&2
	exit 2
	;;
esac
OLD=${MEMBERS##* }
KEPT=${MEMBERS% *}
