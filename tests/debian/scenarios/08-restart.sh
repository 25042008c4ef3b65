# systemctl restart: a new process owns the name; the kernel's originals come back when the
# service stops with no lease. (A restart during a named lease: 11-restart-lease.)
# vm-timeout: 60
name_on_bus || systemctl start mdpilot.service
orig=$(limit_min)
pid0=$(main_pid)
systemctl restart mdpilot.service
assert_eq "$(unit_state)" active "unit state after restart"
[ "$(main_pid)" != "$pid0" ] || fail "restart kept the same process"
name_on_bus || fail "$BUS_NAME not on the bus after restart"
systemctl stop mdpilot.service
assert_eq "$(limit_min)" "$orig" "speed_limit_min after a restart and a stop with no lease"
