//! Property tests for the /proc/mdstat parser:
//! - arbitrary bytes and strings never panic, and every error points at a real line;
//! - arbitrary mixes of mdstat-like lines (real fragments, mutated) never panic;
//! - arrays printed the way md_seq_show prints them (with or without member devices) parse back
//!   to the same values, with any
//!   indentation and blank-line noise (whitespace never makes an error).

use mdpilot::mdstat::parse;
use mdpilot::model::{MdStat, MemberFlag, SyncState};
use proptest::prelude::*;

fn check_invariants(text: &str, s: &MdStat) {
    let lines = text.split('\n').count();
    for w in s.errors.windows(2) {
        assert!(w[0].line <= w[1].line, "errors out of order");
    }
    for e in &s.errors {
        assert!(
            e.line >= 1 && e.line <= lines,
            "error line {} of {lines}",
            e.line
        );
    }
}

const FRAGMENTS: &[&str] = &[
    "Personalities : [linear] [raid0] [raid1] [raid10] [raid6] [raid5] [raid4] ",
    "Personalities :",
    "read_ahead 1024 sectors",
    "Event: 12",
    "md0 : active raid1 sdb1[1] sda1[0]",
    "md127 : inactive sdb[1](S) sda[0](S)",
    "md1 : active (auto-read-only) raid5 sdc[3](W)(F) sdd[4](S)(R) cciss/c0d0p1[2](J)",
    "md2 : broken raid0 nvme0n1p5[0] dm-0[1]",
    "md3 : inactive super 1.2",
    "md4 : active raid10 sdx[9999999999]",
    "      523264 blocks super 1.2 [2/2] [UU]",
    "      5853468288 blocks super 1.2 level 6, 64k chunk, algorithm 2 [8/8] [UUUUUUUU]",
    "      1855870976 blocks super external:/md127/0 128k chunks",
    "      100604928 blocks super 1.2 512K chunks 2 near-copies [6/6] [UUUUUU]",
    "       2095104 blocks super 1.2 0k rounding",
    "      7932 blocks super external:imsm",
    "      [=>...................]  recovery =  8.5% (16775552/195310144) finish=17.0min speed=259783K/sec",
    "      [>....................]  resync =  0.4% (1024/208704) finish=276.9min speed=12K/sec",
    "\tresync=DELAYED",
    "      resync=PENDING",
    "      \trecover=REMOTE",
    "      bitmap: 4/15 pages [16KB], 65536KB chunk",
    "      bitmap: 0/1 pages [0KB], 512B chunk, file: /var/md\\040x",
    "      ",
    "       ",
    "",
    "unused devices: <none>",
    "# cat /proc/mdstat",
    "[...]",
];

fn mutate(line: &str, cut: usize, junk: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let cut = cut % (chars.len() + 1);
    let mut s: String = chars[..cut].iter().collect();
    s.push_str(junk);
    s.extend(&chars[cut..]);
    s
}

fn mdstat_like() -> impl Strategy<Value = String> {
    let line = (
        0..FRAGMENTS.len(),
        any::<usize>(),
        prop_oneof![
            Just(String::new()),
            Just(String::new()),
            "[ \\t\\[\\]()/=%:,.0-9A-Za-z_\u{a0}\u{fffd}-]{0,4}",
        ],
    )
        .prop_map(|(i, cut, junk)| mutate(FRAGMENTS[i], cut, &junk));
    prop::collection::vec(line, 0..40).prop_map(|v| v.join("\n"))
}

/// A member as md_seq_show prints it, and the flags it implies.
fn member() -> impl Strategy<Value = (String, u32, Vec<MemberFlag>)> {
    let name = prop_oneof![
        "sd[a-z]{1,2}[0-9]{0,2}",
        "nvme[0-9]n[0-9]p[0-9]{1,2}",
        "dm-[0-9]{1,3}",
        "md[0-9]{1,3}",
        "cciss/c0d[0-9]p[0-9]",
    ];
    let flags = (any::<bool>(), any::<bool>(), 0..3u8, any::<bool>()).prop_map(|(w, j, fs, r)| {
        let mut f = Vec::new();
        if w {
            f.push(MemberFlag::WriteMostly);
        }
        if j {
            f.push(MemberFlag::Journal);
        }
        match fs {
            1 => f.push(MemberFlag::Faulty),
            2 => f.push(MemberFlag::Spare),
            _ => {}
        }
        // The kernel stops after (F): a faulty member never prints (R).
        if r && fs != 1 {
            f.push(MemberFlag::Replacement);
        }
        f
    });
    (name, 0..64u32, flags)
}

#[derive(Debug, Clone)]
struct Spec {
    name: String,
    ro: u8,
    level: &'static str,
    members: Vec<(String, u32, Vec<MemberFlag>)>,
    size: u64,
    meta: Option<&'static str>,
    sync: u8,
    bitmap: bool,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        "md[0-9]{1,3}|md_d[0-9]|md_[a-z]{1,8}",
        0..3u8,
        prop::sample::select(vec!["raid0", "raid1", "raid5", "raid10", "linear"]),
        prop::collection::vec(member(), 0..6),
        any::<u64>(),
        prop::sample::select(vec![None, Some("1.2"), Some("0.91"), Some("external:imsm")]),
        0..4u8,
        any::<bool>(),
    )
        .prop_map(
            |(name, ro, level, members, size, meta, sync, bitmap)| Spec {
                name,
                ro,
                level,
                members,
                size,
                meta,
                sync,
                bitmap,
            },
        )
}

fn flag_text(f: &MemberFlag) -> &'static str {
    match f {
        MemberFlag::WriteMostly => "(W)",
        MemberFlag::Journal => "(J)",
        MemberFlag::Faulty => "(F)",
        MemberFlag::Spare => "(S)",
        MemberFlag::Replacement => "(R)",
    }
}

/// Prints like md_seq_show, with `indent` in place of its six spaces.
fn print(s: &Spec, indent: &str) -> String {
    let ro = ["", " (read-only)", " (auto-read-only)"][s.ro as usize];
    let mut t = format!("{} : active{ro} {}", s.name, s.level);
    for (n, slot, flags) in &s.members {
        t.push_str(&format!(" {n}[{slot}]"));
        for f in flags {
            t.push_str(flag_text(f));
        }
    }
    // Without members there is no blocks line: super and the status go on the header.
    if !s.members.is_empty() {
        t.push_str(&format!("\n{indent}{} blocks", s.size));
    }
    if let Some(m) = s.meta {
        t.push_str(&format!(" super {m}"));
    }
    let n = s.members.len();
    let status = if n == 0 {
        " [2/0] [__]".to_string()
    } else {
        format!(" [{n}/{n}] [{}]", "U".repeat(n))
    };
    match s.level {
        "raid0" => t.push_str(" 512k chunks"),
        "linear" => t.push_str(" 0k rounding"),
        "raid5" => t.push_str(&format!(" level 5, 64k chunk, algorithm 2{status}")),
        "raid10" => t.push_str(&format!(" 512K chunks 2 near-copies{status}")),
        _ => t.push_str(&status),
    }
    let redundant = !matches!(s.level, "raid0" | "linear");
    if redundant {
        match s.sync {
            1 => t.push_str(&format!(
                "\n{indent}[=>...................]  resync =  9.9% (73239936/732515712) finish=211.5min speed=51946K/sec"
            )),
            2 => t.push_str("\n\tresync=DELAYED"),
            3 => t.push_str(&format!("\n{indent}resync=PENDING")),
            _ => {}
        }
    }
    if s.bitmap && redundant {
        t.push_str(&format!("\n{indent}bitmap: 1/8 pages [4KB], 65536KB chunk"));
    }
    t.push_str(&format!("\n{indent}\n"));
    t
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let text = String::from_utf8_lossy(&bytes);
        let s = parse(&text);
        check_invariants(&text, &s);
    }

    #[test]
    fn arbitrary_strings_never_panic(text in ".{0,600}") {
        let s = parse(&text);
        check_invariants(&text, &s);
    }

    #[test]
    fn mdstat_like_lines_never_panic(text in mdstat_like()) {
        let s = parse(&text);
        check_invariants(&text, &s);
    }

    #[test]
    fn printed_arrays_parse_back(
        specs in prop::collection::vec(spec(), 0..5),
        indent in prop::sample::select(vec!["      ", "  ", "\t", " ", ""]),
        personalities in any::<bool>(),
    ) {
        let mut text = String::new();
        if personalities {
            text.push_str("Personalities : [raid0] [raid1] [raid5] [raid10] [linear] \n");
        }
        for s in &specs {
            text.push_str(&print(s, indent));
        }
        text.push_str("unused devices: <none>\n");
        let got = parse(&text);
        prop_assert!(got.errors.is_empty(), "errors {:?} for\n{}", got.errors, text);
        prop_assert_eq!(got.arrays.len(), specs.len());
        for (a, s) in got.arrays.iter().zip(&specs) {
            prop_assert_eq!(&a.name, &s.name);
            prop_assert_eq!(a.level.as_deref(), Some(s.level));
            let want_size = (!s.members.is_empty()).then_some(s.size);
            prop_assert_eq!(a.size_kib, want_size);
            prop_assert_eq!(a.metadata.as_deref(), s.meta);
            prop_assert_eq!(a.members.len(), s.members.len());
            for (m, (n, slot, flags)) in a.members.iter().zip(&s.members) {
                prop_assert_eq!(&m.name, n);
                prop_assert_eq!(m.slot, *slot);
                prop_assert_eq!(&m.flags, flags);
            }
            let redundant = !matches!(s.level, "raid0" | "linear");
            let want_state = match (redundant, s.sync) {
                (true, 1) => Some(SyncState::Running),
                (true, 2) => Some(SyncState::Delayed),
                (true, 3) => Some(SyncState::Pending),
                _ => None,
            };
            prop_assert_eq!(a.sync.as_ref().map(|x| x.state), want_state);
            prop_assert_eq!(a.bitmap.is_some(), s.bitmap && redundant);
            prop_assert_eq!(a.raid_disks.is_some(), redundant);
        }
    }
}
