//! A stand-in polkit authority (`org.freedesktop.PolicyKit1.Authority.CheckAuthorization`) on a
//! test's private bus: answers yes or no and records every question and who asked it. Point the
//! service at it with `DBUS_SYSTEM_BUS_ADDRESS=<the bus>` (the service asks "the system bus").

use super::bus::Bus;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use zbus::zvariant::OwnedValue;

/// One CheckAuthorization the fake polkit answered.
#[derive(Debug, Clone)]
pub struct Asked {
    /// Subject kind and uid: `unix-process uid=65534`.
    pub subject: String,
    /// The subject's `start-time` (clock ticks since boot; 0 when absent).
    pub start_time: u64,
    /// The action id.
    pub action: String,
    /// The details (`method`, `device`, `polkit.message`, ...).
    pub details: HashMap<String, String>,
    /// CheckAuthorization flags (1 = AllowUserInteraction).
    pub flags: u32,
}

/// polkit's `(sa{sv})` subject: kind and its details (`pid`, `start-time`, `uid`).
type Subject = (String, HashMap<String, OwnedValue>);

/// Called with each question while the fake polkit is "deciding" (before it sleeps `delay`):
/// the hostile caller's moment (re-point a link, disconnect).
pub type OnAsk = Arc<dyn Fn(&Asked) + Send + Sync>;

/// How the fake polkit answers: yes or no, after `delay` (an admin typing a password), with an
/// optional hook run when the question arrives.
#[derive(Clone, Default)]
pub struct Behaviour {
    /// The answer (`is_authorized`).
    pub allow: bool,
    /// How long each CheckAuthorization that allows user interaction takes before it answers
    /// (one without the flag is answered at once, as polkit does).
    pub delay: std::time::Duration,
    /// Run as each question arrives, before the delay.
    pub on_ask: Option<OnAsk>,
}

/// The served object: the answer and the records.
pub struct FakePolkit {
    behaviour: Behaviour,
    asked: Arc<Mutex<Vec<Asked>>>,
    askers: Arc<Mutex<BTreeSet<String>>>,
    #[allow(dead_code)] // read by the authorization race tests
    cancelled: Arc<Mutex<Vec<String>>>,
}

/// A served [`FakePolkit`]: its connection (owning `org.freedesktop.PolicyKit1`) and records.
pub struct PolkitHandle {
    _conn: zbus::Connection,
    asked: Arc<Mutex<Vec<Asked>>>,
    askers: Arc<Mutex<BTreeSet<String>>>,
    cancelled: Arc<Mutex<Vec<String>>>,
}

impl PolkitHandle {
    /// Every question so far, in order.
    pub fn asked(&self) -> Vec<Asked> {
        self.asked.lock().unwrap().clone()
    }

    /// The unique bus names that asked (one per service connection to polkit).
    pub fn askers(&self) -> BTreeSet<String> {
        self.askers.lock().unwrap().clone()
    }

    /// The cancellation ids passed to `CancelCheckAuthorization`, in order.
    #[allow(dead_code)] // for the authorization race tests
    pub fn cancelled(&self) -> Vec<String> {
        self.cancelled.lock().unwrap().clone()
    }
}

impl FakePolkit {
    /// Serves a fake authority answering `allow` on `bus`.
    pub async fn serve(bus: &Bus, allow: bool) -> PolkitHandle {
        Self::serve_with(
            bus,
            Behaviour {
                allow,
                ..Behaviour::default()
            },
        )
        .await
    }

    /// Serves a fake authority that answers as `behaviour` says on `bus`.
    pub async fn serve_with(bus: &Bus, behaviour: Behaviour) -> PolkitHandle {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let askers = Arc::new(Mutex::new(BTreeSet::new()));
        let cancelled = Arc::new(Mutex::new(Vec::new()));
        let conn = zbus::connection::Builder::address(bus.address.as_str())
            .unwrap()
            .serve_at(
                "/org/freedesktop/PolicyKit1/Authority",
                FakePolkit {
                    behaviour,
                    asked: asked.clone(),
                    askers: askers.clone(),
                    cancelled: cancelled.clone(),
                },
            )
            .unwrap()
            .name("org.freedesktop.PolicyKit1")
            .unwrap()
            .build()
            .await
            .unwrap();
        PolkitHandle {
            _conn: conn,
            asked,
            askers,
            cancelled,
        }
    }
}

#[zbus::interface(name = "org.freedesktop.PolicyKit1.Authority")]
impl FakePolkit {
    async fn check_authorization(
        &self,
        subject: Subject,
        action_id: String,
        details: HashMap<String, String>,
        flags: u32,
        _cancellation_id: String,
        #[zbus(header)] header: zbus::message::Header<'_>,
    ) -> (bool, bool, HashMap<String, String>) {
        if let Some(s) = header.sender() {
            self.askers.lock().unwrap().insert(s.to_string());
        }
        let uid = subject
            .1
            .get("uid")
            .and_then(|v| i32::try_from(v.try_clone().ok()?).ok())
            .unwrap_or(-1);
        let start_time = subject
            .1
            .get("start-time")
            .and_then(|v| u64::try_from(v.try_clone().ok()?).ok())
            .unwrap_or(0);
        let asked = Asked {
            subject: format!("{} uid={uid}", subject.0),
            start_time,
            action: action_id,
            details,
            flags,
        };
        self.asked.lock().unwrap().push(asked.clone());
        if let Some(hook) = &self.behaviour.on_ask {
            hook(&asked);
        }
        // As polkit: only a question that allows interaction waits for a person (an agent);
        // without AllowUserInteraction the answer comes at once.
        if !self.behaviour.delay.is_zero() && flags & 1 != 0 {
            tokio::time::sleep(self.behaviour.delay).await;
        }
        (self.behaviour.allow, false, HashMap::new())
    }

    fn cancel_check_authorization(&self, cancellation_id: String) {
        self.cancelled.lock().unwrap().push(cancellation_id);
    }
}
