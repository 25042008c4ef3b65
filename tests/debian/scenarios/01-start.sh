# systemctl start returns once the service sent READY=1 (Type=notify); the name is on the bus.
# vm-timeout: 60
t0=$(date +%s%N)
systemctl start mdpilot.service || { systemctl status mdpilot.service --no-pager || true; fail "systemctl start failed"; }
info "systemctl start mdpilot: $((($(date +%s%N) - t0) / 1000000)) ms to READY"
assert_eq "$(unit_state)" active "unit state after start"
name_on_bus || fail "busctl list does not show $BUS_NAME"
busctl --system get-property "$BUS_NAME" "$MANAGER_PATH" "$MANAGER" Version
assert_eq "$(busctl --system status "$BUS_NAME" 2>/dev/null | sed -n 's/^PID=//p')" "$(main_pid)" "the bus name's owner is the unit's main process"
