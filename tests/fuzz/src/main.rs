//! `waverun-fuzz [--seconds N] [--target NAME]... [--seed S] [--replay-only] [--runs N]
//! [--timeout SECS] [--corpus DIR] [--crashes DIR] [--export DIR] [--minimize FILE] [--list]`

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use waverun_fuzz::runner::{self, Config, Fuzzer, Report};
use waverun_fuzz::targets::{by_name, TARGETS};

const DEFAULT_SEED: u64 = 0x005E_ED0F_3A7E_2026;

const USAGE: &str =
    "usage: waverun-fuzz [--seconds N] [--target NAME]... [--seed S] [--replay-only]
                    [--runs N] [--timeout SECS] [--corpus DIR] [--crashes DIR]
                    [--export DIR] [--minimize FILE [--out FILE]] [--explain FILE] [--list]
  --seconds N      total time budget, shared by the targets (default 60)
  --target NAME    selector, documents, abi or engine (repeatable; default all)
  --seed S         PRNG seed, decimal or 0x-hex (default 0x5eed0f3a7e2026)
  --replay-only    run the committed corpus only
  --runs N         per target, stop after N mutated inputs instead of the time budget
  --timeout SECS   an input slower than this is a failure (default 5; a hang of 4x ends the run)
  --corpus DIR     corpus root (default tests/fuzz/corpus)
  --crashes DIR    where crash inputs go (default $CARGO_TARGET_DIR or target, /fuzz-crashes)
  --export DIR     also write inputs that reached new behaviour to DIR/<target>/
  --minimize FILE  shrink a crashing input (one --target) to FILE.min, or --out FILE
  --explain FILE   run one input once, panics printed (engine: also the inputs it decodes to)
  --list           list the targets and what they check";

struct Args {
    seconds: f64,
    targets: Vec<String>,
    seed: u64,
    replay_only: bool,
    runs: Option<u64>,
    timeout: f64,
    corpus: PathBuf,
    crashes: PathBuf,
    export: Option<PathBuf>,
    minimize: Option<PathBuf>,
    explain: Option<PathBuf>,
    out: Option<PathBuf>,
    list: bool,
}

fn parse_u64(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(&hex.replace('_', ""), 16).ok(),
        None => s.replace('_', "").parse().ok(),
    }
}

fn default_crash_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target")));
    target.join("fuzz-crashes")
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        seconds: 60.0,
        targets: Vec::new(),
        seed: DEFAULT_SEED,
        replay_only: false,
        runs: None,
        timeout: 5.0,
        corpus: PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/corpus")),
        crashes: default_crash_dir(),
        export: None,
        minimize: None,
        explain: None,
        out: None,
        list: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--seconds" => {
                a.seconds = value("--seconds")?
                    .parse()
                    .map_err(|_| "--seconds: not a number")?
            }
            "--target" => {
                let t = value("--target")?;
                if by_name(&t).is_none() {
                    return Err(format!("unknown target {t:?}"));
                }
                a.targets.push(t);
            }
            "--seed" => a.seed = parse_u64(&value("--seed")?).ok_or("--seed: not a number")?,
            "--replay-only" => a.replay_only = true,
            "--runs" => a.runs = Some(parse_u64(&value("--runs")?).ok_or("--runs: not a number")?),
            "--timeout" => {
                a.timeout = value("--timeout")?
                    .parse()
                    .map_err(|_| "--timeout: not a number")?
            }
            "--corpus" => a.corpus = value("--corpus")?.into(),
            "--crashes" => a.crashes = value("--crashes")?.into(),
            "--export" => a.export = Some(value("--export")?.into()),
            "--minimize" => a.minimize = Some(value("--minimize")?.into()),
            "--explain" => a.explain = Some(value("--explain")?.into()),
            "--out" => a.out = Some(value("--out")?.into()),
            "--list" => a.list = true,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if !(a.seconds >= 0.0 && a.timeout > 0.0) {
        return Err("--seconds and --timeout must be positive".into());
    }
    Ok(a)
}

fn minimize(a: &Args, file: &PathBuf) -> ExitCode {
    let [name] = a.targets.as_slice() else {
        eprintln!("--minimize needs exactly one --target");
        return ExitCode::from(2);
    };
    let target = by_name(name).expect("checked");
    let input = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    let limit = Duration::from_secs_f64(a.timeout);
    match runner::minimize(target, &input, limit, 20_000) {
        None => {
            eprintln!(
                "{}: does not fail in target {name}; nothing to minimise",
                file.display()
            );
            ExitCode::from(2)
        }
        Some((min, key)) => {
            let out = a.out.clone().unwrap_or_else(|| {
                let mut p = file.clone().into_os_string();
                p.push(".min");
                p.into()
            });
            if let Err(e) = std::fs::write(&out, &min) {
                eprintln!("{}: {e}", out.display());
                return ExitCode::from(2);
            }
            println!("failure: {key}");
            println!(
                "{} bytes -> {} bytes: {}",
                input.len(),
                min.len(),
                out.display()
            );
            ExitCode::SUCCESS
        }
    }
}

fn explain(a: &Args, file: &PathBuf) -> ExitCode {
    let [name] = a.targets.as_slice() else {
        eprintln!("--explain needs exactly one --target");
        return ExitCode::from(2);
    };
    let target = by_name(name).expect("checked");
    let input = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    waverun_fuzz::targets::engine::set_explain(name == "engine");
    // Not caught: the default hook prints the panic (RUST_BACKTRACE=1 for a backtrace).
    (target.run)(&input);
    println!("no failure");
    ExitCode::SUCCESS
}

fn print_table(reports: &[Report]) {
    println!();
    println!(
        "{:<10} {:>10} {:>9} {:>8} {:>8} {:>9} {:>8}",
        "target", "execs", "exec/s", "seconds", "corpus", "features", "crashes"
    );
    for r in reports {
        let secs = r.elapsed.as_secs_f64();
        println!(
            "{:<10} {:>10} {:>9.0} {:>8.1} {:>8} {:>9} {:>8}",
            r.target,
            r.execs,
            r.execs as f64 / secs.max(1e-9),
            secs,
            format!("{}+{}", r.corpus_files, r.corpus_size - r.corpus_files),
            r.features,
            r.crashes.len()
        );
    }
}

fn main() -> ExitCode {
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("waverun-fuzz: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    if a.list {
        for t in TARGETS {
            println!("{:<10} {}", t.name, t.about);
        }
        return ExitCode::SUCCESS;
    }
    if let Some(file) = &a.explain {
        return explain(&a, file);
    }
    runner::install_panic_hook();
    if let Some(file) = &a.minimize {
        return minimize(&a, file);
    }
    let targets: Vec<_> = if a.targets.is_empty() {
        TARGETS.iter().collect()
    } else {
        a.targets
            .iter()
            .map(|n| by_name(n).expect("checked"))
            .collect()
    };
    let limit = Duration::from_secs_f64(a.timeout);
    runner::start_watchdog(limit.mul_f64(4.0).max(Duration::from_secs(10)));
    let budget = Duration::from_secs_f64(a.seconds / targets.len() as f64);
    println!(
        "waverun-fuzz: seed {:#x}, {} per target, timeout {:.1} s; corpus {}, crashes {}",
        a.seed,
        if a.replay_only {
            "corpus replay only".to_string()
        } else if let Some(n) = a.runs {
            format!("{n} runs")
        } else {
            format!("{:.0} s", budget.as_secs_f64())
        },
        a.timeout,
        a.corpus.display(),
        a.crashes.display()
    );
    let mut reports = Vec::new();
    for t in targets {
        let cfg = Config {
            budget,
            runs: a.runs,
            seed: a.seed,
            corpus_dir: a.corpus.clone(),
            crash_dir: a.crashes.clone(),
            limit,
            replay_only: a.replay_only,
            export: a.export.clone(),
            verbose: true,
        };
        reports.push(Fuzzer::new(t, cfg).run());
        if runner::tracing() {
            let trace = runner::take_trace();
            let mut by_count: Vec<_> = trace.into_iter().collect();
            by_count.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            println!("features of {} (most frequent first):", t.name);
            for (name, n) in &by_count {
                println!("{n:>10} {name}");
            }
        }
    }
    print_table(&reports);
    let mut failed = false;
    for r in &reports {
        for c in &r.crashes {
            failed = true;
            println!(
                "\n[{}] {}\n  at   {}\n  hits {}, input {} ({} bytes)",
                r.target,
                c.message.lines().next().unwrap_or(""),
                c.location,
                c.hits,
                c.path,
                c.size
            );
        }
    }
    if failed {
        println!(
            "\nFAILED: {} distinct crash(es)",
            reports.iter().map(|r| r.crashes.len()).sum::<usize>()
        );
        ExitCode::FAILURE
    } else {
        println!("\nok: no crash");
        ExitCode::SUCCESS
    }
}
