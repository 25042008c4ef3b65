//! The pressure throttle of resync and recovery, where an admin opts in (`[resync]
//! pressure_target`): while an array runs one of `[resync] actions` (`resync` and `recovery`
//! by default; `reshape` where named), the io-pressure controller of checks
//! ([`crate::pressure::decide`], called in one place: [`controller`]) drives the array's
//! `md/sync_speed_max` through the lease `resync-<array>` (kind admin, no owner:
//! [`crate::policy::Holder::resync_throttle`]). Without the opt-in md's own limits apply, as
//! they always did: these syncs restore redundancy.
//!
//! The throttle never fights a lease that asks for priority: while any other live lease
//! (the installer's, `policy apply`, `AcquirePriority`, `SetArraySpeedLimits`, a wipe job's)
//! sets the global `speed_limit_{min,max}` or this array's `sync_speed_{min,max}`, it holds
//! no lease and says so ([`priority_lease`]). Leases combine by the lowest max
//! ([`crate::policy::lease::targets`]), so holding one then would slow what the admin boosted.
//!
//! The lease is released when the sync ends (or is no longer covered), when the opt-in goes
//! (a reload), and at the service's stop ([`release_all`]); the policy restores the
//! original `sync_speed_max` each time. Decisions are kept in the runtime file
//! `resync-throttle.json` (one owner: this module), shown by the Array's `ResyncThrottle`
//! property, `mdpilot status` and the metrics (`throttle="resync"`).

use crate::config::{Config, ResyncConfig};
use crate::host::Root;
use crate::model::{Array, MdStat, SyncKind};
use crate::policy::{
    Holder, LeaseKind, LeaseRequest, LeaseView, Limits, Owner, Policy, PolicyError, PolicyView,
};
use crate::pressure::{confirm, decide, sample, Decision, Mark, Reading, Stall, State, Tuning};
use crate::sysfs::pressure::{IoPressure, PsiUnavailable};
use std::collections::{BTreeMap, BTreeSet};

pub use crate::pressure::Note;

/// The notes of every array under the resync throttle, by kernel name.
pub type Notes = crate::throttle_notes::Notes;

/// [`Note::decision`] while the throttle stands aside for another lease ([`priority_lease`]):
/// no lease held, `limit_kib_s` 0.
pub const ASIDE: &str = "aside";
/// [`Note::decision`] without io pressure to read (no PSI): no lease held, md's own limits.
pub const NO_PRESSURE: &str = "off";

/// The lease's holder id for `array` (kernel name): `resync-<array>`.
pub fn holder(array: &str) -> String {
    Holder::resync_throttle(array).to_string()
}

/// The resync throttle's runtime file of [`Note`]s ([`crate::throttle_notes`]):
/// `resync-throttle.json` beside the policy's state file (default
/// `/run/mdpilot/resync-throttle.json`); a missing or unparsable file loads as no notes.
pub const NOTES: crate::throttle_notes::NotesFile =
    crate::throttle_notes::NotesFile("resync-throttle.json");

/// Which sync of `a` the opt-in covers: its running sync's `/proc/mdstat` word
/// ([`crate::model::SyncAction::running_kind`] of [`Array::sync_action`]) when `cfg` has a
/// `pressure_target` and lists that word in `actions`; `None` otherwise (idle, frozen, a check
/// or repair, an md-cluster peer's `recover`, a reshape unless named). A degraded array
/// rebuilding is covered like any other: the floor keeps it moving.
pub fn covered(cfg: &ResyncConfig, a: &Array) -> Option<SyncKind> {
    cfg.pressure_target?;
    let kind = a.sync_action().running_kind()?;
    let ours = matches!(
        kind,
        SyncKind::Resync | SyncKind::Recovery | SyncKind::Reshape
    );
    (ours && cfg.actions.contains(&kind)).then_some(kind)
}

/// The lease the throttle stands aside for on `array` (kernel name): the first live lease in
/// `view` that is not a pressure throttle ([`Holder::is_throttle`]) and sets a global speed
/// limit (`speed_limit_min`/`max`) or one of `array`'s (`sync_speed_min`/`max`). `None`: the
/// throttle may hold its own. A lease on `sync_io_depth` only, or on other arrays, does not
/// count.
pub fn priority_lease<'a>(view: &'a PolicyView, array: &str) -> Option<&'a LeaseView> {
    let speeds = |l: &Limits| l.min.is_some() || l.max.is_some();
    view.leases.iter().find(|l| {
        !l.dead
            && !Holder::parse(&l.holder).is_throttle()
            && (speeds(&l.global) || l.arrays.get(array).is_some_and(speeds))
    })
}

/// One look's inputs: `/proc/pressure/io` (or why it is missing), read at `now_ms` (Unix ms,
/// the interval's end) during the look at `now_s` (Unix s).
#[derive(Debug, Clone)]
pub struct Look {
    /// The pressure file's values.
    pub pressure: Result<IoPressure, PsiUnavailable>,
    /// When it was read, Unix milliseconds.
    pub now_ms: u64,
    /// The look's time, Unix seconds.
    pub now_s: u64,
}

/// The controller's one call: the decision from the lease's limit now (`have`, KiB/s; `None`
/// before the first decision), the last note (`old`: its stall counters are the base of this
/// look's interval, its quiet looks the controller's state) and the pressure read now, with the
/// stall counters to keep ([`Mark`]). `None`: too soon after the last look
/// ([`crate::pressure::MIN_INTERVAL_MS`]), no decision. Kept to one function so a change of
/// the controller's inputs lands in one place.
pub fn controller(
    tu: &Tuning,
    p: &IoPressure,
    now_ms: u64,
    have: Option<u64>,
    old: Option<&Note>,
) -> Option<(Decision, Mark)> {
    let mark = Mark {
        some_total_us: p.some_total_us,
        full_total_us: p.full_total_us,
        at_ms: now_ms,
    };
    let avg10 = match tu.target.stall {
        Stall::Full => p.full_avg10,
        Stall::Some => p.some_avg10,
    };
    let Reading::Sample(s) = sample(
        tu.target.stall,
        old.and_then(|n| n.mark.as_ref()),
        &mark,
        avg10,
    ) else {
        return None;
    };
    let prev = State {
        limit_kib_s: have,
        quiet_looks: old.map_or(0, |n| n.quiet_looks),
    };
    Some((decide(tu, &prev, Ok(s), tu.ceiling_kib_s), mark))
}

/// What the throttle does for one covered array this look.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Hold the lease at this note's limit (and io depth).
    Hold(Note),
    /// Hold no lease: the note says why ([`ASIDE`], [`NO_PRESSURE`]).
    Without(Note),
}

/// The plan for `a`, which runs `kind` under the opt-in (`tu`): aside for another lease in
/// `view`, without PSI no lease, else the controller's decision read back ([`confirm`]); a
/// look too soon after the last keeps the last held note. `have`: the `resync-<array>`
/// lease's max now, KiB/s; `old`: the last note. Pure.
pub fn plan(
    tu: &Tuning,
    kind: &SyncKind,
    a: &Array,
    view: &PolicyView,
    look: &Look,
    have: Option<u64>,
    old: Option<&Note>,
) -> Plan {
    let p = look.pressure.as_ref().ok();
    let without = |decision: &str, why: String| {
        Plan::Without(Note {
            decision: decision.to_string(),
            why,
            full_avg10: p.map(|p| p.full_avg10),
            some_avg10: p.map(|p| p.some_avg10),
            changed_s: old
                .filter(|n| n.decision == decision)
                .map_or(look.now_s, |n| n.changed_s),
            decisions: old.map(|n| n.decisions.clone()).unwrap_or_default(),
            mark: p.map(|p| Mark {
                some_total_us: p.some_total_us,
                full_total_us: p.full_total_us,
                at_ms: look.now_ms,
            }),
            ..Note::default()
        })
    };
    if let Some(l) = priority_lease(view, &a.name) {
        let why = format!(
            "{kind} not throttled: the lease {} ({}) sets the speed limits, and it wins",
            l.holder, l.kind
        );
        return without(ASIDE, why);
    }
    let Some(p) = p else {
        let e = look.pressure.as_ref().err().map(|e| e.to_string());
        return without(
            NO_PRESSURE,
            format!("{kind} not throttled: {}", e.unwrap_or_default()),
        );
    };
    // A note without a lease (aside, off) is no state to hold: decide afresh.
    let old = old.filter(|n| n.limit_kib_s > 0 && have.is_some());
    let Some((mut d, mark)) = controller(tu, p, look.now_ms, have, old) else {
        return match old {
            Some(n) => Plan::Hold(n.clone()),
            None => without(NO_PRESSURE, format!("{kind}: no sample yet")),
        };
    };
    // A low sync_io_depth only where the kernel has it (Linux 6.16+), as the check throttle.
    if view.sync_io_depth.is_none() {
        d.io_depth = None;
    }
    Plan::Hold(note_of(tu, kind, a, p, &d, mark, have, old, look.now_s))
}

/// The note of decision `d` on `a` (lease at `have`, last note `old`), read back
/// ([`confirm`]); a change of the limit is counted by its decision code.
#[allow(clippy::too_many_arguments)]
fn note_of(
    tu: &Tuning,
    kind: &SyncKind,
    a: &Array,
    p: &IoPressure,
    d: &Decision,
    mark: Mark,
    have: Option<u64>,
    old: Option<&Note>,
    now_s: u64,
) -> Note {
    let since = old.map_or(0, |n| now_s.saturating_sub(n.changed_s));
    let sys = a.sysfs.as_ref();
    let not_applied = have
        .filter(|&h| h == d.limit_kib_s)
        .and_then(|h| {
            confirm(
                h,
                sys.and_then(|s| s.sync_speed_max).map(|l| l.kib_s),
                a.sync_speed_kib_s(),
                sys.and_then(|s| s.sync_speed_min).map(|l| l.kib_s),
                since,
            )
        })
        .map(|n| n.to_string());
    let mut note = Note {
        limit_kib_s: d.limit_kib_s,
        decision: d.why.code().to_string(),
        why: format!("{kind}: {}", d.explain(&tu.target)),
        pressure_pct: d.why.pct(),
        source: d.signal.map(|s| s.source().to_string()),
        interval_ms: d.signal.and_then(|s| s.interval_ms()),
        full_avg10: Some(p.full_avg10),
        some_avg10: Some(p.some_avg10),
        io_depth: d.io_depth,
        changed_s: old.map_or(now_s, |n| n.changed_s),
        not_applied,
        decisions: old.map(|n| n.decisions.clone()).unwrap_or_default(),
        mark: Some(mark),
        quiet_looks: d.quiet_looks,
    };
    if have != Some(d.limit_kib_s) {
        note.changed_s = now_s;
        *note.decisions.entry(note.decision.clone()).or_default() += 1;
    }
    note
}

/// One look of the service (each step while a sync runs, about 1 s): for every array of
/// `model` whose sync the opt-in covers ([`covered`]), the plan ([`plan`]) is carried out on
/// the `resync-<array>` lease (acquired or changed to the note's limit and io depth), then
/// every other `resync-` lease is released (its sync ended, its array went, the throttle
/// stands aside, the opt-in was removed) and the notes are saved. Without the opt-in and
/// without notes nothing is read. Returns whether the notes changed (the Array properties are
/// published again then). Failures are logged; the next look tries again.
pub fn upkeep(root: &Root, config: &Config, model: &MdStat, now_s: u64) -> bool {
    let tuning = config.resync.pressure_tuning();
    let old = NOTES.load(root, config);
    if tuning.is_none() && old.is_empty() {
        return false;
    }
    let policy = Policy::new(root.clone(), config.policy_settings(root));
    let Ok(view) = policy.show() else {
        return false;
    };
    let look = Look {
        pressure: crate::sysfs::pressure::read_io_pressure(root),
        // Read right after the counters: the interval's end.
        now_ms: crate::host::unix_now_us() / 1000,
        now_s,
    };
    let mut notes = Notes::new();
    let mut keep = BTreeSet::new();
    for a in &model.arrays {
        let (Some(tu), Some(kind)) = (&tuning, covered(&config.resync, a)) else {
            continue;
        };
        let have = lease_limits(&view, &a.name);
        let last = old.get(&a.name);
        let note = match plan(tu, &kind, a, &view, &look, have.0, last) {
            Plan::Hold(n) => {
                keep.insert(holder(&a.name));
                if have != (Some(n.limit_kib_s), n.io_depth) {
                    tracing::info!(array = %a.name, from = ?have.0, to = n.limit_kib_s, decision = %n.decision, "resync throttle: {}", n.why);
                    if let Err(e) = acquire(&policy, &a.name, n.limit_kib_s, n.io_depth) {
                        warn(&a.name, &e);
                    }
                }
                n
            }
            Plan::Without(n) => {
                if last.map(|o| &o.decision) != Some(&n.decision) {
                    tracing::info!(array = %a.name, decision = %n.decision, "resync throttle: {}", n.why);
                }
                n
            }
        };
        notes.insert(a.name.clone(), note);
    }
    release_except(&policy, &view, &keep);
    // The counters move at every look: only what is shown counts as a change.
    let shown = |n: &Notes| -> Vec<(String, u64, String, Option<String>)> {
        n.iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v.limit_kib_s,
                    v.why.clone(),
                    v.not_applied.clone(),
                )
            })
            .collect()
    };
    let changed = shown(&notes) != shown(&old);
    if notes != old {
        NOTES.save(root, config, &notes);
    }
    changed
}

/// Releases every `resync-` lease and drops the notes: the service's stop (the policy
/// restores each array's original `sync_speed_max`). Errors: the policy's.
pub fn release_all(root: &Root, config: &Config) -> Result<(), PolicyError> {
    let policy = Policy::new(root.clone(), config.policy_settings(root));
    let view = policy.show()?;
    for l in &view.leases {
        if matches!(Holder::parse(&l.holder), Holder::ResyncThrottle(_)) {
            tracing::info!(holder = %l.holder, "resync throttle released at the stop");
            policy.release(&l.holder)?;
        }
    }
    NOTES.save(root, config, &Notes::new());
    Ok(())
}

/// The `resync-<array>` lease's max (KiB/s) and io depth (requests) in `view`.
fn lease_limits(view: &PolicyView, array: &str) -> (Option<u64>, Option<u64>) {
    let h = holder(array);
    view.leases
        .iter()
        .find(|l| l.holder == h)
        .and_then(|l| l.arrays.get(array))
        .map_or((None, None), |l| (l.max, l.io_depth))
}

/// Releases the `resync-` leases of `view` not in `keep`; failures are logged.
fn release_except(policy: &Policy, view: &PolicyView, keep: &BTreeSet<String>) {
    for l in &view.leases {
        let Holder::ResyncThrottle(array) = Holder::parse(&l.holder) else {
            continue;
        };
        if keep.contains(&l.holder) {
            continue;
        }
        tracing::info!(array = %array, "resync throttle released: md's own limits again");
        if let Err(e) = policy.release(&l.holder) {
            warn(&array, &e);
        }
    }
}

fn warn(array: &str, e: &PolicyError) {
    tracing::warn!("{array}: resync throttle: {}", crate::error::error_chain(e));
}

/// Takes (or changes) `resync-<array>`: `sync_speed_max` = `max` KiB/s and `sync_io_depth` =
/// `io_depth` (requests; `None`: md's own), kind admin, no owner.
fn acquire(
    policy: &Policy,
    array: &str,
    max: u64,
    io_depth: Option<u64>,
) -> Result<(), PolicyError> {
    policy.acquire(LeaseRequest {
        holder: holder(array),
        kind: LeaseKind::Admin,
        owner: Owner::None,
        global: Limits::default(),
        arrays: BTreeMap::from([(
            array.to_string(),
            Limits {
                min: None,
                max: Some(max),
                io_depth,
            },
        )]),
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::GlobalOriginals;

    const MDSTAT: &str = "Personalities : [raid1] [raid5] [raid6]\n\
md1 : active raid1 sdb1[2] sda1[0]\n      1048512 blocks super 1.2 [2/1] [U_]\n      \
[=>...................]  recovery =  5.0% (52480/1048512) finish=1.0min speed=17493K/sec\n\n\
md2 : active raid5 sde1[2] sdd1[1] sdc1[0]\n      2096128 blocks super 1.2 level 5, 512k chunk, algorithm 2 [3/3] [UUU]\n      \
[==>..................]  resync = 10.0% (104960/1048064) finish=1.0min speed=17493K/sec\n\n\
md3 : active raid5 sdh1[3] sdg1[1] sdf1[0]\n      2096128 blocks super 1.2 level 5, 512k chunk, algorithm 2 [4/4] [UUUU]\n      \
[==>..................]  reshape = 10.0% (104960/1048064) finish=1.0min speed=17493K/sec\n\n\
md4 : active raid1 sdj1[1] sdi1[0]\n      1048512 blocks super 1.2 [2/2] [UU]\n\n\
unused devices: <none>\n";

    fn stat() -> MdStat {
        crate::mdstat::parse(MDSTAT)
    }

    fn array(name: &str) -> Array {
        stat().arrays.into_iter().find(|a| a.name == name).unwrap()
    }

    fn opted_in() -> ResyncConfig {
        ResyncConfig {
            pressure_target: Some("full 5%..10%".parse().unwrap()),
            ..ResyncConfig::default()
        }
    }

    /// (holder, kind, global limits, per-array limits).
    type TestLease<'a> = (&'a str, LeaseKind, Limits, &'a [(&'a str, Limits)]);

    fn view(leases: &[TestLease<'_>]) -> PolicyView {
        PolicyView {
            state_path: "/run/mdpilot/policy.toml".into(),
            speed_limit_min: Some(1000),
            speed_limit_max: Some(200_000),
            sync_io_depth: None,
            originals: GlobalOriginals::default(),
            leases: leases
                .iter()
                .map(|(h, kind, global, arrays)| {
                    LeaseView::new(
                        LeaseRequest {
                            holder: (*h).to_string(),
                            kind: *kind,
                            owner: Owner::None,
                            global: *global,
                            arrays: arrays.iter().map(|(a, l)| ((*a).to_string(), *l)).collect(),
                        },
                        false,
                    )
                })
                .collect(),
            arrays: BTreeMap::new(),
            warnings: vec![],
            originals_unknown: None,
            changes: vec![],
        }
    }

    fn max(v: u64) -> Limits {
        Limits {
            max: Some(v),
            ..Limits::default()
        }
    }

    /// A look at `at_ms` with `full total` (and `some total`) at `total_us` and `avg10`.
    fn look(at_ms: u64, total_us: u64, avg10: f64) -> Look {
        Look {
            pressure: Ok(IoPressure {
                some_avg10: avg10,
                full_avg10: avg10,
                some_total_us: total_us,
                full_total_us: total_us,
            }),
            now_ms: at_ms,
            now_s: at_ms / 1000,
        }
    }

    #[test]
    fn the_opt_in_covers_resync_and_recovery_and_reshape_only_where_named() {
        let off = ResyncConfig::default();
        assert_eq!(covered(&off, &array("md1")), None, "no opt-in: md's own");
        let on = opted_in();
        assert_eq!(covered(&on, &array("md1")), Some(SyncKind::Recovery));
        assert_eq!(covered(&on, &array("md2")), Some(SyncKind::Resync));
        assert_eq!(covered(&on, &array("md3")), None, "reshape not by default");
        assert_eq!(covered(&on, &array("md4")), None, "idle");
        let reshape = ResyncConfig {
            actions: vec![SyncKind::Reshape],
            ..opted_in()
        };
        assert_eq!(covered(&reshape, &array("md3")), Some(SyncKind::Reshape));
        assert_eq!(covered(&reshape, &array("md2")), None);
        // A check or repair (sysfs says so) is the check throttle's, whatever is listed.
        let mut checking = array("md2");
        checking.sysfs = Some(crate::model::ArraySysfs {
            sync_action: Some(crate::model::SyncAction::Check),
            ..Default::default()
        });
        let all = ResyncConfig {
            actions: vec![SyncKind::Resync, SyncKind::Check, SyncKind::Repair],
            ..opted_in()
        };
        assert_eq!(covered(&all, &checking), None);
    }

    #[test]
    fn it_stands_aside_for_every_other_lease_on_the_speed_limits() {
        let none = Limits::default();
        let io = Limits {
            io_depth: Some(128),
            ..Limits::default()
        };
        let boost = Limits {
            min: Some(50_000),
            max: Some(500_000),
            io_depth: None,
        };
        // Its own lease, a check's, one on io depth only, one on another array: none counts.
        let v = view(&[
            ("resync-md1", LeaseKind::Admin, none, &[("md1", max(2000))]),
            ("check-md4", LeaseKind::Admin, none, &[("md4", max(5000))]),
            ("deep", LeaseKind::Admin, io, &[("md1", io)]),
            ("other", LeaseKind::Admin, none, &[("md2", boost)]),
        ]);
        assert_eq!(priority_lease(&v, "md1"), None);
        assert_eq!(priority_lease(&v, "md2").unwrap().holder, "other");
        // The installer's global boost, an admin's per-array limits: they win.
        let v = view(&[("installer", LeaseKind::Installer, boost, &[])]);
        assert_eq!(priority_lease(&v, "md1").unwrap().holder, "installer");
        let v = view(&[("admin-md1", LeaseKind::Admin, none, &[("md1", max(9))])]);
        assert_eq!(priority_lease(&v, "md1").unwrap().holder, "admin-md1");
        // A dead pid owner's lease is about to go: it does not count.
        let mut v = view(&[("installer", LeaseKind::Installer, boost, &[])]);
        v.leases[0].dead = true;
        assert_eq!(priority_lease(&v, "md1"), None);
    }

    #[test]
    fn plans_aside_without_psi_and_the_floor_for_a_degraded_recovery() {
        let tu = opted_in().pressure_tuning().unwrap();
        let md1 = array("md1");
        assert!(
            md1.degraded().unwrap_or(0) > 0,
            "md1 recovers a missing member"
        );
        let kind = SyncKind::Recovery;
        let installer = view(&[(
            "installer",
            LeaseKind::Installer,
            Limits {
                min: Some(50_000),
                ..Limits::default()
            },
            &[],
        )]);
        let busy = look(10_000, 0, 30.0);
        let Plan::Without(n) = plan(&tu, &kind, &md1, &installer, &busy, Some(2000), None) else {
            panic!("held a lease beside the installer's");
        };
        assert_eq!((n.limit_kib_s, n.decision.as_str()), (0, ASIDE));
        assert!(
            n.why.contains("the lease installer (installer)"),
            "{}",
            n.why
        );
        let empty = view(&[]);
        let no_psi = Look {
            pressure: Err(PsiUnavailable::Missing),
            now_ms: 10_000,
            now_s: 10,
        };
        let Plan::Without(n) = plan(&tu, &kind, &md1, &empty, &no_psi, None, None) else {
            panic!("a lease without pressure");
        };
        assert_eq!(n.decision, NO_PRESSURE);
        assert!(n
            .why
            .starts_with("recovery not throttled: no /proc/pressure/io"));
        // Busy (the first look: avg10): the degraded array's recovery goes to the floor.
        let hold = |p: Plan| match p {
            Plan::Hold(n) => n,
            Plan::Without(n) => panic!("no lease: {n:?}"),
        };
        let n = hold(plan(
            &tu,
            &kind,
            &md1,
            &empty,
            &look(10_000, 0, 50.0),
            None,
            None,
        ));
        assert_eq!((n.limit_kib_s, n.decision.as_str()), (1000, "start"));
        assert!(
            n.why.starts_with("recovery: io pressure 50.0%"),
            "{}",
            n.why
        );
        // 99 % over the next second: at the floor, never below (never 0).
        let l = look(11_000, 990_000, 0.0);
        let n2 = hold(plan(&tu, &kind, &md1, &empty, &l, Some(1000), Some(&n)));
        assert_eq!((n2.limit_kib_s, n2.decision.as_str()), (1000, "floor"));
        assert_eq!(
            (n2.source.as_deref(), n2.interval_ms),
            (Some("interval"), Some(1000))
        );
        assert_eq!(n2.changed_s, 10, "held: the change time stays");
        // Too soon after: the last note stays.
        let l = look(11_200, 999_000, 0.0);
        assert_eq!(
            hold(plan(&tu, &kind, &md1, &empty, &l, Some(1000), Some(&n2))),
            n2
        );
        // Quiet: one look holds, the second climbs (and counts the step).
        let l = look(12_000, 990_000, 0.0);
        let n3 = hold(plan(&tu, &kind, &md1, &empty, &l, Some(1000), Some(&n2)));
        assert_eq!((n3.limit_kib_s, n3.decision.as_str()), (1000, "hold"));
        let l = look(13_000, 990_000, 0.0);
        let n4 = hold(plan(&tu, &kind, &md1, &empty, &l, Some(1000), Some(&n3)));
        assert_eq!((n4.limit_kib_s, n4.changed_s), (2000, 13));
        assert_eq!(n4.decisions.get("up"), Some(&1));
        assert_eq!(n4.decisions.get("start"), Some(&1));
    }
}
