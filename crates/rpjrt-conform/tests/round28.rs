//! Round 28: a report read from its text keeps integers exactly, past 64 bits too, so
//! `diff` never calls two different integers equal nor shows one as a float.

use rpjrt_conform::{diff, render_html, Report};

/// A report whose one check has `facts` (JSON text) and whose plugin has `attributes`.
fn report(facts: &str, attributes: &str) -> String {
    format!(
        r#"{{"schema": "rpjrt-conform", "schema_version": 2, "rpjrt_version": "0.1.0",
            "plugin": {{"path": "/x/plugin.so", "pjrt_version": "0.81", "table_size": 984,
                        "table_slots": 118, "attributes": {attributes}, "extensions": []}},
            "summary": {{"pass": 1, "fail": 0, "unsupported": 0, "blocked": 0,
                         "crash": 0, "timeout": 0}},
            "results": [{{"name": "other", "group": "g", "outcome": "pass", "facts": {{}}}},
                        {{"name": "devices.memory_stats", "group": "devices",
                          "outcome": "pass", "detail": "", "facts": {facts},
                          "duration_ms": 0.1, "stderr": ""}}]}}"#
    )
}

fn read(facts: &str) -> Report {
    Report::from_text(&report(facts, "{}")).unwrap()
}

#[test]
fn integers_past_64_bits_that_differ_are_a_difference_shown_exactly() {
    let a = read(r#"{"bytes_limit": 18446744073709551616}"#);
    let b = read(r#"{"bytes_limit": 18446744073709551617}"#);
    let d = diff(&a, &b);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].what, "check devices.memory_stats: bytes_limit");
    assert_eq!(d[0].a_text, "18446744073709551616");
    assert_eq!(d[0].b_text, "18446744073709551617");
    assert_eq!(
        d[0].to_json_text(),
        r#"{"a":18446744073709551616,"b":18446744073709551617,"what":"check devices.memory_stats: bytes_limit"}"#
    );
    // The same integer twice is no difference.
    assert!(diff(&a, &a.clone()).is_empty());
}

#[test]
fn a_negative_integer_past_64_bits_is_shown_as_written() {
    let a = read(r#"{"bytes_limit": -9223372036854775809}"#);
    let b = read(r#"{"bytes_limit": 5}"#);
    let d = diff(&a, &b);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].a_text, "-9223372036854775809");
    assert_eq!(d[0].b_text, "5");
    // Absent on one side: shown as null.
    let c = read("{}");
    let d = diff(&a, &c);
    assert_eq!(
        (d[0].a_text.as_str(), d[0].b_text.as_str()),
        ("-9223372036854775809", "null")
    );
}

#[test]
fn nested_and_plugin_values_are_compared_exactly_too() {
    let a = read(r#"{"sizes": [1, {"x/y": 36893488147419103232}]}"#);
    let b = read(r#"{"sizes": [1, {"x/y": 36893488147419103233}]}"#);
    let d = diff(&a, &b);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].a_text, r#"[1,{"x/y":36893488147419103232}]"#);
    assert_eq!(d[0].b_text, r#"[1,{"x/y":36893488147419103233}]"#);

    let pa = Report::from_text(&report("{}", r#"{"limit": 100000000000000000000}"#)).unwrap();
    let pb = Report::from_text(&report("{}", r#"{"limit": 100000000000000000001}"#)).unwrap();
    let d = diff(&pa, &pb);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].what, "plugin.attributes");
    assert_eq!(d[0].a_text, r#"{"limit":100000000000000000000}"#);
    let page = render_html(&[("a.json", &pa)]);
    assert!(
        page.contains("limit = 100000000000000000000"),
        "the page shows it as written"
    );
}

#[test]
fn the_last_of_a_repeated_key_counts_as_when_read_as_json() {
    // Read as a `Value`, the second "bytes_limit" wins: its text must be what is compared.
    let a = read(r#"{"bytes_limit": 18446744073709551616, "bytes_limit": 7}"#);
    let b = read(r#"{"bytes_limit": 7}"#);
    assert!(diff(&a, &b).is_empty(), "{:?}", diff(&a, &b));
    let c = read(r#"{"bytes_limit": 7, "bytes_limit": 18446744073709551618}"#);
    assert_eq!(diff(&b, &c)[0].b_text, "18446744073709551618");
}

#[test]
fn the_page_of_a_report_shows_its_facts_exactly() {
    let a = read(r#"{"bytes_limit": 18446744073709551617}"#);
    let page = render_html(&[("a.json", &a)]);
    assert!(page.contains("<code>18446744073709551617</code>"), "{page}");
}

#[test]
fn text_that_is_not_json_is_refused_and_ordinary_reports_diff_as_before() {
    let e = Report::from_text("{").unwrap_err();
    assert!(e.to_string().contains("not JSON"), "{e}");
    let a = read(r#"{"bytes_limit": 1, "name": "cpu", "ratio": 0.5}"#);
    let b = read(r#"{"bytes_limit": 2, "name": "cpu", "ratio": 0.5}"#);
    assert!(a.wide_integers.is_empty());
    let d = diff(&a, &b);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!((d[0].a.clone(), d[0].b.clone()), (1.into(), 2.into()));
    assert_eq!((d[0].a_text.as_str(), d[0].b_text.as_str()), ("1", "2"));
}
