# vm-timeout: 600
# SIGKILL of `mdpilot serve` during a D-Bus wipe job (StartWipe of a whole raid1 during its
# initial resync, method random: a freeze-and-skip job through md0) at a random moment (2 runs, SIGKILL_SERVE_RUNS; each CI run draws new ones), then `serve` started again. Checked
# per run, once the restarted service has settled (its repair, or a resumed job, has finished):
#   - md0 sync_action is not `frozen`;
#   - the resync resumes and completes, or was skipped because the whole array was written (the
#     restarted service resumes its job from the checkpoint; then a check finds mismatch_cnt 0);
#   - resync_start was never `none` while md0 still held data from before (sampled every 50 ms);
#   - the global limits and md0's per-array limits are the originals.
# Prints the tally `N/RUNS`; passes only at N = RUNS.
need_disks 2
require wipe serve
ORIG_MIN=1000
ORIG_MAX=10000
RUNS=${SIGKILL_SERVE_RUNS:-2}
MD_SIZE=256M
ok=0
problems=()
for run in $(seq 1 "$RUNS"); do
    set_limits "$ORIG_MIN" "$ORIG_MAX"
    md_create md0 1 "${DISKS[0]}" "${DISKS[1]}"
    wait_for 10 sync_is md0 resync || fail "run $run: md0 is not resyncing"
    pmin=$(md_attr md0 sync_speed_min)
    pmax=$(md_attr md0 sync_speed_max)
    # 256 MiB at 40 MB/s through md0 or its members (member offload): several seconds of writing.
    throttle /dev/md0 40000000
    throttle "${DISKS[0]}" 40000000
    throttle "${DISKS[1]}" 40000000
    throttled_bg /tmp/serve.log /tmp/serve.err "$MDP" -v serve
    SERVICE_PID=$THROTTLED_PID
    wait_for 30 bus_has_name || { cat /tmp/serve.err; fail "run $run: serve did not own $BUS_NAME"; }
    : >/tmp/samples
    (while :; do echo "$(cat /sys/block/md0/md/resync_start) $(cat /sys/block/md0/md/sync_action)"; sleep 0.05; done >>/tmp/samples 2>/dev/null) &
    sampler=$!
    # Random data through md0: a zero wipe is offloaded to the members and ends before any kill.
    job=$(bus_call "$MANAGER_PATH" org.mdpilot.MdPilot1.Manager StartWipe 'sa{sv}' /dev/md0 1 method s random | jq -r '.data[0]') ||
        { cat /tmp/serve.err; fail "run $run: StartWipe failed"; }
    delay_ms=$((RANDOM % 6000))
    sleep "$(awk -v m="$delay_ms" 'BEGIN{printf "%.3f", m/1000}')"
    at_kill=$(md_attr md0 sync_action)
    kill -KILL "$SERVICE_PID" 2>/dev/null || true
    wait "$SERVICE_PID" 2>/dev/null || true
    # The next start repairs (or resumes the job, then ends it as any job ends).
    start_service
    settled() { [ "$(md_attr md0 sync_action)" != frozen ]; }
    wait_for 90 settled || true
    sleep 1
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    bad=()
    after=$(md_attr md0 sync_action)
    [ "$after" != frozen ] || bad+=("sync_action frozen after the restart")
    [ "$(limit_min)" = "$ORIG_MIN" ] || bad+=("speed_limit_min $(limit_min), want $ORIG_MIN")
    [ "$(limit_max)" = "$ORIG_MAX" ] || bad+=("speed_limit_max $(limit_max), want $ORIG_MAX")
    [ "$(md_attr md0 sync_speed_min)" = "$pmin" ] || bad+=("md0 sync_speed_min '$(md_attr md0 sync_speed_min)', want '$pmin'")
    [ "$(md_attr md0 sync_speed_max)" = "$pmax" ] || bad+=("md0 sync_speed_max '$(md_attr md0 sync_speed_max)', want '$pmax'")
    stop_service
    [ "$after" != frozen ] || md_set md0 sync_action idle
    skipped=0
    if grep -q '^none ' /tmp/samples; then
        # A skip is right only after a complete wipe (the restarted service resumes its job):
        # then both mirrors hold the same data, which a check proves.
        skipped=1
        set_limits "$ORIG_MIN" 2000000
        md_set md0 sync_action check
        wait_for 5 sync_is md0 check || true
        wait_for 120 sync_is md0 idle || bad+=("check after the skip did not finish")
        [ "$(md_attr md0 mismatch_cnt)" = 0 ] || bad+=("resync skipped but mismatch_cnt $(md_attr md0 mismatch_cnt)")
    else
        set_limits "$ORIG_MIN" 2000000
        wait_for 5 sh -c '! grep -qx "idle\|frozen" /sys/block/md0/md/sync_action' || true
        wait_for 120 sync_is md0 idle || bad+=("resync did not complete (sync_action $(md_attr md0 sync_action))")
        [ "$(md_attr md0 resync_start)" = none ] || bad+=("resync_start $(md_attr md0 resync_start) at the end")
    fi
    if [ "${#bad[@]}" = 0 ]; then
        ok=$((ok + 1))
        log "run $run: ok (kill after ${delay_ms} ms, sync_action at kill $at_kill, job $job, resync skipped $skipped)"
    else
        log "run $run: FAIL (kill after ${delay_ms} ms, sync_action at kill $at_kill): ${bad[*]}"
        tail -20 /tmp/serve.log
        problems+=("run $run at ${delay_ms} ms: ${bad[0]}")
    fi
    mdadm --stop /dev/md0 >/dev/null
    mdadm --zero-superblock "${DISKS[0]}" "${DISKS[1]}"
    udevadm settle --timeout=10 || true
done
set_limits "$ORIG_MIN" "$ORIG_MAX"
info "SIGKILL of serve during a D-Bus freeze-and-skip wipe + serve restart: $ok/$RUNS clean"
[ "$ok" = "$RUNS" ] || fail "left behind after SIGKILL of serve: $ok/$RUNS clean; first: ${problems[0]}"
