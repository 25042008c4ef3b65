# StartCheck on a real raid1 (md0, 04-array's) through the bus under the shipped unit: md runs the
# check to the end, the service records it in /var/lib/mdpilot/checks.toml (StateDirectory=, 0700:
# ProtectSystem=strict leaves the rest of /var read-only), the Array's LastCheckCompleted and
# LastCheckResult show it, and `mdpilot check status` prints it.
# vm-timeout: 90
[ -d /sys/block/md0/md ] || fail "md0 (04-array) is not there"
name_on_bus || systemctl start mdpilot.service
assert_eq "$(stat -c '%a %U' /var/lib/mdpilot)" "700 root" "StateDirectory /var/lib/mdpilot mode and owner"
wait_for 60 idle md0 || fail "md0 is still busy: $(cat /sys/block/md0/md/sync_action)"
before=$(aprop md0 LastCheckCompleted)
t0=$(date +%s%N)
busctl --system call "$BUS_NAME" "$(array_path md0)" "$ARRAY" StartCheck 'a{sv}' 0 ||
    fail "StartCheck md0 failed: $(journalctl -u mdpilot.service --no-pager -o cat | tail -n 3)"
log "md0 sync_action after StartCheck: $(cat /sys/block/md0/md/sync_action)"
recorded() { [ "$(aprop md0 LastCheckCompleted)" != "$before" ]; }
wait_for 60 recorded || fail "LastCheckCompleted stayed '$before' (sync_action $(cat /sys/block/md0/md/sync_action))"
info "StartCheck md0: recorded $((($(date +%s%N) - t0) / 1000000)) ms after the call"
log "LastCheckCompleted: $(aprop md0 LastCheckCompleted)"
res=$(aprop md0 LastCheckResult)
log "LastCheckResult: $res"
case $res in
    *'"action" s "check"'*'"mismatch_cnt" t 0'* | *'"mismatch_cnt" t 0'*'"action" s "check"'*) ;;
    *) fail "LastCheckResult is not a clean check: $res" ;;
esac
# The record, as the service wrote it (read before `mdpilot check status`, which also records).
f=/var/lib/mdpilot/checks.toml
[ -f "$f" ] || fail "no check record $f"
cat "$f"
assert_eq "$(stat -c %a "$f")" 600 "check record mode (UMask=0077)"
grep -q 'action = "check"' "$f" || fail "$f records no completed check"
mdpilot check status | tee /tmp/work/status.txt
grep -q "md0.*last check completed" /tmp/work/status.txt || fail "mdpilot check status shows no last check of md0"
mdpilot check status --json | jq -e '.arrays[] | select(.name == "md0") | .last.mismatch_cnt == 0' >/dev/null ||
    fail "mdpilot check status --json: no clean last check of md0"
