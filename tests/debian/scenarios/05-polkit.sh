# polkit for real: user tester (no session, no rule) is refused every mutating method.
# vm-timeout: 90
need_disks 3
name_on_bus || systemctl start mdpilot.service
before=$(limit_min)
m=org.mdpilot.MdPilot1.Manager
refused() { # refused METHOD ARGS...: gdbus as tester answers NotAuthorized or AccessDenied
    local out
    out=$(as_tester gdbus call --system --dest "$BUS_NAME" --object-path "$BUS_PATH" --method "$m.$1" "${@:2}" 2>&1) &&
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
