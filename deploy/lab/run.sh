#!/bin/sh
# The docker-compose `lab` profile's entrypoint: the lab's LUNs (loop devices on the host's kernel,
# so the exporter sees them in the host's /proc/diskstats) under one phase of the reference, until
# the container stops; then every loop device, mount and fio process is removed again.
set -eu
phase="${LUNLAT_LAB_PHASE:-oltp}"
stop() { lunlat-lab down; exit 0; }
trap stop TERM INT
# The lab description shipped with lunlat-lab (the reference architecture's LUNs).
lunlat-lab up
lunlat-lab phase "$phase"
sleep infinity &
wait $!
