use super::*;

/// The recorder is process-wide: the tests that start it take turns.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn mine<'a>(t: &'a Trace, name: &str) -> Vec<&'a Event> {
    t.events().iter().filter(|e| e.name == name).collect()
}

#[test]
fn off_by_default_and_spans_record_nothing_when_off() {
    let _g = serial();
    assert!(!is_recording());
    let s = span(Category::Execute, "unit-off").bytes(3);
    assert!(!s.is_recording());
    drop(s);
    start().unwrap();
    let t = stop().unwrap();
    assert!(mine(&t, "unit-off").is_empty());
}

#[test]
fn spans_carry_category_duration_thread_and_args() {
    let _g = serial();
    start().unwrap();
    {
        let _s = span(Category::Transfer, "unit-put")
            .bytes(4096)
            .device(1)
            .program("prog");
        std::thread::sleep(Duration::from_millis(2));
    }
    let t = stop().unwrap();
    let e = mine(&t, "unit-put");
    assert_eq!(e.len(), 1);
    let e = e[0];
    assert_eq!(e.category, Category::Transfer);
    assert!(e.duration_us >= 2000.0, "{}", e.duration_us);
    assert!(e.start_us >= 0.0);
    assert_eq!(
        e.args,
        vec![
            ("bytes", Arg::Int(4096)),
            ("device", Arg::Int(1)),
            ("program", Arg::Text("prog".into()))
        ]
    );
    assert!(t.threads().contains_key(&e.thread));
}

#[test]
fn spans_of_other_threads_are_collected_with_their_names() {
    let _g = serial();
    start().unwrap();
    std::thread::Builder::new()
        .name("unit-worker".into())
        .spawn(|| {
            for _ in 0..3 {
                let _s = span(Category::CustomCall, "unit-handler");
            }
        })
        .unwrap()
        .join()
        .unwrap();
    let _s = span(Category::Wait, "unit-main");
    drop(_s);
    let t = stop().unwrap();
    let h = mine(&t, "unit-handler");
    assert_eq!(h.len(), 3);
    let m = mine(&t, "unit-main");
    assert_eq!(m.len(), 1);
    assert_ne!(h[0].thread, m[0].thread);
    assert_eq!(t.threads()[&h[0].thread], "unit-worker");
    // The ended thread's log is released once its spans were taken.
    let r = recorder();
    assert!(r.threads.iter().all(|l| l.name != "unit-worker"));
}

#[test]
fn a_span_open_at_stop_or_opened_before_start_is_left_out() {
    let _g = serial();
    let before = span(Category::Compile, "unit-before");
    start().unwrap();
    drop(before);
    let open = span(Category::Compile, "unit-open");
    let t = stop().unwrap();
    drop(open);
    assert!(mine(&t, "unit-before").is_empty());
    assert!(mine(&t, "unit-open").is_empty());
    // ... and does not leak into the next recording.
    start().unwrap();
    let t = stop().unwrap();
    assert!(mine(&t, "unit-open").is_empty());
}

#[test]
fn start_twice_and_stop_without_start_are_errors() {
    let _g = serial();
    start().unwrap();
    let e = start().unwrap_err();
    assert_eq!(e.code(), rpjrt_raw::error::Code::FailedPrecondition);
    assert!(e.to_string().contains("already being recorded"), "{e}");
    stop().unwrap();
    let e = stop().unwrap_err();
    assert_eq!(e.code(), rpjrt_raw::error::Code::FailedPrecondition);
    assert!(e.to_string().contains("no trace is being recorded"), "{e}");
}

#[test]
fn chrome_json_has_complete_events_and_thread_names() {
    let _g = serial();
    start().unwrap();
    for c in Category::ALL {
        let _s = span(c, "unit-json").int("n", 7);
    }
    let mut t = stop().unwrap();
    t.events.retain(|e| e.name == "unit-json");
    t.set_metadata("profiler", "unsupported");
    let v: Value = serde_json::from_str(&t.to_chrome_json()).unwrap();
    assert_eq!(v["displayTimeUnit"], "ms");
    assert_eq!(v["otherData"]["profiler"], "unsupported");
    assert!(v["otherData"]["producer"]
        .as_str()
        .unwrap()
        .starts_with("rpjrt "));
    let events = v["traceEvents"].as_array().unwrap();
    let x: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(x.len(), Category::ALL.len());
    let cats: Vec<&str> = x.iter().map(|e| e["cat"].as_str().unwrap()).collect();
    for c in Category::ALL {
        assert!(cats.contains(&c.name()), "{c} missing from {cats:?}");
        assert_eq!(Category::from_name(c.name()), Some(c));
    }
    for e in &x {
        assert!(e["ts"].is_number() && e["dur"].is_number());
        assert!(e["pid"].is_u64() && e["tid"].is_u64());
        assert_eq!(e["args"]["n"], 7);
    }
    let tid = x[0]["tid"].clone();
    assert!(events.iter().any(|e| e["ph"] == "M"
        && e["name"] == "thread_name"
        && e["tid"] == tid
        && e["args"]["name"].is_string()));
    assert!(events
        .iter()
        .any(|e| e["ph"] == "M" && e["name"] == "process_name"));
}

#[test]
fn html_embeds_the_trace_safely_and_refuses_what_is_not_a_trace() {
    let json = r#"{"traceEvents":[{"ph":"X","name":"</script><b>","cat":"execute",
                  "ts":0,"dur":5,"pid":1,"tid":1}]}"#;
    let page = html(json, "a <title> @@TRACE@@").unwrap();
    assert!(!page.contains("</script><b>"));
    assert!(page.contains("\\u003c/script>\\u003cb>"));
    assert!(page.contains("a &lt;title&gt; &#64;&#64;TRACE&#64;&#64;"));
    assert_eq!(page.matches("</script>").count(), 2);
    // A bare list of events is a trace too.
    assert!(html("[]", "t").is_ok());
    let e = html("{", "t").unwrap_err();
    assert!(e.to_string().contains("not JSON"), "{e}");
    let e = html(r#"{"events": []}"#, "t").unwrap_err();
    assert!(e.to_string().contains("traceEvents"), "{e}");
    let e = html("3", "t").unwrap_err();
    assert!(e.to_string().contains("neither"), "{e}");
}
