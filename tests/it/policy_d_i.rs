//! The Debian-installer scripts in packaging/udeb/ (partman's init.d hook, finish-install) with
//! the real binary on a temporary root, run by every POSIX shell found (dash, busybox ash, sh).

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;
use support::{skipped, stderr, FakeTree, BIN};

const FINISH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/packaging/udeb/usr/lib/finish-install.d/15-mdpilot-restore"
);

const PARTMAN_HOOK: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/packaging/udeb/lib/partman/init.d/05mdpilot"
);

const BITMAP: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/packaging/udeb/usr/lib/mdpilot/d-i-bitmap"
);

fn shells() -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (prog, args) in [("dash", vec![]), ("busybox", vec!["sh"]), ("sh", vec![])] {
        // Absolute path: the scripts run with a PATH that holds only the test's bin dir.
        let found = ["/usr/bin", "/bin"]
            .into_iter()
            .map(|d| Path::new(d).join(prog))
            .find(|p| p.exists());
        if let Some(found) = found {
            let mut v = vec![found.to_string_lossy().into_owned()];
            v.extend(args.iter().map(|s| (*s).to_string()));
            out.push(v);
        }
    }
    if out.is_empty() {
        skipped("no POSIX shell (dash, busybox, sh) in /usr/bin or /bin");
    }
    out
}

/// A PATH directory with only `grep` and, when `with_mdpilot`, `mdpilot` (no `logger`, except
/// busybox's built-in applet: the scripts' messages are checked on stderr).
fn bin_dir(dir: &Path, with_mdpilot: bool) -> PathBuf {
    let bin = dir.join(if with_mdpilot { "bin" } else { "bin-empty" });
    std::fs::create_dir_all(&bin).unwrap();
    let grep = ["/usr/bin/grep", "/bin/grep"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("grep");
    let _ = std::os::unix::fs::symlink(grep, bin.join("grep"));
    if with_mdpilot {
        let _ = std::os::unix::fs::symlink(BIN, bin.join("mdpilot"));
    }
    bin
}

fn run(shell: &[String], script: &str, t: &FakeTree, path: &Path) -> (i32, String) {
    let out = Command::new(&shell[0])
        .args(&shell[1..])
        .arg(script)
        .env_clear()
        .env("PATH", path)
        .env("MDPILOT_ROOT", t.dir.path())
        .output()
        .unwrap();
    (out.status.code().unwrap_or(-1), stderr(&out))
}

#[test]
fn scripts_never_fail_the_install() {
    for sh in shells() {
        let t = FakeTree::new();
        std::fs::create_dir_all(t.path("/run")).unwrap();
        // mdpilot missing.
        let empty = bin_dir(t.dir.path(), false);
        assert_eq!(run(&sh, FINISH, &t, &empty).0, 0, "{sh:?}");
        let missing = t.path("/nowhere/mdpilot");
        let (code, err) = run_partman_with(&sh, PARTMAN_HOOK, &t, None, &missing);
        assert_eq!(code, 0, "{sh:?}: {err}");
        assert_eq!((t.gmin(), t.gmax()), ("1000".into(), "200000".into()));
        // mdpilot failing (no speed limit files).
        std::fs::remove_file(t.path("/proc/sys/dev/raid/speed_limit_min")).unwrap();
        let (code, err) = run_partman(&sh, PARTMAN_HOOK, &t, None);
        assert_eq!(code, 0, "{sh:?}: {err}");
        let bin = bin_dir(t.dir.path(), true);
        std::fs::write(t.state_path(), "corrupt").unwrap();
        let (code, err) = run(&sh, FINISH, &t, &bin);
        assert_eq!(code, 0, "{sh:?}");
        says(&sh, &err, "restore failed; continuing");
    }
}

#[test]
fn finish_logs_when_mdpilot_is_missing() {
    for sh in shells() {
        let t = FakeTree::new();
        let empty = bin_dir(t.dir.path(), false);
        // A fake logger that records its arguments (busybox may use its own applet instead).
        let log = t.dir.path().join("logger.out");
        let logger = empty.join("logger");
        std::fs::write(
            &logger,
            format!("#!/bin/sh\necho \"$*\" >> {}\n", log.display()),
        )
        .unwrap();
        let mut perm = std::fs::metadata(&logger).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        std::fs::set_permissions(&logger, perm).unwrap();
        let (code, err) = run(&sh, FINISH, &t, &empty);
        assert_eq!(code, 0, "{sh:?}");
        says(&sh, &err, "mdpilot-finish: mdpilot not installed");
        if sh[0].ends_with("dash") {
            let logged = std::fs::read_to_string(&log).unwrap();
            assert!(
                logged.contains("-t mdpilot-finish -- mdpilot not installed"),
                "{logged}"
            );
        }
    }
}

/// Runs `script` as partman or finish-install would, with the system's tools on PATH, mdpilot
/// as `MDPILOT` and partman-crypto's wiper at `<tree>/bin/blockdev-wipe` (absent here).
fn run_partman(shell: &[String], script: &str, t: &FakeTree, arg: Option<&str>) -> (i32, String) {
    run_partman_with(shell, script, t, arg, Path::new(BIN))
}

/// [`run_partman`] with `mdpilot` at `mdpilot`; the installer's partman scripts (which the hook
/// reads to tell a patched installer) under `<tree>/lib/partman`.
fn run_partman_with(
    shell: &[String],
    script: &str,
    t: &FakeTree,
    arg: Option<&str>,
    mdpilot: &Path,
) -> (i32, String) {
    let out = Command::new(&shell[0])
        .args(&shell[1..])
        .arg(script)
        .args(arg)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("MDPILOT", mdpilot)
        .env("MDPILOT_WIPER", t.path("/bin/blockdev-wipe"))
        .env("MDPILOT_PARTMAN_DIR", t.path("/lib/partman"))
        .env("MDPILOT_PARTMAN_HOOK", PARTMAN_HOOK)
        .env("MDPILOT_MDCFG", t.path("/bin/mdcfg"))
        .env("MDPILOT_D_I_BITMAP", t.path("/usr/lib/mdpilot/d-i-bitmap"))
        .env("MDPILOT_ROOT", t.dir.path())
        .output()
        .unwrap();
    (out.status.code().unwrap_or(-1), stderr(&out))
}

/// mdcfg (mdcfg-utils' /bin/mdcfg) installed, and its `speed_limit_min := 0` when it loads md.
fn mdcfg_write(t: &FakeTree) {
    std::fs::create_dir_all(t.path("/bin")).unwrap();
    t.set("/bin/mdcfg", "#!/bin/sh\n");
    t.set("/proc/sys/dev/raid/speed_limit_min", "0\n");
}

#[test]
fn partman_hook_puts_back_mdcfg_min_write_before_the_installer_lease() {
    for sh in shells() {
        let t = FakeTree::new();
        std::fs::create_dir_all(t.path("/run")).unwrap();
        mdcfg_write(&t);
        let (code, err) = run_partman(&sh, PARTMAN_HOOK, &t, None);
        assert_eq!(code, 0, "{sh:?}: {err}");
        assert_eq!(
            (t.gmin(), t.gmax()),
            ("0".into(), "200000".into()),
            "{sh:?}: {err}"
        );
        // The lease's own min 0 at the next start is not taken for mdcfg's write.
        let (code, err) = run_partman(&sh, PARTMAN_HOOK, &t, None);
        assert_eq!(code, 0, "{sh:?}: {err}");
        assert_eq!(t.gmin(), "0", "{sh:?}: {err}");
        // finish-install: md's min from before mdcfg's write, not the 0 it found.
        let (code, err) = run_partman(&sh, FINISH, &t, None);
        assert_eq!(code, 0, "{sh:?}: {err}");
        assert_eq!(
            (t.gmin(), t.gmax()),
            ("1000".into(), "200000".into()),
            "{sh:?}: {err}"
        );
    }
}

#[test]
fn finish_puts_back_mdcfg_min_write_when_partman_never_started() {
    for sh in shells() {
        let t = FakeTree::new();
        std::fs::create_dir_all(t.path("/run")).unwrap();
        mdcfg_write(&t);
        let (code, err) = run_partman(&sh, FINISH, &t, None);
        assert_eq!(code, 0, "{sh:?}: {err}");
        assert_eq!(
            (t.gmin(), t.gmax()),
            ("1000".into(), "200000".into()),
            "{sh:?}: {err}"
        );
    }
}

#[test]
fn partman_hook_leaves_a_min_of_0_without_mdcfg() {
    for sh in shells() {
        let t = FakeTree::new();
        std::fs::create_dir_all(t.path("/run")).unwrap();
        t.set("/proc/sys/dev/raid/speed_limit_min", "0\n");
        run_partman(&sh, PARTMAN_HOOK, &t, None);
        let (code, err) = run_partman(&sh, FINISH, &t, None);
        assert_eq!(code, 0, "{sh:?}: {err}");
        assert_eq!(t.gmin(), "0", "{sh:?}: {err}");
    }
}

/// partman-md's `speed_limit_max := speed_limit_min` just before `mdadm --create`.
fn partman_md_write(t: &FakeTree) {
    let min = t.gmin();
    t.set("/proc/sys/dev/raid/speed_limit_max", &format!("{min}\n"));
}

#[test]
fn partman_hook_puts_back_partman_md_max_write_and_finish_restores_both_limits() {
    for sh in shells() {
        let t = FakeTree::new();
        std::fs::create_dir_all(t.path("/run")).unwrap();
        // partman's first start: the install policy, max as it was.
        let (code, err) = run_partman(&sh, PARTMAN_HOOK, &t, None);
        assert_eq!(code, 0, "{sh:?}: {err}");
        assert_eq!(
            (t.gmin(), t.gmax()),
            ("0".into(), "200000".into()),
            "{sh:?}: {err}"
        );
        // partman-md creates an array (max := min = 0), its menu ends with restart_partman.
        partman_md_write(&t);
        let (code, err) = run_partman(&sh, PARTMAN_HOOK, &t, None);
        assert_eq!(code, 0, "{sh:?}: {err}");
        assert_eq!(
            (t.gmin(), t.gmax()),
            ("0".into(), "200000".into()),
            "{sh:?}: {err}"
        );
        // Again, and finish-install with no partman start in between ("Go Back").
        partman_md_write(&t);
        let (code, err) = run_partman(&sh, FINISH, &t, None);
        assert_eq!(code, 0, "{sh:?}: {err}");
        assert_eq!(
            (t.gmin(), t.gmax()),
            ("1000".into(), "200000".into()),
            "{sh:?}: {err}"
        );
    }
}

#[test]
fn partman_hook_leaves_a_max_that_is_not_partman_md_write() {
    for sh in shells() {
        let t = FakeTree::new();
        std::fs::create_dir_all(t.path("/run")).unwrap();
        run_partman(&sh, PARTMAN_HOOK, &t, None);
        // The admin sets a max by hand (not equal to min): the hook does not undo it.
        t.set("/proc/sys/dev/raid/speed_limit_max", "50000\n");
        let (code, err) = run_partman(&sh, PARTMAN_HOOK, &t, Some("--undo-partman-md"));
        assert_eq!(code, 0, "{sh:?}: {err}");
        assert_eq!(t.gmax(), "50000", "{sh:?}: {err}");
    }
}

/// Writes `<tree>/lib/partman/FILE` holding `line`, and partman-crypto's wiper (a plain file).
fn installer_script(t: &FakeTree, file: &str, line: &str) {
    let p = t.path(&format!("/lib/partman/{file}"));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, format!("#!/bin/sh\n{line}\n")).unwrap();
    std::fs::create_dir_all(t.path("/bin")).unwrap();
    std::fs::write(t.path("/bin/blockdev-wipe"), "partman-crypto's wiper\n").unwrap();
}

#[test]
fn partman_hook_steps_aside_for_a_patched_installer() {
    let crypto = (
        "lib/crypto-base.sh",
        "\t\t/usr/bin/mdpilot blockdev-wipe -s $((512*1024)) $dev > $fifo &",
    );
    let md = (
        "choose_partition/25md/do_option",
        "\t\t/usr/bin/mdpilot policy apply --holder installer \\",
    );
    for sh in shells() {
        // Both patched: the wiper stays partman-crypto's, the limits are left to partman-md.
        let t = FakeTree::new();
        std::fs::create_dir_all(t.path("/run")).unwrap();
        installer_script(&t, crypto.0, crypto.1);
        installer_script(&t, md.0, md.1);
        let (code, err) = run_partman(&sh, PARTMAN_HOOK, &t, None);
        assert_eq!(code, 0, "{sh:?}: {err}");
        let wiper = t.path("/bin/blockdev-wipe");
        assert!(!wiper.is_symlink(), "{sh:?}: the wiper was relinked");
        assert_eq!(
            (t.gmin(), t.gmax()),
            ("1000".into(), "200000".into()),
            "{sh:?}"
        );
        // Only partman-crypto patched: the install policy is still taken.
        let t = FakeTree::new();
        std::fs::create_dir_all(t.path("/run")).unwrap();
        installer_script(&t, crypto.0, crypto.1);
        installer_script(
            &t,
            md.0,
            "\techo \"$md_min_sync_speed\" > /proc/sys/dev/raid/speed_limit_max",
        );
        let (code, err) = run_partman(&sh, PARTMAN_HOOK, &t, None);
        assert_eq!(code, 0, "{sh:?}: {err}");
        assert!(!t.path("/bin/blockdev-wipe").is_symlink(), "{sh:?}");
        assert_eq!(
            (t.gmin(), t.gmax()),
            ("0".into(), "200000".into()),
            "{sh:?}"
        );
        // Neither: the wiper is linked to mdpilot.
        let t = FakeTree::new();
        std::fs::create_dir_all(t.path("/run")).unwrap();
        installer_script(
            &t,
            md.0,
            "\techo \"$md_min_sync_speed\" > /proc/sys/dev/raid/speed_limit_max",
        );
        let (code, err) = run_partman(&sh, PARTMAN_HOOK, &t, None);
        assert_eq!(code, 0, "{sh:?}: {err}");
        assert_eq!(
            std::fs::read_link(t.path("/bin/blockdev-wipe")).unwrap(),
            Path::new(BIN),
            "{sh:?}"
        );
        assert!(
            t.path("/bin/blockdev-wipe.partman-crypto").exists(),
            "{sh:?}"
        );
    }
}

#[test]
fn scripts_parse_as_posix_sh() {
    for sh in shells() {
        for script in [FINISH, PARTMAN_HOOK, BITMAP] {
            let st = Command::new(&sh[0])
                .args(&sh[1..])
                .arg("-n")
                .arg(script)
                .status()
                .unwrap();
            assert!(st.success(), "{sh:?} -n {script}");
        }
    }
}

/// A PATH directory for d-i-bitmap: the tools it runs, linked from the system, and no `logger`
/// (its lines go to stderr, where the tests read them).
fn bitmap_tools(dir: &Path) -> PathBuf {
    let bin = dir.join("bitmap-bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in [
        "awk", "cat", "chmod", "cut", "date", "grep", "mkdir", "mv", "rm", "sed", "sleep",
    ] {
        let found = ["/usr/bin", "/bin"]
            .into_iter()
            .map(|d| Path::new(d).join(tool))
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("{tool} not found"));
        let _ = std::os::unix::fs::symlink(found, bin.join(tool));
    }
    bin
}

/// md0 in the fake tree as d-i-bitmap reads it: a RAID1 with `policy` (`resync`, `bitmap`),
/// resyncing or in sync, created during this install (`new`: mdadm's Creation Time is now; the
/// boot was 160 s ago) or long before. A fake mdadm answers `--detail`, `--detail --export`
/// (MD_UUID) and `--grow --bitmap=internal` (the array then has a bitmap; the call is recorded
/// in `/fake-mdadm/calls`).
fn bitmap_array(t: &FakeTree, policy: &str, in_sync: bool, new: bool) -> PathBuf {
    for d in ["/sys/block/md0/md/bitmap", "/proc", "/fake-mdadm"] {
        std::fs::create_dir_all(t.path(d)).unwrap();
    }
    t.set("/proc/uptime", "100.00 50.00\n");
    t.set("/proc/mdstat", "Personalities : [raid1]\n");
    t.set("/sys/block/md0/md/level", "raid1\n");
    t.set(
        "/sys/block/md0/md/consistency_policy",
        &format!("{policy}\n"),
    );
    let loc = if policy == "bitmap" { "+8" } else { "none" };
    t.set("/sys/block/md0/md/bitmap/location", &format!("{loc}\n"));
    let (action, start) = if in_sync {
        ("idle", "none")
    } else {
        ("resync", "0")
    };
    t.set("/sys/block/md0/md/sync_action", &format!("{action}\n"));
    t.set("/sys/block/md0/md/resync_start", &format!("{start}\n"));
    // mdadm's form of the Creation Time, fixed for the array's life.
    let created = if new {
        let out = Command::new("date")
            .arg("+%a %b %e %H:%M:%S %Y")
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    } else {
        "Mon Jan  1 00:00:00 2001".to_string()
    };
    let root = t.dir.path().display();
    let mdadm = t.path("/fake-mdadm/mdadm");
    std::fs::write(
        &mdadm,
        format!(
            "#!/bin/sh\necho \"$*\" >>{root}/fake-mdadm/calls\ncase \"$1 $2\" in\n\
             '--detail --export') echo MD_UUID=3b6c2a6e:0d0e4b7a:9d5e8a7b:1c2d3e4f ;;\n\
             '--detail '*) echo \"     Creation Time : {created}\" ;;\n\
             '--grow --bitmap=internal') echo bitmap >{root}/sys/block/md0/md/consistency_policy\n\
             echo +8 >{root}/sys/block/md0/md/bitmap/location ;;\nesac\n"
        ),
    )
    .unwrap();
    let mut perm = std::fs::metadata(&mdadm).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&mdadm, perm).unwrap();
    mdadm
}

/// Runs d-i-bitmap CHOICE STEP on the fake tree (the installed system's root at `/target`).
fn run_bitmap(shell: &[String], t: &FakeTree, choice: &str, step: &str) -> String {
    let out = Command::new(&shell[0])
        .args(&shell[1..])
        .arg(BITMAP)
        .args([choice, step])
        .env_clear()
        .env("PATH", bitmap_tools(t.dir.path()))
        .env("MDPILOT_ROOT", t.dir.path())
        .env("MDPILOT_TARGET", t.path("/target"))
        .env("MDPILOT_MDADM", t.path("/fake-mdadm/mdadm"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{shell:?}: {}", stderr(&out));
    stderr(&out)
}

/// `err` (d-i-bitmap's stderr) says `text`; busybox's shell runs its own `logger` applet, whose
/// lines go to syslog, so only the other shells' are read.
fn says(shell: &[String], err: &str, text: &str) {
    if !shell[0].ends_with("busybox") {
        assert!(err.contains(text), "{shell:?}: want {text:?} in {err}");
    }
}

fn grown(t: &FakeTree) -> bool {
    std::fs::read_to_string(t.path("/fake-mdadm/calls"))
        .unwrap_or_default()
        .contains("--grow --bitmap=internal")
}

#[test]
fn d_i_bitmap_adds_it_at_once_to_a_new_array_in_sync_and_says_so() {
    for sh in shells() {
        let t = FakeTree::new();
        bitmap_array(&t, "resync", true, true);
        let err = run_bitmap(&sh, &t, "internal", "once");
        assert!(grown(&t), "{sh:?}: {err}");
        says(
            &sh,
            &err,
            "md0: write-intent bitmap added at once (the array is in sync)",
        );
        assert_eq!(t.get("/sys/block/md0/md/consistency_policy"), "bitmap");
        // Said once: the next pass finds the bitmap it added and says nothing.
        let again = run_bitmap(&sh, &t, "internal", "once");
        assert!(!again.contains("md0"), "{sh:?}: {again}");
    }
}

#[test]
fn d_i_bitmap_leaves_a_resyncing_array_to_the_installed_system_at_finish_install() {
    for sh in shells() {
        let t = FakeTree::new();
        std::fs::create_dir_all(t.path("/target/var")).unwrap();
        bitmap_array(&t, "resync", false, true);
        let err = run_bitmap(&sh, &t, "internal", "once");
        says(
            &sh,
            &err,
            "md0: resyncing; md takes no bitmap before the resync ends",
        );
        let err = run_bitmap(&sh, &t, "internal", "finish");
        assert!(!grown(&t), "{sh:?}: {err}");
        says(&sh, &err, "md0: resync still running at finish-install");
        // The installed system's service reads this file (src/bitmap/wanted.rs).
        let text =
            std::fs::read_to_string(t.path("/target/var/lib/mdpilot/bitmap-wanted")).unwrap();
        assert_eq!(
            mdpilot::bitmap::wanted::parse(&text),
            vec!["3b6c2a6e:0d0e4b7a:9d5e8a7b:1c2d3e4f".to_string()],
            "{sh:?}"
        );
        // The resync ends before the next pass: the bitmap, and the case said.
        t.set("/sys/block/md0/md/sync_action", "idle\n");
        t.set("/sys/block/md0/md/resync_start", "none\n");
        let err = run_bitmap(&sh, &t, "internal", "once");
        assert!(grown(&t), "{sh:?}: {err}");
        says(
            &sh,
            &err,
            "md0: write-intent bitmap added when the array came in sync",
        );
    }
}

#[test]
fn d_i_bitmap_says_an_array_was_created_with_one_and_leaves_old_arrays_and_opt_out_alone() {
    for sh in shells() {
        // Created with a bitmap (the patched partman-md): said once, nothing added.
        let t = FakeTree::new();
        bitmap_array(&t, "bitmap", true, true);
        let err = run_bitmap(&sh, &t, "internal", "once");
        says(&sh, &err, "md0: created with a write-intent bitmap");
        assert!(!grown(&t), "{sh:?}: {err}");
        let again = run_bitmap(&sh, &t, "internal", "once");
        assert!(!again.contains("md0"), "{sh:?}: {again}");
        // An array brought along (created before the installer's boot): left as it is.
        let t = FakeTree::new();
        bitmap_array(&t, "resync", true, false);
        let err = run_bitmap(&sh, &t, "internal", "once");
        assert!(!grown(&t) && !err.contains("md0"), "{sh:?}: {err}");
        // mdpilot/bitmap none: nothing added, and the start says so.
        let t = FakeTree::new();
        bitmap_array(&t, "resync", true, true);
        let err = run_bitmap(&sh, &t, "none", "start");
        assert!(!grown(&t), "{sh:?}: {err}");
        says(&sh, &err, "mdpilot/bitmap is none");
        run_bitmap(&sh, &t, "none", "finish");
        assert!(!grown(&t), "{sh:?}");
    }
}
