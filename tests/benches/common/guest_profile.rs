//! A callgrind profile's instructions in guest code, by guest function.
//!
//! Compiled guest code has no symbols callgrind can see: it is code wasmtime wrote into memory.
//! With `RuntimeConfig::perf_map` on, wasmtime names each function it compiled in
//! `/tmp/perf-<pid>.map`; with `--dump-instr=yes`, callgrind keeps a count per instruction
//! address. Together they give each guest function its instructions (its own, not those of
//! what it calls). Names are the component's own (its name section): a stripped guest shows
//! `wasm[0]::function[N]`, an unstripped one the Rust symbols.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context as _, bail};

/// Instructions counted in each guest function of the profile at `profile`, by name.
pub(crate) fn guest_functions(profile: &Path) -> anyhow::Result<HashMap<String, u64>> {
    let text = std::fs::read_to_string(profile)
        .with_context(|| format!("reading {}", profile.display()))?;
    let pid = text
        .lines()
        .find_map(|line| line.strip_prefix("pid: "))
        .context("the profile names no pid")?
        .trim();
    let map_path = format!("/tmp/perf-{pid}.map");
    let map = PerfMap::read(Path::new(&map_path))?;
    let mut counts = HashMap::new();
    for (address, instructions) in instruction_counts(&text)? {
        if let Some(name) = map.name(address) {
            *counts.entry(readable(name)).or_default() += instructions;
        }
    }
    // The map grows with every component a process loads; each run writes its own.
    let _ = std::fs::remove_file(&map_path);
    Ok(counts)
}

/// `name` with a Rust symbol in it (`wasm[0]::function[82]::_ZN…E`) demangled, its hash left
/// out. Any other name is returned as it is.
fn readable(name: &str) -> String {
    match name.split_once("_ZN") {
        Some((prefix, symbol)) => match rustc_demangle::try_demangle(&format!("_ZN{symbol}")) {
            Ok(demangled) => format!("{prefix}{demangled:#}"),
            Err(_) => name.to_owned(),
        },
        None => name.to_owned(),
    }
}

/// The functions of a perf map, by start address.
struct PerfMap {
    functions: Vec<(u64, u64, String)>,
}

impl PerfMap {
    /// Reads `path`: one `START SIZE NAME` line per function, start and size in hex.
    fn read(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| {
            format!(
                "reading {} (the child writes it when the perf map is on)",
                path.display()
            )
        })?;
        let hex = |field: &str| u64::from_str_radix(field.trim_start_matches("0x"), 16);
        let mut functions = Vec::new();
        for line in text.lines() {
            let mut fields = line.splitn(3, ' ');
            let (Some(start), Some(size), Some(name)) =
                (fields.next(), fields.next(), fields.next())
            else {
                bail!(
                    "{}: a line without start, size and name: {line}",
                    path.display()
                );
            };
            functions.push((hex(start)?, hex(size)?, name.to_owned()));
        }
        // wasmtime may name a function twice: its symbol whole, then with the module's
        // function index before a shortened symbol. The first is kept.
        functions.sort_by_key(|(start, _, _)| *start);
        functions.dedup_by_key(|(start, _, _)| *start);
        Ok(Self { functions })
    }

    fn name(&self, address: u64) -> Option<&str> {
        let at = self
            .functions
            .partition_point(|(start, _, _)| *start <= address);
        let (start, size, name) = self.functions.get(at.checked_sub(1)?)?;
        (address < start + size).then_some(name.as_str())
    }
}

/// Each cost line's instruction address and count, from a profile written with
/// `--dump-instr=yes` (positions `instr line`). A call's cost line, which counts the callee
/// inclusively, is left out: the callee's own lines count it.
fn instruction_counts(text: &str) -> anyhow::Result<Vec<(u64, u64)>> {
    let mut counts = Vec::new();
    // Positions may be given relative to the previous line's (`+N`, `-N`) or repeated (`*`).
    let mut last = [0i64; 2];
    let mut after_call = false;
    for line in text.lines() {
        if line.starts_with("calls=") {
            after_call = true;
            continue;
        }
        let Some(first) = line.bytes().next() else {
            continue;
        };
        if !(first.is_ascii_digit() || matches!(first, b'+' | b'-' | b'*')) {
            continue;
        }
        let mut fields = line.split_whitespace();
        for position in &mut last {
            let field = fields.next().context("a cost line without its positions")?;
            *position = match field.as_bytes().first() {
                Some(b'*') => *position,
                Some(b'+') => *position + parse(&field[1..])?,
                Some(b'-') => *position - parse(&field[1..])?,
                _ => parse(field)?,
            };
        }
        let instructions = fields.next().map_or(Ok(0), str::parse)?;
        if std::mem::take(&mut after_call) {
            continue;
        }
        counts.push((last[0] as u64, instructions));
    }
    Ok(counts)
}

/// A position: decimal, or hex with `0x`.
fn parse(field: &str) -> anyhow::Result<i64> {
    let value = match field.strip_prefix("0x") {
        Some(hex) => i64::from_str_radix(hex, 16),
        None => field.parse(),
    };
    value.with_context(|| format!("not a position: {field}"))
}
