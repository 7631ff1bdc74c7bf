# Shared by hole-phase1.sh and hole-phase2.sh (sourced): the disks of a
# write-hole round (MODE) and the daemon.
#   healthy5:  raid5 on /dev/vda../dev/vdd, all in; phase 2 fails /dev/vda
#              right after the assembly, before the dirty regions' resync
#   degraded5: raid5 on /dev/vda../dev/vdd, /dev/vdd failed and removed
#              before the writes
#   degraded6: raid6 on /dev/vda../dev/vde, /dev/vdd and /dev/vde failed
#              and removed before the writes
#   healthy6:  raid6 on /dev/vda../dev/vde, all in; phase 2 fails /dev/vda
#              and /dev/vdb right after the assembly, before the resync
# LOG, a disk outside the array, records every acknowledged write
# (scripts/vm/crash/pcut.py).
. "$(dirname "$0")/daemon.sh"
case "$MODE" in
healthy5) LEVEL=5 MEMBERS="/dev/vda /dev/vdb /dev/vdc /dev/vdd" GONE="" LOG=/dev/vde ;;
degraded5) LEVEL=5 MEMBERS="/dev/vda /dev/vdb /dev/vdc /dev/vdd" GONE="/dev/vdd" LOG=/dev/vde ;;
degraded6) LEVEL=6 MEMBERS="/dev/vda /dev/vdb /dev/vdc /dev/vdd /dev/vde" GONE="/dev/vdd /dev/vde" LOG=/dev/vdf ;;
healthy6) LEVEL=6 MEMBERS="/dev/vda /dev/vdb /dev/vdc /dev/vdd /dev/vde" GONE="" LOG=/dev/vdf ;;
*)
	echo "usage: $0 healthy5|degraded5|degraded6|healthy6" >&2
	exit 2
	;;
esac
PRESENT=$MEMBERS
for g in $GONE; do PRESENT=$(echo "$PRESENT" | sed "s|$g||"); done
