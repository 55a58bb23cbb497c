//! Running inputs: panics caught quietly (message, location and the innermost waverun frame
//! recorded by a panic hook), wall time measured per input, a watchdog for inputs that never
//! return, crash files deduplicated by panic location, and the fuzz loop itself.

use crate::mutate::{mutate_bytes, MAX_INPUT};
use crate::node::{mutate_tree, Node};
use crate::rng::{fnv1a, Rng};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

/// How a target's inputs are shaped, which decides the structure-aware mutations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Opaque bytes.
    Bytes,
    /// A JSON or YAML document.
    Document,
    /// Lines `VERB payload`, payloads mostly JSON.
    Lines,
}

/// A fuzz target.
pub struct Target {
    /// Name (`--target`, the corpus and crash directories).
    pub name: &'static str,
    /// Runs one input; panics on a bug or a broken invariant.
    pub run: fn(&[u8]),
    /// Tokens for the byte mutator.
    pub dict: &'static [&'static str],
    /// Input shape.
    pub shape: Shape,
    /// A fresh input from nothing.
    pub generate: fn(&mut Rng) -> Vec<u8>,
    /// A line for [`Shape::Lines`] inputs (unused otherwise).
    pub line: fn(&mut Rng) -> Vec<u8>,
    /// What the target checks (for `--list`).
    pub about: &'static str,
}

// ---------------------------------------------------------------------- features

thread_local! {
    static TRACE: RefCell<BTreeMap<String, u64>> = const { RefCell::new(BTreeMap::new()) };
    static FEATURES: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
    static CAPTURE: Cell<bool> = const { Cell::new(false) };
    static LAST_PANIC: RefCell<Option<PanicRecord>> = const { RefCell::new(None) };
}

/// Records a behaviour the input reached (an error kind, an event kind, a state): inputs that
/// reach a new one join the in-memory corpus. Only the first line of `text` counts, normalised
/// ([`normalize`]) so that values do not count as behaviours.
pub fn feature(tag: &str, text: &str) {
    let mut s = String::with_capacity(tag.len() + text.len().min(120) + 1);
    s.push_str(tag);
    s.push('|');
    s.push_str(&normalize(text.lines().next().unwrap_or(""), 160));
    if tracing() {
        TRACE.with(|t| *t.borrow_mut().entry(s.clone()).or_insert(0) += 1);
    }
    let h = fnv1a(s.as_bytes());
    FEATURES.with(|f| f.borrow_mut().push(h));
}

/// Text without its values: everything from the first quote character (`"`, `` ` ``, `'`) to
/// the last one replaced by `..` (values may contain quote characters of their own, unescaped),
/// digit runs replaced by `#`, bracket runs by `[`, other non-ASCII characters by `?`; at most
/// `max` bytes kept.
pub fn normalize(text: &str, max: usize) -> String {
    let quotes: &[char] = &['"', '`', '\''];
    let text = match (text.find(quotes), text.rfind(quotes)) {
        (Some(a), Some(b)) if a < b => format!("{}..{}", &text[..a], &text[b + 1..]),
        _ => text.to_string(),
    };
    let mut s = String::new();
    let mut last: Option<char> = None;
    for c in text.chars() {
        if s.len() >= max {
            break;
        }
        // Runs of digits, and of brackets (raw JSON in a message), count as one.
        let class = if c.is_ascii_digit() {
            Some('#')
        } else if matches!(c, '[' | ']' | '{' | '}') {
            Some('[')
        } else {
            None
        };
        if let Some(k) = class {
            if last != Some(k) {
                s.push(k);
            }
            last = Some(k);
            continue;
        }
        last = None;
        s.push(if c.is_ascii() { c } else { '?' });
    }
    s
}

/// Whether `WAVERUN_FUZZ_TRACE` is set: features are then counted by name, and the fuzzer
/// prints them after each target (what the inputs reach, for tuning generators).
pub fn tracing() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("WAVERUN_FUZZ_TRACE").is_some())
}

/// The features counted by name on this thread since the last call (see [`tracing`]).
pub fn take_trace() -> BTreeMap<String, u64> {
    TRACE.with(|t| std::mem::take(&mut *t.borrow_mut()))
}

fn take_features() -> Vec<u64> {
    FEATURES.with(|f| std::mem::take(&mut *f.borrow_mut()))
}

// ---------------------------------------------------------------------- panics

/// A caught panic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PanicRecord {
    /// The panic message.
    pub message: String,
    /// `file:line:column`.
    pub location: String,
    /// The innermost waverun function on the stack, when the location is in a dependency or
    /// the standard library (e.g. chrono's `DateTime + TimeDelta`).
    pub frame: Option<String>,
}

impl PanicRecord {
    /// What crashes are deduplicated by: the location, plus the innermost waverun frame when
    /// the location alone does not say which code panicked. Invariant checks of the harness
    /// itself add the first line of their message without its values (they share a few
    /// assert sites).
    pub fn key(&self) -> String {
        let mut k = self.location.clone();
        if let Some(f) = &self.frame {
            k.push_str(" via ");
            k.push_str(f);
        }
        if self.location.contains("tests/fuzz/") {
            k.push_str(" :: ");
            k.push_str(&normalize(self.message.lines().next().unwrap_or(""), 80));
        }
        k
    }
}

fn in_dependency(file: &str) -> bool {
    file.contains("/.cargo/registry/")
        || file.contains("/.cargo/git/")
        || file.starts_with("/rustc/")
        || file.contains("/rustlib/src/")
        || file.starts_with("library/")
}

/// The innermost waverun function in a backtrace (symbol names survive in release builds).
fn waverun_frame() -> Option<String> {
    let bt = std::backtrace::Backtrace::force_capture().to_string();
    for line in bt.lines() {
        let line = line.trim_start();
        let Some((num, name)) = line.split_once(": ") else {
            continue;
        };
        if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let is_ours = ["waverun_core::", "waverun_plugin::", "waverun_host::"]
            .iter()
            .any(|p| name.contains(p));
        if is_ours {
            // Drop the `::h0123456789abcdef` hash suffix.
            let name = match name.rfind("::h") {
                Some(i) if name.len() - i == 19 => &name[..i],
                _ => name,
            };
            return Some(name.to_string());
        }
    }
    None
}

/// Installs the quiet panic hook (once): while an input runs, a panic is recorded instead of
/// printed; anywhere else the default hook prints it.
pub fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !CAPTURE.with(Cell::get) {
                default(info);
                return;
            }
            let message = info
                .payload_as_str()
                .map(str::to_string)
                .unwrap_or_else(|| "(non-string panic payload)".to_string());
            let location = info
                .location()
                .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
                .unwrap_or_else(|| "(unknown location)".to_string());
            let frame = if info.location().is_none_or(|l| in_dependency(l.file())) {
                waverun_frame()
            } else {
                None
            };
            LAST_PANIC.with(|p| {
                *p.borrow_mut() = Some(PanicRecord {
                    message,
                    location,
                    frame,
                })
            });
        }));
    });
}

/// Runs `f` with panics caught and recorded quietly.
pub fn quietly<R>(f: impl FnOnce() -> R) -> Result<R, PanicRecord> {
    install_panic_hook();
    let was = CAPTURE.with(|c| c.replace(true));
    LAST_PANIC.with(|p| p.borrow_mut().take());
    let r = catch_unwind(AssertUnwindSafe(f));
    CAPTURE.with(|c| c.set(was));
    r.map_err(|payload| {
        LAST_PANIC
            .with(|p| p.borrow_mut().take())
            .unwrap_or_else(|| PanicRecord {
                message: payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "(non-string panic payload)".into()),
                location: "(unknown location)".into(),
                frame: None,
            })
    })
}

/// What one input did.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// Nothing wrong; the features it reached.
    Ok(Vec<u64>),
    /// It panicked.
    Panic(PanicRecord),
    /// It returned, but took longer than the time limit.
    Slow(Duration),
}

impl Outcome {
    /// The crash key, if the outcome is a failure.
    pub fn key(&self, target: &str) -> Option<String> {
        match self {
            Outcome::Ok(_) => None,
            Outcome::Panic(p) => Some(p.key()),
            Outcome::Slow(_) => Some(format!("timeout in {target}")),
        }
    }
}

// ---------------------------------------------------------------------- the watchdog

struct Watch {
    target: &'static str,
    input: Vec<u8>,
    started: Instant,
    crash_dir: PathBuf,
}

static WATCH: Mutex<Option<Watch>> = Mutex::new(None);

/// Starts (once) a thread that ends the process if one input runs longer than `hard_limit`:
/// a hung input cannot be interrupted, so it is written out like a crash first.
pub fn start_watchdog(hard_limit: Duration) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_millis(200));
            let guard = WATCH.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(w) = guard.as_ref() {
                if w.started.elapsed() > hard_limit {
                    let path = write_crash(&w.crash_dir, w.target, &w.input);
                    eprintln!(
                        "\nHANG [{}]: an input ran for more than {:.0} s; written to {}\n\
                         The harness cannot interrupt it and exits now.",
                        w.target,
                        hard_limit.as_secs_f64(),
                        path.as_ref()
                            .map_or("(unwritable)".into(), |p| p.display().to_string())
                    );
                    std::process::exit(1);
                }
            }
        });
    });
}

/// Runs one input under the panic catcher, the timer and (when `crash_dir` is given) the
/// watchdog.
pub fn execute(
    target: &Target,
    input: &[u8],
    limit: Duration,
    crash_dir: Option<&Path>,
) -> Outcome {
    if let Some(dir) = crash_dir {
        *WATCH.lock().unwrap_or_else(|e| e.into_inner()) = Some(Watch {
            target: target.name,
            input: input.to_vec(),
            started: Instant::now(),
            crash_dir: dir.to_path_buf(),
        });
    }
    take_features();
    let t0 = Instant::now();
    let r = quietly(|| (target.run)(input));
    let elapsed = t0.elapsed();
    if crash_dir.is_some() {
        *WATCH.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
    let features = take_features();
    match r {
        Err(p) => Outcome::Panic(p),
        Ok(()) if elapsed > limit => Outcome::Slow(elapsed),
        Ok(()) => Outcome::Ok(features),
    }
}

/// The file name of an input: 16 hex digits of its FNV-1a hash.
pub fn short_hash(input: &[u8]) -> String {
    format!("{:016x}", fnv1a(input))
}

fn write_crash(dir: &Path, target: &str, input: &[u8]) -> Option<PathBuf> {
    let d = dir.join(target);
    std::fs::create_dir_all(&d).ok()?;
    let p = d.join(short_hash(input));
    std::fs::write(&p, input).ok()?;
    Some(p)
}

// ---------------------------------------------------------------------- the corpus

/// The files of `dir/<target>`, sorted by name.
pub fn corpus_files(dir: &Path, target: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir.join(target)) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if !p.is_file() {
            continue;
        }
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        if let Ok(bytes) = std::fs::read(&p) {
            out.push((name, bytes));
        }
    }
    out.sort();
    out
}

struct Entry {
    data: Vec<u8>,
    /// The parsed tree (documents), computed on first use.
    tree: Option<Option<(Node, bool)>>,
}

impl Entry {
    fn new(data: Vec<u8>) -> Entry {
        Entry { data, tree: None }
    }
}

/// A distinct failure.
#[derive(Clone, Debug)]
pub struct Crash {
    /// Deduplication key.
    pub key: String,
    /// Panic message (or the time taken).
    pub message: String,
    /// Panic location (and waverun frame).
    pub location: String,
    /// Where its smallest input is: a crash file, or the corpus file that reproduces it.
    pub path: String,
    /// Size of that input.
    pub size: usize,
    /// How many inputs hit it.
    pub hits: u64,
}

/// What a target's run did.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Target name.
    pub target: &'static str,
    /// Inputs run (corpus replay included).
    pub execs: u64,
    /// Wall time spent.
    pub elapsed: Duration,
    /// Committed corpus files.
    pub corpus_files: usize,
    /// Corpus entries at the end (files plus inputs that reached new behaviour).
    pub corpus_size: usize,
    /// Distinct behaviours reached.
    pub features: usize,
    /// Distinct failures, in order of discovery.
    pub crashes: Vec<Crash>,
}

/// Knobs of a fuzz run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Time for this target (replay included).
    pub budget: Duration,
    /// Stop after this many mutated inputs instead (deterministic run length).
    pub runs: Option<u64>,
    /// The target's seed.
    pub seed: u64,
    /// `tests/fuzz/corpus`.
    pub corpus_dir: PathBuf,
    /// Where crash inputs are written.
    pub crash_dir: PathBuf,
    /// An input slower than this is a failure.
    pub limit: Duration,
    /// Only replay the corpus.
    pub replay_only: bool,
    /// Write inputs that reached new behaviour to `export/<target>/`.
    pub export: Option<PathBuf>,
    /// Print every new crash as it is found.
    pub verbose: bool,
}

/// The fuzzing state of one target.
pub struct Fuzzer<'t> {
    target: &'t Target,
    cfg: Config,
    rng: Rng,
    entries: Vec<Entry>,
    seen: BTreeSet<u64>,
    crashes: BTreeMap<String, usize>,
    report: Report,
}

/// At most this many inputs are kept in memory.
const MAX_ENTRIES: usize = 4096;
/// Inputs larger than this are not kept (they are still run).
const MAX_KEPT: usize = 16 * 1024;

impl<'t> Fuzzer<'t> {
    /// A fuzzer for `target`.
    pub fn new(target: &'t Target, cfg: Config) -> Fuzzer<'t> {
        let rng = Rng::new(cfg.seed ^ fnv1a(target.name.as_bytes()));
        Fuzzer {
            target,
            rng,
            entries: Vec::new(),
            seen: BTreeSet::new(),
            crashes: BTreeMap::new(),
            report: Report {
                target: target.name,
                ..Report::default()
            },
            cfg,
        }
    }

    /// Replays the corpus, then mutates until the budget is spent; returns the report.
    pub fn run(mut self) -> Report {
        let t0 = Instant::now();
        let files = corpus_files(&self.cfg.corpus_dir, self.target.name);
        self.report.corpus_files = files.len();
        for (name, data) in files {
            let out = execute(
                self.target,
                &data,
                self.cfg.limit,
                Some(&self.cfg.crash_dir),
            );
            self.report.execs += 1;
            let path = self
                .cfg
                .corpus_dir
                .join(self.target.name)
                .join(&name)
                .display()
                .to_string();
            self.account(&data, out, Some(path));
            self.entries.push(Entry::new(data));
        }
        if !self.cfg.replay_only {
            let mut n = 0u64;
            loop {
                match self.cfg.runs {
                    Some(r) if n >= r => break,
                    None if t0.elapsed() >= self.cfg.budget => break,
                    _ => {}
                }
                n += 1;
                let input = self.next_input();
                let out = execute(
                    self.target,
                    &input,
                    self.cfg.limit,
                    Some(&self.cfg.crash_dir),
                );
                self.report.execs += 1;
                self.account(&input, out, None);
            }
        }
        self.report.elapsed = t0.elapsed();
        self.report.corpus_size = self.entries.len();
        self.report.features = self.seen.len();
        self.report
    }

    fn account(&mut self, input: &[u8], out: Outcome, corpus_path: Option<String>) {
        let key = out.key(self.target.name);
        match (out, key) {
            (Outcome::Ok(features), _) => {
                let mut new = false;
                for f in features {
                    new |= self.seen.insert(f);
                }
                if new && corpus_path.is_none() {
                    if let Some(dir) = &self.cfg.export {
                        let _ = write_crash(dir, self.target.name, input);
                    }
                    if input.len() <= MAX_KEPT {
                        if self.entries.len() < MAX_ENTRIES {
                            self.entries.push(Entry::new(input.to_vec()));
                        } else {
                            // Full: replace an entry that is not a corpus file.
                            let files = self.report.corpus_files;
                            let i = files + self.rng.below(MAX_ENTRIES - files);
                            self.entries[i] = Entry::new(input.to_vec());
                        }
                    }
                }
            }
            (out, Some(key)) => {
                let (message, location) = match &out {
                    Outcome::Panic(p) => (
                        p.message.clone(),
                        match &p.frame {
                            Some(f) => format!("{} (in {f})", p.location),
                            None => p.location.clone(),
                        },
                    ),
                    Outcome::Slow(d) => (
                        format!(
                            "took {:.1} s (limit {:.1} s)",
                            d.as_secs_f64(),
                            self.cfg.limit.as_secs_f64()
                        ),
                        "(timeout)".to_string(),
                    ),
                    Outcome::Ok(_) => unreachable!(),
                };
                if let Some(&i) = self.crashes.get(&key) {
                    let c = &mut self.report.crashes[i];
                    c.hits += 1;
                    // Keep the smallest reproducer (crash files only; corpus files stay).
                    if corpus_path.is_none() && input.len() < c.size && !c.path.contains("/corpus/")
                    {
                        if let Some(p) = write_crash(&self.cfg.crash_dir, self.target.name, input) {
                            let _ = std::fs::remove_file(&c.path);
                            c.path = p.display().to_string();
                            c.size = input.len();
                        }
                    }
                    return;
                }
                let path = match corpus_path {
                    Some(p) => p,
                    None => write_crash(&self.cfg.crash_dir, self.target.name, input)
                        .map_or_else(|| "(not written)".to_string(), |p| p.display().to_string()),
                };
                if self.cfg.verbose {
                    eprintln!(
                        "CRASH [{}] {}\n  message:  {}\n  location: {}\n  input:    {} ({} bytes)",
                        self.target.name,
                        self.report.crashes.len() + 1,
                        message.lines().next().unwrap_or(""),
                        location,
                        path,
                        input.len()
                    );
                }
                self.crashes.insert(key.clone(), self.report.crashes.len());
                self.report.crashes.push(Crash {
                    key,
                    message,
                    location,
                    path,
                    size: input.len(),
                    hits: 1,
                });
            }
            (_, None) => {}
        }
    }

    fn next_input(&mut self) -> Vec<u8> {
        let rng = &mut self.rng;
        let from_scratch = self.entries.is_empty() || rng.chance(1, 10);
        if from_scratch {
            let mut data = (self.target.generate)(rng);
            if rng.chance(1, 2) {
                return data;
            }
            mutate_bytes(rng, &mut data, &[], self.target.dict);
            return data;
        }
        let i = rng.below(self.entries.len());
        let j = rng.below(self.entries.len());
        let mode = rng.below(3);
        let mut data = self.entries[i].data.clone();
        if self.target.shape == Shape::Document && mode < 2 {
            if let Some(out) = self.structural(i, j) {
                data = out;
                if mode == 0 {
                    return data;
                }
            }
        }
        if self.target.shape == Shape::Lines && mode < 2 {
            data = self.mutate_lines(data, j);
            if mode == 0 {
                return data;
            }
        }
        let others: Vec<&[u8]> = vec![&self.entries[j].data];
        let n = 1 + self.rng.small(8);
        for _ in 0..n {
            mutate_bytes(&mut self.rng, &mut data, &others, self.target.dict);
        }
        data
    }

    /// A tree mutation of entry `i` (with entry `j` as a splice donor), written as JSON or YAML.
    fn structural(&mut self, i: usize, j: usize) -> Option<Vec<u8>> {
        for k in [i, j] {
            if self.entries[k].tree.is_none() {
                let data = &self.entries[k].data;
                // The YAML reader runs here too; a panic in it is found by the target itself.
                let parsed = quietly(|| Node::parse(data)).ok().flatten();
                self.entries[k].tree = Some(parsed);
            }
        }
        let (mut tree, was_json) = self.entries[i].tree.clone().flatten()?;
        let donor = self.entries[j]
            .tree
            .as_ref()
            .and_then(|t| t.as_ref())
            .map(|(n, _)| n.clone());
        let donors: Vec<&Node> = donor.iter().collect();
        let n = 1 + self.rng.small(4);
        for _ in 0..n {
            mutate_tree(&mut self.rng, &mut tree, &donors);
        }
        let yaml = if was_json {
            self.rng.chance(1, 2)
        } else {
            self.rng.chance(7, 10)
        };
        let text = if yaml {
            tree.to_yaml()
        } else {
            tree.to_json(self.rng.chance(1, 2))
        };
        let mut out = text.into_bytes();
        out.truncate(MAX_INPUT);
        Some(out)
    }

    /// Line-level mutations: a JSON payload changed as a tree, lines deleted, duplicated,
    /// swapped, or taken from another entry, new lines generated.
    fn mutate_lines(&mut self, data: Vec<u8>, j: usize) -> Vec<u8> {
        let mut lines: Vec<Vec<u8>> = data.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
        let n = 1 + self.rng.small(4);
        for _ in 0..n {
            let len = lines.len();
            let i = self.rng.below(len.max(1));
            match self.rng.below(8) {
                0..=2 if len > 0 => {
                    let line = &lines[i];
                    let split = line.iter().position(|&b| b == b' ').map_or(0, |p| p + 1);
                    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&line[split..]) {
                        let mut tree = Node::from_value(&v);
                        mutate_tree(&mut self.rng, &mut tree, &[]);
                        let mut l = line[..split].to_vec();
                        l.extend_from_slice(tree.to_json(false).as_bytes());
                        lines[i] = l;
                    }
                }
                3 if len > 0 => {
                    lines.remove(i);
                }
                4 if len > 0 => {
                    let l = lines[i].clone();
                    lines.insert(self.rng.below(len + 1), l);
                }
                5 if len > 1 => {
                    let k = self.rng.below(len);
                    lines.swap(i, k);
                }
                6 => {
                    let other: Vec<&[u8]> = self.entries[j].data.split(|&b| b == b'\n').collect();
                    let l = other[self.rng.below(other.len())].to_vec();
                    lines.insert(self.rng.below(len + 1), l);
                }
                _ => {
                    let l = (self.target.line)(&mut self.rng);
                    lines.insert(self.rng.below(len + 1), l);
                }
            }
        }
        let mut out = lines.join(&b'\n');
        out.truncate(MAX_INPUT);
        out
    }
}

// ---------------------------------------------------------------------- minimisation

/// Shrinks `input` while it still fails with the same key: tree node removal for documents,
/// line removal for line inputs, then byte-chunk removal (delta debugging). At most `budget`
/// executions.
pub fn minimize(
    target: &Target,
    input: &[u8],
    limit: Duration,
    budget: usize,
) -> Option<(Vec<u8>, String)> {
    let key = execute(target, input, limit, None).key(target.name)?;
    let mut runs = 0usize;
    let fails = |cand: &[u8], runs: &mut usize| -> bool {
        *runs += 1;
        execute(target, cand, limit, None)
            .key(target.name)
            .as_deref()
            == Some(key.as_str())
    };
    let mut best = input.to_vec();

    if target.shape == Shape::Document {
        if let Ok(Some((mut tree, json))) = quietly(|| Node::parse(&best)) {
            let emit = |t: &Node| if json { t.to_json(true) } else { t.to_yaml() }.into_bytes();
            let mut k = 1;
            while k < tree.count() && runs < budget {
                let mut cand = tree.clone();
                if cand.remove_nth(k) && fails(&emit(&cand), &mut runs) {
                    tree = cand;
                } else {
                    k += 1;
                }
            }
            let out = emit(&tree);
            if out.len() < best.len() && fails(&out, &mut runs) {
                best = out;
            }
        }
    }
    if target.shape == Shape::Lines {
        let mut lines: Vec<Vec<u8>> = best.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
        let mut i = 0;
        while i < lines.len() && runs < budget {
            let mut cand = lines.clone();
            cand.remove(i);
            if fails(&cand.join(&b'\n'), &mut runs) {
                lines = cand;
            } else {
                i += 1;
            }
        }
        best = lines.join(&b'\n');
    }
    // Byte chunks, halving the chunk size when a pass removes nothing.
    let mut chunk = (best.len() / 2).max(1);
    loop {
        let mut removed = false;
        let mut at = 0;
        while at < best.len() && runs < budget {
            let end = (at + chunk).min(best.len());
            let mut cand = best[..at].to_vec();
            cand.extend_from_slice(&best[end..]);
            if fails(&cand, &mut runs) {
                best = cand;
                removed = true;
            } else {
                at += chunk;
            }
        }
        if runs >= budget || (chunk == 1 && !removed) {
            break;
        }
        if !removed {
            chunk = (chunk / 2).max(1);
        }
    }
    Some((best, key))
}
