//! The service's side of [`crate::events`]: each new model goes through the classifier; each
//! event is logged with journald-style fields and handed to the configured program.
//!
//! Log: one record per event at `error` (critical), `warn` (warning) or `info`, with the fields
//! `MESSAGE_ID` (fixed per event type, [`crate::events::EventKind::message_id`]), `ARRAY` (`md0`),
//! `DEVICE` (member, empty when none), `MD_EVENT` (`Rebuild40`), `MD_UUID`, and the text line as
//! the message. Under systemd, stderr goes to the journal.
//!
//! Program (`[events] program`): run as `PROGRAM EVENT /dev/mdN [/dev/MEMBER]`, the argument
//! order of `mdadm --monitor --program` (mdadm's `alert()`), with `MDPILOT_EVENT_JSON` holding
//! the event as JSON. One at a time in event order, as mdadm does; a run that takes longer than
//! [`PROGRAM_TIMEOUT`] is killed. A failing program is logged, never fatal.

use crate::events::{Classifier, Event, Severity};
use crate::host::Root;
use crate::model::MdStat;
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

/// How long one run of the event program may take before it is killed.
pub const PROGRAM_TIMEOUT: Duration = Duration::from_secs(60);

/// Classifier plus outputs, owned by the service loop.
pub struct EventSink {
    classifier: Classifier,
    program: Option<UnboundedSender<Event>>,
}

impl EventSink {
    /// A sink; with `program`, a task runs it for each event (needs a tokio runtime).
    pub fn new(program: Option<PathBuf>) -> Self {
        let program = program.map(|p| {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
            tokio::spawn(async move {
                while let Some(e) = rx.recv().await {
                    run_program(&p, &e).await;
                }
            });
            tx
        });
        EventSink {
            classifier: Classifier::new(),
            program,
        }
    }

    /// Classifies `model` (read under `root`, for `md/sync_min`), logs and dispatches the
    /// events; returns them (for tests and callers that publish them).
    pub fn feed(&mut self, root: &Root, model: &MdStat) -> Vec<Event> {
        let views = crate::cli::monitor::event_views(root, model);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let events = self.classifier.observe(&views, now);
        for e in &events {
            log(e);
            if let Some(tx) = &self.program {
                let _ = tx.send(e.clone());
            }
        }
        events
    }
}

fn log(e: &Event) {
    let id = e.kind.message_id();
    let name = e.kind.name();
    let dev = e.device.as_deref().unwrap_or("");
    let uuid = e.uuid.as_deref().unwrap_or("");
    let line = e.line();
    match e.severity {
        Severity::Critical => tracing::error!(
            MESSAGE_ID = id, MD_EVENT = %name, ARRAY = %e.array, DEVICE = dev, MD_UUID = uuid,
            "{line}"
        ),
        Severity::Warning => tracing::warn!(
            MESSAGE_ID = id, MD_EVENT = %name, ARRAY = %e.array, DEVICE = dev, MD_UUID = uuid,
            "{line}"
        ),
        Severity::Info => tracing::info!(
            MESSAGE_ID = id, MD_EVENT = %name, ARRAY = %e.array, DEVICE = dev, MD_UUID = uuid,
            "{line}"
        ),
    }
}

/// The program's arguments: event word, `/dev/<array>`, then `/dev/<member>` when there is one.
pub fn program_args(e: &Event) -> Vec<String> {
    let mut a = vec![e.kind.name(), format!("/dev/{}", e.array)];
    if let Some(d) = &e.device {
        a.push(format!("/dev/{d}"));
    }
    a
}

async fn run_program(program: &std::path::Path, e: &Event) {
    let json = serde_json::to_string(e).unwrap_or_default();
    let child = tokio::process::Command::new(program)
        .args(program_args(e))
        .env("MDPILOT_EVENT_JSON", json)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(err) => {
            tracing::warn!("event program {}: {err}", program.display());
            return;
        }
    };
    match tokio::time::timeout(PROGRAM_TIMEOUT, child.wait()).await {
        Ok(Ok(st)) if st.success() => {}
        Ok(Ok(st)) => tracing::warn!(
            "event program {} for {}: {st}",
            program.display(),
            e.kind.name()
        ),
        Ok(Err(err)) => tracing::warn!("event program {}: {err}", program.display()),
        Err(_) => {
            let _ = child.kill().await;
            tracing::warn!(
                "event program {} for {} took over {PROGRAM_TIMEOUT:?}: killed",
                program.display(),
                e.kind.name()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = "Personalities : [raid1]\nmd1 : active raid1 loop4[1] loop3[0]\n      1046528 blocks super 1.2 [2/2] [UU]\n\nunused devices: <none>\n";

    #[tokio::test]
    async fn program_gets_mdadm_arguments_in_order() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("calls");
        let script = d.path().join("notify.sh");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\necho \"$@\" \"$(echo \"$MDPILOT_EVENT_JSON\" | cut -c1-20)\" >> {}\n",
                out.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let root = Root::new(d.path());
        let mut sink = EventSink::new(Some(script));
        assert!(sink.feed(&root, &crate::mdstat::parse(OK)).is_empty());
        let failed = OK
            .replace("loop4[1]", "loop4[1](F)")
            .replace("[2/2] [UU]", "[2/1] [U_]");
        let ev = sink.feed(&root, &crate::mdstat::parse(&failed));
        assert_eq!(ev.len(), 2);
        for _ in 0..100 {
            if std::fs::read_to_string(&out)
                .unwrap_or_default()
                .lines()
                .count()
                == 2
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            "Fail /dev/md1 /dev/loop4 {\"event\":\"Fail\",\"arr\nDegradedArray /dev/md1 {\"event\":\"DegradedAr\n"
        );
    }
}
