# The fio jobs every benchmark runs, one per line: NAME:KIND:FIO-ARGS...
# (KIND: iops or bw). Sourced by the guest scripts.
JOBS="randread-qd1:iops:--rw=randread:--bs=4k:--iodepth=1
randread-qd32:iops:--rw=randread:--bs=4k:--iodepth=32
randwrite-qd1:iops:--rw=randwrite:--bs=4k:--iodepth=1
randwrite-qd32:iops:--rw=randwrite:--bs=4k:--iodepth=32
seqread-1m-qd8:bw:--rw=read:--bs=1M:--iodepth=8
seqwrite-1m-qd8:bw:--rw=write:--bs=1M:--iodepth=8"
