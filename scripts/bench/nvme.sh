# shellcheck shell=sh
# The guest's emulated NVMe namespaces in serial order (probing is
# asynchronous), NVME_N of them (default 4): sets ALL, D2 (the first two),
# D4 (the first four) and D5 (the first five, when there are), or exits.
# Sourced by the guest bench scripts.
NVME_N=${NVME_N:-4}
nvme() {
	i=0
	while [ "$(ls -d /sys/block/nvme*n1 2>/dev/null | wc -l)" -lt "$NVME_N" ] && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	for s in $(seq 0 $((NVME_N - 1))); do
		for d in /sys/block/nvme*n1; do
			[ "$(tr -d ' ' <"$d/device/serial")" = "nvme$s" ] && echo "/dev/${d##*/}"
		done
	done
	return 0
}
ALL=$(nvme | tr '\n' ' ')
D2=$(echo "$ALL" | cut -d' ' -f1-2)
D4=$(echo "$ALL" | cut -d' ' -f1-4)
D5=$(echo "$ALL" | cut -d' ' -f1-5)
[ "$(echo "$ALL" | wc -w)" = "$NVME_N" ] || { echo "want $NVME_N NVMe namespaces, found: $ALL"; ls -l /sys/block/; exit 1; }
