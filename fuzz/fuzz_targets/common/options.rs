//! Builds an `a{sv}` option dictionary (`HashMap<String, OwnedValue>`, the zbus form the D-Bus
//! methods receive) from fuzz input, two ways:
//! - input starting with `D`: the rest is decoded as a D-Bus-serialized little-endian `a{sv}`
//!   (zvariant), so wire-level oddities (nested variants, odd signatures) are reached;
//! - otherwise `arbitrary` drives a structured dict: keys mostly from `known` (so the parser's
//!   branches are hit), values of every type a client may send.

use arbitrary::{Arbitrary, Unstructured};
use std::collections::HashMap;
use zbus::zvariant::{OwnedValue, Value};

#[derive(Arbitrary, Debug)]
enum Key {
    Known(u8),
    Other(String),
}

#[derive(Arbitrary, Debug)]
enum V {
    U64(u64),
    U32(u32),
    U16(u16),
    U8(u8),
    I64(i64),
    I32(i32),
    Bool(bool),
    F64(f64),
    Str(String),
    Strs(Vec<String>),
    Arrays(Vec<(String, u64, u64)>),
    ArraysU32(Vec<(String, u32, u32)>),
    Nested(Box<V>),
}

fn value(v: V) -> Value<'static> {
    match v {
        V::U64(n) => Value::from(n),
        V::U32(n) => Value::from(n),
        V::U16(n) => Value::from(n),
        V::U8(n) => Value::from(n),
        V::I64(n) => Value::from(n),
        V::I32(n) => Value::from(n),
        V::Bool(b) => Value::from(b),
        V::F64(f) => Value::from(f),
        V::Str(s) => Value::from(s),
        V::Strs(v) => Value::from(v),
        V::Arrays(v) => Value::from(
            v.into_iter()
                .map(|(a, mn, mx)| (a, (mn, mx)))
                .collect::<HashMap<String, (u64, u64)>>(),
        ),
        V::ArraysU32(v) => Value::from(
            v.into_iter()
                .map(|(a, mn, mx)| (a, (mn, mx)))
                .collect::<HashMap<String, (u32, u32)>>(),
        ),
        V::Nested(inner) => Value::new(value(*inner)),
    }
}

/// The dict for `data`, or `None` when the bytes do not decode.
pub fn options(data: &[u8], known: &[&str]) -> Option<HashMap<String, OwnedValue>> {
    if data.starts_with(b"D") {
        return super::checks::wire_options(data);
    }
    let mut u = Unstructured::new(data);
    let entries: Vec<(Key, V)> = u.arbitrary().ok()?;
    let mut dict = HashMap::new();
    for (k, v) in entries {
        let key = match k {
            Key::Known(i) => known[usize::from(i) % known.len()].to_string(),
            Key::Other(s) => s,
        };
        dict.insert(key, OwnedValue::try_from(value(v)).ok()?);
    }
    Some(dict)
}

/// With `MDPILOT_FUZZ_WIRE=DIR` set (replaying one crash input: `cargo fuzz run T crash-...`),
/// writes the dict in wire form to `DIR/wire`, so it can be kept as a regression input that the
/// stable test decodes without `arbitrary`. The wire form has no install policy: a dbus_acquire
/// regression replays with the install policy of its own first two bytes (`D` and the next).
pub fn keep_wire(opts: &HashMap<String, OwnedValue>, _install: (u64, Option<u64>)) {
    if let Some(dir) = std::env::var_os("MDPILOT_FUZZ_WIRE") {
        let _ = std::fs::write(
            std::path::Path::new(&dir).join("wire"),
            super::checks::to_wire(opts),
        );
    }
}
