//! `waverun`: the binary. The command line lives in [`waverun_host::cli`].

fn main() -> std::process::ExitCode {
    waverun_host::cli::main()
}
