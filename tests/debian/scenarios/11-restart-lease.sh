# `systemctl restart mdpilot` during a live named installer lease keeps
# speed_limit_min at 0 throughout (the old process leaves named leases in /run/mdpilot's state
# and the new one keeps applying them); the lease is still on the bus and releasing it restores
# the original; `systemctl stop` after the release leaves the originals.
# vm-timeout: 90
name_on_bus || systemctl start mdpilot.service
# An original unlike the kernel's default (1000), so a restore from anywhere else shows.
echo 1500 >/proc/sys/dev/raid/speed_limit_min
orig=$(limit_min)
omax=$(limit_max)
assert_eq "$(mcall AcquirePriority 'a{sv}' 2 holder s installer kind s installer)" 's "installer"' "lease id"
assert_eq "$(limit_min)" 0 "speed_limit_min during the installer lease"
pid0=$(main_pid)
# Sample the knob every 20 ms across the restart: it must never leave 0.
(while :; do cat /proc/sys/dev/raid/speed_limit_min; sleep 0.02; done) >/tmp/work/samples 2>/dev/null &
sampler=$!
trap 'kill "$sampler" 2>/dev/null || true' EXIT
systemctl restart mdpilot.service
name_on_bus || wait_for 10 name_on_bus || fail "$BUS_NAME not on the bus after restart"
kill "$sampler"
wait "$sampler" 2>/dev/null || true
assert_eq "$(unit_state)" active "unit state after restart"
[ "$(main_pid)" != "$pid0" ] || fail "restart kept the same process"
n=$(wc -l </tmp/work/samples)
other=$(grep -vx 0 /tmp/work/samples | sort -u | tr '\n' ' ' || true)
[ -z "$other" ] || fail "speed_limit_min left 0 during the restart: $other(of $n samples)"
log "ok: speed_limit_min 0 in all $n samples across the restart"
info "restart during a named lease: speed_limit_min 0 in all $n samples (20 ms apart)"
assert_eq "$(limit_min)" 0 "speed_limit_min after a restart during the named lease"
leases=$(busctl --system get-property "$BUS_NAME" "$MANAGER_PATH" "$MANAGER" Leases)
case $leases in
    *'"installer"'*) log "ok: Leases after restart: $leases" ;;
    *) fail "the installer lease is not in Leases after the restart: $leases" ;;
esac
mcall ReleasePriority s installer || fail "ReleasePriority installer after the restart failed"
assert_eq "$(limit_min)" "$orig" "speed_limit_min after the release"
systemctl stop mdpilot.service
assert_eq "$(unit_state)" inactive "unit state after stop"
assert_eq "$(limit_min)" "$orig" "speed_limit_min after the release and a stop"
assert_eq "$(limit_max)" "$omax" "speed_limit_max after the release and a stop"
