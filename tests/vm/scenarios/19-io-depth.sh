# vm-timeout: 240
# sync_io_depth (Linux 6.16+: /proc/sys/dev/raid/sync_io_depth and md/sync_io_depth, `32 (system)`)
# is a lease knob like the speed limits: the original is saved before the first lease, a boost
# raises it, a quiet lease lowers it (the lowest wins), release and `policy restore --defaults`
# put it back; with the service, SIGKILL while a lease is live keeps the originals in the durable
# state: a restart keeps the lease and its release restores, as does `policy restore` without
# the service. On a kernel without the knob
# (6.1, 6.12) a lease asking for it applies the rest, creates nothing and warns nothing; the
# scenario then ends with the kernel's reason.
need_disks 2
require policy
G=/proc/sys/dev/raid/sync_io_depth
A=/sys/block/md0/md/sync_io_depth
set_limits 1000 200000
md_create md0 1 "${DISKS[0]}" "${DISKS[1]}"
gdepth() { cat "$G"; }
adepth() { cat "$A"; }
gdepth_is() { [ "$(gdepth)" = "$1" ]; }

if [ ! -e "$G" ]; then
    [ ! -e "$A" ] || fail "$A exists without $G"
    run_mdp /tmp/out policy apply --holder boost --min 50000 --io-depth 128
    assert_eq "$MDP_RC" 0 "policy apply --io-depth exit status without the knob"
    assert_eq "$(limit_min)" 50000 "speed_limit_min under the boost lease"
    [ ! -e "$G" ] || fail "policy apply created $G"
    run_mdp /tmp/show.json policy show --json
    jq -e '.sync_io_depth == null and (.warnings | length) == 0' /tmp/show.json >/dev/null ||
        fail "policy show without the knob: $(cat /tmp/show.json)"
    run_mdp /tmp/out policy apply --holder boost-md0 --array md0 --io-depth 128
    assert_eq "$MDP_RC" 0 "a per-array lease asking only for sync_io_depth"
    run_mdp /tmp/out policy restore --defaults
    assert_eq "$MDP_RC" 0 "policy restore --defaults without the knob"
    assert_eq "$(limit_min)" 1000 "speed_limit_min after restore"
    [ ! -e "$G" ] && [ ! -e "$A" ] || fail "restore created a sync_io_depth file"
    skip "kernel $(uname -r) has no sync_io_depth (added in Linux 6.16): a lease asking for it applied the rest and wrote nothing"
fi

ORIG=40
echo "$ORIG" >"$G"
assert_eq "$(adepth)" "$ORIG (system)" "md0 sync_io_depth follows the global value"
originals() {
    assert_eq "$(gdepth)" "$ORIG" "sync_io_depth ($1)"
    assert_eq "$(adepth)" "$ORIG (system)" "md0 sync_io_depth ($1)"
    assert_eq "$(limit_min)" 1000 "speed_limit_min ($1)"
}

# Without the service: the CLI on the state file.
run_mdp /tmp/out policy apply --holder boost --min 50000 --io-depth 128
assert_eq "$MDP_RC" 0 "policy apply --io-depth exit status"
assert_eq "$(gdepth)" 128 "sync_io_depth under the boost lease"
run_mdp /tmp/out policy apply --holder boost-md0 --array md0 --io-depth 256
assert_eq "$(adepth)" "256 (local)" "md0 sync_io_depth under the per-array boost"
run_mdp /tmp/show.json policy show --json
jq -e ".sync_io_depth == 128 and .originals.sync_io_depth == $ORIG and .arrays.md0.original_io_depth.system" \
    /tmp/show.json >/dev/null || fail "policy show --json: $(cat /tmp/show.json)"
run_mdp /tmp/out policy apply --holder quiet --io-depth 1
assert_eq "$(gdepth)" 1 "sync_io_depth with a quiet lease beside the boost (lowest wins)"
run_mdp /tmp/out policy release --holder quiet
assert_eq "$(gdepth)" 128 "sync_io_depth back to the boost after the quiet lease"
run_mdp /tmp/out policy release --holder boost
run_mdp /tmp/out policy release --holder boost-md0
originals "after release"

# With the service: SIGKILL while the leases live (named holders: they outlive the caller); the
# durable state keeps the originals, a restart keeps the leases, their release restores.
require serve
start_service
run_mdp /tmp/out policy apply --holder boost --io-depth 128
run_mdp /tmp/out policy apply --holder boost-md0 --array md0 --io-depth 256
assert_eq "$(gdepth)" 128 "sync_io_depth under a lease through the service"
assert_eq "$(adepth)" "256 (local)" "md0 sync_io_depth under a lease through the service"
assert_eq "$(manager_prop SyncIoDepth)" 128 "Manager.SyncIoDepth"
assert_eq "$(manager_prop OriginalSyncIoDepth)" "[true,$ORIG]" "Manager.OriginalSyncIoDepth"
manager_prop Leases | grep -q io_depth || fail "Manager.Leases shows no io_depth: $(manager_prop Leases)"
kill -KILL "$SERVICE_PID"
wait "$SERVICE_PID" 2>/dev/null || true
SERVICE_PID=
grep -q 'md0/sync_io_depth' /run/mdpilot/policy.toml || fail "the state file does not record md0/sync_io_depth"
assert_eq "$(gdepth)" 128 "sync_io_depth right after SIGKILL of the service (lease still live)"
start_service
assert_eq "$(gdepth)" 128 "sync_io_depth after restart (the leases live on)"
t0=$(now_ms)
run_mdp /tmp/out policy release --holder boost
run_mdp /tmp/out policy release --holder boost-md0
info "sync_io_depth restored through the restarted service in $(($(now_ms) - t0)) ms (two releases)"
originals "after SIGKILL, restart and release"
# SIGKILL again with a lease live, and the installer's finish step without the service.
run_mdp /tmp/out policy apply --holder boost --io-depth 128
kill -KILL "$SERVICE_PID"
wait "$SERVICE_PID" 2>/dev/null || true
SERVICE_PID=
run_mdp /tmp/out policy restore
assert_eq "$MDP_RC" 0 "policy restore exit status without the service"
originals "after SIGKILL and policy restore"

# The installer's escape hatch: kernel defaults over anything.
echo 7 >"$G"
echo 9 >"$A"
run_mdp /tmp/out policy restore --defaults
assert_eq "$MDP_RC" 0 "policy restore --defaults exit status"
assert_eq "$(gdepth)" 32 "sync_io_depth after restore --defaults"
assert_eq "$(adepth)" "32 (system)" "md0 sync_io_depth after restore --defaults"
