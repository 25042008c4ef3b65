# vm-timeout: 180
# Policy: an installer lease makes /proc/sys/dev/raid/speed_limit_min read 0 and release restores
# the admin's value; applying twice never saves our own 0; `mdpilot policy restore` is the
# installer's finish step; with the service, SIGKILL while a lease is live and a restart bring the
# original back once the lease's owner is gone.
need_disks 2
require policy
ORIG_MIN=1234
ORIG_MAX=56789
set_limits "$ORIG_MIN" "$ORIG_MAX"
md_create md0 1 "${DISKS[0]}" "${DISKS[1]}" # a resync the policy acts on
min_is() { [ "$(limit_min)" = "$1" ]; }
originals() {
    assert_eq "$(limit_min)" "$ORIG_MIN" "speed_limit_min ($1)"
    assert_eq "$(limit_max)" "$ORIG_MAX" "speed_limit_max ($1)"
}

# Without the service: the CLI works on the state file directly (the installer has no D-Bus).
run_mdp /tmp/out policy apply --holder installer
assert_eq "$MDP_RC" 0 "policy apply exit status"
assert_eq "$(limit_min)" 0 "speed_limit_min under the installer lease"
run_mdp /tmp/show.json policy show --json
assert_eq "$MDP_RC" 0 "policy show exit status"
grep -q installer /tmp/show.json || fail "policy show --json does not list the installer lease"
grep -q "$ORIG_MIN" /tmp/show.json || fail "policy show --json does not show the saved original $ORIG_MIN"
run_mdp /tmp/out policy release --holder installer
assert_eq "$MDP_RC" 0 "policy release exit status"
originals "after release"

run_mdp /tmp/out policy apply --holder installer
run_mdp /tmp/out policy apply --holder installer
assert_eq "$(limit_min)" 0 "speed_limit_min after applying twice"
run_mdp /tmp/out policy release --holder installer
originals "after applying twice and one release"

# Two holders: the limit stays yielding until the last is gone.
run_mdp /tmp/out policy apply --holder installer
run_mdp /tmp/out policy apply --holder admin --min 10
run_mdp /tmp/out policy release --holder installer
[ "$(limit_min)" -le 10 ] || fail "speed_limit_min $(limit_min) with the admin lease (min 10) still live"
run_mdp /tmp/out policy release --holder admin
originals "after both holders released"

# The installer's finish step.
run_mdp /tmp/out policy apply --holder installer
run_mdp /tmp/out policy restore
assert_eq "$MDP_RC" 0 "policy restore exit status"
originals "after policy restore"

# With the service: the CLI goes through it; SIGKILL leaves the lease in the durable state.
require serve
start_service
# The service takes a pid only of the caller or its descendants: the caller here is the mdpilot
# command, so the owner is started by the process that then becomes that command (exec).
MDP_RC=0
sh -c 'sleep 1000 & echo $! >/tmp/installer.pid; exec "$0" policy apply --holder installer --pid $!' \
    "$MDP" >/tmp/out 2>/tmp/out.err </dev/null || MDP_RC=$?
cat /tmp/out /tmp/out.err
assert_eq "$MDP_RC" 0 "policy apply --pid of a process the command started, through the service"
installer=$(cat /tmp/installer.pid)
assert_eq "$(limit_min)" 0 "speed_limit_min under a lease through the service"
manager_prop Leases | grep -q installer || fail "Manager.Leases does not list the installer lease: $(manager_prop Leases)"
assert_eq "$(manager_prop OriginalSpeedLimitMin)" "[true,$ORIG_MIN]" "Manager.OriginalSpeedLimitMin"
kill -KILL "$SERVICE_PID"
wait "$SERVICE_PID" 2>/dev/null || true
SERVICE_PID=
assert_eq "$(limit_min)" 0 "speed_limit_min right after SIGKILL of the service (lease still live)"
# The installer is alive: a restart keeps its lease.
start_service
sleep 1
assert_eq "$(limit_min)" 0 "speed_limit_min after restart with the lease owner alive"
# The installer dies too: the next start drops its lease and restores.
kill -KILL "$SERVICE_PID"
wait "$SERVICE_PID" 2>/dev/null || true
SERVICE_PID=
kill -KILL "$installer"
wait "$installer" 2>/dev/null || true
start_service
wait_for 10 min_is "$ORIG_MIN" || true
originals "after restart with the lease owner dead"

# A D-Bus client's lease ends with its connection (busctl exits right after the call).
bus_call "$MANAGER_PATH" org.mdpilot.MdPilot1.Manager AcquirePriority 'a{sv}' 0 || fail "AcquirePriority failed"
wait_for 10 min_is "$ORIG_MIN" || fail "lease of a disconnected client not released: min $(limit_min)"

# Finish step while the service holds a lease and then dies hard.
run_mdp /tmp/out policy apply --holder installer
assert_eq "$(limit_min)" 0 "speed_limit_min under a lease before the final restore"
kill -KILL "$SERVICE_PID"
wait "$SERVICE_PID" 2>/dev/null || true
SERVICE_PID=
run_mdp /tmp/out policy restore
assert_eq "$MDP_RC" 0 "policy restore exit status without the service"
originals "after policy restore with the service dead"
