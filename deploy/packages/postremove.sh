#!/bin/sh
# After the files are gone. On removal the runtime the package built (/opt/lunlat) and the drop-in
# links go too; on purge (Debian) /etc/lunlat as well, config and passwords included (Debian Policy
# 6.8: purge removes the configuration files). The lunlat user and group stay: files the admin gave
# them may remain, and a reused id would hand those to another account (Debian wiki,
# AccountHandlingInMaintainerScripts; Fedora's packaging guidelines, "Users and Groups": packages never
# remove them). `userdel lunlat` removes it by hand.
set -eu
case "${1:-}" in
    remove | purge | 0)
        rm -rf /opt/lunlat /usr/lib/systemd/system/lunlat.service.d
        # Only where systemd runs (not in a container or chroot); a failed reload is no failed removal.
        if [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi ;;
esac
if [ "${1:-}" = purge ]; then
    rm -rf /etc/lunlat
fi
