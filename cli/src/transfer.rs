//! `leasehold export` and `leasehold import`: a table's rows to JSON lines
//! and back, resumable from a checkpoint file, with progress on stderr.
//!
//! The export's checkpoint holds the continuation token after the last
//! page written, the rows written and the output's length at that point;
//! it is replaced (written to a temporary file, synced, renamed) after
//! each page is synced to the output. The import's holds the input rows
//! stored. Given `--checkpoint FILE`, a command resumes from FILE when it
//! exists and starts afresh when it does not; FILE is removed when the
//! command completes.

use std::fs::File;
use std::io::{BufRead as _, BufReader, BufWriter, Seek as _, SeekFrom, Write};
use std::path::{Path, PathBuf};

use futures_util::StreamExt as _;
use leasehold::entity::Value;
use leasehold::query::{CmpOp, ContinuationToken, Filter, TypedFilter};
use leasehold::store::{ImportOptions, ImportProgress};
use leasehold::{DynamicEntity, Error, Store};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::args::{ExportArgs, ImportArgs, ImportMode};
use crate::failure::Failure;
use crate::output::{Output, Tally};

fn usage(message: impl Into<String>) -> Failure {
    Failure {
        code: Failure::USAGE,
        message: message.into(),
    }
}

fn io_failure(what: &str, path: &Path, e: std::io::Error) -> Failure {
    Failure {
        code: Failure::FAILED,
        message: format!("cannot {what} {}: {e}", path.display()),
    }
}

/// Where an export stands, as its checkpoint file holds it.
#[derive(Debug, Serialize, Deserialize)]
struct ExportCheckpoint {
    table: String,
    /// The query's continuation token after the last page written.
    token: String,
    rows: u64,
    /// The output's length once that page was written.
    bytes: u64,
}

/// Where an import stands, as its checkpoint file holds it.
#[derive(Debug, Serialize, Deserialize)]
struct ImportCheckpoint {
    table: String,
    mode: String,
    /// The input rows stored, counted from the input's start.
    rows: u64,
}

fn read_checkpoint<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, Failure> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            usage(format!(
                "{} is not a checkpoint of this command: {e}",
                path.display()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_failure("read the checkpoint", path, e)),
    }
}

/// Replaces the checkpoint at once: written beside it, synced, renamed
/// over it, so that it is the old one or the new one after a crash.
fn write_checkpoint(path: &Path, value: &impl Serialize) -> Result<(), Failure> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let write = || -> std::io::Result<()> {
        let mut file = File::create(&tmp)?;
        serde_json::to_writer(&mut file, value)?;
        file.write_all(b"\n")?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| io_failure("write the checkpoint", path, e))
}

fn remove_checkpoint(path: &Path) -> Result<(), Failure> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_failure("remove the checkpoint", path, e)),
    }
}

/// Fails with exit code 3 unless the store has table `table`.
async fn require_table(store: &Store, table: &str) -> Result<(), Failure> {
    let full = format!("{}{table}", store.table_prefix());
    let exists = store
        .backend()
        .list_tables()
        .await?
        .iter()
        .any(|t| t.as_str().eq_ignore_ascii_case(&full));
    if exists {
        Ok(())
    } else {
        Err(Failure::not_found(format!("no table {table:?}")))
    }
}

/// Runs `leasehold export`.
pub(crate) async fn export(store: &Store, args: ExportArgs, out: &Output) -> Result<(), Failure> {
    if args.checkpoint.is_some() && args.out.is_none() {
        return Err(usage(
            "--checkpoint needs --out FILE: a resumed export truncates and appends to it",
        ));
    }
    let mut query = store.dynamic_table(&args.table).query();
    if let Some(pk) = &args.partition {
        query = query.partition(pk.as_str());
    }
    if let Some(text) = &args.filter {
        let filter =
            parse_filter(text).map_err(|why| usage(format!("--filter {text:?}: {why}")))?;
        filter.validate()?;
        query = query.filter(TypedFilter::raw(filter));
    }
    require_table(store, &args.table).await?;
    let resumed = match &args.checkpoint {
        Some(path) => read_checkpoint::<ExportCheckpoint>(path)?,
        None => None,
    };
    if let Some(at) = &resumed {
        if at.table != args.table {
            return Err(usage(format!(
                "the checkpoint is of an export of table {:?}, not {:?}",
                at.table, args.table
            )));
        }
        let token: ContinuationToken = at.token.parse()?;
        query = query.resume(token);
    }
    // Where the lines go, and how many bytes and rows are there already.
    let (mut sink, mut file, mut bytes, mut rows): (Box<dyn Write>, Option<File>, u64, u64) =
        match &args.out {
            Some(path) => {
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .write(true)
                    .truncate(resumed.is_none())
                    .open(path)
                    .map_err(|e| io_failure("open", path, e))?;
                let (bytes, rows) = resumed.as_ref().map_or((0, 0), |at| (at.bytes, at.rows));
                // A page written after the checkpoint is written again.
                f.set_len(bytes)
                    .and_then(|()| f.seek(SeekFrom::Start(bytes)).map(drop))
                    .map_err(|e| io_failure("truncate", path, e))?;
                let writer = f.try_clone().map_err(|e| io_failure("open", path, e))?;
                (Box::new(BufWriter::new(writer)), Some(f), bytes, rows)
            }
            None => (
                Box::new(BufWriter::new(std::io::stdout().lock())),
                None,
                0,
                0,
            ),
        };
    let mut progress = Tally::new(out, "export", "exported");
    progress.resume_at(rows);
    let mut pages = std::pin::pin!(query.export());
    let mut line = String::new();
    let write_failed = |e: std::io::Error| match &args.out {
        Some(path) => io_failure("write", path, e),
        // The reader went away (`| head`): it had seen enough.
        None if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        None => Failure {
            code: Failure::FAILED,
            message: format!("cannot write the output: {e}"),
        },
    };
    while let Some(page) = pages.next().await {
        let page = page?;
        for row in &page.items {
            line.clear();
            line.push_str(&row.to_json_line()?);
            line.push('\n');
            sink.write_all(line.as_bytes()).map_err(write_failed)?;
            bytes += line.len() as u64;
        }
        rows += page.items.len() as u64;
        sink.flush().map_err(write_failed)?;
        if let (Some(path), Some(f)) = (&args.checkpoint, &file) {
            f.sync_data().map_err(write_failed)?;
            match &page.continuation {
                Some(token) => write_checkpoint(
                    path,
                    &ExportCheckpoint {
                        table: args.table.clone(),
                        token: token.to_string(),
                        rows,
                        bytes,
                    },
                )?,
                None => remove_checkpoint(path)?,
            }
        }
        progress.set(rows);
    }
    drop(sink);
    if let Some(f) = file.take() {
        f.sync_all().map_err(write_failed)?;
    }
    progress.finish();
    let (seconds, rate) = (progress.seconds(), progress.rate());
    let to = args
        .out
        .as_ref()
        .map_or_else(|| "stdout".to_owned(), |p| p.display().to_string());
    let summary = json!({
        "table": args.table,
        "rows": rows,
        "resumed_at": resumed.as_ref().map(|at| at.rows),
        "out": args.out.as_ref().map(|p| p.display().to_string()),
        "seconds": (seconds * 1000.0).round() / 1000.0,
    });
    let text = format!(
        "exported {rows} rows of {} to {to}{} in {seconds:.1} s ({rate:.0} rows/s)",
        args.table,
        resumed
            .as_ref()
            .map(|at| format!(" (resumed after {} rows)", at.rows))
            .unwrap_or_default(),
    );
    report(out, args.out.is_none(), summary, &text);
    Ok(())
}

/// The final line: on stdout, unless stdout holds the rows.
fn report(out: &Output, stdout_is_data: bool, summary: serde_json::Value, text: &str) {
    match (out.json, stdout_is_data) {
        (true, false) => out!("{summary}"),
        (true, true) => err!("{summary}"),
        (false, false) => out!("{text}"),
        (false, true) => err!("{text}"),
    }
}

/// Runs `leasehold import`.
pub(crate) async fn import(store: &Store, args: ImportArgs, out: &Output) -> Result<(), Failure> {
    let mode = match args.mode {
        ImportMode::Insert => "insert",
        ImportMode::Upsert => "upsert",
    };
    if args.checkpoint.is_some() && args.input.is_none() {
        return Err(usage(
            "--checkpoint needs --in FILE: a resumed import reads its input again",
        ));
    }
    let resumed = match &args.checkpoint {
        Some(path) => read_checkpoint::<ImportCheckpoint>(path)?,
        None => None,
    };
    if let Some(at) = &resumed
        && (at.table != args.table || at.mode != mode)
    {
        return Err(usage(format!(
            "the checkpoint is of an import into table {:?} with --mode {}, not {:?} with --mode {mode}",
            at.table, at.mode, args.table
        )));
    }
    let skip = resumed.as_ref().map_or(0, |at| at.rows);
    let (reader, source): (Box<dyn std::io::BufRead + Send>, String) = match &args.input {
        Some(path) => (
            Box::new(BufReader::new(
                File::open(path).map_err(|e| io_failure("open", path, e))?,
            )),
            path.display().to_string(),
        ),
        None => (
            Box::new(BufReader::new(std::io::stdin())),
            "stdin".to_owned(),
        ),
    };
    let source_name = source.clone();
    let skip_lines = usize::try_from(skip).map_err(|_| usage("checkpoint row count too large"))?;
    let rows = reader
        .lines()
        .enumerate()
        .skip(skip_lines)
        .map(move |(i, line)| {
            let at = || format!("line {} of {source_name}", i + 1);
            let line = line.map_err(|e| Error::invalid(at(), format!("cannot be read: {e}")))?;
            DynamicEntity::from_json_line(&line).map_err(|e| Error::invalid(at(), e.to_string()))
        });
    let mut options = match args.mode {
        ImportMode::Insert => ImportOptions::insert_only(),
        ImportMode::Upsert => ImportOptions::upsert(),
    };
    if let Some(n) = args.concurrency {
        options = options.with_concurrency(usize::from(n));
    }
    let mut progress = Tally::new(out, "import", "imported");
    progress.resume_at(skip);
    let mut reports =
        std::pin::pin!(store.import(&args.table, futures_util::stream::iter(rows), options));
    let mut last = ImportProgress::default();
    while let Some(report) = reports.next().await {
        let report = report?;
        last = report;
        if let Some(path) = &args.checkpoint {
            write_checkpoint(
                path,
                &ImportCheckpoint {
                    table: args.table.clone(),
                    mode: mode.to_owned(),
                    rows: skip + report.rows,
                },
            )?;
        }
        progress.set(skip + report.rows);
    }
    if let Some(path) = &args.checkpoint {
        remove_checkpoint(path)?;
    }
    let total = skip + last.rows;
    progress.finish();
    let (seconds, rate) = (progress.seconds(), progress.rate());
    let index_table = format!("{}Idx", args.table);
    let indexed = store.list_index_tables().await?.contains(&index_table);
    let summary = json!({
        "table": args.table,
        "mode": mode,
        "rows": total,
        "written": last.written,
        "already_there": last.already_there,
        "resumed_at": resumed.as_ref().map(|at| at.rows),
        "seconds": (seconds * 1000.0).round() / 1000.0,
        "index_table": indexed.then_some(&index_table),
    });
    let text = format!(
        "imported {total} rows from {source} into {} ({} written, {} already there{}) in {seconds:.1} s ({rate:.0} rows/s)",
        args.table,
        last.written,
        last.already_there,
        resumed
            .as_ref()
            .map(|at| format!(", resumed after {} rows", at.rows))
            .unwrap_or_default(),
    );
    report(out, false, summary, &text);
    if indexed && !out.json {
        out.note(&format!(
            "{} has an index table ({index_table}), which an import does not write: import its export too, or run `leasehold indexes rebuild {}`",
            args.table, args.table
        ));
    }
    Ok(())
}

/// Parses an OData filter as the Table service takes it: comparisons
/// `Property op literal` (`eq ne gt ge lt le`) joined by `and`, `or`, `not`
/// and parentheses; literals `'text'` (`''` for a quote), `42` (Int32),
/// `42L` (Int64), `1.5` (Double), `true`, `false`, `datetime'…'`,
/// `guid'…'`, `X'0A0B'` (Binary).
fn parse_filter(text: &str) -> Result<Filter, String> {
    let tokens = tokenize(text)?;
    let mut p = Parser { tokens, at: 0 };
    let filter = p.or()?;
    match p.tokens.get(p.at) {
        None => Ok(filter),
        Some(t) => Err(format!("unexpected {t:?} after a complete filter")),
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(String),
    Literal(Value),
    Open,
    Close,
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '(' || c == ')' {
            chars.next();
            tokens.push(if c == '(' { Token::Open } else { Token::Close });
        } else if c == '\'' {
            chars.next();
            tokens.push(Token::Literal(Value::String(quoted(&mut chars)?)));
        } else {
            let mut end = start;
            while let Some(&(i, c)) = chars.peek() {
                if c.is_alphanumeric() || matches!(c, '_' | '.' | '-' | '+') {
                    end = i + c.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            let word = &text[start..end];
            if word.is_empty() {
                return Err(format!("unexpected {c:?}"));
            }
            // A typed literal: a prefix, then a quoted text.
            if matches!(chars.peek(), Some((_, '\''))) {
                chars.next();
                let inner = quoted(&mut chars)?;
                tokens.push(Token::Literal(typed_literal(word, &inner)?));
            } else if word.starts_with(|c: char| c.is_ascii_digit() || c == '-') {
                tokens.push(Token::Literal(number(word)?));
            } else {
                tokens.push(Token::Word(word.to_owned()));
            }
        }
    }
    Ok(tokens)
}

/// The rest of a quoted text, its opening quote read; `''` is a quote.
fn quoted(chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>) -> Result<String, String> {
    let mut s = String::new();
    loop {
        match chars.next() {
            None => return Err("a quoted text is not closed".into()),
            Some((_, '\'')) => {
                if matches!(chars.peek(), Some((_, '\''))) {
                    chars.next();
                    s.push('\'');
                } else {
                    return Ok(s);
                }
            }
            Some((_, c)) => s.push(c),
        }
    }
}

fn typed_literal(prefix: &str, inner: &str) -> Result<Value, String> {
    match prefix.to_ascii_lowercase().as_str() {
        "datetime" => leasehold::time::OffsetDateTime::parse(
            inner,
            &leasehold::time::format_description::well_known::Rfc3339,
        )
        .map(Value::DateTime)
        .map_err(|e| format!("datetime'{inner}': {e}")),
        "guid" => inner
            .parse::<leasehold::uuid::Uuid>()
            .map(Value::Guid)
            .map_err(|e| format!("guid'{inner}': {e}")),
        "x" | "binary" => {
            if !inner.len().is_multiple_of(2) || !inner.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(format!("X'{inner}': not an even number of hex digits"));
            }
            (0..inner.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&inner[i..i + 2], 16))
                .collect::<Result<Vec<u8>, _>>()
                .map(Value::Binary)
                .map_err(|e| format!("X'{inner}': {e}"))
        }
        _ => Err(format!(
            "{prefix}'{inner}': the typed literals are datetime'…', guid'…' and X'…'"
        )),
    }
}

fn number(word: &str) -> Result<Value, String> {
    let bad = |e: &dyn std::fmt::Display| format!("{word:?} is not a number: {e}");
    if let Some(digits) = word.strip_suffix(['L', 'l']) {
        return digits.parse::<i64>().map(Value::Int64).map_err(|e| bad(&e));
    }
    if word.contains(['.', 'e', 'E']) {
        return word.parse::<f64>().map(Value::Double).map_err(|e| bad(&e));
    }
    word.parse::<i32>().map(Value::Int32).map_err(|e| {
        bad(&format!(
            "{e} (an Int64 literal ends with L, as in {word}L)"
        ))
    })
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn keyword(&mut self, word: &str) -> bool {
        match self.tokens.get(self.at) {
            Some(Token::Word(w)) if w.eq_ignore_ascii_case(word) => {
                self.at += 1;
                true
            }
            _ => false,
        }
    }

    fn or(&mut self) -> Result<Filter, String> {
        let mut f = self.and()?;
        while self.keyword("or") {
            f = f.or(self.and()?);
        }
        Ok(f)
    }

    fn and(&mut self) -> Result<Filter, String> {
        let mut f = self.unary()?;
        while self.keyword("and") {
            f = f.and(self.unary()?);
        }
        Ok(f)
    }

    fn unary(&mut self) -> Result<Filter, String> {
        if self.keyword("not") {
            return Ok(self.unary()?.not());
        }
        match self.tokens.get(self.at).cloned() {
            Some(Token::Open) => {
                self.at += 1;
                let f = self.or()?;
                if self.tokens.get(self.at) != Some(&Token::Close) {
                    return Err("a parenthesis is not closed".into());
                }
                self.at += 1;
                Ok(f)
            }
            Some(Token::Word(property)) => {
                self.at += 1;
                let op = match self.tokens.get(self.at) {
                    Some(Token::Word(op)) => match op.to_ascii_lowercase().as_str() {
                        "eq" => CmpOp::Eq,
                        "ne" => CmpOp::Ne,
                        "gt" => CmpOp::Gt,
                        "ge" => CmpOp::Ge,
                        "lt" => CmpOp::Lt,
                        "le" => CmpOp::Le,
                        other => {
                            return Err(format!(
                                "{other:?} is not a comparison (eq ne gt ge lt le)"
                            ));
                        }
                    },
                    other => {
                        return Err(format!(
                            "expected a comparison after {property:?}, found {other:?}"
                        ));
                    }
                };
                self.at += 1;
                let value = match self.tokens.get(self.at).cloned() {
                    Some(Token::Literal(v)) => v,
                    Some(Token::Word(w)) if w.eq_ignore_ascii_case("true") => Value::Boolean(true),
                    Some(Token::Word(w)) if w.eq_ignore_ascii_case("false") => {
                        Value::Boolean(false)
                    }
                    other => {
                        return Err(format!(
                            "expected a value after {property} {}, found {other:?}",
                            op.odata()
                        ));
                    }
                };
                self.at += 1;
                Ok(Filter::compare(property, op, value))
            }
            other => Err(format!("expected a comparison, found {other:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_filter;

    #[test]
    fn filters_parse_to_the_odata_they_were_written_as() {
        for (text, odata) in [
            ("total gt 5", "total gt 5"),
            (
                "total ge 5L and name eq 'o''brien'",
                "(total ge 5L) and (name eq 'o''brien')",
            ),
            (
                "not (a eq true) or d lt 1.5",
                "(not (a eq true)) or (d lt 1.5)",
            ),
            (
                "RowKey ge 'r' and RowKey lt 's'",
                "(RowKey ge 'r') and (RowKey lt 's')",
            ),
        ] {
            let f = parse_filter(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(f.to_odata(), odata, "{text}");
        }
        for bad in [
            "",
            "a eq",
            "a eq 'x",
            "a is 5",
            "(a eq 1",
            "a eq 99999999999",
            "a eq 1 b",
        ] {
            assert!(parse_filter(bad).is_err(), "{bad:?}");
        }
    }
}
