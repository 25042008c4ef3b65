# vm-timeout: 300
# A resync that yields, where the admin opts in (`[resync] pressure_target`), on the real kernel
# under `mdpilot serve` (a 2-member raid1 created while the service runs):
#   - the resync gets the lease `resync-md0` on md/sync_speed_max, and under synchronous
#     foreground writes (io pressure `some` far above the band) the limit steps down; md's knob
#     reads the throttle's value (`status --json`'s `resync_throttle` says why);
#   - the resync ends (md's guaranteed minimum lifted by hand, so it finishes at disk speed):
#     the lease goes and md/sync_speed_max reads md's own `200000 (system)` again.
need_disks 2
require serve
if [ ! -r /proc/pressure/io ]; then
    skip "this kernel has no /proc/pressure/io (CONFIG_PSI off or psi=0)"
fi
conf=/etc/mdpilot/config.d/50-resync.toml
writers=()
cleanup() {
    rm -f "$conf"
    [ "${#writers[@]}" = 0 ] || kill "${writers[@]}" 2>/dev/null || true
    wait "${writers[@]}" 2>/dev/null || true
    writers=()
    [ -e /sys/block/md0/md/sync_speed_min ] && echo system >/sys/block/md0/md/sync_speed_min 2>/dev/null || true
}
trap cleanup EXIT
mkdir -p "$(dirname "$conf")"
# The band on `some` (see 20-check-yield: `full` stays low with the resync thread not counted);
# a ceiling of 20000 KiB/s keeps the 512 MiB resync running for the whole look.
printf '[resync]\npressure_target = "some 10%%..20%%"\npressure_ceiling = 20000\n' >"$conf"
start_service
MD_SIZE=512M
md_create md0 1 "${DISKS[0]}" "${DISKS[1]}"
wait_for 10 sync_is md0 resync || fail "md0 does not resync: $(md_attr md0 sync_action)"
rs() { "$MDP" status --json md0 | jq -r ".resync_throttle.md0$1 // empty"; }
held() { l=$(rs .limit_kib_s); [ -n "$l" ] && [ "$l" -gt 0 ]; }
wait_for 30 held || fail "no resync throttle decision: $("$MDP" status --json md0 | jq -c .resync_throttle); $("$MDP" policy show)"
first=$(rs .limit_kib_s)
"$MDP" policy show --json | jq -e '.leases[] | select(.holder == "resync-md0")' >/dev/null ||
    fail "no lease resync-md0: $("$MDP" policy show)"
log "first decision: $first KiB/s ($(rs .why))"
# Synchronous 4 KiB writes at the array's end: writers stalled on io.
end_kib=$(($(blockdev --getsz /dev/md0) / 2 - 65536))
for i in 1 2 3 4; do
    dd if=/dev/zero of=/dev/md0 bs=4k count=100000 seek=$(((end_kib + i * 8192) / 4)) oflag=direct,dsync status=none 2>/dev/null &
    writers+=("$!")
done
# Lowered: below the first decision, or (busy from the start) held at the floor.
lowered() {
    l=$(rs .limit_kib_s)
    [ -n "$l" ] && [ "$l" -gt 0 ] && { [ "$l" -lt "$first" ] || [ "$(rs .decision)" = floor ]; }
}
wait_for 90 lowered || fail "the resync throttle did not step down under io pressure: $(tr '\n' ' ' </proc/pressure/io); $("$MDP" status --json md0 | jq -c .resync_throttle)"
low=$(rs .limit_kib_s)
knob=$(md_attr md0 sync_speed_max)
case $knob in "$low "* | "$low") ;; *) fail "md0 sync_speed_max reads '$knob', the throttle holds $low" ;; esac
info "resync throttle: io pressure some $(sed -n 's/^some avg10=\([0-9.]*\).*/\1/p' /proc/pressure/io) %, limit $first -> $low KiB/s, md/sync_speed_max '$knob' ($(rs .why))"
kill "${writers[@]}" 2>/dev/null || true
wait "${writers[@]}" 2>/dev/null || true
writers=()
# The resync ends: below sync_speed_min md ignores the max, so it finishes at disk speed.
md_set md0 sync_speed_min 2000000
t0=$(now_ms)
wait_for 180 sync_is md0 idle || fail "md0's resync did not finish: $(cat /proc/mdstat)"
released() {
    [ "$(md_attr md0 sync_speed_max)" = "200000 (system)" ] &&
        ! "$MDP" policy show --json | jq -e '.leases[] | select(.holder == "resync-md0")' >/dev/null
}
wait_for 20 released || fail "after the resync: md0 sync_speed_max '$(md_attr md0 sync_speed_max)'; $("$MDP" policy show)"
[ -z "$(rs .decision)" ] || fail "a resync throttle note after the resync: $("$MDP" status --json md0 | jq -c .resync_throttle)"
info "resync finished $(($(now_ms) - t0)) ms after the minimum was lifted; lease released, md0 sync_speed_max '$(md_attr md0 sync_speed_max)'"
md_set md0 sync_speed_min system
stop_service
cleanup
