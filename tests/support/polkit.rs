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
    /// The action id.
    pub action: String,
    /// The details (`method`, `device`, `polkit.message`, ...).
    pub details: HashMap<String, String>,
    /// CheckAuthorization flags (1 = AllowUserInteraction).
    pub flags: u32,
}

/// polkit's `(sa{sv})` subject: kind and its details (`pid`, `start-time`, `uid`).
type Subject = (String, HashMap<String, OwnedValue>);

/// The served object: the answer and the records.
pub struct FakePolkit {
    allow: bool,
    asked: Arc<Mutex<Vec<Asked>>>,
    askers: Arc<Mutex<BTreeSet<String>>>,
}

/// A served [`FakePolkit`]: its connection (owning `org.freedesktop.PolicyKit1`) and records.
pub struct PolkitHandle {
    _conn: zbus::Connection,
    asked: Arc<Mutex<Vec<Asked>>>,
    askers: Arc<Mutex<BTreeSet<String>>>,
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
}

impl FakePolkit {
    /// Serves a fake authority answering `allow` on `bus`.
    pub async fn serve(bus: &Bus, allow: bool) -> PolkitHandle {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let askers = Arc::new(Mutex::new(BTreeSet::new()));
        let conn = zbus::connection::Builder::address(bus.address.as_str())
            .unwrap()
            .serve_at(
                "/org/freedesktop/PolicyKit1/Authority",
                FakePolkit {
                    allow,
                    asked: asked.clone(),
                    askers: askers.clone(),
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
        }
    }
}

#[zbus::interface(name = "org.freedesktop.PolicyKit1.Authority")]
impl FakePolkit {
    fn check_authorization(
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
        self.asked.lock().unwrap().push(Asked {
            subject: format!("{} uid={uid}", subject.0),
            action: action_id,
            details,
            flags,
        });
        (self.allow, false, HashMap::new())
    }
}
