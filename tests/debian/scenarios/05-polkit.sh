# polkit for real: user tester (no session, no rule) is refused every mutating method.
# vm-timeout: 90
need_disks 3
name_on_bus || systemctl start mdpilot.service
before=$(limit_min)
m=org.mdpilot.MdPilot1.Manager
refused() { # refused METHOD ARGS...: gdbus as tester answers NotAuthorized or AccessDenied
    local out
    out=$(as_tester gdbus call --system --dest "$BUS_NAME" --object-path "$MANAGER_PATH" --method "$m.$1" "${@:2}" 2>&1) &&
        fail "$1 as tester succeeded: $out"
    case $out in
        *org.mdpilot.MdPilot1.Error.NotAuthorized* | *org.freedesktop.DBus.Error.AccessDenied*) log "ok: $1 refused: $out" ;;
        *) fail "$1 as tester: expected NotAuthorized, got: $out" ;;
    esac
}
refused AcquirePriority '{}'
refused ReleasePriority 'installer'
refused SetArraySpeedLimits md0 1 2 '{}'
refused RestoreLimits '{}'
refused StartWipe "${DISKS[2]}" '{}'
assert_eq "$(limit_min)" "$before" "speed_limit_min untouched by the refused calls"
# A polkit rule file grants tester the action: the same call now passes (the lease is tied to
# gdbus's connection and ends when gdbus exits).
rule=/etc/polkit-1/rules.d/50-mdpilot-tester.rules
cat >"$rule" <<'R'
polkit.addRule(function(action, subject) {
    if (action.id == "org.mdpilot.MdPilot1.manage-priority" && subject.user == "tester")
        return polkit.Result.YES;
});
R
granted() { as_tester gdbus call --system --dest "$BUS_NAME" --object-path "$MANAGER_PATH" --method "$m.AcquirePriority" '{}' >/tmp/granted.txt 2>&1; }
wait_for 20 granted || fail "AcquirePriority as tester with a polkit rule: $(cat /tmp/granted.txt)"
log "ok: tester with a rule: $(cat /tmp/granted.txt)"
# The rule covers resync priority only: wiping still needs admin authentication every time.
refused StartWipe "${DISKS[2]}" '{}'
log "ok: tester with the priority rule still gets NotAuthorized from StartWipe"
rm -f "$rule"
wait_for 10 sh -c "[ \"\$(cat /proc/sys/dev/raid/speed_limit_min)\" = $before ]" ||
    fail "speed_limit_min not restored after tester's bus lease ended: $(limit_min)"
