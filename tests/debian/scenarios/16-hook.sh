# The event program under the shipped unit's sandbox: `[events] program` in /etc/mdpilot/config.d
# runs on a real event (a member of a raid1 failed with `mdadm --fail`) as root in the service's
# mount namespace: / is read-only there (ProtectSystem=strict) but for /run/mdpilot and
# /var/lib/mdpilot, /tmp and /var/tmp are the service's own (PrivateTmp=yes), and the journal
# (logger) is reachable. The program writes its note in /run/mdpilot, where it is seen from outside.
# vm-timeout: 90
need_disks 4
conf=/etc/mdpilot/config.d/50-test-events.toml
hook=/usr/local/sbin/mdpilot-test-hook
out=/run/mdpilot/test-hook.log
md=md2
cleanup() {
    rm -f "$conf" "$hook" "$out"
    if [ -e "/dev/$md" ]; then
        mdadm --stop "/dev/$md" >/dev/null 2>&1 || true
        mdadm --zero-superblock "${DISKS[2]}" "${DISKS[3]}" 2>/dev/null || true
    fi
    systemctl restart mdpilot.service || true
}
trap cleanup EXIT
mkdir -p /etc/mdpilot/config.d /usr/local/sbin
cat >"$hook" <<'H'
#!/bin/sh
# PROGRAM EVENT /dev/mdN [/dev/MEMBER], the event as JSON in $MDPILOT_EVENT_JSON.
etc=no; touch /etc/mdpilot-hook-probe 2>/dev/null && etc=yes && rm -f /etc/mdpilot-hook-probe
logger -t mdpilot-test-hook "event $*"
echo "$* uid=$(id -u) etc-writable=$etc json=$MDPILOT_EVENT_JSON" >>/run/mdpilot/test-hook.log
H
chmod 755 "$hook"
printf '[events]\nprogram = "%s"\n' "$hook" >"$conf"
restart_unit
MD_SIZE=32768 md_create "$md" 1 "${DISKS[2]}" "${DISKS[3]}"
wait_for 60 idle "$md" || fail "$md still syncing: $(cat /sys/block/$md/md/sync_action)"
mdadm "/dev/$md" --fail "${DISKS[3]}" || fail "mdadm --fail ${DISKS[3]} failed"
failed() { grep -q "^Fail /dev/$md ${DISKS[3]} " "$out" 2>/dev/null; }
wait_for 30 failed || fail "the event program wrote no Fail line to $out: $(cat "$out" 2>&1); $(journalctl -u mdpilot.service --no-pager -o cat | tail -n 5)"
cat "$out"
line=$(grep "^Fail /dev/$md " "$out" | head -1)
case $line in *" uid=0 "*) ;; *) fail "the program did not run as root: $line" ;; esac
case $line in *" etc-writable=no "*) ;; *) fail "the program could write /etc (ProtectSystem=strict should forbid it): $line" ;; esac
jq -e --arg m "$md" '.' <<<"${line#* json=}" >/dev/null || fail "MDPILOT_EVENT_JSON is not JSON: ${line#* json=}"
journalctl --sync 2>/dev/null || true
journalctl -t mdpilot-test-hook --no-pager -o cat | grep -q "event Fail /dev/$md" ||
    fail "the program's logger record is not in the journal"
info "event program: $(cut -d' ' -f1-3 <<<"$line") ran in the sandbox (/etc read-only, wrote $out, logger reached the journal)"
