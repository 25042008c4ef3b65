# vm-timeout: 600
# Health, events, resumable checks and timed priority on the real kernel, with
# `mdpilot monitor --events` recording the whole time (the transcript is printed at the end):
#   - a check of a raid1 started throttled (check --max), throttled harder mid-way by a per-array
#     lease (the measured rate drops to about the limit), paused (position saved, idle: the
#     point mdstat showed, not md's 1/16 checkpoint), the
#     service killed and restarted, resumed (progress continues from the saved position, not 0),
#     finished with mismatch_cnt 0 and the result recorded;
#   - a corrupted raid1 member gives a non-zero mismatch_cnt, informational; a corrupted raid5
#     member a warning; a fresh raid5 (built by recovery) gives no DegradedArray;
#   - a timed lease (`policy apply --for`) is released on time across a service restart;
#   - `mdadm --fail` gives Fail and DegradedArray within 1 s, and `status --test` exits 1;
#   - a check the machine goes down under (service killed, the array stopped and assembled
#     again, as a reboot does) records no result and resumes from its saved position.
need_disks 5
require monitor serve policy status
ORIG_MIN=1000
ORIG_MAX=200000
set_limits "$ORIG_MIN" "$ORIG_MAX"
"$MDP" monitor --events --interval-ms 200 >/tmp/mon.txt 2>/tmp/mon.err &
mon=$!
trap 'kill $mon 2>/dev/null || true' EXIT
sleep 1
# 900 MiB: room for a 30 s settling time at 5000 KiB/s before the pause (md's speed control
# averages over up to 30 s of marks, so a lowered max takes that long to show in the rate).
MD_SIZE=900M
md_create md0 1 "${DISKS[0]}" "${DISKS[1]}"
set_limits "$ORIG_MIN" 2000000
wait_for 5 sync_is md0 resync || true
wait_for 120 sync_is md0 idle || fail "md0's initial resync did not finish"
set_limits "$ORIG_MIN" "$ORIG_MAX"
start_service

# corrupt_and_check MD MEMBER MIB LEVEL WARNING: 1 MiB of random data on MEMBER at MIB into its
# data region (md/dev-*/offset), a full-speed `check`, then the recorded result: MISMATCH is its
# mismatch_cnt (must be > 0) and its mismatch_warning must be WARNING (true/false).
corrupt_and_check() {
    local md=$1 member=$2 mib=$3 level=$4 warning=$5 off
    off=$(($(md_attr "$md" dev-"$(basename "$member")"/offset) * 512 + mib * 1048576))
    dd if=/dev/urandom of="$member" bs=1M count=1 seek="$off" oflag=direct,seek_bytes status=none
    run_mdp /tmp/c.out check start "$md" --max 2000000
    wait_for 5 sync_is "$md" check || true
    wait_for 120 sync_is "$md" idle || fail "check of the corrupted $level did not finish"
    "$MDP" check status --json "$md" >/tmp/st.json
    MISMATCH=$(jq -r '.arrays[0].last.mismatch_cnt' /tmp/st.json)
    [ "$MISMATCH" -gt 0 ] || fail "no mismatches on a corrupted $level member: $(cat /tmp/st.json)"
    assert_eq "$(jq -r '.arrays[0].mismatch_warning' /tmp/st.json)" "$warning" "mismatch_warning of a $level check"
}

done_sectors() { md_attr md0 sync_completed | awk '{print ($1 ~ /^[0-9]+$/) ? $1 : 0}'; }
# md publishes the position (sync_completed, and mdstat's figure) in steps: every 1/16 of the
# array or every 5 s (md_do_sync's curr_resync_completed updates). A rate is measured between
# such updates: step_rate N waits for the next update, then times N more, and prints KiB/s.
wait_change() {
    local end=$(($(now_ms) + 60000))
    while [ "$(done_sectors)" = "$1" ]; do
        [ "$(now_ms)" -lt "$end" ] || return 1
        sleep 0.05
    done
}
step_rate() {
    local a v t0 t1 n=0
    a=$(done_sectors)
    wait_change "$a" || return 1
    a=$(done_sectors)
    t0=$(now_ms)
    v=$a
    while [ "$n" -lt "$1" ]; do
        wait_change "$v" || return 1
        v=$(done_sectors)
        n=$((n + 1))
    done
    t1=$(now_ms)
    echo $(((v - a) / 2 * 1000 / (t1 - t0)))
}

# Start, throttled by the check's own lease.
run_mdp /tmp/c.out check start md0 --max 20000
assert_eq "$MDP_RC" 0 "check start exit status"
assert_eq "$(md_attr md0 sync_action)" check "md0 sync_action after check start"
"$MDP" policy show --json | jq -e '.leases[] | select(.holder == "check-md0")' >/dev/null ||
    fail "no check-md0 lease in policy show"
r1=$(step_rate 2) || fail "the check made no progress"
log "check rate under --max 20000: $r1 KiB/s"
# Mid-way: an admin's lease on md0's sync_speed_max slows it to 5000 KiB/s.
run_mdp /tmp/p.out policy apply --holder quiet --kind admin --array md0 --max 5000
assert_eq "$MDP_RC" 0 "policy apply --array md0 --max 5000"
# md's own rate (md/sync_speed: KiB/s since its oldest mark, up to 30 s back) says when the
# 20000 KiB/s stretch has left its window. md holds that 30 s average at the limit by running
# at full speed and pausing in turns, so the rate is taken over 6 of md's position updates
# (about 30 s: a whole window), not 2.
settled() { v=$(md_attr md0 sync_speed); [ "$v" -le 6000 ] 2>/dev/null; }
wait_for 90 settled || fail "md0's sync_speed stayed at $(md_attr md0 sync_speed) KiB/s under the 5000 KiB/s lease"
r2=$(step_rate 6) || fail "the check made no progress under the lease"
log "check rate under the 5000 KiB/s lease: $r2 KiB/s"
[ "$r2" -le 7500 ] || fail "check rate $r2 KiB/s under a 5000 KiB/s limit"
# The drop itself shows only where the guest ran well above the lease (a slow TCG host may not
# reach 10000 KiB/s under --max 20000); the cap above is the lease's proof either way.
if [ "$r1" -gt 10000 ]; then
    [ "$r2" -lt $((r1 / 2)) ] || fail "the rate did not drop: $r1 -> $r2 KiB/s"
fi
run_mdp /tmp/p.out policy release --holder quiet
info "check throttled mid-way: $r1 KiB/s (max 20000) -> $r2 KiB/s (max 5000)"

# Pause: the position is saved, the array idle. The saved point is where md has got (mdstat's
# completed count, read by the pause just before it writes idle), not md's checkpoint
# (sync_completed, moved every 1/16 of the array): mdstat read here, before the pause, is a
# lower bound for it (within the 4 KiB md keeps of sync_min; raid1 has no chunk).
mdstat_kib() { sed -n '/^md0 /,/^$/s/.*check = *[0-9.]*% (\([0-9]*\)\/.*/\1/p' /proc/mdstat | head -1; }
before_pause=$(done_sectors)
seen_kib=$(mdstat_kib)
[ -n "$seen_kib" ] || fail "no check progress in /proc/mdstat before the pause: $(cat /proc/mdstat)"
run_mdp /tmp/c.out check pause md0
assert_eq "$MDP_RC" 0 "check pause exit status"
assert_eq "$(md_attr md0 sync_action)" idle "md0 sync_action after pause"
pos=$("$MDP" check status --json md0 | jq -r '.arrays[0].position.sectors // empty')
[ -n "$pos" ] && [ "$pos" -gt 0 ] || fail "no saved position after pause: $("$MDP" check status --json md0)"
[ "$pos" -ge $((seen_kib * 2 - 8)) ] ||
    fail "saved position $pos sectors is behind mdstat's $seen_kib KiB before the pause (md's checkpoint was $before_pause)"
[ $((pos % 8)) -eq 0 ] || fail "saved position $pos is not a 4 KiB multiple (md would keep another sync_min)"
log "paused: md's checkpoint $before_pause sectors, mdstat $seen_kib KiB before the pause, saved position $pos"
info "check paused at $pos sectors (mdstat showed $((seen_kib * 2)) before the pause; md's checkpoint $before_pause)"
"$MDP" policy show --json | jq -e '.leases[] | select(.holder == "check-md0")' >/dev/null &&
    fail "the check's lease is still there after pause"

# The service dies and comes back; the position survives (it is on disk).
kill -KILL "$SERVICE_PID"
wait "$SERVICE_PID" 2>/dev/null || true
SERVICE_PID=
start_service
run_mdp /tmp/c.out check resume md0 --max 50000
assert_eq "$MDP_RC" 0 "check resume exit status"
assert_eq "$(md_attr md0 sync_min)" "$pos" "md0 sync_min after resume (the saved position)"
sleep 0.5
first=$(done_sectors)
[ "$first" -ge "$pos" ] || fail "resumed check restarted below the saved position: $first < $pos"
info "check paused at $pos sectors, service killed and restarted, resumed at $first (not 0)"
wait_for 120 sync_is md0 idle || fail "the resumed check did not finish"
"$MDP" check status --json md0 >/tmp/st.json
assert_eq "$(jq -r '.arrays[0].last.mismatch_cnt' /tmp/st.json)" 0 "recorded mismatch_cnt of the clean check"
assert_eq "$(md_attr md0 sync_min)" 0 "md0 sync_min after the finished check"
"$MDP" policy show --json | jq -e '.leases | length == 0' >/dev/null || fail "leases left after the check: $("$MDP" policy show --json | jq -c .leases)"

# A corrupted raid1 member: mismatches, informational on raid1.
set_limits "$ORIG_MIN" 2000000
corrupt_and_check md0 "${DISKS[1]}" 64 raid1 false
m1=$MISMATCH
info "corrupted raid1 member: mismatch_cnt $m1, informational"

# --for across a restart: released on time by the restarted service.
run_mdp /tmp/p.out policy apply --holder boost --kind admin --min 7777 --for 6s
assert_eq "$(limit_min)" 7777 "speed_limit_min under the timed lease"
kill -KILL "$SERVICE_PID"
wait "$SERVICE_PID" 2>/dev/null || true
SERVICE_PID=
start_service
min_is() { [ "$(limit_min)" = "$1" ]; }
t0=$(now_ms)
wait_for 20 min_is "$ORIG_MIN" || fail "the timed lease was not released after a restart: min $(limit_min)"
info "policy apply --for 6s: released by the restarted service, limits back to $ORIG_MIN"

# mdadm --fail: Fail and DegradedArray within 1 s; status --test exits 1.
marker=$(wc -l </tmp/mon.txt)
tm=$(now_ms)
mdadm /dev/md0 --fail "${DISKS[1]}" >/dev/null 2>&1
# From the moment the kernel has the member faulty (mdadm has returned).
t0=$(now_ms)
log "mdadm --fail took $((t0 - tm)) ms"
seen() { [ "$(tail -n +"$((marker + 1))" /tmp/mon.txt | grep -c -e "^Fail md0" -e "^DegradedArray md0")" -ge 2 ]; }
wait_for 5 seen || fail "no Fail + DegradedArray for md0: $(tail -n +"$((marker + 1))" /tmp/mon.txt)"
dt=$(($(now_ms) - t0))
[ "$dt" -le 1000 ] || fail "Fail + DegradedArray took $dt ms after mdadm --fail returned"
rc=0
"$MDP" status --test >/dev/null 2>&1 || rc=$?
assert_eq "$rc" 1 "status --test with md0 degraded"
info "mdadm --fail: Fail + DegradedArray seen by monitor in $dt ms; status --test exit 1"
mdadm --stop /dev/md0 >/dev/null

# A fresh raid5 builds by recovery: InitialBuild*, never DegradedArray.
marker=$(wc -l </tmp/mon.txt)
MD_SIZE=128M
md_create md1 5 "${DISKS[2]}" "${DISKS[3]}" "${DISKS[4]}"
wait_for 5 sh -c '! grep -qx idle /sys/block/md1/md/sync_action' || true
wait_for 120 sync_is md1 idle || fail "md1's initial build did not finish"
sleep 1
new=$(tail -n +"$((marker + 1))" /tmp/mon.txt)
echo "$new" | grep -q "^DegradedArray md1" && fail "a fresh raid5 was reported DegradedArray: $new"
echo "$new" | grep -q "^InitialBuild" || fail "no InitialBuild event for the fresh raid5: $new"
# A corrupted raid5 member: mismatches are a warning.
corrupt_and_check md1 "${DISKS[3]}" 16 raid5 true
m5=$MISMATCH
info "fresh raid5: InitialBuild, no DegradedArray; corrupted raid5 member: mismatch_cnt $m5, warning"

# The machine goes down under a running check: the service killed (no stop runs) and md1 stopped
# and assembled again, which is what a reboot does to md: idle, sync_min 0, mismatch_cnt 0, as
# after a finished check. md/last_sync_action tells them apart: the restarted service records
# no result (md1's last stays the corrupted check's) and resumes from the last saved position.
run_mdp /tmp/c.out check start md1 --max 2000
assert_eq "$MDP_RC" 0 "check start md1 exit status"
md1_done() { md_attr md1 sync_completed | awk '{print ($1 ~ /^[0-9]+$/) ? $1 : 0}'; }
progressed() { [ "$(md1_done)" -gt 0 ]; }
wait_for 60 progressed || fail "md1's check made no progress: $(cat /proc/mdstat)"
"$MDP" check status md1 >/dev/null # saves the running check's position
pos=$("$MDP" check status --json md1 | jq -r '.arrays[0].position.sectors // 0')
[ "$pos" -gt 0 ] || fail "no saved position for md1's running check: $("$MDP" check status --json md1)"
kill -KILL "$SERVICE_PID"
wait "$SERVICE_PID" 2>/dev/null || true
SERVICE_PID=
mdadm --stop /dev/md1 >/dev/null
# md frees the array once its sysfs directory is gone: the assembly below makes a new one.
gone() { [ ! -e /sys/block/md1 ]; }
wait_for 10 gone || fail "md1 stayed in sysfs after mdadm --stop"
mdadm --assemble /dev/md1 "${DISKS[2]}" "${DISKS[3]}" "${DISKS[4]}" >/dev/null 2>&1 ||
    fail "mdadm --assemble md1"
lsa=$(md_attr md1 last_sync_action)
log "md1 assembled again: sync_action $(md_attr md1 sync_action), sync_min $(md_attr md1 sync_min), mismatch_cnt $(md_attr md1 mismatch_cnt), last_sync_action $lsa"
[ "$lsa" != check ] || fail "md/last_sync_action reads check on a newly assembled array"
start_service
resumed() { sync_is md1 check; }
wait_for 10 resumed || fail "the check md1 went down under did not resume: $("$MDP" check status --json md1)"
assert_eq "$(md_attr md1 sync_min)" "$pos" "md1 sync_min after the restart (the saved position)"
"$MDP" check status --json md1 >/tmp/st.json
assert_eq "$(jq -r '.arrays[0].last.mismatch_cnt' /tmp/st.json)" "$m5" "md1's last result after the restart (the check before, not the cut one)"
run_mdp /tmp/c.out check cancel md1
assert_eq "$MDP_RC" 0 "check cancel md1 exit status"
info "a check cut off by a stop and assemble (last_sync_action $lsa): no result recorded, resumed at $pos sectors"
stop_service
set_limits "$ORIG_MIN" "$ORIG_MAX"
sleep 0.5
echo "--- monitor --events transcript"
cat /tmp/mon.txt
