//! The exposition of fixed model snapshots matches the golden files in tests/fixtures/metrics/
//! (`<case>.prom`: text 0.0.4, `<case>.om`: OpenMetrics); regenerate with
//! `MDPILOT_UPDATE_GOLDEN=1 cargo test --test integration metrics_golden::`.
//! `promtool check metrics` (Debian's `prometheus` package) must accept the text form; without
//! promtool that part prints "skipped: ..." (fails under `MDPILOT_REQUIRE_ALL=1`).

use crate::support;

use mdpilot::metrics::{render, Format, Snapshot, WipeSample};
use mdpilot::model::{ArrayState, ArraySysfs, MemberSysfs, SpeedLimit, SyncAction, SyncCompleted};
use mdpilot::policy::{
    GlobalOriginals, LeaseKind, LeaseRequest, LeaseView, Limits, Owner, PolicyView,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/metrics")
}

fn member(name: &str, state: &str, slot: Option<u32>) -> MemberSysfs {
    MemberSysfs {
        name: name.into(),
        state: state.split(',').map(Into::into).collect(),
        slot,
        errors: Some(0),
    }
}

fn limit(kib_s: u64, system: bool) -> Option<SpeedLimit> {
    Some(SpeedLimit { kib_s, system })
}

fn view(leases: Vec<LeaseView>, originals: GlobalOriginals) -> PolicyView {
    PolicyView {
        state_path: "/run/mdpilot/policy.toml".into(),
        speed_limit_min: Some(0),
        speed_limit_max: Some(200_000),
        sync_io_depth: None,
        originals,
        leases,
        arrays: BTreeMap::new(),
        warnings: vec![],
        originals_unknown: None,
        changes: vec![],
    }
}

/// A clean raid1 and a raid5 in its initial resync, with the install policy applied
/// (speed_limit_min 0, original 1000) and one wipe job running.
fn installing() -> Snapshot {
    let mut model = mdpilot::mdstat::parse(
        "Personalities : [raid1] [raid6] [raid5] [raid4]\n\
         md0 : active raid1 sdb1[1] sda1[0]\n      \
         1048576 blocks super 1.2 [2/2] [UU]\n      \
         bitmap: 0/8 pages [0KB], 65536KB chunk\n\n\
         md1 : active raid5 sde1[3] sdd1[1] sdc1[0]\n      \
         134217728 blocks super 1.2 level 5, 512k chunk, algorithm 2 [3/2] [UU_]\n      \
         [====>................]  recovery = 21.5% (14450688/67108864) finish=4.4min speed=200000K/sec\n\n\
         unused devices: <none>\n",
    );
    model.speed_limit_min = Some(0);
    model.speed_limit_max = Some(200_000);
    model.arrays[0].sysfs = Some(installing_md0());
    model.arrays[1].sysfs = Some(installing_md1());
    Snapshot {
        model,
        policy: Some(installing_policy()),
        // The installer lease's `taken` time, as the service computes it from the view.
        install_applied_at: Some(1_764_547_200.0),
        last_checks: BTreeMap::from([(
            "md0".to_string(),
            mdpilot::check::CheckResult {
                action: mdpilot::check::CheckAction::Check,
                completed_s: 1_764_460_800,
                mismatch_cnt: 0,
                level: "raid1".into(),
            },
        )]),
        io_pressure_pct: Some((0.5, 0.0)),
        check_throttles: BTreeMap::new(),
        resync_throttles: BTreeMap::new(),
        wipe_jobs: Some(vec![WipeSample {
            done_bytes: 1 << 30,
            total_bytes: 4 << 30,
            rate_bytes_per_s: 524_288_000.0,
        }]),
        hook_events_dropped: Some(0),
        version: "0.1.0".into(),
    }
}

/// The clean raid1 md0 of `installing`, as sysfs shows it.
fn installing_md0() -> ArraySysfs {
    ArraySysfs {
        array_state: Some(ArrayState::Clean),
        level: Some("raid1".into()),
        raid_disks: Some(2),
        degraded: Some(0),
        sync_action: Some(SyncAction::Idle),
        sync_completed: Some(SyncCompleted::None),
        sync_speed_min: limit(0, true),
        sync_speed_max: limit(200_000, true),
        metadata_version: Some("1.2".into()),
        uuid: Some("3b6c2a6e-0d0e-4b7a-9d5e-8a7b1c2d3e4f".into()),
        mismatch_cnt: Some(0),
        members: vec![
            member("sda1", "in_sync", Some(0)),
            member("sdb1", "in_sync", Some(1)),
        ],
        consistency_policy: Some("bitmap".into()),
        ..Default::default()
    }
}

/// The raid5 md1 of `installing` in its recovery, as sysfs shows it.
fn installing_md1() -> ArraySysfs {
    ArraySysfs {
        array_state: Some(ArrayState::Active),
        level: Some("raid5".into()),
        raid_disks: Some(3),
        degraded: Some(1),
        sync_action: Some(SyncAction::Recover),
        sync_completed: Some(SyncCompleted::Sectors {
            done: 28_901_376,
            total: 134_217_728,
        }),
        sync_speed_kib_s: Some(200_000),
        sync_speed_min: limit(50_000, false),
        sync_speed_max: limit(200_000, true),
        metadata_version: Some("1.2".into()),
        uuid: Some("9f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b".into()),
        mismatch_cnt: Some(0),
        members: vec![
            member("sdc1", "in_sync", Some(0)),
            member("sdd1", "in_sync", Some(1)),
            member("sde1", "spare", Some(2)),
        ],
        consistency_policy: Some("resync".into()),
        ..Default::default()
    }
}

/// The policy view of `installing`: an installer lease (min 0), a wipe job's and a dead admin's.
fn installing_policy() -> PolicyView {
    let lease = |holder: &str, kind, global: Limits, dead| {
        LeaseView::new(
            LeaseRequest {
                holder: holder.into(),
                kind,
                owner: Owner::None,
                global,
                arrays: BTreeMap::new(),
            },
            dead,
        )
    };
    view(
        vec![
            lease(
                "installer",
                LeaseKind::Installer,
                Limits {
                    min: Some(0),
                    max: None,
                    io_depth: None,
                },
                false,
            ),
            lease("wipe-job-1", LeaseKind::WipeJob, Limits::default(), false),
            lease("old", LeaseKind::Admin, Limits::default(), true),
        ],
        GlobalOriginals {
            speed_limit_min: Some(1000),
            speed_limit_max: None,
            sync_io_depth: None,
        },
    )
}

/// Trouble: a raid1 with a faulty member (degraded), a raid6 check that found mismatches, an
/// inactive array, a frozen raid10; mdstat only for the inactive one (no sysfs), no policy.
fn trouble() -> Snapshot {
    let mut model = mdpilot::mdstat::parse(
        "Personalities : [raid1] [raid6] [raid5] [raid4] [raid10]\n\
         md0 : active raid1 sdb1[1](F) sda1[0](W)\n      \
         1048576 blocks super 1.2 [2/1] [U_]\n\n\
         md2 : active raid6 sdf[3] sde[2] sdd[1] sdc[0] sdg[4](S)\n      \
         2097152 blocks super 1.2 level 6, 512k chunk, algorithm 2 [4/4] [UUUU]\n      \
         [==================>..]  check = 93.7% (982016/1048576) finish=0.1min speed=98304K/sec\n\n\
         md3 : inactive sdh[0](S)\n      \
         1048576 blocks super 1.2\n\n\
         md4 : active raid10 sdk[3] sdj[2] sdi[1] sdl[0]\n      \
         2097152 blocks super 1.2 512K chunks 2 near-copies [4/4] [UUUU]\n\n\
         unused devices: <none>\n",
    );
    assert!(model.errors.is_empty(), "{:?}", model.errors);
    model.speed_limit_min = Some(1000);
    model.speed_limit_max = Some(200_000);
    let sys = |state: &str, action: &str, degraded: u32, mismatch: u64| ArraySysfs {
        array_state: Some(state.into()),
        degraded: Some(degraded),
        sync_action: Some(action.into()),
        sync_completed: Some(SyncCompleted::None),
        sync_speed_min: limit(1000, true),
        sync_speed_max: limit(200_000, true),
        mismatch_cnt: Some(mismatch),
        ..Default::default()
    };
    model.arrays[0].sysfs = Some(sys("clean", "idle", 1, 0));
    let mut check = sys("active", "check", 0, 2048);
    check.sync_completed = Some(SyncCompleted::Sectors {
        done: 1_964_032,
        total: 2_097_152,
    });
    check.sync_speed_kib_s = Some(98_304);
    check.uuid = Some("0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9".into());
    model.arrays[1].sysfs = Some(check);
    model.arrays[3].sysfs = Some(sys("clean", "frozen", 0, 0));
    Snapshot {
        model,
        policy: None,
        install_applied_at: None,
        last_checks: BTreeMap::from([(
            "md2".to_string(),
            mdpilot::check::CheckResult {
                action: mdpilot::check::CheckAction::Check,
                completed_s: 1_762_041_600,
                mismatch_cnt: 128,
                level: "raid6".into(),
            },
        )]),
        // The check on md2 under the pressure throttle, at its floor: the machine is busy.
        io_pressure_pct: Some((31.5, 22.25)),
        check_throttles: BTreeMap::from([(
            "md2".to_string(),
            mdpilot::pressure::Note {
                limit_kib_s: 1_000,
                decision: "down".into(),
                why: "io pressure 25.0% over 1.0 s above full 5%..10%: down to 1000 KiB/s, io depth 1"
                    .into(),
                pressure_pct: Some(25.0),
                source: Some("interval".into()),
                interval_ms: Some(1_000),
                full_avg10: Some(22.25),
                some_avg10: Some(31.5),
                io_depth: Some(1),
                changed_s: 1_764_547_200,
                not_applied: Some("md/sync_speed is 98304 KiB/s, above the limit".into()),
                decisions: BTreeMap::from([("start".into(), 1), ("down".into(), 2)]),
                mark: None,
                quiet_looks: 0,
            },
        )]),
        resync_throttles: recovering_md0(),
        wipe_jobs: Some(vec![]),
        hook_events_dropped: Some(3),
        version: "0.1.0".into(),
    }
}

/// md0's recovery under `[resync] pressure_target` (as it would be once a spare is added), at
/// its floor.
fn recovering_md0() -> BTreeMap<String, mdpilot::pressure::Note> {
    BTreeMap::from([(
            "md0".to_string(),
            mdpilot::pressure::Note {
                limit_kib_s: 1_000,
                decision: "floor".into(),
                why: "recovery: io pressure 22.2% over 1.0 s above full 5%..10%: at the floor, 1000 KiB/s, io depth 1".into(),
                full_avg10: Some(22.25),
                some_avg10: Some(31.5),
                changed_s: 1_764_547_200,
                not_applied: None,
                decisions: BTreeMap::from([("start".into(), 1)]),
                pressure_pct: Some(22.25),
                source: Some("interval".into()),
                interval_ms: Some(1_000),
                io_depth: Some(1),
                mark: None,
                quiet_looks: 0,
            },
        )])
}

/// A machine without md arrays, as `status --format prometheus` sees it (no service: wipe
/// jobs unknown; no policy state file: no leases).
fn empty() -> Snapshot {
    Snapshot {
        model: mdpilot::mdstat::parse("Personalities : \nunused devices: <none>\n"),
        policy: Some(view(vec![], GlobalOriginals::default())),
        install_applied_at: None,
        last_checks: BTreeMap::new(),
        io_pressure_pct: None,
        check_throttles: BTreeMap::new(),
        resync_throttles: BTreeMap::new(),
        wipe_jobs: None,
        hook_events_dropped: None,
        version: "0.1.0".into(),
    }
}

fn golden(name: &str, snap: &Snapshot) {
    for (format, ext) in [(Format::Text, "prom"), (Format::OpenMetrics, "om")] {
        let live = render(snap, format);
        let file = dir().join(format!("{name}.{ext}"));
        if std::env::var_os("MDPILOT_UPDATE_GOLDEN").is_some() {
            std::fs::create_dir_all(dir()).unwrap();
            std::fs::write(&file, &live).unwrap();
            continue;
        }
        let committed = std::fs::read_to_string(&file).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (regenerate with MDPILOT_UPDATE_GOLDEN=1)",
                file.display()
            )
        });
        pretty_assertions::assert_eq!(committed, live, "{} drifted", file.display());
    }
    support::promtool_check_metrics(name, &render(snap, Format::Text));
}

#[test]
fn installing_matches_golden() {
    golden("installing", &installing());
}

#[test]
fn trouble_matches_golden() {
    golden("trouble", &trouble());
}

#[test]
fn empty_matches_golden() {
    golden("empty", &empty());
}

/// The values docs/metrics.md and the alert rules rely on, read from the rendered text.
#[test]
fn key_values() {
    let t = render(&installing(), Format::Text);
    for line in [
        "mdpilot_array_degraded{array=\"md1\"} 1\n",
        "mdpilot_array_sync_action{array=\"md1\",action=\"recover\"} 1\n",
        "mdpilot_array_sync_action{array=\"md1\",action=\"idle\"} 0\n",
        "mdpilot_array_sync_completed_ratio{array=\"md1\"} 0.21533203125\n",
        "mdpilot_array_sync_speed_bytes_per_second{array=\"md1\"} 204800000\n",
        "mdpilot_array_sync_remaining_seconds{array=\"md1\"} 264.0\n",
        "mdpilot_array_members{array=\"md1\",state=\"down\"} 1\n",
        "mdpilot_speed_limit_bytes_per_second{bound=\"min\"} 0\n",
        "mdpilot_speed_limit_original_bytes_per_second{bound=\"min\"} 1024000\n",
        "mdpilot_policy_leases{kind=\"installer\"} 1\n",
        "mdpilot_policy_leases{kind=\"admin\"} 0\n",
        "mdpilot_array_sync_speed_limit_local{array=\"md1\",bound=\"min\"} 1\n",
        "mdpilot_wipe_jobs_running 1\n",
        "mdpilot_array_consistency_policy{array=\"md0\",policy=\"bitmap\"} 1\n",
        "mdpilot_array_consistency_policy{array=\"md1\",policy=\"resync\"} 1\n",
        "mdpilot_array_consistency_policy{array=\"md1\",policy=\"bitmap\"} 0\n",
    ] {
        assert!(t.contains(line), "missing {line:?} in\n{t}");
    }
    let t = render(&trouble(), Format::Text);
    for line in [
        "mdpilot_array_members{array=\"md0\",state=\"faulty\"} 1\n",
        "mdpilot_array_members{array=\"md0\",state=\"write-mostly\"} 1\n",
        "mdpilot_array_members{array=\"md2\",state=\"spare\"} 1\n",
        "mdpilot_array_state{array=\"md3\",state=\"inactive\"} 1\n",
        "mdpilot_array_members{array=\"md3\",state=\"active\"} 0\n",
        "mdpilot_array_sync_action{array=\"md4\",action=\"frozen\"} 1\n",
        "mdpilot_array_mismatch_sectors{array=\"md2\"} 2048\n",
        "mdpilot_wipe_jobs_running 0\n",
        "mdpilot_hook_events_dropped_total 3\n",
    ] {
        assert!(t.contains(line), "missing {line:?} in\n{t}");
    }
    assert!(
        !t.contains("mdpilot_policy_leases{"),
        "no policy, no leases"
    );
    // The check record: md2's last check, nothing for the arrays it has no result for.
    assert!(t.contains(
        "mdpilot_array_last_check_completion_timestamp_seconds{array=\"md2\"} 1762041600\n"
    ));
    assert!(t.contains("mdpilot_array_last_check_mismatch_sectors{array=\"md2\"} 128\n"));
    assert!(!t.contains("mdpilot_array_last_check_completion_timestamp_seconds{array=\"md0\"}"));
    assert!(
        !t.contains("mdpilot_array_consistency_policy{"),
        "no consistency_policy in sysfs, no series"
    );
}
