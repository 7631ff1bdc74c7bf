#!/bin/sh
# kill-recover.sh on a raid1 array over two disks.
KR_RAID="/dev/vdc /dev/vdd" exec scripts/vm/scenarios/kill-recover.sh
