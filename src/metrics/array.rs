//! The per-array families (`mdpilot_array_*`) of one [`Array`]: sysfs values where the model
//! has them, else the nearest `/proc/mdstat` reading. Pure.

use super::families::{
    esc, int, Builder, Labels, Value, ARRAY_STATES, CONSISTENCY_POLICIES, MEMBER_DOWN,
    MEMBER_WRITE_MOSTLY, SYNC_ACTIONS, WRITE_INTENT_BITMAPS,
};
use crate::model::{
    Array, ArrayState, ArrayWarning, ConsistencyPolicy, HeaderState, MemberRole, MemberState,
    SyncAction,
};
use crate::vocab::MEMBER_ACTIVE;

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

/// Adds the samples of every `mdpilot_array_*` family for `a`; `global_min_kib_s` is the
/// global `speed_limit_min` (the estimate's floor where the array's own is not read).
pub fn array(b: &mut Builder, a: &Array, global_min_kib_s: Option<u64>) {
    let sys = a.sysfs.as_ref();
    let name = esc(&a.name);
    let arr = || -> Labels { vec![("array", name.clone())] };
    let level = a.level().map(|l| l.to_string()).unwrap_or_default();
    let level = level.as_str();
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
                esc(&a.uuid().map(|u| u.to_string()).unwrap_or_default()),
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
        a.array_state().as_str(),
    );
    if let Some(kib) = a.size_kib {
        b.add(
            "mdpilot_array_size_bytes",
            arr(),
            int(kib.saturating_mul(1024)),
        );
    }
    if let Some(n) = a.raid_disks() {
        b.add("mdpilot_array_raid_disks", arr(), int(n.into()));
    }
    if let Some(d) = a.degraded() {
        b.add("mdpilot_array_degraded", arr(), int(d.into()));
    }
    members(b, a, &name);
    bitmap(b, a, &name, global_min_kib_s);
    if let Some(p) = sys.and_then(|s| s.consistency_policy.as_ref().map(|p| p.as_str())) {
        state_set(
            b,
            "mdpilot_array_consistency_policy",
            &name,
            "policy",
            CONSISTENCY_POLICIES.iter().map(ConsistencyPolicy::as_str),
            p,
        );
    }
    state_set(
        b,
        "mdpilot_array_sync_action",
        &name,
        "action",
        SYNC_ACTIONS.iter().map(SyncAction::as_str),
        a.sync_action().as_str(),
    );
    sync(b, a, arr);
    if let Some(m) = sys.and_then(|s| s.mismatch_cnt) {
        b.add("mdpilot_array_mismatch_sectors", arr(), int(m));
    }
    limits(b, a, &name);
}

/// The write-intent bitmap (redundant arrays), `md/logical_block_size`, the array's warnings
/// and, where the advisor warns, the full resync estimate ([`Array::warnings`]).
fn bitmap(b: &mut Builder, a: &Array, name: &str, global_min_kib_s: Option<u64>) {
    if a.is_redundant() {
        state_set(
            b,
            "mdpilot_array_write_intent_bitmap",
            name,
            "bitmap",
            WRITE_INTENT_BITMAPS.iter().map(|w| w.as_str()),
            a.write_intent_bitmap().as_str(),
        );
    }
    if let Some(l) = a.sysfs.as_ref().and_then(|s| s.md_logical_block_size) {
        let labels = vec![("array", name.to_string())];
        b.add("mdpilot_array_md_logical_block_size_bytes", labels, int(l));
    }
    for w in a.warnings(global_min_kib_s) {
        let kind = match &w {
            ArrayWarning::NoBitmap { estimate, .. } => {
                if let Some(e) = estimate {
                    let labels = vec![
                        ("array", name.to_string()),
                        ("basis", e.basis.as_str().to_string()),
                    ];
                    b.add(
                        "mdpilot_array_full_resync_estimate_seconds",
                        labels,
                        Value::Float(e.seconds),
                    );
                }
                "no_bitmap"
            }
            ArrayWarning::LogicalBlockSize { .. } => "logical_block_size",
        };
        let labels = vec![("array", name.to_string()), ("kind", kind.to_string())];
        b.add("mdpilot_array_warning", labels, Value::Int(1));
    }
}

/// The array's `md/sync_speed_{min,max}`: bytes/s and whether local.
fn limits(b: &mut Builder, a: &Array, name: &str) {
    let sys = a.sysfs.as_ref();
    for (bound, lim) in [
        ("min", sys.and_then(|s| s.sync_speed_min)),
        ("max", sys.and_then(|s| s.sync_speed_max)),
    ] {
        let Some(lim) = lim else { continue };
        let labels = vec![("array", name.to_string()), ("bound", bound.to_string())];
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

/// `mdpilot_array_members`: members by role ([`Array::members_with_roles`]: active = in sync,
/// rebuilding, spare, faulty, journal), write-mostly ones, and `down`: the `_` slots of `[UU_]`
/// (empty or not yet in sync). An array that is not active (mdstat's header) has no active
/// member.
fn members(b: &mut Builder, a: &Array, name: &str) {
    let ms = a.members_with_roles();
    let role = |r: MemberRole| ms.iter().filter(|m| m.role == r).count() as u64;
    let active = if a.state == HeaderState::Active {
        role(MemberRole::InSync)
    } else {
        0
    };
    let write_mostly = ms
        .iter()
        .filter(|m| m.states.contains(&MemberState::WriteMostly))
        .count() as u64;
    let down = a
        .member_status
        .as_deref()
        .map_or(0, |s| s.bytes().filter(|&c| c == b'_').count() as u64);
    for (state, n) in [
        (MEMBER_ACTIVE, active),
        (
            MemberRole::Rebuilding.as_str(),
            role(MemberRole::Rebuilding),
        ),
        (MemberRole::Spare.as_str(), role(MemberRole::Spare)),
        (MemberRole::Faulty.as_str(), role(MemberRole::Faulty)),
        (MEMBER_DOWN, down),
        (MEMBER_WRITE_MOSTLY, write_mostly),
        (MemberRole::Journal.as_str(), role(MemberRole::Journal)),
    ] {
        b.add(
            "mdpilot_array_members",
            vec![("array", name.to_string()), ("state", state.into())],
            int(n),
        );
    }
}

/// The running sync's ratio, speed and time left ([`Array::sync_progress`],
/// [`Array::sync_speed_kib_s`], [`Array::sync_remaining_s`]; no samples while none runs).
fn sync(b: &mut Builder, a: &Array, arr: impl Fn() -> Labels) {
    if let Some(p) = a.sync_progress() {
        b.add(
            "mdpilot_array_sync_completed_ratio",
            arr(),
            Value::Float(p.fraction()),
        );
    }
    if let Some(v) = a.sync_speed_kib_s() {
        b.add(
            "mdpilot_array_sync_speed_bytes_per_second",
            arr(),
            int(v.saturating_mul(1024)),
        );
    }
    if let Some(r) = a.sync_remaining_s() {
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
    use crate::model::{ArraySysfs, SyncKind, SyncState, SyncStatus};

    fn array_of(mdstat: &str) -> Array {
        crate::mdstat::parse(mdstat).arrays.remove(0)
    }

    #[test]
    fn mdstat_words_stand_in_for_sysfs() {
        let mut a = array_of(
            "md0 : active (auto-read-only) raid1 sdb1[1] sda1[0]\n      \
             1048576 blocks super 1.2 [2/2] [UU]\n\nunused devices: <none>\n",
        );
        assert_eq!(a.array_state(), ArrayState::ReadAuto);
        assert_eq!(a.sync_action(), SyncAction::Idle);
        a.sync = Some(SyncStatus {
            action: SyncKind::Recovery,
            state: SyncState::Delayed,
            percent: None,
            done_kib: None,
            total_kib: None,
            finish_min: None,
            speed_kib_s: None,
        });
        assert_eq!(a.sync_action(), SyncAction::Recover);
        a.sysfs = Some(ArraySysfs {
            array_state: Some(ArrayState::Clean),
            sync_action: Some(SyncAction::Frozen),
            ..Default::default()
        });
        assert_eq!(a.array_state(), ArrayState::Clean);
        assert_eq!(a.sync_action(), SyncAction::Frozen);
    }

    #[test]
    fn an_unknown_consistency_policy_gets_its_own_series() {
        let mut a = array_of(
            "md0 : active raid1 sdb1[1] sda1[0]\n      \
             1048576 blocks super 1.2 [2/2] [UU]\n\nunused devices: <none>\n",
        );
        a.sysfs = Some(ArraySysfs {
            consistency_policy: Some(crate::model::ConsistencyPolicy::from("future")),
            ..Default::default()
        });
        let mut b = Builder::default();
        array(&mut b, &a, None);
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
