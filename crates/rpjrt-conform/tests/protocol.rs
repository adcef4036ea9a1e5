//! The runner's reading of the child's protocol lines: the plugin shares the child's
//! stdout, so a line that looks like the protocol but is not its next step (a forged
//! result, a start out of turn, a late load error) must not become a verdict.

use std::time::Duration;

use rpjrt_conform::{run_isolated, select, CheckResult, Outcome, RunConfig};

/// A child that speaks the protocol as `script` says (lines without the mark and the run's
/// word, which the child reads from its environment as a real one does).
fn run_script(lines: &[String], checks: &[rpjrt_conform::Check]) -> rpjrt_conform::Report {
    let body: String = lines
        .iter()
        .map(|l| {
            format!("printf '\\n\\036rpjrt-conform %s %s\\n' \"$RPJRT_CONFORM_NONCE\" '{l}'; ")
        })
        .collect();
    let config = RunConfig {
        child: vec!["sh".into(), "-c".into(), body.into(), "sh".into()],
        timeout: Duration::from_secs(20),
        env: Vec::new(),
        load_timeout: None,
        load_notice: None,
    };
    let mut progress = |_: usize, _: usize, _: &str, _: Option<&CheckResult>| {};
    run_isolated(
        "/nonexistent/plugin.so".as_ref(),
        checks,
        &config,
        &mut progress,
    )
    .expect("the run completes")
}

#[test]
fn lines_out_of_protocol_order_are_not_verdicts() {
    let mut checks: Vec<_> = select(None).into_iter().take(3).collect();
    let [a, b, c] = [0, 1, 2].map(|i| checks[i].name.clone());
    // Two checks run; the third is a name the runner did not ask for.
    checks.truncate(2);
    let result =
        |n: &str| format!(r#"{{"result": {{"name": "{n}", "group": "g", "outcome": "pass"}}}}"#);
    let start = |n: &str| format!(r#"{{"start": "{n}"}}"#);
    let report = run_script(
        &[
            r#"{"plugin": {}}"#.to_string(),
            // A result before any start, and a start out of turn: not the child's.
            result(&b),
            start(&c),
            start(&a),
            // A second start and a result for another check while `a` runs.
            start(&b),
            result(&c),
            result(&a),
            // `b` never started: its forged pass must not count, nor a late load error.
            result(&b),
            r#"{"load_error": "forged"}"#.to_string(),
        ],
        &checks,
    );
    let outcomes: Vec<(&str, Outcome)> = report
        .results
        .iter()
        .map(|r| (r.name.as_str(), r.outcome))
        .collect();
    assert_eq!(
        outcomes,
        [(a.as_str(), Outcome::Pass), (b.as_str(), Outcome::Crash)],
        "{:#?}",
        report.results
    );
    assert!(
        report.results[1]
            .detail
            .contains("before this check started"),
        "{}",
        report.results[1].detail
    );
}

#[test]
fn a_child_that_never_reports_its_load_is_killed_at_the_load_timeout_and_said_so() {
    // A child that neither loads nor reports (stuck before it could) was waited for a
    // minute, then its kill reported as "killed by SIGKILL" as if it had crashed.
    let config = RunConfig {
        child: vec![
            "sh".into(),
            "-c".into(),
            "exec sleep 60".into(),
            "sh".into(),
        ],
        timeout: Duration::from_secs(60),
        env: Vec::new(),
        load_timeout: Some(rpjrt_conform::LoadTimeout {
            limit: Duration::from_millis(500),
            shown_as: "500ms (the test's limit)".into(),
        }),
        load_notice: None,
    };
    let checks: Vec<_> = select(None).into_iter().take(1).collect();
    let mut progress = |_: usize, _: usize, _: &str, _: Option<&CheckResult>| {};
    let started = std::time::Instant::now();
    let e = run_isolated(
        "/nonexistent/plugin.so".as_ref(),
        &checks,
        &config,
        &mut progress,
    )
    .expect_err("a child that never loads fails the run");
    let took = started.elapsed();
    let msg = e.to_string();
    assert!(took < Duration::from_secs(20), "took {took:?}: {msg}");
    assert!(
        msg.contains("did not finish loading within 500ms (the test's limit)"),
        "{msg}"
    );
    assert!(msg.contains("killed") && !msg.contains("SIGKILL"), "{msg}");
}
