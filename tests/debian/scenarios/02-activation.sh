# After systemctl stop, a D-Bus call from an unprivileged user starts the service again
# (activation file -> SystemdService=mdpilot.service).
# vm-timeout: 60
systemctl stop mdpilot.service
assert_eq "$(unit_state)" inactive "unit state after stop"
! name_on_bus || fail "$BUS_NAME still on the bus after stop"
t0=$(date +%s%N)
as_tester busctl --system call "$BUS_NAME" "$BUS_PATH" org.freedesktop.DBus.Peer Ping ||
    fail "a call to $BUS_NAME from user tester did not activate it"
info "D-Bus activation: $((($(date +%s%N) - t0) / 1000000)) ms to the first answer"
assert_eq "$(unit_state)" active "unit state after the call"
v=$(as_tester busctl --system get-property "$BUS_NAME" "$MANAGER_PATH" "$MANAGER" SpeedLimitMin)
assert_eq "$v" "t $(limit_min)" "SpeedLimitMin read by tester"
