# A timed lease through the service: `mdpilot policy apply --for 5s --min N` (the CLI hands it to
# the running service over the bus) sets speed_limit_min at once, the policy state records its
# end, and the service releases it on time by itself (within its 5 s recheck), restoring the
# original.
# vm-timeout: 60
name_on_bus || systemctl start mdpilot.service
echo 1200 >/proc/sys/dev/raid/speed_limit_min
orig=$(limit_min)
t0=$(date +%s%N)
mdpilot policy apply --for 5s --min 4321 || fail "mdpilot policy apply --for 5s failed"
assert_eq "$(limit_min)" 4321 "speed_limit_min during the timed lease"
leases=$(busctl --system get-property "$BUS_NAME" "$MANAGER_PATH" "$MANAGER" Leases)
log "Leases: $leases"
case $leases in *'"id" s "timed"'*) ;; *) fail "Leases lacks the timed lease: $leases" ;; esac
# Its end, as the policy state records it (the bus's Leases does not carry `expires` yet).
mdpilot policy show | tee /tmp/work/show.txt
grep -q "timed: .*(ends in [0-9]* s" /tmp/work/show.txt || fail "mdpilot policy show gives the timed lease no end"
unit_journal | jq -e -s 'any(.MESSAGE == "acquire lease" and .HOLDER == "timed" and .EXPIRES != null)' >/dev/null ||
    fail "the service's journal has no 'acquire lease' of holder timed (did the CLI bypass the service?)"
wait_for 15 sh -c "[ \"\$(cat /proc/sys/dev/raid/speed_limit_min)\" = $orig ]" ||
    fail "speed_limit_min not restored 15 s after a 5 s lease: $(limit_min)"
ms=$((($(date +%s%N) - t0) / 1000000))
ended() { unit_journal | jq -e -s 'any(.MESSAGE == "timed lease ended" and .HOLDER == "timed")' >/dev/null; }
wait_for 5 ended || fail "the service's journal has no 'timed lease ended' of holder timed"
[ "$ms" -ge 4500 ] || fail "the 5 s lease ended after only $ms ms"
info "timed lease --for 5s: speed_limit_min back to $orig after $ms ms"
assert_eq "$(busctl --system get-property "$BUS_NAME" "$MANAGER_PATH" "$MANAGER" Leases)" "aa{sv} 0" "Leases after the end"
