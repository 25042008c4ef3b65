# vm-timeout: 480
# Maintenance that yields, on the real kernel under `mdpilot serve` (a 3-member raid1):
#   - a running check pauses when its array degrades (`mdadm --fail`: md interrupts the check):
#     `check status` names the pause (`paused_for` degraded) and keeps the position;
#   - the guard: `check start` on the degraded array is refused with the reason, and
#     "force overrides";
#   - the member back (`--remove`, `--add`) and recovered: the service resumes the check by
#     itself from the kept position (md/sync_min);
#   - SIGTERM of the service pauses the check (sync_action idle, `paused_for` shutdown, the
#     position saved) and the service exits; the next start resumes from that position;
#   - the io-pressure throttle (`pressure_target`, where the kernel has /proc/pressure/io): a
#     check under synchronous foreground writes drops to its floor on the pressure measured over
#     the interval since the throttle's last look (`source` interval), and, where md has
#     `sync_io_depth` (Linux 6.16+), asks for io depth 1 there; the writers gone, it climbs off
#     the floor and md's own io depth is back (decisions and knobs, never timings).
need_disks 3
require serve
ORIG_MIN=1000
ORIG_MAX=200000
conf=/etc/mdpilot/config.d/50-yield.toml
writers=()
cleanup() {
    rm -f "$conf"
    [ "${#writers[@]}" = 0 ] || kill "${writers[@]}" 2>/dev/null || true
    wait "${writers[@]}" 2>/dev/null || true
    writers=()
}
trap cleanup EXIT
MD_SIZE=512M
set_limits "$ORIG_MIN" 2000000
md_create md0 1 "${DISKS[0]}" "${DISKS[1]}" "${DISKS[2]}"
wait_for 5 sync_is md0 resync || true
wait_for 180 sync_is md0 idle || fail "md0's initial resync did not finish"
set_limits "$ORIG_MIN" "$ORIG_MAX"
start_service

st() { "$MDP" check status --json md0 | jq -r ".arrays[0]$1 // empty"; }
done_sectors() { md_attr md0 sync_completed | awk '{print ($1 ~ /^[0-9]+$/) ? $1 : 0}'; }
moved() { [ "$(done_sectors)" -gt 0 ]; }

# A check, slowed by its own lease, degraded mid-way.
run_mdp /tmp/c.out check start md0 --max 5000
assert_eq "$MDP_RC" 0 "check start exit status"
wait_for 60 moved || fail "the check made no progress"
mdadm /dev/md0 --fail "${DISKS[2]}" >/dev/null 2>&1 || fail "mdadm --fail failed"
paused_degraded() { [ "$(st .paused_for)" = degraded ] && sync_is md0 idle; }
wait_for 30 paused_degraded ||
    fail "no pause for the degradation: sync_action $(md_attr md0 sync_action), $("$MDP" check status --json md0)"
pos=$(st .position.sectors)
[ -n "$pos" ] && [ "$pos" -gt 0 ] || fail "no position kept at the pause: $("$MDP" check status --json md0)"
# md prints the total as done while it cleans up after the interrupted check: not a position.
[ "$pos" -lt "$(blockdev --getsz /dev/md0)" ] || fail "position kept at the pause is the array's end ($pos): $("$MDP" check status --json md0)"
log "paused by the degradation at sector $pos"

# The guard: a check of the degraded array is refused, with the reason.
run_mdp /tmp/g.out check start md0
[ "$MDP_RC" != 0 ] || fail "check start on a degraded md0 succeeded"
grep -q degraded /tmp/g.out.err || fail "the refusal does not name the degradation: $(cat /tmp/g.out.err)"
grep -q 'force overrides' /tmp/g.out.err || fail "the refusal does not say --force overrides: $(cat /tmp/g.out.err)"
assert_eq "$(st .position.sectors)" "$pos" "position after the refused start"

# The member back: recovery, then the service resumes the check from the kept position.
mdadm /dev/md0 --remove "${DISKS[2]}" >/dev/null 2>&1 || fail "mdadm --remove failed"
mdadm /dev/md0 --add "${DISKS[2]}" >/dev/null 2>&1 || fail "mdadm --add failed"
resumed() { sync_is md0 check; }
wait_for 180 resumed || fail "the check did not resume after the recovery: sync_action $(md_attr md0 sync_action), $("$MDP" check status --json md0)"
assert_eq "$(md_attr md0 sync_min)" "$pos" "md0 sync_min of the resumed check (the kept position)"
info "check paused by a member's failure at sector $pos, refused while degraded, resumed there after the recovery"

# SIGTERM: the check pauses (position saved, idle), the service exits, the next start resumes.
t0=$(now_ms)
kill -TERM "$SERVICE_PID"
wait "$SERVICE_PID" 2>/dev/null || true
SERVICE_PID=
dt=$(($(now_ms) - t0))
assert_eq "$(md_attr md0 sync_action)" idle "md0 sync_action after the service's SIGTERM"
assert_eq "$(st .paused_for)" shutdown "paused_for after SIGTERM"
pos2=$(st .position.sectors)
[ -n "$pos2" ] && [ "$pos2" -ge "$pos" ] || fail "position after SIGTERM: '$pos2' (before: $pos)"
start_service
wait_for 30 resumed || fail "the check did not resume after the restart: $("$MDP" check status --json md0)"
assert_eq "$(md_attr md0 sync_min)" "$pos2" "md0 sync_min after the restart (the position saved at SIGTERM)"
info "SIGTERM during a check: service gone after $dt ms with md0 idle at sector $pos2; resumed there at the next start"
run_mdp /tmp/c.out check cancel md0
wait_for 20 sync_is md0 idle || fail "check cancel left md0 $(md_attr md0 sync_action)"
stop_service

# The io-pressure throttle.
if [ ! -r /proc/pressure/io ]; then
    info "throttle: this kernel has no /proc/pressure/io (CONFIG_PSI off or psi=0): the fixed check_max applies"
    exit 0
fi
mkdir -p "$(dirname "$conf")"
printf '[check]\npressure_target = "some 5%%..10%%"\npressure_floor = 1000\npressure_ceiling = 100000\n' >"$conf"
start_service
run_mdp /tmp/c.out check start md0
assert_eq "$MDP_RC" 0 "check start under the throttle"
first=$(st .throttle.limit_kib_s)
[ -n "$first" ] || fail "no throttle decision at the check's start: $("$MDP" check status --json md0)"
depth_knob=/sys/block/md0/md/sync_io_depth
depth0=
[ -r "$depth_knob" ] && depth0=$(cat "$depth_knob")
# Synchronous 4 KiB writes at the array's end keep the writers waiting on the disks: `some`
# pressure (a task stalled on io) runs at 40-80 % in the guest, while `full` (every task at
# once) stays near 2 % with the check's kernel thread not counted: the band is on `some`.
end_kib=$(($(blockdev --getsz /dev/md0) / 2 - 65536))
for i in 1 2 3 4; do
    dd if=/dev/zero of=/dev/md0 bs=4k count=100000 seek=$(((end_kib + i * 8192) / 4)) oflag=direct,dsync status=none 2>/dev/null &
    writers+=("$!")
done
throttle_json() { "$MDP" check status --json md0 | jq -c '.arrays[0].throttle'; }
at_floor() { [ "$(st .throttle.limit_kib_s)" = 1000 ] && [ "$(st .throttle.source)" = interval ]; }
wait_for 90 at_floor || fail "the throttle did not drop to its floor under io pressure: $(cat /proc/pressure/io | tr '\n' ' '); $(throttle_json)"
case $(st .throttle.decision) in down | floor) ;; *) fail "decision at the floor: $(throttle_json)" ;; esac
info "throttle: io pressure some $(st .throttle.pressure_pct) % over $(st .throttle.interval_ms) ms, limit $first -> 1000 KiB/s ($(st .throttle.why))"
if [ -n "$depth0" ]; then
    assert_eq "$(st .throttle.io_depth)" 1 "the throttle's io depth at its floor"
    depth_is_1() { [ "$(cat "$depth_knob" | cut -d' ' -f1)" = 1 ]; }
    wait_for 10 depth_is_1 || fail "md0 sync_io_depth at the floor: $(cat "$depth_knob") (was $depth0); $(throttle_json)"
    info "throttle: md0 sync_io_depth $depth0 -> $(cat "$depth_knob") at the floor"
else
    assert_eq "$(st .throttle.io_depth)" "" "io depth on a kernel without md/sync_io_depth"
    info "throttle: no io depth output: kernel $(uname -r) has no md/sync_io_depth (Linux 6.16+)"
fi
cleanup
off_floor() { l=$(st .throttle.limit_kib_s); [ -n "$l" ] && [ "$l" -gt 1000 ] && [ -z "$(st .throttle.io_depth)" ]; }
wait_for 90 off_floor || fail "the throttle did not climb off its floor with the writers gone: $(cat /proc/pressure/io | tr '\n' ' '); $(throttle_json)"
if [ -n "$depth0" ]; then
    depth_back() { [ "$(cat "$depth_knob")" = "$depth0" ]; }
    wait_for 10 depth_back || fail "md0 sync_io_depth off the floor: $(cat "$depth_knob"), md's own was $depth0"
fi
info "throttle: writers gone, up to $(st .throttle.limit_kib_s) KiB/s ($(st .throttle.why)); decisions $(st .throttle.decisions | jq -c .)"
run_mdp /tmp/c.out check cancel md0
stop_service
