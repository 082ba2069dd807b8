#!/bin/sh
# The docker-compose `lab` profile's entrypoint: the lab's LUNs (loop devices on the host's kernel,
# so the exporter sees them in the host's /proc/diskstats) under one phase of the reference, until
# the container stops; then every loop device, mount and fio process is removed again.
set -eu
phase="${LUNLAT_LAB_PHASE:-oltp}"
stop() { lunlat lab down; exit 0; }
trap stop TERM INT
lunlat lab up --config=/etc/lunlat/lab.yaml
lunlat lab phase "$phase"
sleep infinity &
wait $!
