//! A wipe job's plan as structured data: the `PlanData` property (`a{sv}`) of
//! `org.mdpilot.MdPilot1.Job`, beside the prose `Plan` ([`crate::wipe::plan::Plan::describe`]).
//! Built from the planner's [`Plan`]; sizes in bytes, limits in KiB/s.

use crate::policy::{LeaseRequest, Limits};
use crate::wipe::plan::{Data, Op, Plan, ResyncAction};
use std::collections::HashMap;
use zbus::zvariant::{OwnedValue, Value};

/// The plan as structured data: the job's `PlanData` property, `a{sv}` with these keys (all
/// present unless said otherwise; sizes in bytes):
///
/// - `method` (s): `zero`, `random`, `discard`, `zeroout`, `signatures` (StartWipe's option).
/// - `operation` (s): what is done to each range: `write`, `zeroout` (BLKZEROOUT) or
///   `discard` (BLKDISCARD).
/// - `data` (s, only with `write`): `zero`, `random`, `pattern`, `file`, `stream`.
/// - `open-flags` (s): `O_WRONLY|O_EXCL|O_DIRECT` (open(2) flags; `O_CLOEXEC` always).
/// - `block-bytes` (t): bytes per write request and verify read.
/// - `step-bytes` (t): bytes per BLKZEROOUT/BLKDISCARD request.
/// - `queue-depth` (u): requests in flight.
/// - `ranges` (u): how many byte ranges; `total-bytes` (t): their sum (= `Bytes`).
/// - `resync-action` (s): `leave`, or `freeze-and-skip` (md/sync_action frozen during the
///   wipe, the initial resync skipped after a complete one); `resync-array` (s, only with
///   `freeze-and-skip`): the array's kernel name.
/// - `verify` (b): read back and compare.
/// - `leases` (aa{sv}): the speed-limit leases held for the job's life, one dict each:
///   `holder` (s), `kind` (s), `min`/`max` (t, KiB/s, global `speed_limit_{min,max}`, present
///   only when set) and `arrays` (a{sa{st}}: kernel name -> {`min`, `max`} KiB/s, only the set
///   keys; present only when the lease has per-array limits).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlanData {
    /// `method`.
    pub method: String,
    /// `operation`.
    pub operation: String,
    /// `data`.
    pub data: Option<String>,
    /// `open-flags`.
    pub open_flags: String,
    /// `block-bytes`.
    pub block_bytes: u64,
    /// `step-bytes`.
    pub step_bytes: u64,
    /// `queue-depth`.
    pub queue_depth: u32,
    /// `ranges`.
    pub ranges: u32,
    /// `total-bytes`.
    pub total_bytes: u64,
    /// `resync-action`.
    pub resync_action: String,
    /// `resync-array`.
    pub resync_array: Option<String>,
    /// `verify`.
    pub verify: bool,
    /// `leases`.
    pub leases: Vec<LeaseRequest>,
}

impl PlanData {
    /// The structured form of `plan` (no key material: `random`'s seed stays out).
    pub fn from_plan(plan: &Plan) -> PlanData {
        let (operation, data) = match &plan.op {
            Op::Write(d) => (
                "write",
                Some(match d {
                    Data::Zero => "zero",
                    Data::Random(_) => "random",
                    Data::Pattern(_) => "pattern",
                    Data::RepeatFile { .. } => "file",
                    Data::Stream(_) => "stream",
                }),
            ),
            Op::ZeroOut => ("zeroout", None),
            Op::Discard => ("discard", None),
        };
        let (resync_action, resync_array) = match &plan.resync {
            ResyncAction::Leave => ("leave", None),
            ResyncAction::FreezeAndSkip { array } => ("freeze-and-skip", Some(array.clone())),
        };
        PlanData {
            method: plan.method.name().to_string(),
            operation: operation.to_string(),
            data: data.map(str::to_string),
            open_flags: plan.open.describe(),
            block_bytes: plan.block_bytes,
            step_bytes: plan.step_bytes,
            queue_depth: u32::try_from(plan.queue_depth).unwrap_or(u32::MAX),
            ranges: u32::try_from(plan.ranges.len()).unwrap_or(u32::MAX),
            total_bytes: plan.total_bytes(),
            resync_action: resync_action.to_string(),
            resync_array,
            verify: plan.verify,
            leases: plan.leases.clone(),
        }
    }

    /// The `a{sv}` described on [`PlanData`].
    pub fn to_dict(&self) -> HashMap<String, OwnedValue> {
        fn limits(l: &Limits) -> HashMap<String, Value<'static>> {
            let mut d = HashMap::new();
            if let Some(m) = l.min {
                d.insert("min".to_string(), Value::U64(m));
            }
            if let Some(m) = l.max {
                d.insert("max".to_string(), Value::U64(m));
            }
            d
        }
        let leases: Vec<HashMap<String, Value<'static>>> = self
            .leases
            .iter()
            .map(|l| {
                let mut d = limits(&l.global);
                d.insert("holder".to_string(), Value::from(l.holder.clone()));
                d.insert("kind".to_string(), Value::from(l.kind.as_str().to_string()));
                if !l.arrays.is_empty() {
                    let arrays: HashMap<String, HashMap<String, u64>> = l
                        .arrays
                        .iter()
                        .map(|(a, lim)| {
                            let mut m = HashMap::new();
                            if let Some(v) = lim.min {
                                m.insert("min".to_string(), v);
                            }
                            if let Some(v) = lim.max {
                                m.insert("max".to_string(), v);
                            }
                            (a.clone(), m)
                        })
                        .collect();
                    d.insert("arrays".to_string(), Value::from(arrays));
                }
                d
            })
            .collect();
        let mut v: Vec<(&str, Value<'static>)> = vec![
            ("method", Value::from(self.method.clone())),
            ("operation", Value::from(self.operation.clone())),
            ("open-flags", Value::from(self.open_flags.clone())),
            ("block-bytes", Value::U64(self.block_bytes)),
            ("step-bytes", Value::U64(self.step_bytes)),
            ("queue-depth", Value::U32(self.queue_depth)),
            ("ranges", Value::U32(self.ranges)),
            ("total-bytes", Value::U64(self.total_bytes)),
            ("resync-action", Value::from(self.resync_action.clone())),
            ("verify", Value::Bool(self.verify)),
            ("leases", Value::from(leases)),
        ];
        if let Some(d) = &self.data {
            v.push(("data", Value::from(d.clone())));
        }
        if let Some(a) = &self.resync_array {
            v.push(("resync-array", Value::from(a.clone())));
        }
        v.into_iter()
            .filter_map(|(k, v)| Some((k.to_string(), OwnedValue::try_from(v).ok()?)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Owner;

    #[test]
    fn plan_data_leases_carry_only_the_set_limits() {
        let d = PlanData {
            method: "zero".into(),
            operation: "write".into(),
            data: Some("zero".into()),
            leases: vec![LeaseRequest {
                holder: "wipe-job-1".into(),
                kind: crate::policy::LeaseKind::WipeJob,
                owner: Owner::None,
                global: Limits {
                    min: Some(0),
                    max: None,
                    io_depth: None,
                },
                arrays: std::collections::BTreeMap::from([(
                    "md1".to_string(),
                    Limits {
                        min: None,
                        max: Some(5000),
                        io_depth: None,
                    },
                )]),
            }],
            ..PlanData::default()
        }
        .to_dict();
        assert_eq!(
            String::try_from(d["data"].try_clone().unwrap()).unwrap(),
            "zero"
        );
        assert!(!d.contains_key("resync-array"));
        type Lease = HashMap<String, OwnedValue>;
        let leases = <Vec<Lease>>::try_from(d["leases"].try_clone().unwrap()).unwrap();
        let l = &leases[0];
        assert_eq!(u64::try_from(l["min"].try_clone().unwrap()).unwrap(), 0);
        assert!(!l.contains_key("max"), "unset max stays absent");
        assert_eq!(
            String::try_from(l["kind"].try_clone().unwrap()).unwrap(),
            "wipe-job"
        );
        let arrays =
            <HashMap<String, HashMap<String, u64>>>::try_from(l["arrays"].try_clone().unwrap())
                .unwrap();
        assert_eq!(arrays["md1"], HashMap::from([("max".to_string(), 5000)]));
    }
}
