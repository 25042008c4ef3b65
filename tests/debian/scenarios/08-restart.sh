# systemctl restart: a new process owns the name; the kernel's originals come back when the
# service stops with no lease. During a named installer lease the limit's fate across the
# restart is reported (the reliability issue makes named leases survive it).
# vm-timeout: 60
name_on_bus || systemctl start mdpilot.service
orig=$(limit_min)
pid0=$(main_pid)
systemctl restart mdpilot.service
assert_eq "$(unit_state)" active "unit state after restart"
[ "$(main_pid)" != "$pid0" ] || fail "restart kept the same process"
name_on_bus || fail "$BUS_NAME not on the bus after restart"
mcall AcquirePriority 'a{sv}' 2 holder s installer kind s installer >/dev/null
assert_eq "$(limit_min)" 0 "speed_limit_min during the installer lease"
systemctl restart mdpilot.service
info "speed_limit_min after a restart during a named lease: $(limit_min) (original $orig)"
mcall ReleasePriority s installer 2>/dev/null || log "the lease did not outlive the restart"
systemctl stop mdpilot.service
assert_eq "$(limit_min)" "$orig" "speed_limit_min after the lease and a stop"
