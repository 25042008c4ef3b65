#!/bin/sh
# The test bed's scenario inside the stock Debian 12 or 13 installer, started by the preseeded
# `preseed/early_command` (so it runs under the installer's cdebconf, text frontend).
#
# What runs is the installer's own code: udpkg installs the udebs, partman's init.d scripts
# start parted_server and build /var/lib/partman, partman-md's `25md/do_option` functions create
# the RAID1 (with its `speed_limit_max := speed_limit_min` write just before `mdadm --create`),
# and partman-crypto's `crypto_wipe_device` erases the array with `crypto_do_wipe`'s
# db_progress loop and `/bin/blockdev-wipe`. What this script adds: the answers (db_set +
# seen, as a preseed file would), the blank GPT labels, the clock, and the results.
#
# Route mdcfg (udeb with mdcfg's udebs): mdcfg's own main program (without its menu) loads md
# and writes its speed_limit_min := 0 before partman starts; partman-md creates the RAID1 and
# finish-install follows at once (no partman restart, no erase), while partman-md's
# max := min (0/0 under the installer lease) holds the resync: the array is still resyncing at
# finish-install, for certain.
#
# Route autoraid (udeb, Debian 13): partman-auto-raid's display.d step and its auto-raidcfg
# create the RAID1 from a preseeded recipe; the resync runs to its end; then finish-install.
#
# Kernel command line: di.release=12|13 di.mode=stock|udeb|patched|mdcfg|autoraid  di.size=GIB
# Results: `KEY value` lines on /dev/ttyS1 (the host's results file), ending with `END`.
# POSIX sh (the installer's busybox ash).

RES=/dev/ttyS1
res() { echo "$*" >"$RES"; }
log() { echo "di-test: $*" >&2; logger -t di-test -- "$*" 2>/dev/null || :; }
now_ms() { awk '{ printf "%d\n", $1 * 1000 }' /proc/uptime; }
limits() { echo "$(cat /proc/sys/dev/raid/speed_limit_min)/$(cat /proc/sys/dev/raid/speed_limit_max)"; }
# Sectors of the array's resync done so far (sync_completed "DONE / TOTAL"; "none": 0).
sync_done() {
    c=$(cat /sys/block/$md/md/sync_completed)
    case $c in *' / '*) echo "${c%% /*}" ;; *) echo 0 ;; esac
}
# bitmap_state: the array's consistency_policy and md/bitmap/location ("resync none", "bitmap +8").
bitmap_state() {
    echo "$(cat /sys/block/$md/md/consistency_policy 2>/dev/null) $(cat /sys/block/$md/md/bitmap/location 2>/dev/null || echo none)"
}
# wait_redundant FROM_MS [LIMIT_S]: waits, for at most LIMIT_S (DI_REDUNDANT_WAIT_S) from now,
# until the array is redundant; REDUNDANT_MS from FROM_MS. Bounded: the stock route resyncs at the floor (hours).
# Without the end, the resync's progress over the wait gives its rate (sectors of
# sync_completed per second) and the host extrapolates.
wait_redundant() {
    limit_s=${2:-${DI_REDUNDANT_WAIT_S:-120}}
    t_end=$(now_ms)
    done0=$(sync_done)
    redundant=""
    while :; do
        act=$(cat /sys/block/$md/md/sync_action)
        # Redundant: no resync running or pending (`resync_start` none: every stripe in sync).
        if [ "$act" = idle ] && [ "$(cat /sys/block/$md/md/resync_start)" = none ] &&
            ! grep -q 'resync\|recovery' /proc/mdstat; then
            redundant=$(now_ms)
            break
        fi
        [ $(( ($(now_ms) - t_end) / 1000 )) -ge "$limit_s" ] && break
        sleep 0.5
    done
    if [ -n "$redundant" ]; then
        res "REDUNDANT_MS $((redundant - $1))"
    else
        t_now=$(now_ms)
        res "REDUNDANT_MS none-after-$(( (t_now - $1) / 1000 ))s"
        res "RESYNC_DONE_SECTORS $(sync_done) of $(($(cat /sys/block/$md/size)))"
        res "RESYNC_RATE_KIBS $(( ($(sync_done) - done0) / 2 * 1000 / (t_now - t_end + 1) ))"
        res "RESYNC_AT $(grep -o '\(resync\|recovery\) *=.*' /proc/mdstat | head -1)"
    fi
}
# finish_install: finish-install's mdpilot step, with a directory standing in for the
# installed system's root at /target; the results; the end.
finish_install() {
    res "SYNC_AT_FINISH $(cat /sys/block/$md/md/sync_action) $(cat /sys/block/$md/md/resync_start) $(limits)"
    mkdir -p /target/var/lib
    for s in /usr/lib/finish-install.d/*mdpilot*; do
        [ -x "$s" ] && "$s"
    done
    res "LIMITS_AFTER_FINISH $(limits)"
    res "BITMAP_AT_END $(bitmap_state)"
    res "BITMAP_WANTED $(cat /target/var/lib/mdpilot/bitmap-wanted 2>/dev/null | tr '\n' ' ' | sed 's/ $//')"
    # (each line without its time stamp, "Dec  3 03:10:11 ")
    grep 'mdpilot' /var/log/syslog 2>/dev/null | sed 's/^[^:]*:[0-9][0-9]:[0-9][0-9] //' |
        while read -r l; do res "SYSLOG $l"; done
    mdadm --stop "/dev/$md" >/dev/null 2>&1 || :
    res END
    finish_vm
}
fail() {
    res "FAIL $*"
    grep 'partman\|mdadm\|md:\|parted' /var/log/syslog 2>/dev/null | tail -25 |
        while read -r l; do res "DEBUG $l"; done
    res END
    finish_vm
}
finish_vm() { sync; echo o >/proc/sysrq-trigger; sleep 60; }

mode=stock
size=1
release=12
for a in $(cat /proc/cmdline); do
    case $a in
        di.release=*) release=${a#di.release=} ;;
        di.mode=*) mode=${a#di.mode=} ;;
        di.size=*) size=${a#di.size=} ;;
        di.wait=*) DI_REDUNDANT_WAIT_S=${a#di.wait=} ;;
    esac
done
res "RELEASE $release"
res "MODE $mode"
res "SIZE_GIB $size"

. /usr/share/debconf/confmodule

# ---------------------------------------------------------------- udebs, with the installer's udpkg
# `udpkg --unpack`, then the templates (what udpkg's configure step loads): configuring would
# run the postinsts, and partman-base's postinst is partman itself, the interactive menu.
for u in /di-test/udebs/*.udeb; do
    case $u in *mdpilot-udeb*) continue ;; esac
    udpkg --unpack "$u" >/dev/null 2>&1 || fail "udpkg --unpack $u"
done
# mdpilot-udeb as docs/installer.md has the admin install it: `udpkg -i` from early_command.
if [ "$mode" != stock ]; then
    # (its templates too: mdpilot/bitmap)
    set -- /di-test/udebs/mdpilot-udeb_*.udeb
    [ -f "$1" ] || fail "no mdpilot-udeb in /di-test/udebs"
    udpkg -i "$1" >/dev/null 2>&1 || fail "udpkg -i mdpilot-udeb"
    [ -x /usr/bin/mdpilot ] && [ -x /lib/partman/init.d/05mdpilot ] || fail "mdpilot-udeb not installed"
fi
for t in /var/lib/dpkg/info/*.templates; do
    debconf-loadtemplate debian "$t" 2>/dev/null || :
done
if [ "$mode" = patched ]; then
    # The maintainers' patches of packaging/d-i-patches, applied by the host to the udebs'
    # scripts, replace the unpacked files (file by file: Debian 13's /lib is a link to usr/lib,
    # which a copy of the directory tree would try to replace).
    for f in $(cd /di-test/patched && find . -type f); do
        cp -p "/di-test/patched/$f" "/$f" || fail "patched script $f"
    done
fi
depmod -a
for m in virtio_blk md_mod raid1 dm_mod dm_crypt; do modprobe "$m" 2>/dev/null || log "modprobe $m failed"; done
i=0
while [ ! -b /dev/vda ] || [ ! -b /dev/vdb ]; do
    i=$((i + 1)); [ $i -gt 50 ] && fail "no /dev/vda and /dev/vdb"
    sleep 0.2
done
# Blank disks with an empty GPT label (what partman-partitioning would write on request).
for d in /dev/vda /dev/vdb; do parted -s "$d" mklabel gpt || fail "mklabel $d"; done
res "MEM_TOTAL_KIB $(awk '/^MemTotal/ { print $2 }' /proc/meminfo)"
res "MDADM $(mdadm --version 2>&1 | head -1)"
res "LIMITS_BEFORE $(limits)"

# ---------------------------------------------------------------- mdcfg: md loaded, min := 0
if [ "$mode" = mdcfg ]; then
    # mdcfg's own main program, as its main-menu item runs it (its postinst is /bin/mdcfg),
    # without the last call, its menu loop `md_mainmenu`: md is loaded (here already, as
    # hw-detect may have done; /dev/md does not exist yet, so mdcfg takes it for not loaded),
    # speed_limit_min := 0, the scan and assembly of existing arrays, apt-install mdadm.
    [ -x /bin/mdcfg ] || fail "no /bin/mdcfg (mdcfg-utils)"
    sed '/^md_mainmenu$/d' /bin/mdcfg >/tmp/mdcfg-main.sh
    sh /tmp/mdcfg-main.sh || fail "mdcfg's main program"
    res "LIMITS_AFTER_MDCFG $(limits)"
fi

# ---------------------------------------------------------------- partman's start
# /bin/partman's init loop: every init.d script in order (parted_server, the device tree,
# 49md, 52crypto, and with mdpilot-udeb its hook).
mkdir -p /var/lib/partman
for s in /lib/partman/init.d/*; do
    [ -x "$s" ] || continue
    "$s" || fail "partman init.d $s"
done
res "LIMITS_PARTMAN_START $(limits)"
# The answers a preseed file would give (partman-md's questions are asked at critical priority).
# Set after init.d: its 25md-devices re-registers partman-md/confirm*, which drops an earlier
# answer and its seen flag.
answer() { db_set "$1" "$2"; db_fset "$1" seen true; }
answer partman-md/confirm true
answer partman-md/confirm_nooverwrite true
answer partman-md/device_remove_md true
answer partman-md/createmain RAID1
answer partman-md/raiddevcount 2
answer partman-md/raidsparecount 0


# ---------------------------------------------------------------- route autoraid: partman-auto-raid
# partman's own display.d step for a preseeded RAID (`partman-auto/method raid`):
# partman-auto-raid's `50initial_auto_raid`, as /bin/partman runs it before its menu: confirm,
# commit, `auto-raidcfg` (its own `mdadm --create ... --force -R` of the recipe's RAID1 over
# both disks, no --bitmap), and `restart_partman`. The array resyncs in the installer's idle
# time; mdpilot-udeb's waiter adds the bitmap when the resync ends; then finish-install.
if [ "$mode" = autoraid ]; then
    answer partman-auto/method raid
    # partman-base's confirm_changes with no partition changed asks TEMPLATE/confirm_nochanges
    # ("Keep current partition layout and configure RAID?").
    answer partman-md/confirm_nochanges true
    # raidtype devcount sparecount fstype mountpoint devices sparedevices (auto-raidcfg's recipe)
    answer partman-auto-raid/recipe "1 2 0 ext4 / /dev/vda#/dev/vdb ."
    t0=$(now_ms)
    /lib/partman/display.d/50initial_auto_raid || fail "partman-auto-raid's display.d/50initial_auto_raid"
    md=$(sed -n 's/^\(md[0-9]*\) : active.*/\1/p' /proc/mdstat | head -1)
    [ -n "$md" ] || fail "no array after auto-raidcfg"
    res "ARRAY $md $(cat /sys/block/$md/md/level) $(cat /sys/block/$md/md/raid_disks)"
    res "ARRAY_UUID $(mdadm --detail --export "/dev/$md" | sed -n 's/^MD_UUID=//p')"
    res "BITMAP_AFTER_CREATE $(bitmap_state)"
    res "LIMITS_AFTER_MD_MENU $(limits)"
    # The whole resync, at idle speed (bounded well inside the host's timeout for the run).
    wait_redundant "$t0" 500
    # (the waiter, or finish-install's own pass when the resync ended between its looks)
    finish_install
fi

# ---------------------------------------------------------------- partman-md: create the RAID1
# `25md/do_option` is a menu loop whose answers never change once preseeded; its functions
# are taken as they are (everything before its main program, the first bare
# `do_initial_setup` line) and run once, as one "create" pass of the menu would.
md_opt=/lib/partman/choose_partition/25md/do_option
sed '/^do_initial_setup$/,$d' "$md_opt" >/tmp/md-functions.sh
. /tmp/md-functions.sh
# partman's confirm_changes resets its confirm* question after each answer, and md_create_array
# empties partman-md/raiddevs before asking: a preseed file's value would be gone the second
# time. The answers are given again as each question is asked (the confmodule's db_input,
# `_db_cmd "INPUT $@"`, wrapped), as a preseeding admin would have them. Defined after
# partman's libraries, which source the confmodule again.
db_input() {
    case $2 in
        partman-md/confirm*) answer "$2" true ;;
        partman-md/raiddevs) answer "$2" "$descriptions" ;;
    esac
    _db_cmd "INPUT $*"
}
make_choices
if [ -z "$descriptions" ]; then
    res "DEBUG devices: $(ls /var/lib/partman/devices 2>&1 | tr '\n' ' ')"
    res "DEBUG allowed: $(md_list_allowed 2>&1 | tr '\n\t' '  ')"
    res "DEBUG list-devices: $(list-devices disk 2>&1 | tr '\n' ' ')"
    grep -i 'partman\|parted' /var/log/syslog | tail -15 | while read -r l; do res "DEBUG $l"; done
    fail "partman-md offers no free space"
fi
log "partman-md offers: $descriptions"
res "DEBUG descriptions=[$descriptions]"
do_initial_setup
make_choices
num_parts="$(count_choices "$descriptions")"
t0=$(now_ms)
if ! md_create_array RAID1; then
    db_get partman-md/raiddevs
    res "DEBUG raiddevs=[$RET]"
    res "DEBUG pathmap=[$(echo "$pathmap" | tr '\n\t' '|;')]"
    for d in /var/lib/partman/devices/*; do res "DEBUG $d: $(ls "$d" | tr '\n' ' ')"; done
    res "DEBUG $(parted -s /dev/vda unit s print 2>&1 | tail -3 | tr '\n' '|')"
    fail "md_create_array RAID1"
fi
t_created=$(now_ms)
res "LIMITS_AFTER_CREATE $(limits)"
md=$(sed -n 's/^\(md[0-9]*\) : active.*/\1/p' /proc/mdstat | head -1)
[ -n "$md" ] || fail "no array after md_create_array"
res "ARRAY $md $(cat /sys/block/$md/md/level) $(cat /sys/block/$md/md/raid_disks)"
res "ARRAY_UUID $(mdadm --detail --export "/dev/$md" | sed -n 's/^MD_UUID=//p')"
res "BITMAP_AFTER_CREATE $(bitmap_state)"
[ "$mode" = mdcfg ] && finish_install
# The end of partman-md's menu ("Finish"): its own last lines, `stop_parted_server` and
# partman-base's `restart_partman`, which runs partman's init.d again.
stop_parted_server
restart_partman
res "LIMITS_AFTER_MD_MENU $(limits)"
res "ARRAY_SIZE_KIB $(($(cat /sys/block/$md/size) / 2))"
res "SYNC_ACTION_AFTER_CREATE $(cat /sys/block/$md/md/sync_action)"

# ---------------------------------------------------------------- partman-crypto: erase it
. /lib/partman/lib/crypto-base.sh
part=/var/lib/partman/di-test-part
mkdir -p "$part"
# Count the progress steps the installer's db_progress loop sees: partman-crypto reads the
# wiper's lines from a fifo; the steps are counted by wrapping db_progress (the confmodule's
# shell function, `_db_cmd "PROGRESS $@"`) with one that counts STEPs and returns its status.
# With cancel_at N the wrapper answers the Nth STEP with 30, what the frontend returns when the
# user presses the progress bar's Cancel: crypto_do_wipe then kills the writer (SIGTERM).
steps=0
cancel_at=0
watch_pid=
db_progress() {
    [ "$1" = STEP ] && steps=$((steps + 1)) && echo "$steps" >$steps_file
    # The last of the 1000 steps of a whole erase: the erase's tail is watched from here
    # (watch_tail below), apart from the installer's progress loop: no fd of the loop or of
    # debconf is kept open by it.
    if [ "$1" = STEP ] && [ "$cancel_at" = 0 ] && [ "$steps" = 1000 ] && [ -z "$watch_pid" ]; then
        watch_tail "$pid" "$$" </dev/null >/dev/null 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9<&- &
        watch_pid=$!
    fi
    if [ "$1" = STEP ] && [ "$cancel_at" -gt 0 ] && [ "$steps" -ge "$cancel_at" ]; then
        _db_cmd "PROGRESS $*"
        # crypto_do_wipe's writer ($pid, its local) still running when Cancel is pressed?
        kill -0 "$pid" 2>/dev/null && cancel_alive=yes
        return 30
    fi
    _db_cmd "PROGRESS $*"
}
# crypto_do_wipe's `wait $pid` (a regular builtin, so a function overrides it): the writer's
# own exit status, which crypto_do_wipe replaces by 0 after a cancel.
wait() { command wait "$@"; writer_rc=$?; return $writer_rc; }
# Which program the writer was and its peak memory, from the writer's own end: the harness's
# writer-wrap (guest/writer-wrap.c) stands where crypto_do_wipe runs its writer
# (/bin/blockdev-wipe, or a patched crypto_do_wipe's /usr/bin/mdpilot), runs the writer moved
# to PATH.measured, forwards the Cancel's SIGTERM, and records the program's resolved path, its
# ru_maxrss (the kernel's peak RSS over the writer's whole life) and its status; then it ends
# as the writer did. Nothing is sampled.
writer_path=/bin/blockdev-wipe
grep -q 'mdpilot blockdev-wipe' /lib/partman/lib/crypto-base.sh && writer_path=/usr/bin/mdpilot
export WRITER_REPORT=/tmp/writer-report
wrap_writer() {
    rm -f "$WRITER_REPORT"
    mv "$writer_path" "$writer_path.measured" && cp /di-test/writer-wrap "$writer_path" ||
        fail "cannot put writer-wrap at $writer_path"
}
unwrap_writer() { mv -f "$writer_path.measured" "$writer_path" || fail "cannot put $writer_path back"; }
report() { sed -n "s/^$1 //p" "$WRITER_REPORT" 2>/dev/null | tail -1; }
# The erase's tail, from the progress loop's last step to crypto_do_wipe's return, in the
# kernel's own words. watch_tail WRAPPER_PID SHELL_PID (writer-wrap's pid, the writer being its
# child; the scenario's shell, which runs crypto_do_wipe) polls once a second and records
# (TAIL_* lines):
#   TAIL_WRITER pid and command line of the writer (a fast writer has ended already: the
#     progress loop reads its lines one debconf round trip at a time);
#   TAIL_RESYNC_IDLE_MS when md's sync_action turned idle while the writer still ran;
#   TAIL_AT S brief figures every 60 s while the writer runs (sync_action, sync_completed,
#     mdstat's resync line, the page cache's Dirty and Writeback, the writer's wait channel);
#   TAIL_WRITER_END_MS and TAIL_AT_END: when the writer ended, and md's resync then;
#   TAIL_RETURN_MS: when crypto_do_wipe returned (erase's marker file);
#   a dump (tail_dump) 10 s and 300 s after the last step while the writer runs, and 10 s
#     and 300 s after the writer's end while crypto_do_wipe has not returned;
#   TAIL_HUNG_TASK_REPORTS: the kernel's hung-task reports ("blocked for more than") so far.
# A writer that ends within 10 s of the last step, with crypto_do_wipe returning within 10 s
# of it (every passing run), gets a few lines and no dump. Nothing here writes to md or holds
# the erase's fds.
erase_returned=/tmp/di-erase-returned
tail_brief() {
    echo "sync_action=$(cat /sys/block/$md/md/sync_action)" \
        "sync_completed=$(cat /sys/block/$md/md/sync_completed | tr ' ' '_')" \
        "mdstat=[$(grep -o '\(resync\|recovery\) *=.*' /proc/mdstat | head -1)]" \
        "dirty_kib=$(awk '/^Dirty:/ { print $2 }' /proc/meminfo)" \
        "writeback_kib=$(awk '/^Writeback:/ { print $2 }' /proc/meminfo)" \
        "wchan=$(cat /proc/$1/wchan 2>/dev/null)"
}
# tail_dump TAG PID...: each PID's state, wait channel, syscall (number and arguments) and
# kernel stack, and those of the scenario shell's children; md's resync; Dirty and Writeback;
# the disks' stat; the serial ports' counters (tx: bytes the UART sent, so a stalled results
# port shows); every process with its state and wait channel; the blocked (D state) tasks'
# stacks by sysrq w (TAIL_KMSG: the kernel log lines it added). Only a run already held 10 s
# gets here: the console's log level is raised to show everything, and each line goes to the
# kernel log as well, so the console (kept by the host for a run without END) has the dump
# even if the results port does not.
dres() {
    res "$*"
    echo "di-test: $*" >/dev/kmsg 2>/dev/null
}
tail_dump() {
    td_at=$1
    shift
    echo 8 >/proc/sys/kernel/printk 2>/dev/null
    for td_p in "$@" $(cat /proc/$sh_pid/task/$sh_pid/children 2>/dev/null); do
        [ -d /proc/$td_p ] || { dres "TAIL_PID $td_at $td_p gone"; continue; }
        dres "TAIL_PID $td_at $td_p $(cat /proc/$td_p/comm 2>/dev/null)" \
            "state=$(sed -n 's/^State:[[:space:]]*//p' /proc/$td_p/status 2>/dev/null | tr ' ' '_')" \
            "wchan=$(cat /proc/$td_p/wchan 2>/dev/null) syscall=[$(cat /proc/$td_p/syscall 2>/dev/null)]"
        cat /proc/$td_p/stack 2>/dev/null | while read -r td_l; do dres "TAIL_STACK $td_at $td_p $td_l"; done
    done
    while read -r td_l; do dres "TAIL_MDSTAT $td_at $td_l"; done </proc/mdstat
    for td_a in sync_action sync_completed sync_speed sync_speed_min sync_speed_max resync_start; do
        dres "TAIL_MD $td_at $td_a $(cat /sys/block/$md/md/$td_a 2>/dev/null)"
    done
    dres "TAIL_MD $td_at limits $(limits)"
    dres "TAIL_MEM $td_at $(grep '^Dirty:\|^Writeback:' /proc/meminfo | tr -s ' ' | tr '\n' ' ')"
    for td_d in $md vda vdb; do dres "TAIL_DISKSTAT $td_at $td_d $(tr -s ' ' </sys/block/$td_d/stat)"; done
    grep '^[01]:' /proc/tty/driver/serial 2>/dev/null | while read -r td_l; do dres "TAIL_SERIAL $td_at $td_l"; done
    for td_p in /proc/[0-9]*; do
        td_c=$(tr '\0' ' ' <$td_p/cmdline 2>/dev/null | cut -c1-80)
        [ -n "$td_c" ] || continue
        dres "TAIL_PS $td_at ${td_p#/proc/} $(awk '{ print "ppid=" $4, "state=" $3 }' $td_p/stat 2>/dev/null)" \
            "wchan=$(cat $td_p/wchan 2>/dev/null) $td_c"
    done
    td_n0=$(dmesg | wc -l)
    echo w >/proc/sysrq-trigger
    sleep 1
    dmesg | tail -n +$((td_n0 + 1)) | while read -r td_l; do res "TAIL_KMSG $td_at $td_l"; done
}
watch_tail() {
    wrap=$1 sh_pid=$2
    t_last=$(now_ms)
    w=$(cat /proc/$wrap/task/$wrap/children 2>/dev/null | awk '{ print $1 }')
    [ -n "$w" ] || w=$(awk -v p="$wrap" '$4 == p { print $1; exit }' /proc/[0-9]*/stat 2>/dev/null)
    [ -n "$w" ] || w=$wrap
    w_cmd=$(tr '\0' ' ' </proc/$w/cmdline 2>/dev/null)
    res "TAIL_WRITER $w ${w_cmd:-(ended before the last step was shown)}"
    dumped= resync_idle= next_brief=60
    # (the writer cannot outlive crypto_do_wipe's return, which waits for it)
    while [ -d /proc/$w ] && ! grep -q '^State:.*Z' /proc/$w/status 2>/dev/null &&
        [ ! -e $erase_returned ]; do
        s=$(( ($(now_ms) - t_last) / 1000 ))
        if [ -z "$resync_idle" ] && [ "$(cat /sys/block/$md/md/sync_action)" = idle ]; then
            resync_idle=$(( $(now_ms) - t_last ))
            res "TAIL_RESYNC_IDLE_MS $resync_idle $(cat /sys/block/$md/md/sync_completed)"
        fi
        if [ "$s" -ge 10 ] && [ -z "$dumped" ]; then
            tail_dump writer-10s "$w" "$wrap" "$sh_pid"; dumped=10
        elif [ "$s" -ge 300 ] && [ "$dumped" = 10 ]; then
            tail_dump writer-300s "$w" "$wrap" "$sh_pid"; dumped=300
        fi
        if [ "$s" -ge "$next_brief" ]; then
            res "TAIL_AT $s $(tail_brief "$w")"
            next_brief=$((next_brief + 60))
        fi
        sleep 1
    done
    t_end=$(now_ms)
    res "TAIL_WRITER_END_MS $((t_end - t_last))"
    res "TAIL_AT_END $(tail_brief "$w")"
    dumped=
    while [ ! -e $erase_returned ]; do
        s=$(( ($(now_ms) - t_end) / 1000 ))
        if [ "$s" -ge 10 ] && [ -z "$dumped" ]; then
            tail_dump return-10s "$wrap" "$sh_pid"; dumped=10
        elif [ "$s" -ge 300 ] && [ "$dumped" = 10 ]; then
            tail_dump return-300s "$wrap" "$sh_pid"; dumped=300
        fi
        sleep 1
    done
    res "TAIL_RETURN_MS $(( $(now_ms) - t_last ))"
    res "TAIL_HUNG_TASK_REPORTS $(dmesg | grep -c 'blocked for more than')"
}

# watch_steps SHELL_PID: an erase whose progress stands still. Polls once a second from the
# erase's start to its return; when the step count (db_progress writes it to $steps_file) has
# not moved for 60 s, and again at 600 s, it records STALL_AT (the steps, the seconds, brief
# figures) and a dump (tail_dump) of the scenario shell's process tree: which process waits
# where when the installer's progress loop stops. Runs that never stall print nothing.
steps_file=/tmp/di-erase-steps
watch_steps() {
    ws_sh=$1 ws_last= ws_since=$(now_ms) ws_dumped= sh_pid=$1
    while [ ! -e $erase_returned ]; do
        ws_now=$(cat $steps_file 2>/dev/null)
        if [ "$ws_now" != "$ws_last" ]; then
            ws_last=$ws_now ws_since=$(now_ms) ws_dumped=
        fi
        ws_s=$(( ($(now_ms) - ws_since) / 1000 ))
        if { [ "$ws_s" -ge 60 ] && [ -z "$ws_dumped" ]; } ||
            { [ "$ws_s" -ge 600 ] && [ "$ws_dumped" = 60 ]; }; then
            ws_dumped=$([ -z "$ws_dumped" ] && echo 60 || echo 600)
            dres "STALL_AT steps=${ws_now:-0} still=${ws_s}s $(tail_brief "$ws_sh")"
            # shellcheck disable=SC2046 # the tree's pids, one word each
            tail_dump "stall-${ws_dumped}s" $(tree_pids "$ws_sh")
        fi
        sleep 1
    done
}
# tree_pids PID: PID and every process below it (from /proc/*/stat's ppid).
tree_pids() {
    awk '{ print $1, $4 }' /proc/[0-9]*/stat 2>/dev/null | awk -v root="$1" '
        { parent[$1] = $2 }
        END { for (p in parent) { q = p; while (q != "" && q != 0 && q != root) q = parent[q]; if (q == root) print p } }'
}

# erase TAG: partman-crypto's crypto_wipe_device of the array; TAG_RC, TAG_MS, TAG_STEPS, ...
erase() {
    steps=0 writer_rc= watch_pid=
    rm -f $erase_returned $steps_file
    watch_steps "$$" </dev/null >/dev/null 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9<&- &
    steps_pid=$!
    wrap_writer
    t0=$(now_ms)
    crypto_wipe_device "/dev/$md" "$part" no
    rc=$?
    t1=$(now_ms)
    # (the tail's watcher ends within a second of this)
    : >$erase_returned
    [ -n "$watch_pid" ] && command wait "$watch_pid"
    command wait "$steps_pid"
    unwrap_writer
    res "${1}_RC $rc"
    res "${1}_WRITER_RC $writer_rc"
    res "${1}_MS $((t1 - t0))"
    res "${1}_STEPS $steps"
    res "${1}_WRITER_PEAK_KIB $(report WRITER_PEAK_KIB)"
    res "${1}_WRITER $(report WRITER)"
}

# The user cancels an erase of the new array at its first step (partman-crypto 121's Cancel):
# the writer is stopped, the resync not left frozen, the limits as they were, no writer left
# running. At the first step: the progress loop (a debconf round trip per line) lags behind a
# fast writer, whose lines wait in the fifo; at a later step the writer may be done already.
res "WIPER $(ls -l /bin/blockdev-wipe | sed 's/.* \/bin/\/bin/')"
res "CANCEL_LIMITS_BEFORE $(limits)"
cancel_at=1 cancel_alive=no
erase CANCEL
cancel_at=0
res "CANCEL_WRITER_ALIVE $cancel_alive"
res "CANCEL_SYNC_ACTION $(cat /sys/block/$md/md/sync_action)"
res "CANCEL_LIMITS_AFTER $(limits)"
res "CANCEL_WRITER_LEFT $(pidof blockdev-wipe mdpilot 2>/dev/null | wc -w)"

# The erase itself, to the end.
t_wipe0=$(now_ms)
erase WIPE
res "PROGRESS_STEPS $steps"
res "LIMITS_AFTER_ERASE $(limits)"
res "SYNC_AFTER_ERASE $(cat /sys/block/$md/md/sync_action) $(cat /sys/block/$md/md/sync_completed)"

# ---------------------------------------------------------------- redundant: resync done or skipped
wait_redundant "$t_wipe0"

# ---------------------------------------------------------------- finish-install
finish_install
