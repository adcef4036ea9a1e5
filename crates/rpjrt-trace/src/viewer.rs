//! What the viewer page is given: the events of a Chrome trace it can draw, each in the
//! shape its script expects, and a note naming the events it left out.
//!
//! A trace read from a file may hold anything in `traceEvents`: `null`, a number, a
//! complete event without a `name`, a `ts` that is text. The page draws complete
//! (`"ph":"X"`) events and reads thread names from `thread_name` metadata events; every
//! other element is dropped here, so the page's script only ever sees objects whose
//! `name`, `cat` and `tid`/`pid` are strings or numbers and whose `ts` and `dur` are
//! finite numbers. What was not drawn, and why, is shown on the page.

use serde_json::{json, Map, Value};

/// Times past this (in microseconds, about 31,700 years) are not drawn: the page adds and
/// subtracts them as doubles, where two such values could reach infinity.
const MAX_TIME_US: f64 = 1e18;

/// How many skipped events the page names one by one (the rest are counted).
const NAMED: usize = 5;

/// The value the page embeds for `trace` (an object with a `traceEvents` list): only
/// drawable events, normalised, the trace's metadata object, and `rpjrtSkipped` naming
/// what was left out.
pub(crate) fn drawable(trace: &Map<String, Value>) -> Value {
    let empty = Vec::new();
    let events = trace
        .get("traceEvents")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let mut out = Vec::with_capacity(events.len());
    let mut skipped: Vec<String> = Vec::new();
    let mut other_kinds = 0usize;
    for (i, e) in events.iter().enumerate() {
        match event(e) {
            // Metadata the page does not read (a process name) is left out unremarked.
            Ok(Some(Value::Null)) => {}
            Ok(Some(v)) => out.push(v),
            Ok(None) => other_kinds += 1,
            Err(why) => skipped.push(format!("traceEvents[{i}] {why}")),
        }
    }
    let mut page = Map::new();
    page.insert("traceEvents".into(), Value::Array(out));
    // The page shows one metadata object: `otherData` (Chrome), else `metadata`.
    let meta = ["otherData", "metadata"]
        .iter()
        .find_map(|k| trace.get(*k).filter(|v| v.is_object()));
    if let Some(m) = meta {
        page.insert("otherData".into(), m.clone());
    }
    let mut notes = Vec::new();
    if !skipped.is_empty() {
        let mut s = format!(
            "{} event(s) not drawn, not being well-formed: {}",
            skipped.len(),
            skipped[..skipped.len().min(NAMED)].join("; ")
        );
        if skipped.len() > NAMED {
            s.push_str(&format!("; and {} more", skipped.len() - NAMED));
        }
        notes.push(s);
    }
    if other_kinds > 0 {
        notes.push(format!(
            "{other_kinds} event(s) of kinds this page does not draw (only complete \
             \"ph\":\"X\" events are drawn)"
        ));
    }
    if !notes.is_empty() {
        page.insert("rpjrtSkipped".into(), json!(notes.join(". ")));
    }
    Value::Object(page)
}

/// One element of `traceEvents`: `Ok(Some)` normalised when the page uses it (`null` for
/// metadata it does not read), `Ok(None)` for a kind of event it does not draw, `Err`
/// saying why it is not an event it can draw.
fn event(e: &Value) -> Result<Option<Value>, String> {
    let Value::Object(o) = e else {
        return Err(format!("is {}, not an event (an object)", kind(e)));
    };
    match o.get("ph").and_then(Value::as_str) {
        Some("X") => complete(o).map(Some),
        Some("M") => Ok(Some(thread_name(o).unwrap_or(Value::Null))),
        Some(_) => Ok(None),
        None => Err(match o.get("ph") {
            None => "has no \"ph\" (its kind)".into(),
            Some(p) => format!("has \"ph\" {}, not a string", kind(p)),
        }),
    }
}

/// A complete event with a numeric `ts` (and `dur`, 0 when absent) within range; its
/// `name` and `cat` made text (`?` when absent), `pid` and `tid` a number or text.
fn complete(o: &Map<String, Value>) -> Result<Value, String> {
    let what = "(\"ph\":\"X\")";
    let ts = match o.get("ts") {
        Some(Value::Number(n)) => n.as_f64().unwrap_or(f64::NAN),
        None | Some(Value::Null) => return Err(format!("{what} has no \"ts\" (its start)")),
        Some(v) => return Err(format!("{what} has \"ts\" {}, not a number", kind(v))),
    };
    let dur = match o.get("dur") {
        None | Some(Value::Null) => 0.0,
        Some(Value::Number(n)) => match n.as_f64() {
            Some(d) if d >= 0.0 => d,
            _ => return Err(format!("{what} has \"dur\" {n}, not 0 or more")),
        },
        Some(v) => return Err(format!("{what} has \"dur\" {}, not a number", kind(v))),
    };
    if !(ts.abs() <= MAX_TIME_US && (ts + dur).abs() <= MAX_TIME_US) {
        return Err(format!(
            "{what} has \"ts\" {ts} and \"dur\" {dur}: out of the range drawn (±1e18 µs)"
        ));
    }
    let mut out = Map::new();
    out.insert("ph".into(), json!("X"));
    out.insert("ts".into(), json!(ts));
    out.insert("dur".into(), json!(dur));
    out.insert("name".into(), json!(text(o.get("name"))));
    out.insert("cat".into(), json!(text(o.get("cat"))));
    out.insert("pid".into(), id(o.get("pid")));
    out.insert("tid".into(), id(o.get("tid")));
    if let Some(args) = o.get("args").filter(|a| !a.is_null()) {
        out.insert("args".into(), args.clone());
    }
    Ok(Value::Object(out))
}

/// A `thread_name` metadata event, reduced to what the page reads; `None` for other
/// metadata, or one without a name.
fn thread_name(o: &Map<String, Value>) -> Option<Value> {
    if o.get("name").and_then(Value::as_str) != Some("thread_name") {
        return None;
    }
    let name = o.get("args")?.as_object()?.get("name")?;
    if name.is_null() {
        return None;
    }
    Some(json!({
        "ph": "M", "name": "thread_name", "pid": id(o.get("pid")), "tid": id(o.get("tid")),
        "args": {"name": text(Some(name))},
    }))
}

/// A name or category as text: a string as it is, `?` when absent or null, anything
/// else as its JSON text.
fn text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => "?".into(),
        Some(other) => other.to_string(),
    }
}

/// A process or thread id: a number or text as it is, 0 when absent, else its JSON text.
fn id(v: Option<&Value>) -> Value {
    match v {
        Some(n @ (Value::Number(_) | Value::String(_))) => n.clone(),
        None | Some(Value::Null) => json!(0),
        Some(other) => json!(other.to_string()),
    }
}

/// A JSON value's kind, for a message: `null`, `a number (5)`, `a string ("x")`, ...
fn kind(v: &Value) -> String {
    let shown = |v: &Value| {
        let s = v.to_string();
        if s.chars().count() > 40 {
            format!("{}…", s.chars().take(40).collect::<String>())
        } else {
            s
        }
    };
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("a boolean ({b})"),
        Value::Number(_) => format!("a number ({})", shown(v)),
        Value::String(_) => format!("a string ({})", shown(v)),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "an object".into(),
    }
}
