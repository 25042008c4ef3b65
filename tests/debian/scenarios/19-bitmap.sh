# The bitmap advisor under the shipped unit: a raid1 made without a write-intent bitmap (md19 on
# the last two data disks, --assume-clean: in sync at once) is named by `mdpilot status` (text
# and JSON), the Array object (BitmapAdvised, WriteIntentBitmap, FullResyncTime, Warnings) and
# the metrics (mdpilot_array_warning{kind="no_bitmap"}); `mdpilot bitmap add md19` gives it an
# internal bitmap (md/bitmap/location, consistency_policy bitmap) and every view drops the
# advice. Then Array.AddBitmap through the bus, so mdadm runs inside the unit's sandbox: at once
# on an idle array; during a check (slowed to 1000 KiB/s), queued (BitmapPending) and added by
# the service when the check ends.
# vm-timeout: 240
need_disks 4
md=md19
conf=/etc/mdpilot/config.d/50-test-bitmap.toml
cleanup() {
    rm -f "$conf"
    if [ -e "/dev/$md" ]; then
        mdadm --stop "/dev/$md" >/dev/null 2>&1 || true
        mdadm --zero-superblock "${DISKS[2]}" "${DISKS[3]}" 2>/dev/null || true
    fi
    systemctl restart mdpilot.service || true
}
trap cleanup EXIT
mkdir -p /etc/mdpilot/config.d
printf '[metrics]\nlisten = "127.0.0.1:9852"\n' >"$conf"
restart_unit
mdadm --create "/dev/$md" --run --quiet --metadata=1.2 --level=1 --raid-devices=2 --size=65536 \
    --assume-clean --bitmap=none "${DISKS[2]}" "${DISKS[3]}" || fail "mdadm --create --bitmap=none failed"
udevadm settle --timeout=20 || true
sysmd=/sys/block/$md/md
location() { cat "$sysmd/bitmap/location" 2>/dev/null || echo none; }
log "$md: consistency_policy $(cat "$sysmd/consistency_policy"), bitmap/location $(location), sync_action $(cat "$sysmd/sync_action")"
assert_eq "$(location)" none "$md bitmap/location after --bitmap=none"
wait_for 20 busctl --system introspect "$BUS_NAME" "$(array_path $md)" "$ARRAY" >/dev/null || fail "$md not on the bus"

# The four views, each with or without the advice (`advised` or `quiet`).
status_block() { mdpilot status | awk -v h="/dev/$md:" '$0 == h {p = 1} p && /^$/ {exit} p'; }
json_advised() { mdpilot status --json | jq -r --arg n "$md" '.arrays[] | select(.name == $n) | .bitmap_advised'; }
scrape() {
    python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen("http://127.0.0.1:9852/metrics", timeout=5).read().decode())' \
        >/tmp/work/metrics.txt 2>/tmp/work/scrape.err
}
bus_is() { [ "$(aprop $md BitmapAdvised)" = "b $1" ]; }
views() { # views advised|quiet WHEN
    local want=true sample
    [ "$1" = advised ] || want=false
    wait_for 30 bus_is "$want" || fail "$2: BitmapAdvised is '$(aprop $md BitmapAdvised)', not $want"
    assert_eq "$(json_advised)" "$want" "$2: mdpilot status --json bitmap_advised"
    wait_for 20 scrape || fail "no answer on 127.0.0.1:9852/metrics: $(tail -n 1 /tmp/work/scrape.err)"
    sample=$(grep "^mdpilot_array_warning{array=\"$md\",kind=\"no_bitmap\"}" /tmp/work/metrics.txt || true)
    status_block >/tmp/work/status.txt
    if [ "$1" = advised ]; then
        assert_eq "$(aprop $md WriteIntentBitmap)" 's "none"' "$2: WriteIntentBitmap"
        [ "$(aprop $md FullResyncTime | cut -d' ' -f2)" -gt 0 ] || fail "$2: FullResyncTime is $(aprop $md FullResyncTime)"
        aprop $md Warnings | grep -q 'no write-intent bitmap' || fail "$2: Warnings lack the bitmap: $(aprop $md Warnings)"
        assert_eq "${sample##* }" 1 "$2: mdpilot_array_warning no_bitmap sample"
        grep -q "^mdpilot_array_full_resync_estimate_seconds{array=\"$md\"" /tmp/work/metrics.txt ||
            fail "$2: no mdpilot_array_full_resync_estimate_seconds for $md"
        grep -q 'Bitmap : none: a crash or power loss means a full resync' /tmp/work/status.txt ||
            fail "$2: mdpilot status does not advise a bitmap: $(cat /tmp/work/status.txt)"
    else
        assert_eq "$(aprop $md WriteIntentBitmap)" 's "internal"' "$2: WriteIntentBitmap"
        assert_eq "$(aprop $md FullResyncTime)" "t 0" "$2: FullResyncTime"
        assert_eq "$sample" "" "$2: mdpilot_array_warning no_bitmap sample"
        grep -q 'full resync' /tmp/work/status.txt && fail "$2: mdpilot status still advises: $(cat /tmp/work/status.txt)"
        grep -Eq '^ *Bitmap : [0-9]+/[0-9]+ pages' /tmp/work/status.txt ||
            fail "$2: mdpilot status shows no bitmap line: $(cat /tmp/work/status.txt)"
    fi
    log "ok: $2: every view $1"
}
views advised "no bitmap"
cat /tmp/work/status.txt
info "advisor on $md: FullResyncTime $(aprop $md FullResyncTime | cut -d' ' -f2) us, metrics $(grep "^mdpilot_array_full_resync_estimate_seconds{array=\"$md\"" /tmp/work/metrics.txt)"

# The CLI, as an admin runs it (mdadm outside the unit).
mdpilot bitmap add "$md" || fail "mdpilot bitmap add $md failed"
[ "$(location)" != none ] || fail "mdpilot bitmap add: bitmap/location still none"
assert_eq "$(cat "$sysmd/consistency_policy")" bitmap "consistency_policy after mdpilot bitmap add"
views quiet "after mdpilot bitmap add"

# The bus at once: the service's mdadm, in the unit's sandbox.
mdadm --grow --bitmap=none "/dev/$md" || fail "mdadm --grow --bitmap=none failed"
# md sends no change event when a bitmap is removed (seen on 6.1): the service re-reads an array
# on its events, so the removal is announced as udev would at the next change (docs/bitmap.md).
udevadm trigger --action=change --settle "/dev/$md"
views advised "bitmap removed"
out=$(busctl --system call "$BUS_NAME" "$(array_path $md)" "$ARRAY" AddBitmap 'a{sv}' 0 2>&1) ||
    fail "AddBitmap on an idle $md: $out; $(journalctl -u mdpilot.service --no-pager -o cat | tail -n 3)"
# false: added now, not queued (true means queued for the end of a sync)
assert_eq "$out" "b false" "AddBitmap on an idle array"
[ "$(location)" != none ] || fail "AddBitmap: bitmap/location still none"
views quiet "after AddBitmap"

# The bus during a check: queued, added by the service when the check ends.
mdadm --grow --bitmap=none "/dev/$md" || fail "mdadm --grow --bitmap=none failed"
# md sends no change event when a bitmap is removed (seen on 6.1): the service re-reads an array
# on its events, so the removal is announced as udev would at the next change (docs/bitmap.md).
udevadm trigger --action=change --settle "/dev/$md"
views advised "bitmap removed again"
echo 1000 >"$sysmd/sync_speed_max"
echo check >"$sysmd/sync_action"
out=$(busctl --system call "$BUS_NAME" "$(array_path $md)" "$ARRAY" AddBitmap 'a{sv}' 0 2>&1) ||
    fail "AddBitmap during a check: $out"
log "AddBitmap during a check ($(cat "$sysmd/sync_action") $(cat "$sysmd/sync_completed")): $out"
assert_eq "$out" "b true" "AddBitmap during a check (queued)"
assert_eq "$(cat "$sysmd/sync_action")" check "sync_action after AddBitmap (the check still runs)"
assert_eq "$(location)" none "bitmap/location while the check runs"
assert_eq "$(aprop $md BitmapPending)" "b true" "BitmapPending while the check runs"
t0=$(date +%s%N)
echo system >"$sysmd/sync_speed_max"
added() { [ "$(location)" != none ] && [ "$(aprop $md BitmapPending)" = "b false" ]; }
wait_for 120 added ||
    fail "no bitmap after the check: location $(location), $(aprop $md BitmapPending), sync_action $(cat "$sysmd/sync_action"); $(journalctl -u mdpilot.service --no-pager -o cat | tail -n 5)"
info "queued AddBitmap: added $((($(date +%s%N) - t0) / 1000000)) ms after the check was let go"
views quiet "after the queued AddBitmap"
journalctl -u mdpilot.service --no-pager -o cat | grep -i bitmap | tail -n 5 || true
