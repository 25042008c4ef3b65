# Maintainer scripts: an upgrade (dpkg -i again) try-restarts a running service and leaves a
# stopped one stopped; dpkg -r stops it and keeps the state in /var/lib/mdpilot; purge removes
# the enablement and the state (StateDirectory=, made by systemd at the first start).
# vm-timeout: 300
systemctl start mdpilot.service
pid0=$(main_pid)
t0=$(date +%s)
dpkg -i "$DEB" >/dev/null || fail "dpkg -i (upgrade) failed"
info "dpkg -i (upgrade, service running): $(($(date +%s) - t0)) s"
assert_eq "$(unit_state)" active "running service after an upgrade"
[ "$(main_pid)" != "$pid0" ] || fail "the upgrade did not restart the service"
systemctl stop mdpilot.service
dpkg -i "$DEB" >/dev/null || fail "dpkg -i (upgrade) failed"
assert_eq "$(unit_state)" inactive "stopped service after an upgrade"
systemctl start mdpilot.service
log "dpkg -r"
dpkg -r mdpilot >/dev/null || fail "dpkg -r failed"
assert_eq "$(unit_state)" inactive "service after dpkg -r"
[ ! -e /usr/bin/mdpilot ] || fail "/usr/bin/mdpilot left after dpkg -r"
[ -d /var/lib/mdpilot ] || fail "dpkg -r removed /var/lib/mdpilot (only purge should)"
log "dpkg --purge"
dpkg --purge mdpilot >/dev/null || fail "dpkg --purge failed"
[ ! -e /etc/systemd/system/dbus-org.mdpilot.MdPilot1.service ] || fail "alias left after purge"
[ ! -e /var/lib/mdpilot ] || fail "/var/lib/mdpilot left after purge: $(ls -la /var/lib/mdpilot)"
dpkg -i "$DEB" >/dev/null || fail "reinstall failed"
