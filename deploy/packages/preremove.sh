#!/bin/sh
# Before the files go: on removal (not upgrade) the service is stopped and disabled. dpkg runs
# `prerm remove` (Debian Policy 6.5), rpm %preun with 0 when no instance stays (rpm.org, "Package scriptlets").
set -eu
case "${1:-}" in
    remove | 0)
        if [ -d /run/systemd/system ]; then
            systemctl disable --now lunlat.service || true
        fi ;;
esac
