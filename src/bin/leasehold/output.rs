//! Where results go: text or one JSON document on stdout, progress on
//! stderr; and what every command shows of a lease.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use leasehold::backend::LeaseState;
use leasehold::lease::{BreakOutcome, LeaseDescription, OnceState};
use serde_json::{Value, json};

use crate::failure::Failure;

/// Writes a line on stdout. A reader that closed the pipe (`| head`) ends
/// the command at once, quietly and with status 0: the output is written
/// only after the operation is done, so nothing is left half-way. Another
/// write failure ends it with status 1 and a message on stderr.
pub(crate) fn stdout_line(line: std::fmt::Arguments<'_>) {
    let mut stdout = std::io::stdout().lock();
    let written = stdout
        .write_fmt(line)
        .and_then(|()| stdout.write_all(b"\n"))
        .and_then(|()| stdout.flush());
    if let Err(e) = written {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        err!("leasehold: cannot write the output: {e}");
        std::process::exit(i32::from(Failure::FAILED));
    }
}

pub(crate) fn state_str(state: LeaseState) -> &'static str {
    match state {
        LeaseState::Available => "available",
        LeaseState::Leased => "leased",
        LeaseState::Expired => "expired",
        LeaseState::Breaking => "breaking",
        LeaseState::Broken => "broken",
    }
}

pub(crate) fn once_json(once: &OnceState) -> Value {
    match once {
        OnceState::NotStarted => json!({ "state": "not_started" }),
        OnceState::Started { attempts } => json!({ "state": "started", "attempts": attempts }),
        OnceState::Done { attempts } => json!({ "state": "done", "attempts": attempts }),
    }
}

pub(crate) fn once_text(once: &OnceState) -> String {
    match once {
        OnceState::NotStarted => "not started".into(),
        OnceState::Started { attempts } => format!("started, unfinished ({attempts} attempts)"),
        OnceState::Done { attempts } => format!("done ({attempts} attempts)"),
    }
}

/// The holder: the recorded owner while the lease is held.
pub(crate) fn holder(d: &LeaseDescription) -> Option<&str> {
    d.owner.as_deref().filter(|_| d.is_held())
}

pub(crate) fn lease_json(d: &LeaseDescription) -> Value {
    json!({
        "name": d.name.as_str(),
        "exists": d.exists,
        "state": state_str(d.state),
        "held": d.is_held(),
        "holder": holder(d),
        "last_owner": d.owner,
        "acquired_at": d.acquired_at,
        "epoch": d.epoch,
        "once": once_json(&d.once),
        "reservation_records": d.reservation_records,
    })
}

/// Where results go: text or JSON on stdout, progress on stderr.
pub(crate) struct Output {
    pub(crate) json: bool,
}

impl Output {
    pub(crate) fn progress(&self, len: u64, what: &'static str) -> ProgressBar {
        if self.json || !std::io::stderr().is_terminal() || len == 0 {
            return ProgressBar::hidden();
        }
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {eta}") {
            bar.set_style(style);
        }
        bar.set_message(what);
        bar
    }

    pub(crate) fn note(&self, text: &str) {
        if self.json {
            err!("{text}");
        } else {
            out!("{text}");
        }
    }

    pub(crate) fn broken(&self, name: &str, was: LeaseState, outcome: BreakOutcome) {
        let left = match outcome {
            BreakOutcome::Broken { left } => Some(left),
            BreakOutcome::NotHeld => None,
        };
        if self.json {
            out!(
                "{}",
                json!({
                    "name": name,
                    "was": state_str(was),
                    "broken": left.is_some(),
                    "seconds_left": left.map(|d| d.as_secs()),
                })
            );
            return;
        }
        match left {
            None => out!("{name}: not held ({}); nothing to break", state_str(was)),
            Some(d) if d.is_zero() => out!("{name}: broken"),
            Some(d) => out!("{name}: breaking, broken in {} s", d.as_secs()),
        }
    }
}

/// The progress of a long command that counts rows (`purge`, `count`):
/// on a terminal (without `--json`) a line on stderr redrawn with the
/// count and the rate; otherwise (a log, a pipe, `--json`) a plain line on
/// stderr every [`Tally::EVERY`], so a scheduled job's log shows it
/// working.
pub(crate) struct Tally {
    bar: Option<ProgressBar>,
    command: &'static str,
    verb: &'static str,
    unit: &'static str,
    started: Instant,
    last_line: Instant,
    count: u64,
}

impl Tally {
    /// How often the plain lines come.
    const EVERY: Duration = Duration::from_secs(2);

    /// The progress of `command`, whose rows are `verb` (`deleted`).
    pub(crate) fn new(out: &Output, command: &'static str, verb: &'static str) -> Tally {
        Tally::of(out, command, verb, "rows")
    }

    /// The progress of `command`, whose `unit`s (`lock blobs`) are `verb`.
    pub(crate) fn of(
        out: &Output,
        command: &'static str,
        verb: &'static str,
        unit: &'static str,
    ) -> Tally {
        let now = Instant::now();
        let bar = (!out.json && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(&format!(
                "{{spinner}} {{msg}}: {{human_pos}} {unit} ({{per_sec}}, {{elapsed}})"
            )) {
                bar.set_style(style);
            }
            bar.set_message(format!("{command}: {verb}"));
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Tally {
            bar,
            command,
            verb,
            unit,
            started: now,
            last_line: now,
            count: 0,
        }
    }

    /// `count` rows so far.
    pub(crate) fn set(&mut self, count: u64) {
        self.count = count;
        match &self.bar {
            Some(bar) => bar.set_position(count),
            None if self.last_line.elapsed() >= Self::EVERY => {
                self.last_line = Instant::now();
                let seconds = self.started.elapsed().as_secs_f64();
                err!(
                    "{}: {} {count} {} ({:.0} {}/s, {seconds:.0} s)",
                    self.command,
                    self.verb,
                    self.unit,
                    count as f64 / seconds.max(0.001),
                    self.unit
                );
            }
            None => {}
        }
    }

    /// Takes the bar off the terminal: the command's result follows.
    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
