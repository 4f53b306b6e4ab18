//! The report: rows of figures, details, and the Markdown they make.

use std::fmt::Write as _;

struct Row {
    section: &'static str,
    name: String,
    measured: String,
    baseline: String,
    ratio: f64,
    goal: String,
    met: bool,
}

#[derive(Default)]
pub(crate) struct Report {
    rows: Vec<Row>,
    details: Vec<String>,
    misses: Vec<String>,
    pub(crate) svg: Option<String>,
}

impl Report {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn row(
        &mut self,
        section: &'static str,
        name: impl Into<String>,
        measured: String,
        baseline: String,
        ratio: f64,
        goal_max: Option<f64>,
        goal_min: Option<f64>,
        why_missed: &str,
    ) {
        let (goal, met) = match (goal_max, goal_min) {
            (Some(g), _) => (format!("≤ {g}"), ratio <= g),
            (None, Some(g)) => (format!("≥ {g}"), ratio >= g),
            (None, None) => ("—".into(), true),
        };
        self.row_with_goal(
            section, name, measured, baseline, ratio, goal, met, why_missed,
        );
    }

    /// A row whose goal is not on the ratio (an absolute bound on the
    /// measured value, say).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn row_with_goal(
        &mut self,
        section: &'static str,
        name: impl Into<String>,
        measured: String,
        baseline: String,
        ratio: f64,
        goal: String,
        met: bool,
        why_missed: &str,
    ) {
        let name = name.into();
        eprintln!("{section} | {name} | {measured} | {baseline} | {ratio:.3} | {goal} | {met}");
        if !met {
            self.misses.push(format!(
                "**{name}** ({ratio:.3}, goal {goal}): {why_missed}"
            ));
        }
        self.rows.push(Row {
            section,
            name,
            measured,
            baseline,
            ratio,
            goal,
            met,
        });
    }

    pub(crate) fn detail(&mut self, line: String) {
        eprintln!("  {line}");
        self.details.push(line);
    }

    pub(crate) fn markdown(&self) -> String {
        let mut out = String::new();
        out.push_str("| section | figure | leasehold | baseline | ratio | goal | met |\n");
        out.push_str("|---|---|---|---|---|---|---|\n");
        for r in &self.rows {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {:.3} | {} | {} |",
                r.section,
                r.name,
                r.measured,
                r.baseline,
                r.ratio,
                r.goal,
                if r.met { "yes" } else { "**no**" }
            );
        }
        if !self.misses.is_empty() {
            out.push_str("\n### Goals missed, and why\n\n");
            for m in &self.misses {
                let _ = writeln!(out, "* {m}");
            }
        }
        out.push_str("\n### Details\n\n");
        for d in &self.details {
            let _ = writeln!(out, "* {d}");
        }
        out
    }
}
