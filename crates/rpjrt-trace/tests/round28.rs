//! Round 28: `html` (what `rpjrt trace view` writes) hands its page only events the page's
//! script can draw, and says which it left out, whatever a trace file holds.

use serde_json::{json, Value};

/// The trace the page embeds (its `trace-data` script).
fn embedded(page: &str) -> Value {
    let open = "<script id=\"trace-data\" type=\"application/json\">";
    let at = page.find(open).expect("the page embeds the trace") + open.len();
    let end = at + page[at..].find("</script>").unwrap();
    serde_json::from_str(&page[at..end]).expect("the embedded trace is JSON")
}

fn good() -> Value {
    json!({"name": "execute", "cat": "execute", "ph": "X", "ts": 0, "dur": 100,
           "pid": 1, "tid": 1})
}

/// Every event on the page is an object the script reads without a type error.
fn assert_drawable(events: &[Value]) {
    for e in events {
        let o = e
            .as_object()
            .unwrap_or_else(|| panic!("not an object: {e}"));
        match o["ph"].as_str() {
            Some("X") => {
                assert!(o["name"].is_string() && o["cat"].is_string(), "{e}");
                let ts = o["ts"].as_f64().unwrap();
                let dur = o["dur"].as_f64().unwrap();
                assert!(
                    ts.is_finite() && dur >= 0.0 && (ts + dur).is_finite(),
                    "{e}"
                );
                for k in ["pid", "tid"] {
                    assert!(o[k].is_number() || o[k].is_string(), "{e}");
                }
            }
            Some("M") => {
                assert_eq!(o["name"], "thread_name", "{e}");
                assert!(o["args"]["name"].is_string(), "{e}");
            }
            _ => panic!("the page got an event it does not draw: {e}"),
        }
    }
}

#[test]
fn null_and_nameless_events_reach_the_page_well_formed_or_not_at_all() {
    let mut no_name = good();
    no_name.as_object_mut().unwrap().remove("name");
    let mut null_name = good();
    null_name["name"] = Value::Null;
    let trace = json!({"traceEvents": [good(), null, no_name, null_name]});
    let page = rpjrt_trace::html(&trace.to_string(), "t").unwrap();
    let data = embedded(&page);
    let events = data["traceEvents"].as_array().unwrap();
    assert_drawable(events);
    // The three complete events are drawn; the missing names read "?".
    assert_eq!(events.len(), 3, "{data}");
    assert_eq!(events[1]["name"], "?");
    assert_eq!(events[2]["name"], "?");
    let note = data["rpjrtSkipped"].as_str().unwrap();
    assert!(
        note.contains("traceEvents[1] is null, not an event"),
        "{note}"
    );
}

#[test]
fn every_odd_event_is_dropped_or_normalised_and_named() {
    let odd = json!([
        null, 5, "x", [], true, {},
        {"ph": 3},
        {"ph": "X", "name": 7, "cat": {"a": 1}, "ts": 1, "pid": {"p": 1}, "tid": [2]},
        {"ph": "X", "name": ["n"], "ts": 2, "dur": null, "args": "text"},
        {"ph": "X", "name": "no ts"},
        {"ph": "X", "name": "text ts", "ts": "12"},
        {"ph": "X", "name": "negative", "ts": 1, "dur": -5},
        {"ph": "X", "name": "text dur", "ts": 1, "dur": "5"},
        {"ph": "X", "name": "far", "ts": 1e300, "dur": 1e300},
        {"ph": "X", "name": "far back", "ts": -1.7e308, "dur": 1.7e308},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": null},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": "x"},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": 42}},
        {"ph": "B", "name": "begin", "ts": 0},
        {"ph": "X", "name": "__proto__", "cat": "constructor", "ts": 3, "dur": 1}
    ]);
    for trace in [
        json!({"traceEvents": odd.clone(), "otherData": "text", "metadata": [1]}),
        odd.clone(),
    ] {
        let page = rpjrt_trace::html(&trace.to_string(), "t").unwrap();
        let data = embedded(&page);
        let events = data["traceEvents"].as_array().unwrap();
        assert_drawable(events);
        let names: Vec<&str> = events
            .iter()
            .filter(|e| e["ph"] == "X")
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["7", "[\"n\"]", "__proto__"], "{data}");
        assert!(data.get("otherData").is_none(), "{data}");
        let note = data["rpjrtSkipped"].as_str().unwrap();
        for want in [
            "traceEvents[0] is null",
            "traceEvents[1] is a number (5), not an event",
            "traceEvents[2] is a string",
            "and 8 more",
            "1 event(s) of kinds this page does not draw",
        ] {
            assert!(note.contains(want), "{want:?} missing from {note}");
        }
        assert!(note.starts_with("13 event(s) not drawn"), "{note}");
    }
}

#[test]
fn a_bad_time_is_named_with_its_reason() {
    for (event, why) in [
        (json!({"ph": "X", "name": "a"}), "has no \"ts\""),
        (
            json!({"ph": "X", "ts": "1"}),
            "\"ts\" a string (\"1\"), not a number",
        ),
        (
            json!({"ph": "X", "ts": 1, "dur": -1}),
            "\"dur\" -1, not 0 or more",
        ),
        (json!({"ph": "X", "ts": 1e300}), "out of the range drawn"),
        (json!({"name": "a"}), "has no \"ph\""),
    ] {
        let page = rpjrt_trace::html(&json!([event]).to_string(), "t").unwrap();
        let data = embedded(&page);
        assert_eq!(data["traceEvents"], json!([]));
        let note = data["rpjrtSkipped"].as_str().unwrap();
        assert!(note.contains(why), "{why:?} missing from {note}");
    }
}

#[test]
fn a_good_trace_is_embedded_with_its_metadata_and_no_note() {
    let trace = json!({"traceEvents": [good(),
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}},
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "rpjrt"}}],
        "otherData": {"producer": "me"}});
    let data = embedded(&rpjrt_trace::html(&trace.to_string(), "t").unwrap());
    assert_eq!(data["traceEvents"].as_array().unwrap().len(), 2);
    assert_eq!(data["traceEvents"][0]["args"], Value::Null);
    assert_eq!(data["traceEvents"][1]["args"]["name"], "main");
    assert_eq!(data["otherData"]["producer"], "me");
    assert!(data.get("rpjrtSkipped").is_none(), "{data}");
}

#[test]
fn the_page_script_checks_each_event_itself() {
    // The script must not trust the data: a page saved by an older rpjrt, or edited, may
    // hold odd events. These are the guards that keep one from blanking the page.
    let page = rpjrt_trace::html("[]", "t").unwrap();
    for guard in [
        "if (!e || typeof e !== \"object\") { return; }",
        "try { draw(); } catch (err)",
        "Object.create(null)",
        "text(e.name)",
    ] {
        assert!(page.contains(guard), "{guard:?} missing from the page");
    }
}
