# dpkg -i of the built package on a booted Debian: files in place, unit enabled (its alias),
# not started (no array yet: it starts on demand), unit and security as systemd sees them.
# vm-timeout: 150
dpkg -i "$DEB" || fail "dpkg -i $DEB failed"
assert_eq "$(dpkg-query -W -f '${db:Status-Status}' mdpilot)" installed "package status"
for f in /usr/bin/mdpilot /usr/lib/systemd/system/mdpilot.service \
    /usr/share/dbus-1/system.d/org.mdpilot.MdPilot1.conf \
    /usr/share/dbus-1/system-services/org.mdpilot.MdPilot1.service \
    /usr/share/polkit-1/actions/org.mdpilot.MdPilot1.policy \
    /usr/share/dbus-1/interfaces/org.mdpilot.MdPilot1.Manager.xml \
    /usr/lib/udev/rules.d/69-mdpilot.rules /usr/lib/mdpilot/config.d/00-mdpilot.toml \
    /usr/share/doc/mdpilot/copyright /usr/share/doc/mdpilot/changelog.Debian.gz; do
    [ -f "$f" ] || fail "the package did not install $f"
done
mdpilot --version
alias=/etc/systemd/system/dbus-org.mdpilot.MdPilot1.service
[ "$(readlink "$alias")" = /lib/systemd/system/mdpilot.service ] ||
    [ "$(readlink "$alias")" = /usr/lib/systemd/system/mdpilot.service ] ||
    fail "postinst did not enable the unit: $alias -> $(readlink "$alias" || echo nothing)"
log "is-enabled: $(systemctl is-enabled mdpilot.service || true)"
assert_eq "$(unit_state)" inactive "unit state right after install (no array yet)"
for action in org.mdpilot.MdPilot1.manage-priority org.mdpilot.MdPilot1.wipe; do
    pkaction --action-id "$action" >/dev/null || fail "polkit does not know $action"
done
err=$(systemd-analyze verify --man=no mdpilot.service 2>&1 || true)
[ -z "$err" ] || fail "systemd-analyze verify: $err"
score=$(systemd-analyze security mdpilot.service 2>/dev/null | sed -n 's/.*Overall exposure level for mdpilot.service: \([0-9.]*\).*/\1/p')
info "systemd-analyze security (installed unit): ${score:-?}"
info "package: $(stat -c %s "$DEB") bytes, installed size $(dpkg-query -W -f '${Installed-Size}' mdpilot) KiB"
