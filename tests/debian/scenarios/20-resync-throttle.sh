# The resync throttle under the shipped unit (ProtectSystem=strict; its notes in /run/mdpilot):
# with `[resync] pressure_target` (the admin's opt-in), a new raid1 (md20 on the last two data
# disks) resyncs under the lease `resync-md20` on md/sync_speed_max; synchronous foreground
# writes (io pressure `some` far above the band) step the limit down, and md's knob reads the
# throttle's value (`status --json`'s `resync_throttle`, the Array's ResyncThrottle); when the
# resync ends the lease goes and md/sync_speed_max reads md's own `200000 (system)` again.
# vm-timeout: 300
need_disks 4
[ -r /proc/pressure/io ] || skip "this kernel has no /proc/pressure/io (CONFIG_PSI off or psi=0)"
md=md20
conf=/etc/mdpilot/config.d/50-test-resync.toml
cleanup() {
    rm -f "$conf"
    stop_writers
    drop_array "$md" "${DISKS[2]}" "${DISKS[3]}"
    systemctl restart mdpilot.service || true
}
trap cleanup EXIT
mkdir -p /etc/mdpilot/config.d
# The band on `some`, the ceiling 20000 KiB/s: the 512 MiB resync runs for the whole look.
printf '[resync]\npressure_target = "some 10%%..20%%"\npressure_ceiling = 20000\n' >"$conf"
restart_unit
MD_SIZE=512M md_create "$md" 1 "${DISKS[2]}" "${DISKS[3]}"
resyncing() { [ "$(cat "/sys/block/$md/md/sync_action")" = resync ]; }
wait_for 10 resyncing || fail "$md does not resync: $(cat "/sys/block/$md/md/sync_action")"
rs() { mdpilot status --json "$md" | jq -r ".resync_throttle.$md$1 // empty"; }
lease() { mdpilot policy show --json | jq -e ".leases[] | select(.holder == \"resync-$md\")" >/dev/null; }
held() { l=$(rs .limit_kib_s); [ -n "$l" ] && [ "$l" -gt 0 ] && lease; }
wait_for 30 held || fail "no resync throttle lease: $(mdpilot status --json "$md" | jq -c .resync_throttle); $(mdpilot policy show)"
first=$(rs .limit_kib_s)
log "first decision: $first KiB/s ($(rs .why))"
busctl --system get-property "$BUS_NAME" "$(array_path "$md")" "$ARRAY" ResyncThrottle | grep -q limit ||
    fail "the Array's ResyncThrottle has no limit: $(busctl --system get-property "$BUS_NAME" "$(array_path "$md")" "$ARRAY" ResyncThrottle)"
sync_writers "$md"
lowered() {
    l=$(rs .limit_kib_s)
    [ -n "$l" ] && [ "$l" -gt 0 ] && { [ "$l" -lt "$first" ] || [ "$(rs .decision)" = floor ]; }
}
wait_for 90 lowered || fail "the resync throttle did not step down: $(tr '\n' ' ' </proc/pressure/io); $(mdpilot status --json "$md" | jq -c .resync_throttle)"
low=$(rs .limit_kib_s)
knob=$(cat "/sys/block/$md/md/sync_speed_max")
case $knob in "$low "* | "$low") ;; *) fail "$md sync_speed_max reads '$knob', the throttle holds $low" ;; esac
info "resync throttle under the unit: limit $first -> $low KiB/s, md/sync_speed_max '$knob' ($(rs .why))"
stop_writers
# The resync ends: below sync_speed_min md ignores the max, so it finishes at disk speed.
echo 2000000 >"/sys/block/$md/md/sync_speed_min"
wait_for 180 idle "$md" || fail "$md's resync did not finish: $(cat /proc/mdstat)"
echo system >"/sys/block/$md/md/sync_speed_min"
released() { [ "$(cat "/sys/block/$md/md/sync_speed_max")" = "200000 (system)" ] && ! lease; }
wait_for 20 released || fail "after the resync: $md sync_speed_max '$(cat "/sys/block/$md/md/sync_speed_max")'; $(mdpilot policy show)"
[ -z "$(rs .decision)" ] || fail "a resync throttle note after the resync: $(mdpilot status --json "$md" | jq -c .resync_throttle)"
info "after the resync: lease resync-$md released, $md sync_speed_max '$(cat "/sys/block/$md/md/sync_speed_max")'"
