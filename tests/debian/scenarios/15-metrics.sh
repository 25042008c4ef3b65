# The metrics listener under the shipped unit (IPAddressDeny=any, IPAddressAllow=localhost,
# RestrictAddressFamilies with AF_INET): `[metrics] listen = "127.0.0.1:PORT"` in
# /etc/mdpilot/config.d, a scrape from inside the guest gets mdpilot's families for md0.
# vm-timeout: 60
[ -d /sys/block/md0/md ] || fail "md0 (04-array) is not there"
conf=/etc/mdpilot/config.d/50-test-metrics.toml
cleanup() { rm -f "$conf"; systemctl restart mdpilot.service || true; }
trap cleanup EXIT
mkdir -p /etc/mdpilot/config.d
printf '[metrics]\nlisten = "127.0.0.1:9851"\n' >"$conf"
restart_unit
scrape() {
    python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen("http://127.0.0.1:9851/metrics", timeout=5).read().decode())' \
        >/tmp/work/metrics.txt 2>/tmp/work/scrape.err
}
wait_for 20 scrape || fail "no answer on http://127.0.0.1:9851/metrics: $(cat /tmp/work/scrape.err | tail -n 1)"
head -n 20 /tmp/work/metrics.txt
for fam in mdpilot_build_info mdpilot_array_info mdpilot_array_state mdpilot_speed_limit_bytes_per_second \
    mdpilot_array_last_check_completion_timestamp_seconds mdpilot_wipe_jobs_running; do
    grep -q "^# TYPE $fam " /tmp/work/metrics.txt || fail "the scrape lacks the family $fam"
done
grep -q '^mdpilot_array_info{.*md0' /tmp/work/metrics.txt || fail "mdpilot_array_info has no md0 sample"
info "metrics on 127.0.0.1:9851 under the unit: $(grep -c '^# TYPE mdpilot_' /tmp/work/metrics.txt) families, $(wc -c </tmp/work/metrics.txt) bytes"
