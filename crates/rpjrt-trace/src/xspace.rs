//! The plugin profiler's data inside a [`Trace`]: the serialized `XSpace` kept as it is
//! (written beside the trace by [`Trace::save`]) and, where it decodes, its events added
//! on a process row of their own. Pure: the profiler handle itself is `rpjrt::profiler`.

use serde_json::{json, Value};

use super::Trace;
use crate::{Error, Result};

impl Trace {
    /// Adds what a plugin profiler collected, or records why there is nothing: with
    /// `Ok(bytes)` the `XSpace` is kept ([`Trace::plugin_profile`], written beside the
    /// trace by [`Trace::save`]) and, where it decodes, its events join the trace on
    /// their own process row (category `plugin`); metadata `plugin_profile` says which.
    /// With an error (a plugin without the Profiler extension, say) the metadata says
    /// `none: ` and the error; the trace itself is unaffected.
    pub fn attach_plugin_profile(&mut self, collected: Result<Vec<u8>>) {
        match collected {
            Err(e) => self.set_metadata("plugin_profile", format!("none: {e}")),
            Ok(bytes) => {
                let note = match xspace_events(&bytes, self.start_unix_ns) {
                    Ok((events, planes)) => {
                        let n = events.iter().filter(|e| e["ph"] == "X").count();
                        self.plugin_events = events;
                        format!(
                            "XSpace, {} bytes: {n} event(s) from plane(s) {}",
                            bytes.len(),
                            planes.join(", ")
                        )
                    }
                    Err(e) => format!(
                        "XSpace, {} bytes (kept as is; its events could not be read: {e})",
                        bytes.len()
                    ),
                };
                self.set_metadata("plugin_profile", note);
                self.plugin_profile = Some(bytes);
            }
        }
    }

    /// The plugin's serialized `XSpace`, if one was attached.
    pub fn plugin_profile(&self) -> Option<&[u8]> {
        self.plugin_profile.as_deref()
    }

    /// The plugin's events (Chrome trace events, category `plugin`), if any were decoded.
    pub fn plugin_events(&self) -> &[Value] {
        &self.plugin_events
    }
}

/// The subset of XLA's `xplane.proto` that the conversion reads.
mod proto {
    use std::collections::HashMap;

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct XSpace {
        #[prost(message, repeated, tag = "1")]
        pub planes: Vec<XPlane>,
        #[prost(string, repeated, tag = "4")]
        pub hostnames: Vec<String>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct XPlane {
        #[prost(int64, tag = "1")]
        pub id: i64,
        #[prost(string, tag = "2")]
        pub name: String,
        #[prost(message, repeated, tag = "3")]
        pub lines: Vec<XLine>,
        #[prost(map = "int64, message", tag = "4")]
        pub event_metadata: HashMap<i64, XEventMetadata>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct XLine {
        #[prost(int64, tag = "1")]
        pub id: i64,
        #[prost(string, tag = "2")]
        pub name: String,
        #[prost(int64, tag = "3")]
        pub timestamp_ns: i64,
        #[prost(message, repeated, tag = "4")]
        pub events: Vec<XEvent>,
        #[prost(string, tag = "11")]
        pub display_name: String,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct XEvent {
        #[prost(int64, tag = "1")]
        pub metadata_id: i64,
        #[prost(int64, tag = "2")]
        pub offset_ps: i64,
        #[prost(int64, tag = "3")]
        pub duration_ps: i64,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct XEventMetadata {
        #[prost(int64, tag = "1")]
        pub id: i64,
        #[prost(string, tag = "2")]
        pub name: String,
        #[prost(string, tag = "4")]
        pub display_name: String,
    }
}

/// Timestamps before 2001 are not wall-clock times: such a plane counts from the start
/// of the recording instead.
const WALL_CLOCK_FLOOR_NS: i64 = 1_000_000_000 * 1_000_000_000;

/// Pids of the plugin's planes: above any real process id (Linux's are below 2^22) and
/// below 2^31, which trace readers that keep pids in 32 bits still read.
const PLANE_PID_BASE: u64 = 1 << 30;

/// The events of a serialized `XSpace` as Chrome trace events (one process row per plane,
/// one thread row per line), and the planes' names. Some plugins append a zero byte
/// after the proto; it is ignored.
pub(crate) fn xspace_events(bytes: &[u8], start_unix_ns: i64) -> Result<(Vec<Value>, Vec<String>)> {
    use prost::Message;
    let trimmed = match bytes {
        [rest @ .., 0] => rest,
        _ => bytes,
    };
    let space = proto::XSpace::decode(trimmed)
        .or_else(|_| proto::XSpace::decode(bytes))
        .map_err(|e| Error::invalid(format!("not an XSpace proto: {e}")))?;
    let mut out = Vec::new();
    let mut planes = Vec::new();
    for (i, plane) in space.planes.iter().enumerate() {
        let pid = PLANE_PID_BASE + i as u64;
        let name = if plane.name.is_empty() {
            format!("plane {}", plane.id)
        } else {
            plane.name.clone()
        };
        planes.push(name.clone());
        out.push(
            json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                        "args": {"name": format!("plugin: {name}")}}),
        );
        for line in &plane.lines {
            let line_name = [&line.display_name, &line.name]
                .into_iter()
                .find(|s| !s.is_empty())
                .cloned()
                .unwrap_or_else(|| format!("line {}", line.id));
            out.push(
                json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": line.id,
                            "args": {"name": line_name}}),
            );
            let base_ns = if line.timestamp_ns >= WALL_CLOCK_FLOOR_NS {
                line.timestamp_ns.saturating_sub(start_unix_ns)
            } else {
                line.timestamp_ns
            };
            for e in &line.events {
                let meta = plane.event_metadata.get(&e.metadata_id);
                let ev_name = meta
                    .map(|m| {
                        if m.display_name.is_empty() {
                            m.name.clone()
                        } else {
                            m.display_name.clone()
                        }
                    })
                    .filter(|n| !n.is_empty())
                    .unwrap_or_else(|| format!("event {}", e.metadata_id));
                let ts_us = base_ns as f64 / 1e3 + e.offset_ps as f64 / 1e6;
                out.push(json!({"name": ev_name, "cat": "plugin", "ph": "X",
                                "ts": ts_us, "dur": e.duration_ps as f64 / 1e6,
                                "pid": pid, "tid": line.id}));
            }
        }
    }
    Ok((out, planes))
}

#[cfg(test)]
mod tests {
    use super::proto::*;
    use super::*;
    use prost::Message;

    fn space(timestamp_ns: i64) -> Vec<u8> {
        let mut metadata = std::collections::HashMap::new();
        metadata.insert(
            7,
            XEventMetadata {
                id: 7,
                name: "gemm".into(),
                display_name: String::new(),
            },
        );
        XSpace {
            planes: vec![XPlane {
                id: 1,
                name: "/device:GPU:0".into(),
                lines: vec![XLine {
                    id: 3,
                    name: "stream 3".into(),
                    timestamp_ns,
                    events: vec![XEvent {
                        metadata_id: 7,
                        offset_ps: 5_000_000,
                        duration_ps: 2_000_000,
                    }],
                    display_name: String::new(),
                }],
                event_metadata: metadata,
            }],
            hostnames: vec!["h".into()],
        }
        .encode_to_vec()
    }

    #[test]
    fn wall_clock_planes_are_placed_against_the_recording_start() {
        let start = 1_800_000_000_000_000_000;
        let (events, planes) = xspace_events(&space(start + 2_000_000), start).unwrap();
        assert_eq!(planes, ["/device:GPU:0"]);
        let x: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(x.len(), 1);
        assert_eq!(x[0]["name"], "gemm");
        assert_eq!(x[0]["ts"], 2005.0);
        assert_eq!(x[0]["dur"], 2.0);
        assert_eq!(x[0]["pid"], PLANE_PID_BASE);
        assert_eq!(x[0]["tid"], 3);
        assert!(events
            .iter()
            .any(|e| e["name"] == "thread_name" && e["args"]["name"] == "stream 3"));
    }

    #[test]
    fn a_trailing_zero_byte_is_ignored_and_garbage_is_refused() {
        let mut bytes = space(0);
        bytes.push(0);
        let (events, _) = xspace_events(&bytes, 0).unwrap();
        assert_eq!(events.iter().filter(|e| e["ph"] == "X").count(), 1);
        let e = xspace_events(&[0xff, 0xff, 0xff], 0).unwrap_err();
        assert!(e.to_string().contains("not an XSpace"), "{e}");
        // Undecodable data is still kept, and said so.
        let mut t = Trace::default();
        t.attach_plugin_profile(Ok(vec![0xff, 0xff, 0xff]));
        assert_eq!(t.plugin_profile(), Some(&[0xff, 0xff, 0xff][..]));
        assert!(t.metadata()["plugin_profile"].contains("kept as is"));
        assert!(t.plugin_events().is_empty());
    }
}
