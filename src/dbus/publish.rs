//! The Array objects as published: built from the model in one place ([`ArrayObjects::build`]),
//! compared in one place ([`ArrayObjects::diff`]) and put on the bus in one place
//! ([`publish`]). The paths it publishes ([`ArrayObjects::paths`], in [`Shared::arrays`]) are
//! the one map the ObjectManager's `GetManagedObjects` and the jobs' `Objects` read.

use super::array::{ArrayObject, ArrayProps};
use super::check::CheckView;
use super::props::emit_changed;
use super::shared::{ArrayPaths, Shared};
use super::{array_path, ARRAY_IFACE};
use crate::lock::lock;
use crate::model::MdStat;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use zbus::zvariant::OwnedValue;

/// The arrays' properties by object path ([`array_path`]), as the service publishes them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ArrayObjects {
    by_path: BTreeMap<String, ArrayProps>,
}

/// One difference between two [`ArrayObjects`], from [`ArrayObjects::diff`].
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// The object at this path goes away (`InterfacesRemoved`).
    Remove(String),
    /// A new object at this path (`InterfacesAdded`).
    Add(String, ArrayProps),
    /// The object at this path gets these properties; the changed ones by D-Bus name
    /// (`PropertiesChanged`).
    Update(String, ArrayProps, HashMap<&'static str, OwnedValue>),
}

impl ArrayObjects {
    /// The objects of `model`'s arrays: each array's properties from the model
    /// ([`ArrayProps::from_model_in`]), its check properties from `checks`, `BitmapPending`
    /// when its UUID (lower case) is in `bitmap_pending`. Of two arrays at one path (the same
    /// UUID twice) the first is published and the other logged. Pure.
    pub fn build(model: &MdStat, checks: &CheckView, bitmap_pending: &[String]) -> ArrayObjects {
        let mut by_path = BTreeMap::new();
        for a in &model.arrays {
            let mut props = ArrayProps::from_model_in(a, model.speed_limit_min);
            props.check = checks.props(a);
            props.bitmap_pending = bitmap_pending.contains(&props.uuid.to_ascii_lowercase());
            let path = array_path(&props.uuid, &props.kernel_name);
            if by_path.contains_key(&path) {
                tracing::warn!("two arrays at {path}: {} is not published", a.name);
                continue;
            }
            by_path.insert(path, props);
        }
        ArrayObjects { by_path }
    }

    /// How many objects.
    pub fn len(&self) -> usize {
        self.by_path.len()
    }

    /// True when there is none.
    pub fn is_empty(&self) -> bool {
        self.by_path.is_empty()
    }

    /// The object path of each array, by kernel name.
    pub fn paths(&self) -> ArrayPaths {
        ArrayPaths::new(
            self.by_path
                .iter()
                .map(|(path, p)| (p.kernel_name.clone(), path.clone()))
                .collect(),
        )
    }

    /// What turns `self` into `new`: removals first, then additions and updates in path
    /// order; objects whose properties are equal give nothing. Pure.
    pub fn diff(&self, new: &ArrayObjects) -> Vec<Change> {
        let gone = self
            .by_path
            .keys()
            .filter(|p| !new.by_path.contains_key(*p))
            .map(|p| Change::Remove(p.clone()));
        let came = new
            .by_path
            .iter()
            .filter_map(|(path, props)| match self.by_path.get(path) {
                None => Some(Change::Add(path.clone(), props.clone())),
                Some(old) if old != props => Some(Change::Update(
                    path.clone(),
                    props.clone(),
                    ArrayProps::changed(old, props),
                )),
                Some(_) => None,
            });
        gone.chain(came).collect()
    }
}

/// Puts `new` on `conn`'s object server in place of `published` (what the last call put
/// there): the objects gone are removed (zbus emits `InterfacesRemoved` through the
/// ObjectManager), the new ones served (`InterfacesAdded`), the changed ones updated with one
/// `PropertiesChanged` each; then `published` is `new` and [`Shared::arrays`] its paths.
/// Failures are logged (an object that cannot be served is left out, and tried again at the
/// next publication).
pub async fn publish(
    conn: &zbus::Connection,
    shared: &Arc<Shared>,
    published: &mut ArrayObjects,
    mut new: ArrayObjects,
) {
    let server = conn.object_server();
    for change in published.diff(&new) {
        match change {
            Change::Remove(path) => {
                if let Err(e) = server.remove::<ArrayObject, _>(path.as_str()).await {
                    tracing::warn!("cannot remove {path}: {e}");
                }
            }
            Change::Add(path, props) => {
                let name = props.kernel_name.clone();
                let obj = ArrayObject {
                    props,
                    shared: shared.clone(),
                };
                if let Err(e) = server.at(path.as_str(), obj).await {
                    tracing::warn!("cannot add {name}: {e}");
                    new.by_path.remove(&path);
                }
            }
            Change::Update(path, props, changed) => {
                match server.interface::<_, ArrayObject>(path.as_str()).await {
                    Ok(iface) => {
                        iface.get_mut().await.props = props;
                        emit_changed(iface.signal_emitter(), ARRAY_IFACE, changed).await;
                    }
                    Err(e) => tracing::warn!("array object {path} missing: {e}"),
                }
            }
        }
    }
    *lock(&shared.arrays) = new.paths();
    *published = new;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(text: &str) -> MdStat {
        crate::mdstat::parse(text)
    }

    const TWO: &str = "Personalities : [raid1]\nmd0 : active raid1 sdb1[1] sda1[0]\n      1048576 blocks super 1.2 [2/2] [UU]\n\nmd1 : active raid1 sdd1[1] sdc1[0]\n      1048576 blocks super 1.2 [2/2] [UU]\n\nunused devices: <none>\n";

    #[test]
    fn objects_are_diffed_by_path() {
        let checks = CheckView::default();
        let two = ArrayObjects::build(&model(TWO), &checks, &[]);
        assert_eq!(two.len(), 2);
        let paths = two.paths().paths();
        assert_eq!(
            paths,
            [
                "/org/mdpilot/MdPilot1/arrays/name_md0",
                "/org/mdpilot/MdPilot1/arrays/name_md1"
            ]
        );
        assert_eq!(two.diff(&two), []);
        let added = ArrayObjects::default().diff(&two);
        assert!(matches!(&added[..], [Change::Add(..), Change::Add(..)]));

        let degraded = TWO.replacen("[2/2] [UU]", "[2/1] [U_]", 1);
        let one_changed = ArrayObjects::build(&model(&degraded), &checks, &[]);
        match &two.diff(&one_changed)[..] {
            [Change::Update(path, props, changed)] => {
                assert_eq!(path, "/org/mdpilot/MdPilot1/arrays/name_md0");
                assert_eq!(props.degraded, 1);
                assert!(changed.contains_key("Degraded"), "{changed:?}");
            }
            other => panic!("{other:?}"),
        }

        let only_md1 = TWO.split("\n\n").nth(1).unwrap();
        let fewer = ArrayObjects::build(&model(&format!("{only_md1}\n\n")), &checks, &[]);
        assert_eq!(
            two.diff(&fewer),
            [Change::Remove(
                "/org/mdpilot/MdPilot1/arrays/name_md0".into()
            )]
        );
    }

    #[test]
    fn paths_of_names_only_published_arrays() {
        let two = ArrayObjects::build(&model(TWO), &CheckView::default(), &[]);
        let got: Vec<String> = two
            .paths()
            .paths_of(["md1", "loop0", "md1", "md0"])
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            got,
            [
                "/org/mdpilot/MdPilot1/arrays/name_md0",
                "/org/mdpilot/MdPilot1/arrays/name_md1"
            ]
        );
        assert!(two.paths().paths_of(["loop0"]).is_empty());
    }

    #[test]
    fn objects_are_the_arrays_by_uuid_path() {
        let array = |name: &str, uuid: Option<&str>| crate::model::Array {
            name: name.into(),
            state: crate::model::HeaderState::Active,
            read_only: None,
            level: Some("raid1".into()),
            size_kib: Some(1024),
            metadata: Some("1.2".into()),
            raid_disks: Some(2),
            active_disks: Some(2),
            member_status: Some("UU".into()),
            members: vec![],
            sync: None,
            bitmap: None,
            sysfs: Some(crate::model::ArraySysfs {
                uuid: uuid.map(str::to_string),
                ..Default::default()
            }),
        };
        let arrays = [
            array("md0", Some("3B6C2A6E-0D0E-4B7A-9D5E-8A7B1C2D3E4F")),
            array("md1", None),
            array("md2", Some("9f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b")),
        ];
        let model = MdStat {
            arrays: arrays.to_vec(),
            ..MdStat::default()
        };
        let objects = ArrayObjects::build(&model, &CheckView::default(), &[]);
        let got: Vec<String> = objects
            .paths()
            .paths_of(["md2", "loop0", "md0", "md2", "md1"])
            .iter()
            .map(std::string::ToString::to_string)
            .collect();
        assert_eq!(
            got,
            [
                "/org/mdpilot/MdPilot1/arrays/3b6c2a6e0d0e4b7a9d5e8a7b1c2d3e4f",
                "/org/mdpilot/MdPilot1/arrays/9f1e2d3c4b5a69788a9b0c1d2e3f4a5b",
                "/org/mdpilot/MdPilot1/arrays/name_md1",
            ]
        );
        assert!(objects.paths().paths_of(["loop0"]).is_empty());
    }
}
