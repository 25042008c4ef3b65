//! One case per printed form of /proc/mdstat (drivers/md/md.c `md_seq_show`, `status_resync`,
//! the personalities' `status` hooks, md-bitmap.c) and per error rule of the parser.

use mdpilot::mdstat::parse;
use mdpilot::model::{HeaderState, MdStat, MemberFlag, ReadOnly, SyncState};
use pretty_assertions::assert_eq;

fn ok(text: &str) -> MdStat {
    let s = parse(text);
    assert_eq!(s.errors, vec![], "unexpected errors for:\n{text}");
    s
}

fn error_lines(s: &MdStat) -> Vec<usize> {
    s.errors.iter().map(|e| e.line).collect()
}

#[test]
fn header_states_and_read_only_markers() {
    let s = ok("Personalities : [raid0] [raid1] \n\
md0 : broken raid0 sda[0] sdb[1]\n      2048 blocks super 1.2 512k chunks\n      \n\
md1 : active (read-only) raid1 sdc[0] sdd[1]\n      1024 blocks super 1.2 [2/2] [UU]\n      \n\
md2 : active (auto-read-only) raid1 sde[0] sdf[1]\n      1024 blocks super 1.2 [2/2] [UU]\n      \n\
md3 : inactive sdg[0](S)\n       1024 blocks super 1.2\n       \n\
md4 : inactive raid1 sdh[0]\n       1024 blocks super 1.2 [2/1] [U_]\n       \n\
unused devices: <none>\n");
    let a = &s.arrays;
    assert_eq!(a.len(), 5);
    assert_eq!(a[0].state, HeaderState::Broken);
    assert_eq!(a[0].level.as_deref(), Some("raid0"));
    assert_eq!(a[1].read_only, Some(ReadOnly::ReadOnly));
    assert_eq!(a[2].read_only, Some(ReadOnly::AutoReadOnly));
    assert_eq!(a[3].state, HeaderState::Inactive);
    assert_eq!(a[3].level, None);
    assert_eq!(a[4].level.as_deref(), Some("raid1"));
    assert_eq!(s.personalities, vec!["raid0", "raid1"]);
}

#[test]
fn member_names_flags_and_slots() {
    let s = ok("md0 : active raid1 nvme0n1p5[0](W) dm-0[1](J) md126[2](W)(F) cciss/c0d0p1[7](S) sdx[9](R) sdy[3](W)(S)\n      \
1024 blocks super 1.2 [2/2] [UU]\n");
    let m = &s.arrays[0].members;
    let names: Vec<&str> = m.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        names,
        ["nvme0n1p5", "dm-0", "md126", "cciss/c0d0p1", "sdx", "sdy"]
    );
    use MemberFlag::*;
    assert_eq!(m[0].flags, vec![WriteMostly]);
    assert_eq!(m[1].flags, vec![Journal]);
    assert_eq!(m[2].flags, vec![WriteMostly, Faulty]);
    assert_eq!(m[3].flags, vec![Spare]);
    assert_eq!(m[3].slot, 7, "slots can exceed raid_disks");
    assert_eq!(m[4].flags, vec![Replacement]);
    assert_eq!(m[5].flags, vec![WriteMostly, Spare]);
}

#[test]
fn arrays_without_members() {
    let s = ok("md0 : inactive\n       \nmd1 : inactive super 1.2\n       \nmd2 : inactive super external:imsm\n");
    assert_eq!(s.arrays.len(), 3);
    assert!(s
        .arrays
        .iter()
        .all(|a| a.members.is_empty() && a.size_kib.is_none()));
    assert_eq!(s.arrays[1].metadata.as_deref(), Some("1.2"));
    assert_eq!(s.arrays[2].metadata.as_deref(), Some("external:imsm"));
}

#[test]
fn blocks_line_variants() {
    let s = ok("\
md0 : active raid0 a[0] b[1]\n      100 blocks 64k chunks\n\
md1 : active linear a[0] b[1]\n      100 blocks super 1.2 0k rounding\n\
md2 : active raid5 a[0] b[1] c[2]\n      100 blocks super 0.91 level 5, 512k chunk, algorithm 2 [3/3] [UUU]\n\
md3 : active raid10 a[0] b[1]\n      100 blocks super 1.2 2 near-copies [2/2] [UU]\n\
md4 : active raid10 a[0] b[1] c[2]\n      100 blocks super 1.2 512K chunks 2 near-copies [3/3] [UUU]\n\
md5 : active raid10 a[0] b[1]\n      100 blocks super 1.2 512K chunks 2 far-copies [2/2] [UU]\n\
md6 : active raid10 a[0] b[1]\n      100 blocks super 1.2 512K chunks 2 offset-copies [2/2] [UU]\n\
md7 : active raid1 a[0] b[1]\n      100 blocks super external:/md127/0 [2/1] [_U]\n\
md8 : active raid0 a[0]\n      100 blocks super non-persistent 4k chunks\n\
md9 : active raid1 a[0] b[1]\n      100 blocks [2/2] [UU]\n");
    let meta: Vec<Option<&str>> = s.arrays.iter().map(|a| a.metadata.as_deref()).collect();
    assert_eq!(
        meta,
        [
            None,
            Some("1.2"),
            Some("0.91"),
            Some("1.2"),
            Some("1.2"),
            Some("1.2"),
            Some("1.2"),
            Some("external:/md127/0"),
            Some("non-persistent"),
            None
        ]
    );
    assert_eq!(s.arrays[0].raid_disks, None);
    assert_eq!(s.arrays[2].member_status.as_deref(), Some("UUU"));
    assert_eq!(s.arrays[7].active_disks, Some(1));
    assert_eq!(s.arrays[7].member_status.as_deref(), Some("_U"));
}

#[test]
fn sync_lines() {
    let s = ok("\
md0 : active raid1 a[0] b[1]\n      208704 blocks [2/1] [_U]\n      [>....................]  recovery =  0.4% (1024/208704) finish=276.9min speed=12K/sec\n\
md1 : active raid1 a[0] b[1]\n      100 blocks [2/2] [UU]\n\tresync=DELAYED\n\
md2 : active raid1 a[0] b[1]\n      100 blocks [2/2] [UU]\n        resync=PENDING\n\
md3 : active raid1 a[0] b[1]\n      100 blocks [2/2] [UU]\n      \tresync=REMOTE\n\
md4 : active raid1 a[0] b[1]\n      100 blocks [2/2] [UU]\n      \trecover=REMOTE\n\
md5 : active raid5 a[0] b[1] c[2]\n      200 blocks level 5, 64k chunk, algorithm 2 [3/3] [UUU]\n      [===================>.]  reshape = 99.9% (99/100) finish=0.0min speed=1K/sec\n\
md6 : active raid1 a[0] b[1]\n      100 blocks [2/2] [UU]\n      [==========>..........]  check = 50.0% (50/100) finish=1.5min speed=100000K/sec\n\
md7 : active raid1 a[0] b[1]\n      100 blocks [2/2] [UU]\n      [====================>]  resync =100.0% (100/100) finish=0.0min speed=1K/sec\n");
    let sy: Vec<_> = s.arrays.iter().map(|a| a.sync.clone().unwrap()).collect();
    assert_eq!(sy[0].action, "recovery");
    assert_eq!(sy[0].percent, Some(0.4));
    assert_eq!(sy[0].finish_min, Some(276.9));
    assert_eq!(sy[1].state, SyncState::Delayed);
    assert_eq!(sy[1].done_kib, None);
    assert_eq!(sy[2].state, SyncState::Pending);
    assert_eq!(sy[3].state, SyncState::Remote);
    assert_eq!(sy[4].action, "recover");
    assert_eq!(sy[5].action, "reshape");
    assert_eq!(sy[6].action, "check");
    assert_eq!(sy[6].speed_kib_s, Some(100000));
    assert_eq!(sy[7].percent, Some(100.0));
}

#[test]
fn bitmap_lines() {
    let s = ok("\
md0 : active raid1 a[0] b[1]\n      100 blocks super 1.2 [2/2] [UU]\n      bitmap: 1/8 pages [4KB], 65536KB chunk\n\n\
md1 : active raid1 a[0] b[1]\n      100 blocks [2/2] [UU]\n      bitmap: 0/1 pages [0KB], 512B chunk, file: /boot/md1.bitmap\n\n\
md2 : active raid1 a[0] b[1]\n      100 blocks [2/2] [UU]\n      [=>...................]  resync =  5.0% (5/100) finish=1.0min speed=10K/sec\n      bitmap: 1/1 pages [4KB], 65536KB chunk\n");
    let b0 = s.arrays[0].bitmap.clone().unwrap();
    assert_eq!((b0.pages_used, b0.pages_total, b0.memory_kib), (1, 8, 4));
    assert_eq!(b0.chunk_bytes, 67108864);
    let b1 = s.arrays[1].bitmap.clone().unwrap();
    assert_eq!(b1.chunk_bytes, 512);
    assert_eq!(b1.file.as_deref(), Some("/boot/md1.bitmap"));
    assert!(s.arrays[2].sync.is_some() && s.arrays[2].bitmap.is_some());
}

#[test]
fn whitespace_and_old_kernel_lines_are_not_errors() {
    // 2.4: read_ahead and Event lines; CRLF; no final newline; TAB indentation; odd blank lines.
    let s = ok(
        "Personalities : [raid1] \r\nread_ahead 1024 sectors\r\nEvent: 4\r\n\
md0 : active raid1 hdc1[1] hda1[0]\r\n\t104320 blocks [2/2] [UU]\r\n      \r\n\
md1 : active raid1 hdc2[1] hda2[0]\n 1024 blocks [2/2] [UU]\n\n\n \t \nunused devices: <none>",
    );
    assert_eq!(s.arrays.len(), 2);
    assert_eq!(s.arrays[0].size_kib, Some(104320));
    // No Personalities line, no unused devices line, no separator between stanzas.
    let s = ok("md0 : active raid0 a[0]\n100 blocks 64k chunks\nmd1 : active raid0 b[0]\n100 blocks 64k chunks");
    assert_eq!(s.arrays.len(), 2);
    assert!(s.personalities.is_empty());
}

#[test]
fn empty_input() {
    assert_eq!(ok(""), MdStat::default());
    assert_eq!(ok("\n\n"), MdStat::default());
}

#[test]
fn broken_stanza_left_out_with_one_error_at_its_start() {
    // Bad header state: header line; the blocks line belongs to the same error.
    let s = parse("Personalities : [raid1]\nmd3 : invalid\n      100 blocks 64k chunks\n\nmd0 : active raid0 a[0]\n  1 blocks 4k chunks\n");
    assert_eq!(error_lines(&s), [2]);
    assert_eq!(s.arrays.len(), 1);
    // Bad member token.
    let s = parse("md1 : active raid1 sda[0] sdb[X]\n  100 blocks [2/2] [UU]\n");
    assert_eq!(error_lines(&s), [1]);
    assert!(s.arrays.is_empty());
    // Members but no blocks line: the header.
    let s = parse(
        "md1 : active raid1 sda[0] sdb[1]\n\nmd2 : active raid0 c[0]\n  1 blocks 4k chunks\n",
    );
    assert_eq!(error_lines(&s), [1]);
    assert_eq!(s.arrays.len(), 1);
    // A redundant level without [T/A] [U_]: the blocks line.
    let s = parse("md1 : active raid1 sda[0] sdb[1]\n  100 blocks super 1.2\n");
    assert_eq!(error_lines(&s), [2]);
    // An unparseable body line: that line; consecutive bad lines are one part.
    let s = parse("md1 : active raid1 sda[0] sdb[1]\n  100 blocks [2/2] [UU]\n  bitmap: lots\n  [==>] resync = x\n\nmd2 : active raid0 c[0]\n  1 blocks 4k chunks\n");
    assert_eq!(error_lines(&s), [3]);
    assert_eq!(s.arrays.len(), 1);
    assert_eq!(s.arrays[0].name, "md2");
    // Garbage on the blocks line.
    let s = parse("md1 : active raid0 sda[0]\n  100 blocks 64k chunks and more\n");
    assert_eq!(error_lines(&s), [2]);
}

#[test]
fn non_mdstat_text_is_an_error_part_and_the_rest_is_kept() {
    let s = parse("# cat /proc/mdstat\n$ oops\nPersonalities : [raid1]\nmd0 : active raid1 a[0] b[1]\n  100 blocks [2/2] [UU]\n...\n\nmd1 : active raid1 a[0] b[1]\n  100 blocks [2/2] [UU]\n[snip]\n");
    assert_eq!(error_lines(&s), [1, 6, 10]);
    assert_eq!(s.arrays.len(), 2);
}

#[test]
fn inconsistent_but_parseable_is_reported_as_printed() {
    let s = ok("md0 : active raid5 a[0] b[1]\n  100 blocks level 5, 64k chunk, algorithm 2 [5/5] [UUUUUU]\n");
    assert_eq!(s.arrays[0].raid_disks, Some(5));
    assert_eq!(s.arrays[0].member_status.as_deref(), Some("UUUUUU"));
}

#[test]
fn blank_line_inside_a_stanza_is_only_whitespace() {
    let s = ok(
        "md12 : active raid0 sdc2[0] sdd2[1]\n\n      3886394368 blocks super 1.2 512k chunks\n",
    );
    assert_eq!(s.arrays[0].size_kib, Some(3886394368));
}

#[test]
fn header_then_blank_then_garbage_is_two_parts() {
    let s = parse("md1 : active raid1 sda[0] sdb[1]\n\n# prompt\n");
    assert_eq!(error_lines(&s), [1, 3]);
    assert_eq!(s.errors[0].text, "md1 : active raid1 sda[0] sdb[1]");
    // Without the blank line the garbage is where the stanza breaks: one part.
    let s = parse("md1 : active raid1 sda[0] sdb[1]\n# prompt\n$ more\n");
    assert_eq!(error_lines(&s), [2]);
}

#[test]
fn array_without_members_keeps_its_status_from_the_header_line() {
    // md_seq_show: no member devices, so no blocks line; `pers->status` follows the level (and
    // ` super V`) on the header line. The array must still be reported.
    let s = ok(
        "md126 : active raid5 super 1.2 level 5, 64k chunk, algorithm 2 [4/0] [____]\n      \n\
md127 : active raid1 super 1.2 [2/0] [__]\n      \n\
md1 : active raid1 [2/0] [__]\n      \n\
md2 : active raid10 super 1.2 512K chunks 2 near-copies [4/0] [____]\n      \n\
md3 : active raid0 super 1.2 512k chunks\n      \n\
md4 : active linear 0k rounding\n      \n",
    );
    let names: Vec<&str> = s.arrays.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["md126", "md127", "md1", "md2", "md3", "md4"]);
    let a = &s.arrays[0];
    assert_eq!(a.state, HeaderState::Active);
    assert_eq!(a.level.as_deref(), Some("raid5"));
    assert_eq!(a.metadata.as_deref(), Some("1.2"));
    assert_eq!((a.raid_disks, a.active_disks), (Some(4), Some(0)));
    assert_eq!(a.member_status.as_deref(), Some("____"));
    assert_eq!(a.size_kib, None);
    assert!(a.members.is_empty());
    assert_eq!(s.arrays[1].member_status.as_deref(), Some("__"));
    assert_eq!(s.arrays[2].metadata, None, "0.90 prints no super");
    assert_eq!(s.arrays[2].raid_disks, Some(2));
    assert_eq!(s.arrays[3].raid_disks, Some(4));
    assert_eq!(s.arrays[4].raid_disks, None);
}

#[test]
fn array_without_members_may_have_sync_and_bitmap_lines() {
    let s = ok("md127 : active raid1 super 1.2 [2/0] [__]\n      resync=PENDING\n      bitmap: 0/1 pages [0KB], 65536KB chunk\n\n");
    let a = &s.arrays[0];
    assert_eq!(a.sync.as_ref().map(|x| x.state), Some(SyncState::Pending));
    assert!(a.bitmap.is_some());
    // A blocks line cannot follow a status already printed on the header.
    let s = parse("md127 : active raid1 super 1.2 [2/0] [__]\n      100 blocks [2/0] [__]\n");
    assert_eq!(error_lines(&s), [2]);
}

#[test]
fn header_status_that_cannot_be_read_is_still_an_error() {
    for text in [
        "md1 : active raid1 super 1.2 [2/0] [__] trailing\n",
        "md1 : active raid1 super 1.2 fast\n",
        "md1 : active raid5 level 5, 64k chunk\n",
        "md1 : active raid1 super 1.2 sda[0]\n",
    ] {
        let s = parse(text);
        assert_eq!(error_lines(&s), [1], "{text}");
        assert!(s.arrays.is_empty(), "{text}");
    }
}
