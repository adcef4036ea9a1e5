//! The HTML view of conform reports: one page per plugin, or a matrix of several.
//!
//! The page is one self-contained file: inline CSS, no script, no image, no font, no link
//! to anything, and a Content-Security-Policy that forbids loading or running anything
//! else, so it opens offline and a hostile string in a report cannot act. Every string
//! taken from a report (plugin names and paths, attributes, check details, facts, the
//! plugin's log lines) is untrusted and goes through [`escape`].
//!
//! The matrix has the checks as rows and the reports as columns. A cell shows the outcome
//! as a word (coloured too, but never by colour alone) and its detail; a row whose
//! outcomes differ between the columns is marked `differs` and highlighted, and an "only
//! differences" checkbox hides the others with CSS alone. The matrix scrolls sideways
//! inside its box with the check names pinned on the left, so it reads on a phone.
//!
//! The markup is stable for tools: every check row is `<tr data-check="NAME">`, every
//! outcome cell `<td data-outcome="OUTCOME">` with the word in `<span class="label">`,
//! and a differing row has the class `diff` (the others `same`).

use std::fmt::Write as _;

use serde_json::Value as Json;

use crate::{CheckResult, Outcome, Report};

/// Escapes `s` for HTML text and for a double- or single-quoted attribute value. Control
/// characters other than tab, newline and carriage return become U+FFFD.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if c.is_control() => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// Renders `reports`, each with where it came from (a file name, or what ran it), as one
/// HTML page: the page of that plugin for one report, a matrix for several.
pub fn render_html(reports: &[(&str, &Report)]) -> String {
    match reports {
        [(source, report)] => page(source, report),
        _ => matrix(reports),
    }
}

const STYLE: &str = r#"
:root { color-scheme: light; --fg: #1f2328; --muted: #59636e; --line: #d1d9e0; --bg: #fff; --head: #f6f8fa; }
* { box-sizing: border-box; }
body { margin: 0; padding: 12px; font: 15px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); }
h1 { font-size: 1.3em; margin: 0 0 4px; overflow-wrap: anywhere; }
h2 { font-size: 1.1em; margin: 20px 0 6px; }
p, .meta { color: var(--muted); margin: 4px 0; overflow-wrap: anywhere; }
code { font: 0.9em ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; overflow-wrap: anywhere; }
.scroll { overflow-x: auto; max-width: 100%; border: 1px solid var(--line); border-radius: 6px; }
table { border-collapse: separate; border-spacing: 0; width: 100%; }
th, td { padding: 6px 8px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
thead th { background: var(--head); position: sticky; top: 0; z-index: 2; }
tbody th { font-weight: 600; }
.sticky { position: sticky; left: 0; z-index: 1; background: var(--bg); min-width: 9.5em; max-width: 14em; overflow-wrap: anywhere; border-right: 1px solid var(--line); }
thead .sticky { z-index: 3; background: var(--head); }
td.cell { min-width: 9em; max-width: 24em; }
.label { font-weight: 600; white-space: nowrap; }
.sym { display: inline-block; width: 1.1em; }
.detail { display: block; font-size: 0.85em; color: #333; overflow-wrap: anywhere; white-space: pre-wrap; }
.by { font-size: 0.8em; color: var(--muted); }
.o-pass { background: #dcf5e3; color: #0f5132; }
.o-fail { background: #fbd9d9; color: #842029; }
.o-unsupported { background: #fdf3c8; color: #664d03; }
.o-blocked { background: #e6e8eb; color: #3d4450; }
.o-crash { background: #f2d6f6; color: #6a1b78; }
.o-timeout { background: #fde3cc; color: #7a3305; }
.o-absent { background: #fff; color: var(--muted); font-style: italic; }
tr.diff th.sticky { background: #fff1a8; box-shadow: inset 4px 0 #c77700; }
tr.diff td { box-shadow: inset 0 2px #c77700, inset 0 -2px #c77700; }
.mark { display: inline-block; margin-left: 4px; padding: 0 4px; border-radius: 4px; font-size: 0.75em; font-weight: 600; background: #c77700; color: #fff; }
.chips { display: flex; flex-wrap: wrap; gap: 6px; margin: 8px 0; padding: 0; list-style: none; }
.chips li { padding: 3px 8px; border-radius: 12px; font-weight: 600; }
.toggle { margin: 12px 0 8px; font-weight: 600; display: inline-flex; align-items: center; gap: 6px; }
.toggle input { width: 1.2em; height: 1.2em; }
#only-diff:checked ~ .scroll tr.same { display: none; }
details { margin-top: 4px; }
summary { cursor: pointer; color: var(--muted); font-size: 0.85em; }
pre { margin: 4px 0; padding: 6px; background: var(--head); border-radius: 4px; font-size: 0.8em; white-space: pre-wrap; overflow-wrap: anywhere; }
dl.facts { margin: 4px 0; font-size: 0.85em; display: grid; grid-template-columns: auto 1fr; gap: 0 8px; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
.load-error { color: #842029; background: #fbd9d9; padding: 6px 8px; border-radius: 6px; overflow-wrap: anywhere; white-space: pre-wrap; }
footer { margin-top: 16px; font-size: 0.8em; color: var(--muted); }
"#;

fn head(out: &mut String, title: &str) {
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    // Nothing may load or run: the page is complete as written.
    out.push_str(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'\">\n",
    );
    let _ = writeln!(out, "<title>{}</title>", escape(title));
    let _ = writeln!(out, "<style>{STYLE}</style>\n</head>\n<body>");
}

fn foot(out: &mut String, reports: &[(&str, &Report)]) {
    let mut versions: Vec<String> = reports
        .iter()
        .map(|(_, r)| {
            format!(
                "rpjrt {} (schema {})",
                escape(&r.rpjrt_version),
                r.schema_version
            )
        })
        .collect();
    versions.dedup();
    let _ = writeln!(
        out,
        "<footer>Checks run by {}; page written by rpjrt {}.</footer>\n</body>\n</html>",
        versions.join(", "),
        env!("CARGO_PKG_VERSION")
    );
}

/// The symbol drawn next to an outcome's word (decoration; the word carries the meaning).
fn symbol(o: Option<Outcome>) -> &'static str {
    match o {
        Some(Outcome::Pass) => "\u{2713}",
        Some(Outcome::Fail) => "\u{2717}",
        Some(Outcome::Unsupported) => "\u{2013}",
        Some(Outcome::Blocked) => "\u{2298}",
        Some(Outcome::Crash) => "\u{2620}",
        Some(Outcome::Timeout) => "\u{29d6}",
        None => "\u{00b7}",
    }
}

fn outcome_class(o: Option<Outcome>) -> &'static str {
    o.map(Outcome::name).unwrap_or("absent")
}

/// The one-line detail of a result: what happened, who lacks an unsupported capability,
/// what blocked a blocked check.
fn detail_html(r: &CheckResult) -> String {
    let mut s = String::new();
    if let (Outcome::Blocked, Some(cause)) = (r.outcome, r.blocked_by.as_deref()) {
        let _ = write!(s, "blocked by {}: ", escape(cause));
    }
    s.push_str(&escape(&r.detail));
    if r.outcome == Outcome::Unsupported && r.unsupported_by.as_deref() == Some("rpjrt") {
        s.push_str(" <span class=\"by\">(not yet bound by rpjrt)</span>");
    }
    s
}

/// `<span class="sym">…</span><span class="label">outcome</span>`.
fn label_html(o: Option<Outcome>) -> String {
    format!(
        "<span class=\"sym\" aria-hidden=\"true\">{}</span><span class=\"label\">{}</span>",
        symbol(o),
        outcome_class(o)
    )
}

fn json_text(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The facts of `r.results[i]`, their wide integers as the report's file writes them.
fn facts_html(r: &Report, i: usize) -> String {
    let facts = &r.results[i].facts;
    if facts.is_empty() {
        return String::new();
    }
    let mut s = String::from("<details><summary>facts</summary><dl class=\"facts\">");
    for (k, v) in facts {
        let _ = write!(
            s,
            "<dt>{}</dt><dd><code>{}</code></dd>",
            escape(k),
            escape(&match v {
                Json::String(s) => s.clone(),
                _ => crate::exact::text_at(
                    v,
                    &format!("/results/{i}/facts/{}", crate::exact::token(k)),
                    &r.wide_integers
                ),
            })
        );
    }
    s.push_str("</dl></details>");
    s
}

/// The plugin's file name (the last part of its path), or a stand-in.
fn plugin_name(r: &Report) -> String {
    let path = r.plugin.get("path").and_then(Json::as_str).unwrap_or("");
    let name = path.rsplit('/').next().unwrap_or("");
    if name.is_empty() {
        "unknown plugin".into()
    } else {
        name.into()
    }
}

fn plugin_field(r: &Report, key: &str) -> String {
    r.plugin.get(key).map(json_text).unwrap_or_default()
}

fn extension_names(r: &Report) -> String {
    r.plugin
        .get("extensions")
        .and_then(Json::as_array)
        .map(|exts| {
            exts.iter()
                .filter_map(|e| e.get("name").and_then(Json::as_str))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

fn chips(out: &mut String, r: &Report) {
    out.push_str("<ul class=\"chips\">");
    let s = r.summary();
    for o in Outcome::ALL {
        let n = s[o.name()];
        if n == 0 && matches!(o, Outcome::Blocked | Outcome::Crash | Outcome::Timeout) {
            continue;
        }
        let _ = write!(
            out,
            "<li class=\"o-{name}\" data-summary=\"{name}\">{n} {name}</li>",
            name = o.name()
        );
    }
    out.push_str("</ul>\n");
}

/// The page of one report.
fn page(source: &str, r: &Report) -> String {
    let name = plugin_name(r);
    let mut out = String::new();
    head(&mut out, &format!("rpjrt conform: {name}"));
    let _ = writeln!(out, "<h1>Conformance of {}</h1>", escape(&name));
    let _ = writeln!(
        out,
        "<p class=\"meta\">PJRT {} &middot; {} checks &middot; from {}</p>",
        escape(&plugin_field(r, "pjrt_version")),
        r.results.len(),
        escape(source)
    );
    if let Some(e) = r.load_error() {
        let _ = writeln!(
            out,
            "<p class=\"load-error\" data-load-error><strong>The plugin could not be loaded; no \
             check ran:</strong> {}</p>",
            escape(e)
        );
    }
    chips(&mut out, r);
    // The plugin's facts are written here but shown after the checks (below).
    let facts_at = out.len();
    out.push_str("<h2>Plugin</h2>\n<div class=\"scroll\"><table class=\"plugin\"><tbody>\n");
    let mut rows = vec![
        ("path", plugin_field(r, "path")),
        ("PJRT version", plugin_field(r, "pjrt_version")),
        (
            "function table",
            format!(
                "{} bytes, {} slots",
                plugin_field(r, "table_size"),
                plugin_field(r, "table_slots")
            ),
        ),
        ("extensions", extension_names(r)),
    ];
    if let Some(e) = r.load_error() {
        rows.push(("load error", e.to_string()));
    }
    if let Some(attrs) = r.plugin.get("attributes").and_then(Json::as_object) {
        for (k, v) in attrs {
            let at = format!("/plugin/attributes/{}", crate::exact::token(k));
            let text = match v {
                Json::String(s) => s.clone(),
                _ => crate::exact::text_at(v, &at, &r.wide_integers),
            };
            rows.push(("attribute", format!("{k} = {text}")));
        }
    }
    for (k, v) in rows {
        let _ = writeln!(
            out,
            "<tr><th class=\"sticky\" scope=\"row\">{}</th><td><code>{}</code></td></tr>",
            escape(k),
            escape(&v)
        );
    }
    out.push_str("</tbody></table></div>\n");
    let facts: String = out.drain(facts_at..).collect();
    out.push_str("<h2>Checks</h2>\n<div class=\"scroll\">\n");
    out.push_str(
        "<table class=\"checks\"><thead><tr><th class=\"sticky\" scope=\"col\">check</th>\
         <th scope=\"col\">outcome and detail</th></tr></thead>\n<tbody>\n",
    );
    for (i, c) in r.results.iter().enumerate() {
        let o = c.outcome.name();
        let _ = write!(
            out,
            "<tr data-check=\"{n}\"><th class=\"sticky\" scope=\"row\"><code>{n}</code></th>\
             <td class=\"cell o-{o}\" data-outcome=\"{o}\">{}<span class=\"detail\">{}</span>{}",
            label_html(Some(c.outcome)),
            detail_html(c),
            facts_html(r, i),
            n = escape(&c.name),
        );
        if !c.stderr.is_empty() {
            let _ = write!(
                out,
                "<details><summary>plugin output</summary><pre>{}</pre></details>",
                escape(&c.stderr)
            );
        }
        out.push_str("</td></tr>\n");
    }
    out.push_str("</tbody></table>\n</div>\n");
    // The checks come first: on a phone they are what one scrolls for.
    out.push_str(&facts);
    foot(&mut out, &[(source, r)]);
    out
}

/// The column titles: the plugin's file name, with the source added where two are alike.
fn titles(reports: &[(&str, &Report)]) -> Vec<String> {
    let names: Vec<String> = reports.iter().map(|(_, r)| plugin_name(r)).collect();
    names
        .iter()
        .zip(reports)
        .map(|(n, (source, _))| {
            if names.iter().filter(|m| *m == n).count() > 1 {
                format!("{n} ({source})")
            } else {
                n.clone()
            }
        })
        .collect()
}

/// The matrix of several reports.
fn matrix(reports: &[(&str, &Report)]) -> String {
    let titles = titles(reports);
    // The checks in the order the first report ran them, then any only later ones have.
    let mut names: Vec<&str> = Vec::new();
    for (_, r) in reports {
        for c in &r.results {
            if !names.contains(&c.name.as_str()) {
                names.push(&c.name);
            }
        }
    }
    let rows: Vec<(&str, Vec<Option<&CheckResult>>)> = names
        .iter()
        .map(|n| {
            let cells = reports
                .iter()
                .map(|(_, r)| r.results.iter().find(|c| c.name == *n))
                .collect();
            (*n, cells)
        })
        .collect();
    let differs = |cells: &[Option<&CheckResult>]| {
        cells
            .windows(2)
            .any(|w| w[0].map(|c| c.outcome) != w[1].map(|c| c.outcome))
    };
    let n_diff = rows.iter().filter(|(_, c)| differs(c)).count();

    let mut out = String::new();
    head(
        &mut out,
        &format!("rpjrt conform: {} plugins compared", reports.len()),
    );
    let _ = writeln!(
        out,
        "<h1>Conformance of {} plugins</h1>\n<p class=\"meta\">{} checks; the outcome differs in {}.</p>",
        reports.len(),
        rows.len(),
        n_diff
    );

    // The plugins, side by side; a row whose values differ is marked like a check.
    // Written here, shown after the checks (below).
    let plugins_at = out.len();
    out.push_str("<h2>Plugins</h2>\n<div class=\"scroll\"><table class=\"plugins\">\n");
    header_row(&mut out, "", &titles, reports);
    out.push_str("<tbody>\n");
    let mut facts: Vec<(&str, Vec<String>)> = vec![
        (
            "report",
            reports.iter().map(|(s, _)| s.to_string()).collect(),
        ),
        (
            "path",
            reports
                .iter()
                .map(|(_, r)| plugin_field(r, "path"))
                .collect(),
        ),
        (
            "PJRT version",
            reports
                .iter()
                .map(|(_, r)| plugin_field(r, "pjrt_version"))
                .collect(),
        ),
        (
            "table slots",
            reports
                .iter()
                .map(|(_, r)| plugin_field(r, "table_slots"))
                .collect(),
        ),
        (
            "extensions",
            reports.iter().map(|(_, r)| extension_names(r)).collect(),
        ),
    ];
    // A plugin that could not be loaded says why (its column has no check).
    if reports.iter().any(|(_, r)| r.load_error().is_some()) {
        facts.push((
            "load error",
            reports
                .iter()
                .map(|(_, r)| r.load_error().unwrap_or("").to_string())
                .collect(),
        ));
    }
    for o in Outcome::ALL {
        facts.push((
            o.name(),
            reports
                .iter()
                .map(|(_, r)| r.summary()[o.name()].to_string())
                .collect(),
        ));
    }
    for (k, values) in &facts {
        let differ = *k != "report" && *k != "path" && values.windows(2).any(|w| w[0] != w[1]);
        let _ = write!(
            out,
            "<tr class=\"{}\"><th class=\"sticky\" scope=\"row\">{}{}</th>",
            if differ { "diff" } else { "same" },
            escape(k),
            if differ {
                "<span class=\"mark\">differs</span>"
            } else {
                ""
            }
        );
        for v in values {
            let _ = write!(out, "<td><code>{}</code></td>", escape(v));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table></div>\n");
    let plugins: String = out.drain(plugins_at..).collect();

    out.push_str("<h2>Checks</h2>\n");
    // The checkbox precedes the table's box, so `:checked ~ .scroll` reaches it: the
    // filter is CSS, and every row is in the page whether or not it is shown.
    let _ = writeln!(
        out,
        "<input type=\"checkbox\" id=\"only-diff\"><label class=\"toggle\" for=\"only-diff\">\
         only differences ({n_diff} of {})</label>",
        rows.len()
    );
    out.push_str("<div class=\"scroll\">\n<table class=\"matrix\">\n");
    header_row(&mut out, "check", &titles, reports);
    out.push_str("<tbody>\n");
    for (name, cells) in &rows {
        let d = differs(cells);
        let _ = write!(
            out,
            "<tr class=\"{}\" data-check=\"{n}\"><th class=\"sticky\" scope=\"row\"><code>{n}</code>{}</th>",
            if d { "diff" } else { "same" },
            if d {
                "<span class=\"mark\">differs</span>"
            } else {
                ""
            },
            n = escape(name),
        );
        for (cell, (_, report)) in cells.iter().zip(reports) {
            let o = cell.map(|c| c.outcome);
            let _ = write!(
                out,
                "<td class=\"cell o-{k}\" data-outcome=\"{k}\">{}",
                label_html(o),
                k = outcome_class(o)
            );
            match cell {
                Some(c) => {
                    let _ = write!(out, "<span class=\"detail\">{}</span>", detail_html(c));
                }
                None if report.load_error().is_some() => out.push_str(
                    "<span class=\"detail\">not run: the plugin could not be loaded (its load \
                     error is under Plugins)</span>",
                ),
                None => out.push_str("<span class=\"detail\">not in this report</span>"),
            }
            out.push_str("</td>");
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n</div>\n");
    // The checks come first: on a phone they are what one scrolls for.
    out.push_str(&plugins);
    foot(&mut out, reports);
    out
}

fn header_row(out: &mut String, corner: &str, titles: &[String], reports: &[(&str, &Report)]) {
    let _ = write!(
        out,
        "<thead><tr><th class=\"sticky\" scope=\"col\">{}</th>",
        escape(corner)
    );
    for (t, (_, r)) in titles.iter().zip(reports) {
        let _ = write!(
            out,
            "<th scope=\"col\" data-plugin=\"{t}\">{t}<br><span class=\"by\">PJRT {}</span></th>",
            escape(&plugin_field(r, "pjrt_version")),
            t = escape(t),
        );
    }
    out.push_str("</tr></thead>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Map};

    fn result(name: &str, outcome: Outcome, detail: &str) -> CheckResult {
        CheckResult {
            name: name.into(),
            group: name.split('.').next().unwrap_or("").into(),
            outcome,
            unsupported_by: (outcome == Outcome::Unsupported).then(|| "plugin".into()),
            blocked_by: None,
            detail: detail.into(),
            facts: Map::new(),
            duration_ms: 1.0,
            stderr: String::new(),
        }
    }

    fn report(path: &str, results: Vec<CheckResult>) -> Report {
        Report {
            schema_version: crate::SCHEMA_VERSION,
            rpjrt_version: "0.1.0".into(),
            plugin: json!({"path": path, "pjrt_version": "0.81", "table_slots": 118})
                .as_object()
                .unwrap()
                .clone(),
            results,
            notes: Vec::new(),
            wide_integers: std::collections::BTreeMap::new(),
        }
    }

    /// The rows of a page: (check, [(outcome, row class)]), read back from the markup.
    fn rows(html: &str) -> Vec<(String, String, Vec<String>)> {
        html.split("<tr ")
            .skip(1)
            .filter_map(|tr| {
                let tr = &tr[..tr.find("</tr>")?];
                let check = tr.split("data-check=\"").nth(1)?.split('"').next()?;
                let class = tr
                    .strip_prefix("class=\"")
                    .and_then(|s| s.split('"').next())
                    .unwrap_or("");
                let outcomes = tr
                    .split("data-outcome=\"")
                    .skip(1)
                    .map(|s| s.split('"').next().unwrap_or("").to_string())
                    .collect();
                Some((check.to_string(), class.to_string(), outcomes))
            })
            .collect()
    }

    #[test]
    fn escape_covers_markup_and_quotes() {
        assert_eq!(
            escape("</script><img src=x onerror='alert(1)'> & \"q\""),
            "&lt;/script&gt;&lt;img src=x onerror=&#39;alert(1)&#39;&gt; &amp; &quot;q&quot;"
        );
        assert_eq!(
            escape("a\u{0}b\u{1b}[31m\tc\n"),
            "a\u{fffd}b\u{fffd}[31m\tc\n"
        );
    }

    #[test]
    fn hostile_strings_render_as_text() {
        let evil = "</script><img src=x onerror=alert(1)><script>alert(2)</script>";
        let mut r = result("api.version", Outcome::Fail, evil);
        r.facts.insert(evil.into(), json!(evil));
        r.stderr = evil.into();
        r.unsupported_by = Some(evil.into());
        let mut a = report(&format!("/p/{evil}.so"), vec![r.clone()]);
        a.plugin.insert("attributes".into(), json!({ evil: evil }));
        a.rpjrt_version = evil.into();
        let mut b = a.clone();
        b.results[0].name = format!("x.{evil}\" data-x=\"");
        for html in [
            render_html(&[(evil, &a)]),
            render_html(&[(evil, &a), ("b\"<", &b)]),
        ] {
            assert!(!html.contains("<img"), "{html}");
            assert!(!html.contains("<script"), "{html}");
            assert!(!html.contains("data-x=\""), "{html}");
            assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"));
            assert!(html.contains("Content-Security-Policy"));
        }
    }

    #[test]
    fn one_report_is_a_page_with_counts_and_every_check() {
        let mut blocked = result("buffers.scalar", Outcome::Blocked, "needs a client");
        blocked.blocked_by = Some(crate::CLIENT_CHECK.into());
        let mut by_rpjrt = result("ffi.x", Outcome::Unsupported, "not bound");
        by_rpjrt.unsupported_by = Some("rpjrt".into());
        let r = report(
            "/lib/xla_cpu_pjrt.so",
            vec![
                result("api.version", Outcome::Pass, ""),
                result("client.create", Outcome::Fail, "no GPU"),
                blocked,
                by_rpjrt,
            ],
        );
        let html = render_html(&[("a.json", &r)]);
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.contains("<meta name=\"viewport\""));
        assert!(html.contains("<h1>Conformance of xla_cpu_pjrt.so</h1>"));
        assert!(html.contains("data-summary=\"pass\">1 pass<"));
        assert!(html.contains("data-summary=\"blocked\">1 blocked<"));
        assert!(
            !html.contains("data-summary=\"crash\""),
            "zero crash hidden"
        );
        assert!(html.contains("blocked by client.create: needs a client"));
        assert!(html.contains("(not yet bound by rpjrt)"));
        let got: Vec<(String, Vec<String>)> =
            rows(&html).into_iter().map(|(n, _, o)| (n, o)).collect();
        let want: Vec<(String, Vec<String>)> = r
            .results
            .iter()
            .map(|c| (c.name.clone(), vec![c.outcome.name().to_string()]))
            .collect();
        assert_eq!(got, want);
        // No script and no external reference.
        assert!(!html.contains("<script") && !html.contains("://"));
    }

    #[test]
    fn a_matrix_marks_the_rows_that_differ() {
        let a = report(
            "/a/xla_cpu_pjrt.so",
            vec![
                result("api.version", Outcome::Pass, ""),
                result("buffers.scalar", Outcome::Pass, ""),
                result("exec.basic", Outcome::Crash, "SIGSEGV"),
            ],
        );
        let mut b = report(
            "/b/pjrt_c_api_cpu_plugin.so",
            vec![
                result("api.version", Outcome::Pass, ""),
                result("buffers.scalar", Outcome::Unsupported, "no"),
                result("exec.basic", Outcome::Crash, "SIGSEGV"),
                result("topology.describe", Outcome::Timeout, "60 s"),
            ],
        );
        b.plugin.insert("pjrt_version".into(), json!("0.115"));
        let html = render_html(&[("a.json", &a), ("b.json", &b)]);
        let got = rows(&html);
        let want = [
            ("api.version", "same", vec!["pass", "pass"]),
            ("buffers.scalar", "diff", vec!["pass", "unsupported"]),
            ("exec.basic", "same", vec!["crash", "crash"]),
            ("topology.describe", "diff", vec!["absent", "timeout"]),
        ];
        assert_eq!(got.len(), want.len(), "{got:?}");
        for ((n, class, o), (wn, wc, wo)) in got.iter().zip(want) {
            assert_eq!((n.as_str(), class.as_str()), (wn, wc));
            assert_eq!(o, &wo);
        }
        assert!(html.contains("only differences (2 of 4)"));
        assert!(html.contains("#only-diff:checked ~ .scroll tr.same { display: none; }"));
        assert!(html.contains(">xla_cpu_pjrt.so<br>") && html.contains("PJRT 0.115"));
        // The plugin rows: the PJRT version differs, the counts of crashes do not.
        assert!(html.contains(
            "<tr class=\"diff\"><th class=\"sticky\" scope=\"row\">PJRT version<span class=\"mark\">differs</span>"
        ));
        assert!(html.contains("<tr class=\"same\"><th class=\"sticky\" scope=\"row\">crash</th>"));
        // Two columns of one plugin are told apart by their source.
        let same = render_html(&[("a.json", &a), ("a2.json", &a)]);
        assert!(same.contains(">xla_cpu_pjrt.so (a.json)<br>"));
        assert!(same.contains(">xla_cpu_pjrt.so (a2.json)<br>"));
        assert!(same.contains("only differences (0 of 3)"));
    }
}
