//! Planner unit tests on synthetic probes: alignment, methods, refusals, each resync kind.

use mdpilot::wipe::leases::{Limits, Owner};
use mdpilot::wipe::plan::{Data, Method, Op, Options, Range, ResyncAction};
use mdpilot::wipe::planner::{plan, signature_ranges, MIB};
use mdpilot::wipe::probe::{ArrayFacts, Holder, MountUse, Probe};
use mdpilot::wipe::stream::Seed;
use mdpilot::wipe::WipeError;
use std::path::PathBuf;
use std::sync::Arc;

fn disk(size: u64) -> Probe {
    Probe {
        path: PathBuf::from("/dev/sdx"),
        name: "sdx".into(),
        dev: (8, 16),
        size_bytes: size,
        logical_block_size: 512,
        physical_block_size: 4096,
        ..Probe::default()
    }
}

fn md(level: &str, action: &str, opt: u64) -> Probe {
    Probe {
        path: PathBuf::from("/dev/md0"),
        name: "md0".into(),
        dev: (9, 0),
        size_bytes: 1 << 30,
        logical_block_size: 512,
        physical_block_size: 512,
        optimal_io_size: opt,
        minimum_io_size: 512 * 1024,
        array: Some(ArrayFacts {
            name: "md0".into(),
            level: level.into(),
            sync_action: action.into(),
            raid_disks: 4,
            chunk_size: 512 * 1024,
        }),
        ..Probe::default()
    }
}

fn opts() -> Options {
    Options {
        seed: Some(Seed([3; 32])),
        owner: Some(Owner::Pid(42)),
        ..Options::default()
    }
}

fn refused(p: &Probe) -> String {
    match plan(p, Method::Zero, &opts()) {
        Err(e @ WipeError::Refused { .. }) => e.to_string(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn block_is_4mib_multiple_of_block_sizes_on_plain_disk() {
    let p = plan(&disk(1 << 30), Method::Random, &opts()).unwrap();
    assert_eq!(p.block_bytes, 4 * MIB);
    assert!(p.open.direct && p.open.exclusive && !p.open.read);
    assert!(p.queue_depth > 1);
    assert_eq!(
        p.ranges,
        vec![Range {
            offset: 0,
            len: 1 << 30
        }]
    );
}

#[test]
fn raid5_block_is_whole_stripes() {
    // raid5 on 4 disks, 512 KiB chunks: 3 data chunks per stripe = 1.5 MiB.
    let p = plan(&md("raid5", "idle", 1536 * 1024), Method::Random, &opts()).unwrap();
    assert_eq!(p.block_bytes % (1536 * 1024), 0);
    assert!(p.block_bytes >= 4 * MIB);
    assert_eq!(p.block_bytes, 3 * 1536 * 1024);
    assert!(p.reasons.iter().any(|r| r.contains("optimal_io_size")));
}

#[test]
fn raid6_block_is_whole_stripes() {
    // raid6 on 7 disks, 512 KiB chunks: 5 data chunks = 2.5 MiB; 2 stripes = 5 MiB.
    let p = plan(&md("raid6", "idle", 2560 * 1024), Method::Random, &opts()).unwrap();
    assert_eq!(p.block_bytes, 5 * MIB);
}

#[test]
fn huge_optimal_io_size_is_ignored_with_a_reason() {
    let mut d = disk(1 << 34);
    d.optimal_io_size = 100 * MIB + 512;
    let p = plan(&d, Method::Random, &opts()).unwrap();
    assert_eq!(p.block_bytes, 4 * MIB);
    assert!(p.reasons.iter().any(|r| r.contains("ignored")));
}

#[test]
fn logical_4k_and_hint_are_respected() {
    let mut d = disk(1 << 30);
    d.logical_block_size = 4096;
    let o = Options {
        block_hint: Some(65536),
        ..opts()
    };
    let p = plan(&d, Method::Random, &o).unwrap();
    assert_eq!(p.block_bytes, 4 * MIB);
    assert!(p.reasons.iter().any(|r| r.contains("raised")));
    let o = Options {
        block_hint: Some(6 * MIB + 100),
        ..opts()
    };
    let p = plan(&d, Method::Random, &o).unwrap();
    assert_eq!(p.block_bytes % 4096, 0);
    assert!(p.block_bytes >= 6 * MIB + 100);
}

#[test]
fn zero_uses_zeroout_unless_writes_are_asked_for() {
    let mut d = disk(1 << 30);
    let p = plan(&d, Method::Zero, &opts()).unwrap();
    assert_eq!(p.op, Op::ZeroOut);
    assert!(p.reasons.iter().any(|r| r.contains("zero-page")));
    assert!(p.step_bytes >= p.block_bytes && p.step_bytes % p.block_bytes == 0);
    assert_eq!(p.request_bytes(), p.step_bytes);
    d.write_zeroes_max_bytes = 1 << 30;
    let p = plan(&d, Method::Zero, &opts()).unwrap();
    assert!(p.reasons.iter().any(|r| r.contains("offloads")));
    let p = plan(&md("raid1", "idle", 0), Method::Zero, &opts()).unwrap();
    assert_eq!(p.op, Op::ZeroOut);
    assert!(p.reasons.iter().any(|r| r.contains("md raid1/5/10")));
    let w = Options {
        prefer_writes: true,
        ..opts()
    };
    let p = plan(&d, Method::Zero, &w).unwrap();
    assert_eq!(p.op, Op::Write(Data::Zero));
    assert_eq!(p.request_bytes(), p.block_bytes);
    let p = plan(
        &d,
        Method::Zero,
        &Options {
            queue_depth: Some(1000),
            ..w
        },
    )
    .unwrap();
    assert_eq!(p.queue_depth, 64);
}

#[test]
fn discard_unsupported_is_a_clear_error() {
    let e = plan(&disk(1 << 30), Method::Discard, &opts()).unwrap_err();
    let s = e.to_string();
    assert!(s.contains("/dev/sdx") && s.contains("discard"), "{s}");
    let mut d = disk(1 << 30);
    d.discard_max_bytes = 1 << 30;
    assert_eq!(plan(&d, Method::Discard, &opts()).unwrap().op, Op::Discard);
    let v = Options {
        verify: true,
        ..opts()
    };
    assert!(matches!(
        plan(&d, Method::Discard, &v),
        Err(WipeError::Usage(_))
    ));
}

#[test]
fn random_needs_a_seed() {
    let o = Options::default();
    assert!(matches!(
        plan(&disk(1 << 30), Method::Random, &o),
        Err(WipeError::Usage(_))
    ));
}

#[test]
fn pattern_data_replaces_zeroes() {
    let o = Options {
        data: Some(Data::Pattern(Arc::new(b"abc".to_vec()))),
        ..opts()
    };
    let mut d = disk(1 << 30);
    d.write_zeroes_max_bytes = 1 << 30;
    let p = plan(&d, Method::Zero, &o).unwrap();
    assert!(matches!(p.op, Op::Write(Data::Pattern(_))));
}

#[test]
fn signature_ranges_cover_every_superblock() {
    let size = 1u64 << 30;
    let r = signature_ranges(size, 512);
    let covered = |off: u64, len: u64| {
        r.iter()
            .any(|x| x.offset <= off && off + len <= x.offset + x.len)
    };
    assert!(covered(0, MIB));
    assert!(covered(size - MIB, MIB));
    assert!(covered(4096, 4096)); // 1.2
    assert!(covered((size - 8192) & !4095, 4096)); // 1.0
    assert!(covered((size & !65535) - 65536, 65536)); // 0.90
    assert_eq!(r.len(), 2, "{r:?}");
    // A size that is not 64 KiB aligned, and a tiny device.
    let odd = (1u64 << 30) + 12345 * 512;
    let r = signature_ranges(odd, 512);
    assert!(r
        .iter()
        .any(|x| x.offset <= (odd & !65535) - 65536 && x.offset + x.len >= odd & !65535));
    let tiny = signature_ranges(1536 * 1024, 512);
    assert_eq!(
        tiny,
        vec![Range {
            offset: 0,
            len: 1536 * 1024
        }]
    );
    for x in signature_ranges(odd, 4096) {
        assert_eq!(x.offset % 4096, 0);
    }
}

#[test]
fn refusal_table() {
    let mut p = disk(1 << 30);
    p.mounts.push(MountUse {
        device: "sdx1".into(),
        mount_point: "/boot".into(),
    });
    let s = refused(&p);
    assert!(
        s.contains("/dev/sdx") && s.contains("sdx1 is mounted on /boot"),
        "{s}"
    );

    let mut p = disk(1 << 30);
    p.swaps.push("/dev/sdx2".into());
    assert!(refused(&p).contains("swap"));

    let mut p = disk(1 << 30);
    p.backs_root = true;
    assert!(refused(&p).contains("root filesystem"));

    let mut p = disk(1 << 30);
    p.holders.push(Holder {
        name: "dm-0".into(),
        held: "sdx".into(),
        md_array_state: None,
    });
    assert!(refused(&p).contains("device-mapper device dm-0"));

    let mut p = disk(1 << 30);
    p.holders.push(Holder {
        name: "md0".into(),
        held: "sdx1".into(),
        md_array_state: Some("clean".into()),
    });
    assert!(refused(&p).contains("active md array md0"));

    // A member of a stopped or inactive array may be wiped.
    let mut p = disk(1 << 30);
    p.holders.push(Holder {
        name: "md0".into(),
        held: "sdx1".into(),
        md_array_state: Some("inactive".into()),
    });
    assert!(plan(&p, Method::Zero, &opts()).is_ok());

    assert!(refused(&disk(0)).contains("size 0"));
}

#[test]
fn resync_of_whole_array_is_frozen_and_skipped() {
    for m in [Method::Zero, Method::Random, Method::Zeroout] {
        let p = plan(&md("raid1", "resync", 0), m, &opts()).unwrap();
        assert_eq!(
            p.resync,
            ResyncAction::FreezeAndSkip {
                array: "md0".into()
            },
            "{m:?}"
        );
        assert!(p.leases.is_empty());
    }
}

#[test]
fn resync_kept_with_keep_resync_or_partial_methods() {
    let o = Options {
        keep_resync: true,
        ..opts()
    };
    let p = plan(&md("raid1", "resync", 0), Method::Zero, &o).unwrap();
    assert_eq!(p.resync, ResyncAction::Leave);
    assert!(p.reasons.iter().any(|r| r.contains("--keep-resync")));
    let p = plan(&md("raid1", "resync", 0), Method::Signatures, &opts()).unwrap();
    assert_eq!(p.resync, ResyncAction::Leave);
}

#[test]
fn recover_reshape_check_repair_take_a_per_array_lease() {
    for action in ["recover", "reshape", "check", "repair"] {
        let p = plan(&md("raid5", action, 1536 * 1024), Method::Zero, &opts()).unwrap();
        assert_eq!(p.resync, ResyncAction::Leave, "{action}");
        assert_eq!(p.leases.len(), 1, "{action}");
        let l = &p.leases[0];
        assert_eq!(l.holder, "wipe:/dev/md0");
        assert_eq!(l.owner, Owner::Pid(42));
        assert_eq!(
            l.arrays.get("md0"),
            Some(&Limits {
                min: Some(1),
                max: None,
                io_depth: None,
            })
        );
        assert_eq!(l.global, Limits::default());
    }
}

#[test]
fn idle_array_needs_nothing() {
    let p = plan(&md("raid1", "idle", 0), Method::Zero, &opts()).unwrap();
    assert_eq!(p.resync, ResyncAction::Leave);
    assert!(p.leases.is_empty());
}

#[test]
fn shared_disk_with_resyncing_array_takes_global_lease() {
    let mut p = disk(1 << 30);
    p.resyncing_neighbours = vec!["md1".into()];
    let pl = plan(&p, Method::Zero, &opts()).unwrap();
    assert_eq!(pl.leases.len(), 1);
    assert_eq!(
        pl.leases[0].global,
        Limits {
            min: Some(0),
            max: None,
            io_depth: None,
        }
    );
    assert!(pl.leases[0].arrays.is_empty());
    // Both at once: one lease carrying both limits.
    let mut a = md("raid5", "recover", 0);
    a.resyncing_neighbours = vec!["md1".into()];
    let pl = plan(&a, Method::Zero, &opts()).unwrap();
    assert_eq!(pl.leases.len(), 1);
    assert_eq!(pl.leases[0].global.min, Some(0));
    assert_eq!(pl.leases[0].arrays["md0"].min, Some(1));
}

#[test]
fn describe_shows_reasons_but_not_the_seed() {
    let p = plan(&disk(1 << 30), Method::Random, &opts()).unwrap();
    let d = p.describe();
    assert!(d.contains("reasons:") && d.contains("O_DIRECT"));
    assert!(format!("{p:?}").contains("redacted"));
}

#[test]
fn buffered_fallback_has_one_in_flight() {
    let p = plan(&disk(1 << 30), Method::Random, &opts()).unwrap();
    let b = p.buffered_fallback();
    assert!(!b.open.direct);
    assert_eq!(b.queue_depth, 1);
    assert!(b.reasons.last().unwrap().contains("sync_file_range"));
}

#[test]
fn human_bytes_uses_binary_units_and_bytes_exact_adds_the_count() {
    use mdpilot::units::{bytes_exact, human_bytes};
    assert_eq!(human_bytes(512), "512 B");
    assert_eq!(human_bytes(4 * MIB), "4 MiB");
    assert_eq!(human_bytes(3 * MIB / 2 * 1024), "1.5 GiB");
    assert_eq!(human_bytes(3_000_592_982_016), "2.73 TiB");
    assert_eq!(bytes_exact(4 * MIB), "4 MiB (4194304 bytes)");
}

#[test]
fn text_plan_spells_the_method_as_the_cli_and_sizes_in_human_units_with_bytes() {
    let d = plan(&disk(64 * MIB), Method::Zero, &opts())
        .unwrap()
        .describe();
    assert!(d.contains("method: zero\n"), "{d}");
    assert!(!d.contains("Zero"), "{d}");
    assert!(d.contains("size: 64 MiB (67108864 bytes)\n"), "{d}");
    assert!(d.contains("open: O_WRONLY|O_EXCL|O_DIRECT\n"), "{d}");
    assert!(
        d.contains("request: 64 MiB (67108864 bytes), 4 in flight"),
        "{d}"
    );
    assert!(d.contains("block 4 MiB (4194304 bytes)"), "{d}");
    assert!(
        d.contains("ranges: 1, 64 MiB (67108864 bytes) in all\n"),
        "{d}"
    );
    assert!(!d.contains("0 B (0 bytes)"), "{d}");
    let d = plan(&md("raid1", "recover", 0), Method::Signatures, &opts())
        .unwrap()
        .describe();
    assert!(d.contains("method: signatures\n"), "{d}");
    assert!(
        d.contains("lease: wipe:/dev/md0: md0 sync_speed_min 1 KiB/s"),
        "{d}"
    );
}

#[test]
fn plan_reasons_state_facts_without_issue_numbers_or_history() {
    let mut probes = vec![disk(64 * MIB), md("raid1", "resync", 0)];
    let mut offload = disk(64 * MIB);
    offload.write_zeroes_max_bytes = 1 << 30;
    probes.push(offload);
    for p in &probes {
        for m in [
            Method::Zero,
            Method::Random,
            Method::Zeroout,
            Method::Signatures,
        ] {
            let pl = plan(p, m, &opts()).unwrap();
            for r in &pl.reasons {
                let l = r.to_lowercase();
                assert!(
                    !l.contains("issue") && !l.contains("bench") && !l.contains("mb/s"),
                    "{r}"
                );
            }
        }
    }
    let pl = plan(&md("raid1", "resync", 0), Method::Zero, &opts()).unwrap();
    assert!(
        pl.reasons
            .iter()
            .any(|r| r.contains("md raid1/5/10 report write_zeroes_max_bytes 0")),
        "{:?}",
        pl.reasons
    );
}

#[test]
fn plan_json_enums_are_lowercase_kebab_and_show_open_flags_and_operation() {
    let pl = plan(&disk(64 * MIB), Method::Zero, &opts()).unwrap();
    let v = mdpilot::cli::wipe::plan_json(&pl, true);
    assert_eq!(v["resync"], "leave");
    assert_eq!(v["method"], "zero");
    assert_eq!(v["open_flags"], "O_WRONLY|O_EXCL|O_DIRECT");
    assert_eq!(v["open"]["direct"], true);
    assert_eq!(v["operation"], "BLKZEROOUT");
    let pl = plan(&md("raid1", "resync", 0), Method::Random, &opts()).unwrap();
    let v = mdpilot::cli::wipe::plan_json(&pl, false);
    assert_eq!(v["resync"]["freeze-and-skip"]["array"], "md0", "{v}");
    assert_eq!(v["method"], "random");
}

#[test]
fn method_name_is_the_cli_json_and_lookup_word() {
    use clap::ValueEnum;
    for m in Method::ALL {
        let cli = m.to_possible_value().unwrap();
        assert_eq!(cli.get_name(), m.name());
        assert_eq!(serde_json::to_value(m).unwrap(), m.name());
        assert_eq!(Method::from_name(m.name()), Some(m));
    }
    assert_eq!(Method::value_variants().len(), Method::ALL.len());
    assert_eq!(Method::from_name("shred"), None);
}

#[test]
fn reread_partitions_on_a_whole_disk_with_partitions_or_a_wiped_first_sector() {
    let mut d = disk(1 << 30);
    d.partitions = vec!["sdx1".into()];
    let p = plan(&d, Method::Signatures, &opts()).unwrap();
    assert!(p.reread_partitions);
    assert!(p
        .reasons
        .iter()
        .any(|r| r.contains("BLKRRPART") && r.contains("sdx1")));
    d.partitions.clear();
    assert!(plan(&d, Method::Zero, &opts()).unwrap().reread_partitions);
    let mut part = disk(1 << 30);
    part.is_partition = true;
    assert!(
        !plan(&part, Method::Zero, &opts())
            .unwrap()
            .reread_partitions
    );
}

fn offloadable(level: &str, action: &str) -> Probe {
    use mdpilot::model::{ArrayState, MemberSysfs};
    use mdpilot::wipe::probe::{MdDetail, MemberFacts};
    let mut p = md(level, action, 0);
    p.md = Some(MdDetail {
        array_state: Some(ArrayState::from("clean")),
        reshape_position: "none".into(),
        resync_start: "none".into(),
        sync_completed: "none".into(),
        uuid: "u".into(),
        members: ["vdb", "vdc"]
            .iter()
            .map(|n| MemberFacts {
                sysfs: MemberSysfs {
                    name: (*n).to_string(),
                    state: vec!["in_sync".into()],
                    slot: None,
                    errors: None,
                },
                path: PathBuf::from(format!("/dev/{n}")),
                dev: Some((252, 16)),
                size_bytes: 2 << 30,
                offset_sectors: 2048,
                size_kib: 1 << 20,
                write_zeroes_max_bytes: 1 << 30,
                discard_max_bytes: 0,
            })
            .collect(),
    });
    p
}

#[test]
fn member_offload_zeroes_each_data_region_and_freezes_an_idle_array() {
    let p = plan(&offloadable("raid1", "idle"), Method::Zero, &opts()).unwrap();
    assert_eq!(p.offload.len(), 2);
    assert_eq!(p.offload[0].offset_bytes, 2048 * 512);
    assert_eq!(p.offload[0].len_bytes, 1 << 30);
    assert_eq!(
        p.resync,
        ResyncAction::FreezeAndSkip {
            array: "md0".into()
        }
    );
    assert!(
        p.reasons.iter().any(|r| r.starts_with("member offload:")),
        "{:?}",
        p.reasons
    );
    for level in ["raid10", "raid4", "raid5", "raid6"] {
        assert!(!plan(&offloadable(level, "resync"), Method::Zero, &opts())
            .unwrap()
            .offload
            .is_empty());
    }
}

#[test]
fn member_offload_refused_with_a_reason_for_each_condition() {
    let why = |p: &Probe, m: Method, o: &Options| {
        let pl = plan(p, m, o).unwrap();
        assert!(pl.offload.is_empty());
        pl.reasons
            .iter()
            .find(|r| r.starts_with("no member offload"))
            .cloned()
            .unwrap_or_default()
    };
    let base = offloadable("raid1", "idle");
    let mut p = base.clone();
    p.array.as_mut().unwrap().level = "raid0".into();
    assert!(why(&p, Method::Zero, &opts()).contains("raid0"));
    let mut p = base.clone();
    p.md.as_mut().unwrap().members[1].write_zeroes_max_bytes = 0;
    assert!(why(&p, Method::Zero, &opts()).contains("vdc cannot zero itself"));
    let mut p = base.clone();
    p.md.as_mut().unwrap().reshape_position = "1024".into();
    assert!(why(&p, Method::Zero, &opts()).contains("reshape"));
    let mut p = base.clone();
    p.md.as_mut().unwrap().array_state = Some(mdpilot::model::ArrayState::from("write-pending"));
    assert!(why(&p, Method::Zero, &opts()).contains("write-pending"));
    let mut p = base.clone();
    p.md.as_mut().unwrap().members[0].sysfs.state = vec!["faulty".into()];
    assert!(why(&p, Method::Zero, &opts()).contains("not in_sync"));
    assert!(why(&offloadable("raid1", "recover"), Method::Zero, &opts()).contains("recover"));
    let keep = Options {
        keep_resync: true,
        ..opts()
    };
    assert!(why(&base, Method::Zero, &keep).contains("--keep-resync"));
    // Not asked: another method, or an array that zeroes itself (raid0 passes it through).
    assert!(plan(&base, Method::Random, &opts())
        .unwrap()
        .offload
        .is_empty());
    let mut p = base.clone();
    p.write_zeroes_max_bytes = 1 << 20;
    assert_eq!(why(&p, Method::Zero, &opts()), "");
}
