//! Where results go: text or one JSON document on stdout, progress on
//! stderr; and what every command shows of a lease.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use leasehold::backend::LeaseState;
use leasehold::lease::{LeaseDescription, OnceState};
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
    pub(crate) fn note(&self, text: &str) {
        if self.json {
            err!("{text}");
        } else {
            out!("{text}");
        }
    }

    /// `left`: the time until the lease is broken; `None` when nobody held it.
    pub(crate) fn broken(&self, name: &str, was: LeaseState, left: Option<Duration>) {
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

/// The progress of a long command, on stderr, the one kind every long
/// command shows (`purge`, `count`, `export`, `import`, `sweep`,
/// `indexes verify` and `rebuild`, listings): on a terminal (without
/// `--json`) a line redrawn with the count, the rate and the time taken (a
/// bar when the total is known); otherwise (a log, a pipe, `--json`) a plain line every 2 s, so
/// a scheduled job's log shows it working. `LEASEHOLD_PROGRESS_EVERY_MS`
/// sets that interval in milliseconds. The command's result, written after
/// [`Tally::finish`], says what it did.
pub(crate) struct Tally {
    bar: Option<ProgressBar>,
    command: &'static str,
    verb: &'static str,
    unit: &'static str,
    every: Duration,
    started: Instant,
    last_line: Instant,
    /// What was counted before this run (an import resumed), left out of
    /// the rate.
    base: u64,
    /// `None` for a command that cannot count: it shows the time alone.
    count: Option<u64>,
}

impl Tally {
    /// How often the plain lines come unless `LEASEHOLD_PROGRESS_EVERY_MS`
    /// says otherwise.
    const EVERY: Duration = Duration::from_secs(2);

    /// The progress of `command`, whose rows are `verb` (`deleted`).
    pub(crate) fn new(out: &Output, command: &'static str, verb: &'static str) -> Tally {
        Tally::of(out, command, verb, "rows")
    }

    /// The progress of `command`, whose `unit` (`leases`) are `verb`.
    pub(crate) fn of(
        out: &Output,
        command: &'static str,
        verb: &'static str,
        unit: &'static str,
    ) -> Tally {
        let template =
            format!("{{spinner}} {{msg}} {{human_pos}} {unit} ({{per_sec}}, {{elapsed}})");
        Tally::start(out, command, verb, unit, &template, Some(0))
    }

    fn start(
        out: &Output,
        command: &'static str,
        verb: &'static str,
        unit: &'static str,
        template: &str,
        count: Option<u64>,
    ) -> Tally {
        let now = Instant::now();
        let bar = (!out.json && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(template) {
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
            every: every(),
            started: now,
            last_line: now,
            base: 0,
            count,
        }
    }

    /// Out of `total`: a bar on a terminal.
    pub(crate) fn with_total(self, total: u64) -> Tally {
        if let Some(bar) = &self.bar {
            bar.set_length(total);
            if let Ok(style) = ProgressStyle::with_template(&format!(
                "{{msg}} [{{bar:30}}] {{human_pos}}/{{human_len}} {} ({{per_sec}}, {{eta}} left)",
                self.unit
            )) {
                bar.set_style(style);
            }
        }
        self
    }

    /// Starts from `count` already done (a resumed command), which the
    /// rate leaves out.
    pub(crate) fn resume_at(&mut self, count: u64) {
        self.base = count;
        self.count = Some(count);
        if let Some(bar) = &self.bar {
            bar.set_position(count);
            bar.reset_elapsed();
        }
    }

    /// `count` so far.
    pub(crate) fn set(&mut self, count: u64) {
        self.count = Some(count);
        match &self.bar {
            Some(bar) => bar.set_position(count),
            None => self.line_if_due(),
        }
    }

    /// Adds `n` to the count.
    pub(crate) fn add(&mut self, n: u64) {
        self.set(self.count.unwrap_or(0) + n);
    }

    /// The seconds since the command started.
    pub(crate) fn seconds(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// The rate of this run: what it counted (not what a resumed run
    /// found done) per second.
    pub(crate) fn rate(&self) -> f64 {
        let done = self.count.unwrap_or(0).saturating_sub(self.base);
        done as f64 / self.seconds().max(0.001)
    }

    fn line_if_due(&mut self) {
        if self.last_line.elapsed() < self.every {
            return;
        }
        self.last_line = Instant::now();
        let seconds = self.seconds();
        match self.count {
            Some(count) => err!(
                "{}: {} {count} {} ({:.0} {}/s, {seconds:.0} s)",
                self.command,
                self.verb,
                self.unit,
                self.rate(),
                self.unit
            ),
            None => err!("{}: {} ({seconds:.0} s)", self.command, self.verb),
        }
    }

    /// Takes the bar off the terminal: the command's result follows.
    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// The interval of the plain progress lines: `LEASEHOLD_PROGRESS_EVERY_MS`
/// (at least 1 ms), or [`Tally::EVERY`].
fn every() -> Duration {
    std::env::var("LEASEHOLD_PROGRESS_EVERY_MS")
        .ok()
        .and_then(|ms| ms.trim().parse::<u64>().ok())
        .map_or(Tally::EVERY, |ms| Duration::from_millis(ms.max(1)))
}
