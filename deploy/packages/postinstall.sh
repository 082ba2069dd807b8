#!/bin/sh
# After the files are in place: the runtime, the credentials directory, the systemd drop-ins this
# systemd understands, then the service (docs/deploy/packages.md). dpkg runs it as `postinst configure
# [OLD-VERSION]` (Debian Policy 6.5), rpm as %post with 1 on install and 2 on upgrade.
set -eu
case "${1:-}" in
    configure | [1-9]*) ;;
    *) exit 0 ;;
esac

/usr/lib/lunlat/lunlat-runtime build

# Database passwords and TLS keys: files here, root-owned and readable by the lunlat group, which the
# service reads directly on every systemd version (docs/deploy/systemd.md, "Database passwords").
# Made here, not shipped, so an upgrade never touches what the admin put in it.
if [ ! -d /etc/lunlat/credentials ]; then
    install -d -m 0750 -o root -g lunlat /etc/lunlat/credentials
fi

# Hardening newer than systemd 239 (the unit's floor): each drop-in in /usr/share/lunlat/systemd
# states its minimum version on a "# minimum systemd: N" line and is linked in where systemd is at
# least that new. `systemctl --version` prints "systemd N (…)" first (systemctl(1)).
dropins=/usr/lib/systemd/system/lunlat.service.d
version="$(systemctl --version 2>/dev/null | sed -n '1s/^systemd \([0-9]*\).*/\1/p')"
mkdir -p "$dropins"
for conf in /usr/share/lunlat/systemd/*.conf; do
    minimum="$(sed -n 's/^# minimum systemd: \([0-9]*\)$/\1/p' "$conf")"
    if [ -n "$version" ] && [ -n "$minimum" ] && [ "$version" -ge "$minimum" ]; then
        ln -sf "$conf" "$dropins/$(basename "$conf")"
    else
        rm -f "$dropins/$(basename "$conf")"
    fi
done

# First install on Debian and Ubuntu: enabled, and started below, as dh_installsystemd does by default
# (debhelper, dh_installsystemd(1)). First install on RHEL, OL and SLES: the distribution's presets
# decide and nothing is started, as the %systemd_post macro does (systemd src/rpm/macros.systemd.in).
# Both work without a running systemd (an image build, a chroot): they only write symlinks.
first_deb=""
if [ "$1" = configure ] && [ -z "${2:-}" ]; then
    first_deb=yes
    systemctl enable lunlat.service
elif [ "$1" = 1 ]; then
    systemctl preset lunlat.service
fi

# No systemd running: nothing more to do.
[ -d /run/systemd/system ] || exit 0
systemctl daemon-reload
if [ -n "$first_deb" ]; then
    systemctl start lunlat.service
elif [ "$1" != 1 ]; then
    # Upgrade: restarted if running, as dh_installsystemd and %systemd_postun_with_restart do.
    systemctl try-restart lunlat.service
fi
