# vm-timeout: 180
# Live resync: a new raid1's SyncAction and SyncCompleted rise over D-Bus (`mdpilot monitor
# --json`) and end in idle; reports the latency from the kernel's sync start to the signal.
need_disks 2
require serve monitor
set_limits 1000 50000 # ~20 s for 1 GiB: several progress updates
start_service
# Each monitor line gets the guest's arrival time in ms in front of it.
"$MDP" monitor --json 2>/tmp/monitor.err </dev/null |
    while IFS= read -r line; do printf '%s %s\n' "$(date +%s%3N)" "$line"; done >/tmp/monitor.log &
sleep 2 # subscribed
grep -q 'not implemented yet' /tmp/monitor.err && skip "mdpilot monitor: not implemented yet"

# Watch the kernel's sync_action as closely as a shell can, from just before the create.
(
    until [ "$(cat /sys/block/md0/md/sync_action 2>/dev/null)" = resync ]; do sleep 0.01; done
    date +%s%3N >/tmp/kernel-start
) &
md_create md0 1 "${DISKS[0]}" "${DISKS[1]}"
wait_for 20 test -s /tmp/kernel-start || fail "kernel never reported resync"
# A monitor line mentioning md0 and SyncAction resync; the format is one JSON object per line.
sync_line() {
    grep -m1 -E "md0.*SyncAction.*resync|SyncAction.*resync.*md0|resync.*SyncAction.*md0" /tmp/monitor.log
}
wait_for 20 sync_line || { cat /tmp/monitor.log /tmp/monitor.err; fail "no SyncAction=resync signal for md0 within 20 s"; }
t_sig=$(sync_line | cut -d' ' -f1)
t_kern=$(cat /tmp/kernel-start)
info "resync start: kernel -> mdpilot monitor line latency $((t_sig - t_kern)) ms (kernel time polled every 10 ms)"

wait_for 120 sync_is md0 idle || fail "resync did not finish"
sleep 3
# SyncCompleted values seen for md0, in order: they must rise and the last action must be idle.
vals=$(grep md0 /tmp/monitor.log | cut -d' ' -f2- |
    jq -r '(.. | objects | select(has("SyncCompleted")) | .SyncCompleted),
           (.. | objects | select((.property? // .name?) == "SyncCompleted") | .value) | numbers' 2>/dev/null || true)
echo "SyncCompleted values: $(echo $vals)"
n=$(echo "$vals" | grep -c . || true)
[ "$n" -ge 3 ] || fail "expected at least 3 SyncCompleted updates for md0, got $n"
sort -g -c <<<"$vals" 2>/dev/null || {
    # A value of 0 again after 1 is the end of the sync (idle); everything before must rise.
    head -n -1 <<<"$vals" | sort -g -c || fail "SyncCompleted did not rise: $(echo $vals)"
}
info "SyncCompleted updates over D-Bus during a 1 GiB resync at 50 MB/s: $n"
last_action=$(grep md0 /tmp/monitor.log | grep SyncAction | tail -1)
grep -q idle <<<"$last_action" || fail "last SyncAction for md0 is not idle: $last_action"
assert_eq "$(array_prop md0 SyncAction)" '"idle"' "D-Bus md0 SyncAction at the end"
stop_service
