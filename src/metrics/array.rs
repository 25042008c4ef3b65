//! The per-array families (`mdpilot_array_*`) of one [`Array`]: sysfs values where the model
//! has them, else the nearest `/proc/mdstat` reading. Pure.

use super::families::{
    esc, int, Builder, Labels, Value, ARRAY_STATES, CONSISTENCY_POLICIES, SYNC_ACTIONS,
};
use crate::model::{
    Array, ArrayState, HeaderState, MemberFlag, ReadOnly, SyncAction, SyncCompleted, SyncKind,
    SyncState,
};

/// `md/array_state`, or the nearest state from the `/proc/mdstat` header.
fn array_state(a: &Array) -> ArrayState {
    if let Some(s) = a.sysfs.as_ref().and_then(|s| s.array_state.clone()) {
        return s;
    }
    match (a.state, a.read_only) {
        (HeaderState::Inactive, _) => ArrayState::Inactive,
        (HeaderState::Broken, _) => ArrayState::Broken,
        (HeaderState::Active, Some(ReadOnly::ReadOnly)) => ArrayState::Readonly,
        (HeaderState::Active, Some(ReadOnly::AutoReadOnly)) => ArrayState::ReadAuto,
        (HeaderState::Active, None) => ArrayState::Active,
    }
}

/// `md/sync_action`, or the nearest action from the mdstat sync line (`idle` without one).
fn sync_action(a: &Array) -> SyncAction {
    if let Some(s) = a.sysfs.as_ref().and_then(|s| s.sync_action.clone()) {
        return s;
    }
    match a.sync.as_ref().map(|s| &s.action) {
        None => SyncAction::Idle,
        Some(SyncKind::Resync) => SyncAction::Resync,
        Some(SyncKind::Recovery | SyncKind::Recover) => SyncAction::Recover,
        Some(SyncKind::Reshape) => SyncAction::Reshape,
        Some(SyncKind::Check) => SyncAction::Check,
        Some(SyncKind::Repair) => SyncAction::Repair,
        Some(SyncKind::Other(w)) => SyncAction::from(w.as_str()),
    }
}

/// (done, total) of the running sync in KiB: `md/sync_completed` (sectors / 2), else the
/// mdstat progress line.
fn sync_progress_kib(a: &Array) -> Option<(f64, f64)> {
    if let Some(c) = a.sysfs.as_ref().and_then(|s| s.sync_completed) {
        return match c {
            SyncCompleted::Sectors { done, total } if total > 0 => {
                Some((done as f64 / 2.0, total as f64 / 2.0))
            }
            _ => None,
        };
    }
    let s = a.sync.as_ref().filter(|s| s.state == SyncState::Running)?;
    match (s.done_kib, s.total_kib) {
        (Some(d), Some(t)) if t > 0 => Some((d as f64, t as f64)),
        _ => None,
    }
}

/// One series per word of `known` (1 for `cur`, 0 for the others) in the family `fam` with the
/// label `key`, plus a series for `cur` when it is not in `known`.
fn state_set<'a>(
    b: &mut Builder,
    fam: &str,
    array: &str,
    key: &'static str,
    known: impl IntoIterator<Item = &'a str>,
    cur: &str,
) {
    let mut seen = false;
    for w in known {
        seen |= w == cur;
        b.add(
            fam,
            vec![("array", array.to_string()), (key, w.to_string())],
            Value::Int((w == cur) as i64),
        );
    }
    if !seen {
        b.add(
            fam,
            vec![("array", array.to_string()), (key, esc(cur))],
            Value::Int(1),
        );
    }
}

/// Adds the samples of every `mdpilot_array_*` family for `a`.
pub fn array(b: &mut Builder, a: &Array) {
    let sys = a.sysfs.as_ref();
    let name = esc(&a.name);
    let arr = || -> Labels { vec![("array", name.clone())] };
    let level = a
        .level
        .as_deref()
        .or(sys.and_then(|s| s.level.as_deref()))
        .unwrap_or("");
    let metadata = sys
        .and_then(|s| s.metadata_version.as_deref())
        .or(a.metadata.as_deref())
        .unwrap_or("");
    b.add(
        "mdpilot_array_info",
        vec![
            ("array", name.clone()),
            ("level", esc(level)),
            ("metadata", esc(metadata)),
            (
                "uuid",
                esc(sys.and_then(|s| s.uuid.as_deref()).unwrap_or("")),
            ),
        ],
        Value::Int(1),
    );
    state_set(
        b,
        "mdpilot_array_state",
        &name,
        "state",
        ARRAY_STATES.iter().map(ArrayState::as_str),
        array_state(a).as_str(),
    );
    if let Some(kib) = a.size_kib {
        b.add(
            "mdpilot_array_size_bytes",
            arr(),
            int(kib.saturating_mul(1024)),
        );
    }
    let raid_disks = sys.and_then(|s| s.raid_disks).or(a.raid_disks);
    if let Some(n) = raid_disks {
        b.add("mdpilot_array_raid_disks", arr(), int(n.into()));
    }
    let degraded = sys.and_then(|s| s.degraded).or_else(|| {
        a.raid_disks
            .zip(a.active_disks)
            .map(|(t, act)| t.saturating_sub(act))
    });
    if let Some(d) = degraded {
        b.add("mdpilot_array_degraded", arr(), int(d.into()));
    }
    members(b, a, &name);
    if let Some(p) = sys.and_then(|s| s.consistency_policy.as_deref()) {
        state_set(
            b,
            "mdpilot_array_consistency_policy",
            &name,
            "policy",
            CONSISTENCY_POLICIES,
            p,
        );
    }
    state_set(
        b,
        "mdpilot_array_sync_action",
        &name,
        "action",
        SYNC_ACTIONS.iter().map(SyncAction::as_str),
        sync_action(a).as_str(),
    );
    sync(b, a, arr);
    if let Some(m) = sys.and_then(|s| s.mismatch_cnt) {
        b.add("mdpilot_array_mismatch_sectors", arr(), int(m));
    }
    for (bound, lim) in [
        ("min", sys.and_then(|s| s.sync_speed_min)),
        ("max", sys.and_then(|s| s.sync_speed_max)),
    ] {
        let Some(lim) = lim else { continue };
        let labels = vec![("array", name.clone()), ("bound", bound.to_string())];
        b.add(
            "mdpilot_array_sync_speed_limit_bytes_per_second",
            labels.clone(),
            int(lim.kib_s.saturating_mul(1024)),
        );
        b.add(
            "mdpilot_array_sync_speed_limit_local",
            labels,
            Value::Int((!lim.system) as i64),
        );
    }
}

/// `mdpilot_array_members`: members by state, from the mdstat member list and `[UU_]`.
fn members(b: &mut Builder, a: &Array, name: &str) {
    let count = |f: MemberFlag| a.members.iter().filter(|m| m.flags.contains(&f)).count() as u64;
    let active = match (a.state, a.active_disks) {
        (HeaderState::Active, Some(n)) => u64::from(n),
        (HeaderState::Active, None) => a
            .members
            .iter()
            .filter(|m| {
                !m.flags.iter().any(|f| {
                    matches!(
                        f,
                        MemberFlag::Faulty | MemberFlag::Spare | MemberFlag::Journal
                    )
                })
            })
            .count() as u64,
        _ => 0,
    };
    let down = a
        .member_status
        .as_deref()
        .map_or(0, |s| s.bytes().filter(|&c| c == b'_').count() as u64);
    for (state, n) in [
        ("active", active),
        ("spare", count(MemberFlag::Spare)),
        ("faulty", count(MemberFlag::Faulty)),
        ("down", down),
        ("write-mostly", count(MemberFlag::WriteMostly)),
        ("journal", count(MemberFlag::Journal)),
    ] {
        b.add(
            "mdpilot_array_members",
            vec![("array", name.to_string()), ("state", state.into())],
            int(n),
        );
    }
}

/// The running sync's ratio, speed and time left (no samples while none runs).
fn sync(b: &mut Builder, a: &Array, arr: impl Fn() -> Labels) {
    let sys = a.sysfs.as_ref();
    let progress = sync_progress_kib(a);
    if let Some((done, total)) = progress {
        b.add(
            "mdpilot_array_sync_completed_ratio",
            arr(),
            Value::Float((done / total).clamp(0.0, 1.0)),
        );
    }
    let running = a.sync.as_ref().filter(|s| s.state == SyncState::Running);
    let speed_kib = sys
        .and_then(|s| s.sync_speed_kib_s)
        .or(running.and_then(|s| s.speed_kib_s));
    if let (Some(v), true) = (speed_kib, progress.is_some() || running.is_some()) {
        b.add(
            "mdpilot_array_sync_speed_bytes_per_second",
            arr(),
            int(v.saturating_mul(1024)),
        );
    }
    let remaining = running
        .and_then(|s| s.finish_min)
        .map(|m| m * 60.0)
        .or_else(|| {
            let (done, total) = progress?;
            let v = speed_kib.filter(|&v| v > 0)?;
            Some((total - done).max(0.0) / v as f64)
        });
    if let (Some(r), true) = (remaining, progress.is_some() || running.is_some()) {
        b.add(
            "mdpilot_array_sync_remaining_seconds",
            arr(),
            Value::Float(r),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ArraySysfs, SyncStatus};

    fn array_of(mdstat: &str) -> Array {
        crate::mdstat::parse(mdstat).arrays.remove(0)
    }

    #[test]
    fn mdstat_words_stand_in_for_sysfs() {
        let mut a = array_of(
            "md0 : active (auto-read-only) raid1 sdb1[1] sda1[0]\n      \
             1048576 blocks super 1.2 [2/2] [UU]\n\nunused devices: <none>\n",
        );
        assert_eq!(array_state(&a), ArrayState::ReadAuto);
        assert_eq!(sync_action(&a), SyncAction::Idle);
        a.sync = Some(SyncStatus {
            action: SyncKind::Recovery,
            state: SyncState::Delayed,
            percent: None,
            done_kib: None,
            total_kib: None,
            finish_min: None,
            speed_kib_s: None,
        });
        assert_eq!(sync_action(&a), SyncAction::Recover);
        a.sysfs = Some(ArraySysfs {
            array_state: Some(ArrayState::Clean),
            sync_action: Some(SyncAction::Frozen),
            ..Default::default()
        });
        assert_eq!(array_state(&a), ArrayState::Clean);
        assert_eq!(sync_action(&a), SyncAction::Frozen);
    }

    #[test]
    fn an_unknown_consistency_policy_gets_its_own_series() {
        let mut a = array_of(
            "md0 : active raid1 sdb1[1] sda1[0]\n      \
             1048576 blocks super 1.2 [2/2] [UU]\n\nunused devices: <none>\n",
        );
        a.sysfs = Some(ArraySysfs {
            consistency_policy: Some("future".into()),
            ..Default::default()
        });
        let mut b = Builder::default();
        array(&mut b, &a);
        let t = b.encode();
        assert!(
            t.contains("mdpilot_array_consistency_policy{array=\"md0\",policy=\"future\"} 1\n"),
            "{t}"
        );
        assert!(
            t.contains("mdpilot_array_consistency_policy{array=\"md0\",policy=\"bitmap\"} 0\n"),
            "{t}"
        );
    }
}
