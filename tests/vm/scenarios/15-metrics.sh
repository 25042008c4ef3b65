# vm-timeout: 360
# Metrics against the kernel: a resyncing raid1 (md0, held slow by the md speed limits,
# local limits on md0), a raid1 created with `missing` (md1) and a raid1 with a member failed by
# `mdadm --fail` (md2). `mdpilot status --format prometheus` and a GET of `serve --metrics`'s
# /metrics (bash /dev/tcp) must match /sys/block/mdX/md/*: degraded, raid_disks, mismatch_cnt,
# the sync action series with value 1, sync_completed (done/total, between the reads before and
# after), sync_speed_min/max (KiB/s x 1024, local flag), faulty members (dev-*/state), and the
# global /proc/sys/dev/raid limits.
need_disks 5
require status serve
set_limits 50 200 # KiB/s: md0's resync stays far from done for the whole scenario
MD_SIZE=32M md_create md0 1 "${DISKS[0]}" "${DISKS[1]}"
wait_for 20 sync_is md0 resync || fail "md0 is not resyncing"
md_set md0 sync_speed_min 20
md_set md0 sync_speed_max 100
MD_SIZE=32M md_create md1 1 "${DISKS[2]}" missing
MD_SIZE=32M md_create md2 1 "${DISKS[3]}" "${DISKS[4]}"
mdadm /dev/md2 --fail "${DISKS[4]}" || fail "mdadm --fail ${DISKS[4]} failed"
wait_for 20 sync_is md2 idle || fail "md2's resync did not stop after the member failed"
cat /proc/mdstat
# sync_completed moves in steps (1/16 of the device): wait for a first step so the ratio is not 0.
md0_done() { local d; d=$(md_attr md0 sync_completed | cut -d' ' -f1); [ "${d:-0}" -gt 0 ] 2>/dev/null; }
wait_for 90 md0_done || log "md0 sync_completed still 0 after 90 s: $(md_attr md0 sync_completed)"
ARRAYS=(md0 md1 md2)

# prom FILE NAME LABEL...: the value of the one sample of NAME whose labels contain every
# LABEL (e.g. 'array="md0"'); fails unless exactly one sample matches.
prom() {
    local f=$1 name=$2 l out n
    shift 2
    out=$(grep -E "^$name(\{| )" "$f" || true)
    for l in "$@"; do out=$(grep -F -- "$l" <<<"$out" || true); done
    n=$(grep -c . <<<"$out" || true)
    [ "$n" = 1 ] || fail "$name $*: expected one sample in $f, found $n: $out"
    awk '{print $NF}' <<<"$out"
}
# prom_none FILE NAME LABEL...: no sample of NAME carries every LABEL.
prom_none() {
    local f=$1 name=$2 l out
    shift 2
    out=$(grep -E "^$name(\{| )" "$f" || true)
    for l in "$@"; do out=$(grep -F -- "$l" <<<"$out" || true); done
    [ -z "$out" ] || fail "$name $*: expected no sample in $f, found: $out"
}
# ratio SYNC_COMPLETED: done/total of `done / total` (sectors), empty for `none`.
ratio() { awk '$2 == "/" && $3 > 0 {printf "%.6f", $1 / $3}' <<<"$1"; }
# kib_x1024 "100 (local)": 102400
kib_x1024() { echo $(($(cut -d' ' -f1 <<<"$1") * 1024)); }
# num_eq A B WHAT: A and B are the same number (integers printed as floats, e.g. 1e0, are fine).
num_eq() {
    [ -n "$1" ] || fail "$3: no value (expected $2)"
    awk -v a="$1" -v b="$2" 'BEGIN{exit !(a + 0 == b + 0)}' || fail "$3: expected $2, got $1"
    log "ok: $3 = $2"
}

# check FILE WHAT: compares FILE (exposition text) with sysfs; SC_BEFORE[md] and SC_AFTER[md] are
# md/sync_completed read just before and just after FILE was produced.
declare -A SC_BEFORE SC_AFTER
check() {
    local f=$1 what=$2 md act one r lo hi smin smax faulty d sc
    num_eq "$(prom "$f" mdpilot_speed_limit_bytes_per_second 'bound="min"')" $(($(limit_min) * 1024)) "$what global min limit"
    num_eq "$(prom "$f" mdpilot_speed_limit_bytes_per_second 'bound="max"')" $(($(limit_max) * 1024)) "$what global max limit"
    for md in "${ARRAYS[@]}"; do
        num_eq "$(prom "$f" mdpilot_array_degraded "array=\"$md\"")" "$(md_attr "$md" degraded)" "$what $md degraded"
        num_eq "$(prom "$f" mdpilot_array_raid_disks "array=\"$md\"")" "$(md_attr "$md" raid_disks)" "$what $md raid_disks"
        num_eq "$(prom "$f" mdpilot_array_mismatch_sectors "array=\"$md\"")" "$(md_attr "$md" mismatch_cnt)" "$what $md mismatch_cnt"
        act=$(md_attr "$md" sync_action)
        one=$(grep -E "^mdpilot_array_sync_action\{" "$f" | grep -F "array=\"$md\"" | awk '$NF + 0 == 1' |
            sed -n 's/.*action="\([a-z]*\)".*/\1/p')
        [ -n "$act" ] || fail "$what $md: empty md/sync_action"
        assert_eq "$one" "$act" "$what $md sync action with value 1 (md/sync_action)"
        smin=$(md_attr "$md" sync_speed_min)
        smax=$(md_attr "$md" sync_speed_max)
        num_eq "$(prom "$f" mdpilot_array_sync_speed_limit_bytes_per_second "array=\"$md\"" 'bound="min"')" "$(kib_x1024 "$smin")" "$what $md sync_speed_min ($smin) x 1024"
        num_eq "$(prom "$f" mdpilot_array_sync_speed_limit_bytes_per_second "array=\"$md\"" 'bound="max"')" "$(kib_x1024 "$smax")" "$what $md sync_speed_max ($smax) x 1024"
        num_eq "$(prom "$f" mdpilot_array_sync_speed_limit_local "array=\"$md\"" 'bound="max"')" "$(grep -c local <<<"$smax" || true)" "$what $md sync_speed_max local"
        faulty=0
        for d in /sys/block/"$md"/md/dev-*/state; do if grep -q faulty "$d"; then faulty=$((faulty + 1)); fi; done
        num_eq "$(prom "$f" mdpilot_array_members "array=\"$md\"" 'state="faulty"')" "$faulty" "$what $md faulty members (dev-*/state)"
        sc=${SC_AFTER[$md]}
        if [ -z "$(ratio "$sc")" ] && [ -z "$(ratio "${SC_BEFORE[$md]}")" ]; then
            prom_none "$f" mdpilot_array_sync_completed_ratio "array=\"$md\""
            log "ok: $what $md no sync ratio (sync_completed $sc)"
            continue
        fi
        r=$(prom "$f" mdpilot_array_sync_completed_ratio "array=\"$md\"")
        lo=$(ratio "${SC_BEFORE[$md]}")
        hi=$(ratio "$sc")
        # The service's model may be a little older than the read before the scrape: 0.02 of
        # slack below (at 100 KiB/s on 32 MiB that is ~7 s of resync), none above.
        awk -v r="$r" -v lo="${lo:-0}" -v hi="${hi:-1}" 'BEGIN{exit !(r + 0 >= lo - 0.02 && r + 0 <= hi + 0.000001)}' ||
            fail "$what $md sync ratio $r outside [$lo - 0.02, $hi] (sync_completed ${SC_BEFORE[$md]} .. $sc)"
        log "ok: $what $md sync ratio $r within [$lo, $hi] (sync_completed ${SC_BEFORE[$md]} .. $sc)"
        info "$what: $md ratio $r vs sysfs sync_completed ${SC_BEFORE[$md]} .. $sc ($lo .. $hi)"
    done
    for md in "${ARRAYS[@]}"; do
        info "$what: $md degraded $(md_attr "$md" degraded) raid_disks $(md_attr "$md" raid_disks) sync_action $(md_attr "$md" sync_action) mismatch_cnt $(md_attr "$md" mismatch_cnt) sync_speed_min '$(md_attr "$md" sync_speed_min)' max '$(md_attr "$md" sync_speed_max)': metrics match"
    done
}
read_before() { local md; for md in "${ARRAYS[@]}"; do SC_BEFORE[$md]=$(md_attr "$md" sync_completed); done; }
read_after() { local md; for md in "${ARRAYS[@]}"; do SC_AFTER[$md]=$(md_attr "$md" sync_completed); done; }

# 1. The textfile collector's view.
read_before
run_mdp /tmp/status.prom status --format prometheus
read_after
[ "$MDP_RC" = 0 ] || fail "status --format prometheus exited $MDP_RC"
check /tmp/status.prom "status --format prometheus"

# 2. The service's /metrics over loopback.
ip link set lo up 2>/dev/null || /bbin/ip link set lo up 2>/dev/null || /bbin/ifconfig lo 127.0.0.1 up ||
    fail "cannot bring up the loopback interface"
PORT=9163
start_service --metrics "127.0.0.1:$PORT"
# http_get PATH OUT: GET over bash's /dev/tcp (HTTP/1.0: no chunking, the server closes);
# the head goes to OUT.head, the body to OUT.
http_get() (
    exec 3<>"/dev/tcp/127.0.0.1/$PORT" || exit 1
    printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$1" >&3
    tr -d '\r' <&3 >"$2.raw"
    exec 3<&-
    sed '/^$/q' "$2.raw" >"$2.head"
    sed '1,/^$/d' "$2.raw" >"$2"
)
scraped() { http_get /metrics /tmp/metrics.prom 2>/dev/null && grep -q '^mdpilot_array_degraded{' /tmp/metrics.prom; }
wait_for 30 scraped || { cat /tmp/serve.log; fail "no metrics from http://127.0.0.1:$PORT/metrics within 30 s"; }
sleep 2 # one more refresh of the service's model
read_before
http_get /metrics /tmp/metrics.prom || fail "GET /metrics failed"
read_after
head -1 /tmp/metrics.prom.head
grep -q '^HTTP/1\.[01] 200' /tmp/metrics.prom.head || fail "GET /metrics: $(head -1 /tmp/metrics.prom.head)"
grep -c . /tmp/metrics.prom | sed 's/^/metrics lines: /'
check /tmp/metrics.prom "serve --metrics"
stop_service
assert_eq "$(md_attr md0 sync_action)" resync "md0 still resyncing at the end"
