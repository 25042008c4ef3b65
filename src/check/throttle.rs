//! The throttle of a check: a lease `check-<array>` (kind admin, no owner) on the array's
//! `md/sync_speed_max`, from an explicit `max` or the config's `check_max` (and
//! `check_max_working` inside working hours), taken at start and resume, released on pause,
//! cancel and when the check is seen finished, and rewritten by the service's upkeep when the
//! working-hours band changes.

use super::CheckState;
use crate::config::Config;
use crate::host::Root;
use crate::model::{Array, MdStat};
use crate::policy::{LeaseKind, LeaseRequest, Limits, Owner, Policy, PolicyError};
use std::collections::BTreeMap;

/// The throttle lease's holder id for `array`: `check-<array>`
/// ([`crate::policy::Holder::check_throttle`]).
pub fn holder(array: &str) -> String {
    crate::policy::Holder::check_throttle(array).to_string()
}

/// Rewrites the `check-<array>` lease of each running check that follows the config's throttle
/// (its record has no explicit `max`) when [`configured_max`] at `now_s` differs from the lease
/// (working hours began or ended). `key` is the record key of an array. Failures are logged;
/// the next look tries again.
pub(super) fn rethrottle(
    root: &Root,
    config: &Config,
    model: &MdStat,
    st: &CheckState,
    key: &dyn Fn(&Array) -> String,
    now_s: u64,
) {
    let policy = Policy::new(root.clone(), config.policy_settings(root));
    let Ok(view) = policy.show() else {
        return;
    };
    for a in &model.arrays {
        let Some(rec) = st.array.get(&key(a)) else {
            continue;
        };
        let Some(action) = rec.running else {
            continue;
        };
        let now_action = a.sysfs.as_ref().and_then(|s| s.sync_action.as_ref());
        if rec.max.is_some() || now_action.map(|w| w.as_str()) != Some(action.as_str()) {
            continue;
        }
        let h = holder(&a.name);
        let have = view
            .leases
            .iter()
            .find(|l| l.holder == h)
            .and_then(|l| l.arrays.get(&a.name))
            .and_then(|l| l.max);
        let want = configured_max(config, now_s);
        if have == want {
            continue;
        }
        tracing::info!(array = %a.name, from = ?have, to = ?want, "check throttle follows working hours");
        let r = match want {
            Some(_) => throttle(&policy, &a.name, want),
            None => unthrottle(&policy, &a.name),
        };
        if let Err(e) = r {
            tracing::warn!(
                "{}: check throttle: {}",
                a.name,
                crate::error::error_chain(&e)
            );
        }
    }
}

/// The config's throttle at `now` (Unix seconds, local time): [`crate::config::CheckConfig::check_max_at`].
pub(super) fn configured_max(config: &Config, now: u64) -> Option<u64> {
    let t = i64::try_from(now).unwrap_or(i64::MAX);
    config.check.check_max_at(t, crate::host::utc_offset_s(t))
}

pub(super) fn throttle(policy: &Policy, array: &str, max: Option<u64>) -> Result<(), PolicyError> {
    let Some(max) = max else {
        return Ok(());
    };
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
            },
        )]),
    })?;
    Ok(())
}

pub(super) fn unthrottle(policy: &Policy, array: &str) -> Result<(), PolicyError> {
    let h = holder(array);
    if policy.show()?.leases.iter().any(|l| l.holder == h) {
        policy.release(&h)?;
    }
    Ok(())
}
