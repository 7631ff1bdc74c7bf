# shellcheck shell=sh
# The guest's four emulated NVMe namespaces in serial order (probing is
# asynchronous): sets ALL, D2 (the first two) and D4 (all four), or exits.
# Sourced by the guest bench scripts.
nvme() {
	i=0
	while [ "$(ls -d /sys/block/nvme*n1 2>/dev/null | wc -l)" -lt 4 ] && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	for s in 0 1 2 3; do
		for d in /sys/block/nvme*n1; do
			[ "$(tr -d ' ' <"$d/device/serial")" = "nvme$s" ] && echo "/dev/${d##*/}"
		done
	done
	return 0
}
ALL=$(nvme | tr '\n' ' ')
D2=$(echo "$ALL" | cut -d' ' -f1-2)
D4=$(echo "$ALL" | cut -d' ' -f1-4)
[ "$(echo "$D4" | wc -w)" = 4 ] || { echo "want 4 NVMe namespaces, found: $ALL"; ls -l /sys/block/; exit 1; }
